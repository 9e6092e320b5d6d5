"""vLLM stand-in: ``random_uuid`` (tests only)."""

import uuid


def random_uuid() -> str:
    return uuid.uuid4().hex
