"""Import-only stand-in for vllm (tests only; see ../README.md)."""

__version__ = "0.0.0"


class SamplingParams:
    """Holds keyword arguments; generation is not available."""

    def __init__(self, **kwargs: object) -> None:
        self.__dict__.update(kwargs)


def __getattr__(name: str) -> object:
    raise AttributeError(f"vllm stand-in (tests only) has no {name!r}")
