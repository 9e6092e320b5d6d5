"""Test harness: each library's own trainer, end to end on CPU (test-only code)."""
