"""vLLM stand-in (the CPU trial only)."""
