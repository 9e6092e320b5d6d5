"""Test support for the TRL adapter: a tiny random Qwen2, a local tokenizer, toy data."""
