"""vLLM stand-in: ``TokensPrompt`` (the CPU trial only)."""


class TokensPrompt(dict):  # type: ignore[type-arg]
    """A prompt given as token ids."""
