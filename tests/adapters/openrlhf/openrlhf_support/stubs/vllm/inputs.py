"""Import-only stand-in (tests only)."""


class TokensPrompt(dict):  # type: ignore[type-arg]
    """A dict, as in vllm."""
