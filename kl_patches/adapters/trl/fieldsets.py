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
    "INSTALLED_TRANSFORMERS",
    "OPTIONAL_VALUE_FIELDS",
    "RELEASES",
    "TRAINING_ARGUMENTS",
    "data",
    "fields",
    "installed_transformers",
    "known_fields",
    "needs_value",
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


CONFIG_KEYS_CHECKED_SINCE = "0.19.0"
"""The first TRL release whose ``TrlParser.parse_args_and_config`` refuses a ``--config`` YAML
key no dataclass declares (``fail_with_unknown_args=True``: "Unknown arguments from config
file"). Before it ``set_defaults_with_config`` returned the unused keys and
``parse_args_and_config`` dropped them unless ``return_remaining_strings``."""

CONFIG_KEYS_SOURCE = "trl/scripts/utils.py:203-215 at v0.18.0"
"""Where the releases before :data:`CONFIG_KEYS_CHECKED_SINCE` drop unused config keys."""


def config_keys_checked(release: str) -> bool:
    """Whether TRL ``release``'s TrlParser refuses unknown ``--config`` keys."""
    from packaging.version import Version

    return Version(release) >= Version(CONFIG_KEYS_CHECKED_SINCE)


HF_ARGPARSER_BOOL = "transformers/hf_argparser.py:211 (4.51.3, 4.56.2, 5.24.0)"
"""Where HfArgumentParser gives a boolean field ``nargs='?'`` and ``const=True`` (a bare
``--flag`` means True): only when ``field.type is bool or (field.default is not None and
field.default is not dataclasses.MISSING)``, read in those three releases."""


OPTIONAL_VALUE_FIELDS: dict[str, dict[str, str]] = {
    "5.24.0": {
        "activation_checkpointing": "transformers/training_args.py:912",
        "gradient_checkpointing": "transformers/training_args.py:930",
        "fsdp": "transformers/training_args.py:1451",
    },
}
"""transformers release -> TrainingArguments fields whose ``metadata`` itself declares
``"nargs": "?", "const": True`` (HfArgumentParser passes the metadata to argparse, so a bare flag
is accepted whatever the field's type), with ``file:line`` of that metadata; read from each
recorded transformers release's training_args.py (none in 4.49.0-4.57.6; the recording keeps
defaults, not metadata)."""


def needs_value(release: str, name: str, classes: tuple[str, ...]) -> tuple[bool, str] | None:
    """Whether HfArgumentParser refuses ``--name`` given without a value in TRL ``release``,
    and ``file:line`` of the field; None when not judged (no recorded class declares it, e.g. a
    project's own dataclass, or its recorded default does not tell its type).

    HfArgumentParser gives a boolean field ``nargs='?'``/``const=True`` (a bare flag is True)
    only when ``field.type is bool or field.default is not None`` (:data:`HF_ARGPARSER_BOOL`;
    ``Optional[X]`` is X, ``Union[str, X]`` is X), unless the field's metadata declares them
    (:data:`OPTIONAL_VALUE_FIELDS`); every other field takes argparse's one value. From the
    recorded default: True/False is a boolean (accepted); None is ``Optional[X]`` with a None
    default (refused: TRL's ``bf16: bool | None = None`` from 0.19.0, ``output_dir`` in
    transformers 5.x); an int or float is a number (refused); a string may be
    ``Union[str, bool]`` (``include_num_input_tokens_seen``), so it is not judged. The first of
    ``classes`` declaring the field wins (a TRL config's override of a TrainingArguments
    field), then transformers' TrainingArguments of the release's install
    (:func:`installed_transformers`), else the newest recorded transformers declaring it."""
    record = data().at(release)
    for cls in classes:
        entry = record.entry(cls, name)
        if entry is not None:
            return _judged(entry.get("default"), str(entry.get("at", "")))
    tf = recording("kl_patches.adapters.trl", "data/transformers")
    pinned = installed_transformers(release)
    order = [pinned] if pinned is not None else list(reversed(tf.releases))
    for transformers in order:
        entry = tf.at(transformers).entry("TrainingArguments", name)
        if entry is not None:
            optional = OPTIONAL_VALUE_FIELDS.get(transformers, {}).get(name)
            if optional is not None:
                return False, f"{optional} (transformers {transformers})"
            at = str(entry.get("at", ""))
            return _judged(entry.get("default"), f"{at} (transformers {transformers})")
    return None


def _judged(default: object, at: str) -> tuple[bool, str] | None:
    """:func:`needs_value` from a recorded default (see there)."""
    if isinstance(default, bool):
        return False, at
    if default is None or isinstance(default, (int, float)):
        return True, at
    return None
