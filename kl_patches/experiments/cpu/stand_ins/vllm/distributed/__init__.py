"""vLLM stand-in: the weight-sync group (the CPU trial only)."""
