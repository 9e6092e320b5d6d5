"""vLLM stand-in: the weight-sync group (tests only)."""
