"""Import-only stand-in (the CPU trial only)."""


def all_gather(*args: object, **kwargs: object) -> object:
    raise RuntimeError("flash_attn stand-in (the CPU trial only): not available on CPU")
