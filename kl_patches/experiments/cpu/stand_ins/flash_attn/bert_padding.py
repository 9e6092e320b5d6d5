"""Import-only stand-in (the CPU trial only): padding helpers are not available."""

from einops import rearrange  # noqa: F401  (imported by name in OpenRLHF)


def _unavailable(*args: object, **kwargs: object) -> object:
    raise RuntimeError("flash_attn stand-in (the CPU trial only): not available on CPU")


index_first_axis = pad_input = unpad_input = _unavailable
