"""vLLM stand-in (tests only)."""
