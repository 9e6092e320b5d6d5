"""TrainingArguments fields transformers dropped, with the field that took over their meaning.

A TRL release installed today gets a transformers that no longer has some of
``TrainingArguments``' old fields (:attr:`.semantics.TrlSemantics.gone`), so a config that
still sets them is refused (``trl.field_rejected``). Where transformers itself named the
successor (a deprecation that forwarded the old field's value to the new one, in the releases
before the drop) the fix renames the field and keeps its value; a field with no entry here is
left to the user (delete it, or pin a transformers that still has it).

Each row is read from transformers' own ``training_args.py`` (the wheels of the releases
named): the forwarding in the last releases that had the old field, and the new field reading
that value the same way in the release that dropped the old one.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SUCCESSORS", "Successor"]


@dataclass(frozen=True)
class Successor:
    """The field that took over a dropped ``TrainingArguments`` field."""

    field: str
    """The successor's name, set to the old field's value unchanged."""
    source: str
    """Where transformers says so (release, file:line)."""


SUCCESSORS: dict[str, Successor] = {
    "warmup_ratio": Successor(
        "warmup_steps",
        "transformers 5.0.0 and 5.10.4 training_args.py:1645-1647 / :1485-1487 "
        "(`warmup_ratio is deprecated ... Use warmup_steps instead`; `self.warmup_steps = "
        "self.warmup_ratio`); 5.15.0 has no warmup_ratio and its get_warmup_steps "
        "(training_args.py:2108-2115) reads a warmup_steps below 1 as a ratio of the "
        "training steps (`math.ceil(num_training_steps * self.warmup_steps)`)",
    ),
}
"""Dropped field -> its successor (value kept)."""
