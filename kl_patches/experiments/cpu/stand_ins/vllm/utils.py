"""vLLM stand-in: ``random_uuid`` (the CPU trial only)."""

import uuid


def random_uuid() -> str:
    return uuid.uuid4().hex
