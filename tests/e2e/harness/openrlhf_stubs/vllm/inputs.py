"""vLLM stand-in: ``TokensPrompt`` (tests only)."""


class TokensPrompt(dict):  # type: ignore[type-arg]
    """A prompt given as token ids."""
