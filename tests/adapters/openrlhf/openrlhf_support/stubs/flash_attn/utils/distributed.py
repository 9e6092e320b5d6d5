"""Import-only stand-in (tests only)."""


def all_gather(*args: object, **kwargs: object) -> object:
    raise RuntimeError("flash_attn stand-in (tests only): not available on CPU")
