"""Import-only stand-in for flash_attn (the CPU trial only; see the ``stand_ins`` docstring)."""

__version__ = "0.0.0"
