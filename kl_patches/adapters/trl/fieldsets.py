"""The fields of TRL's own config dataclasses in each release (TRL refuses others).

``TrlParser`` / ``HfArgumentParser`` refuse a YAML key or ``--flag`` that no dataclass of the
script defines (``Unknown arguments from config file``, ``Some specified arguments are not used
by the HfArgumentParser``), and ``GRPOConfig(**kwargs)`` raises ``TypeError`` on an unknown
keyword. TRL adds, renames and removes fields from release to release (``max_prompt_length``
and ``use_liger_loss`` are gone in 1.x, ``ModelConfig.torch_dtype`` became ``dtype``), so a
config written for one release can be refused by another. For each recorded release this module
gives the fields each of TRL's own dataclasses declares: ``GRPOConfig``, ``RLOOConfig``,
``PPOConfig`` (with ``OnPolicyConfig``'s fields where it derives from it), ``ModelConfig``,
``ScriptArguments`` (with ``GRPOScriptArguments`` of ``trl/scripts/grpo.py``). A class that is
not in a release has no fields there (None).

``TrainingArguments`` is transformers', not TRL's: its fields depend on the installed
transformers, not on the TRL release, so :data:`TRAINING_ARGUMENTS` is the union over the
recorded transformers releases (4.49.0, 4.52.3, 4.56.2, 4.57.6, 5.10.4, 5.15.0, 5.24.0), only
ever used to *accept* a key.

Source: the data files ``data/<release>.json`` (and ``data/transformers/<release>.json``),
written by ``python -m kl_patches.dev record trl V`` (``record transformers V``) from each
release's files, the annotated assignments of each class body read with :mod:`ast`
(:mod:`.recording` says which files); ``record --check`` re-reads them.
``tests/adapters/trl/test_fieldsets.py`` checks the installed release's GRPOConfig and
RLOOConfig dataclass fields against the data.
"""

from __future__ import annotations

from functools import cache

from kl_patches.adapters.releases import Recording, recording

from .history import RELEASES

__all__ = [
    "CLASSES",
    "RELEASES",
    "TRAINING_ARGUMENTS",
    "INSTALLED_TRANSFORMERS",
    "data",
    "fields",
    "installed_transformers",
    "needs_value",
    "known_fields",
    "releases_accepting",
]

CLASSES = ("GRPOConfig", "RLOOConfig", "PPOConfig", "ModelConfig", "ScriptArguments")
"""TRL's own dataclasses recorded (``ScriptArguments`` includes ``GRPOScriptArguments``)."""


def data() -> Recording:
    """Every recorded TRL release (``data/<release>.json``)."""
    return recording("kl_patches.adapters.trl")


TRAINING_ARGUMENTS: frozenset[str] = recording(
    "kl_patches.adapters.trl", "data/transformers"
).every_name("TrainingArguments")
"""transformers ``TrainingArguments`` fields (union over the recorded transformers releases)."""


INSTALLED_TRANSFORMERS: tuple[tuple[str, str], ...] = (("1.0.0", "5.24.0"),)
"""(first TRL release, transformers release): ``pip install trl==V`` for V from that release on
resolves this transformers (measured for 1.0.0 to 1.16.0: :data:`.compat.INSTALL_RECIPES`; TRL
1.x asks only ``transformers>=4.56.2``, so pip takes the newest). Releases before it are
installed with a transformers of their era (4.51-4.57), whose TrainingArguments fields the union
:data:`TRAINING_ARGUMENTS` accepts."""


def installed_transformers(release: str) -> str | None:
    """The transformers release a fresh install of TRL ``release`` gets (None: not pinned
    down, any recorded transformers' fields are accepted)."""
    from packaging.version import Version

    found = None
    for first, transformers in INSTALLED_TRANSFORMERS:
        if Version(release) >= Version(first):
            found = transformers
    return found


@cache
def training_arguments(transformers: str) -> frozenset[str]:
    """transformers ``TrainingArguments`` fields in one recorded transformers release."""
    names = recording("kl_patches.adapters.trl", "data/transformers").names(
        transformers, "TrainingArguments"
    )
    if names is None:
        raise ValueError(f"transformers {transformers} has no recorded TrainingArguments")
    return names


@cache
def fields(release: str, cls: str) -> frozenset[str] | None:
    """The fields ``cls`` declares in TRL ``release`` (None when the class is not in it).
    ValueError for an unrecorded release or class."""
    if cls not in CLASSES:
        raise ValueError(f"cls={cls!r} is not recorded; choose one of {list(CLASSES)}")
    return data().names(release, cls)


@cache
def known_fields() -> frozenset[str]:
    """Every field any recorded TRL class declared in any recorded release."""
    out: set[str] = set()
    for cls in CLASSES:
        out |= data().every_name(cls)
    return frozenset(out)


def releases_accepting(
    names: set[str] | frozenset[str], cls: str = "GRPOConfig"
) -> tuple[str, ...]:
    """The recorded TRL releases whose ``cls`` (or transformers' ``TrainingArguments``, which
    every TRL config extends) accepts every one of ``names``, ascending."""
    own = set(names) - TRAINING_ARGUMENTS
    return data().releases_accepting(own, (cls,))


HF_ARGPARSER_BOOL = "transformers/hf_argparser.py:211 (4.51.3, 4.56.2, 5.24.0)"
"""Where HfArgumentParser gives a boolean field ``nargs='?'`` and ``const=True`` (a bare
``--flag`` means True): only when ``field.type is bool or (field.default is not None and
field.default is not dataclasses.MISSING)``, read in those three releases."""


def needs_value(release: str, name: str, classes: tuple[str, ...]) -> tuple[bool, str] | None:
    """Whether HfArgumentParser refuses ``--name`` given without a value in TRL ``release``,
    and ``file:line`` of the field (None when no recorded class declares it: a project's own
    dataclass, not judged). A bare flag is accepted only for a boolean field whose default is
    not None (:data:`HF_ARGPARSER_BOOL`); any other field (``bool | None = None`` such as
    TRL's ``bf16`` from 0.19.0, a string, a number, a list) takes argparse's default of one
    value ("expected one argument"). The recorded default stands for the type: a field whose
    default is True or False is a boolean. The first of ``classes`` declaring the field wins
    (a TRL config's override of a TrainingArguments field), then transformers'
    TrainingArguments of the release's install (:func:`installed_transformers`), else the
    newest recorded transformers declaring it."""
    record = data().at(release)
    for cls in classes:
        entry = record.entry(cls, name)
        if entry is not None:
            return not isinstance(entry.get("default"), bool), str(entry.get("at", ""))
    tf = recording("kl_patches.adapters.trl", "data/transformers")
    pinned = installed_transformers(release)
    order = [pinned] if pinned is not None else list(reversed(tf.releases))
    for transformers in order:
        entry = tf.at(transformers).entry("TrainingArguments", name)
        if entry is not None:
            at = str(entry.get("at", ""))
            return not isinstance(entry.get("default"), bool), f"{at} (transformers {transformers})"
    return None
