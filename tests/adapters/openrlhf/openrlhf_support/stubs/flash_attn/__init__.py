"""Import-only stand-in for flash_attn (tests only; see ../README.md)."""

__version__ = "0.0.0"
