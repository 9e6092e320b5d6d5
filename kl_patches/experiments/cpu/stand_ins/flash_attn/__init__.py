"""Import-only stand-in for flash_attn (the CPU trial only; see kl_patches.experiments.cpu.stand_ins)."""

__version__ = "0.0.0"
