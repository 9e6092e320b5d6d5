"""One command-line syntax for a KLConfig, generated from its fields: ``--kl NAME --kl.FIELD V``.

``--kl`` takes a short name (``k1-in-reward``, ``k3-in-both``, ``none``); ``--kl.FIELD VALUE`` sets
any :class:`~kl_patches.config.KLConfig` field (``none`` for an optional number). Every command
and launcher uses this module, so the flags, their choices and their help text are the config
dataclass itself: a new field is a new flag everywhere. The help text is the first sentence of
the field's docstring in :mod:`kl_patches.config`.

Two ways in: :func:`add_arguments` declares the flags on an ``argparse`` parser (commands that
own their whole command line); :func:`split_argv` + :func:`config_from_tokens` take them out of
an argv that is otherwise handed to a library (the OpenRLHF and TRL launchers).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kl_patches import config as config_module
from kl_patches.config import FIELD_CHOICES, KLConfig

PREFIX = "--kl."
"""Prefix of the per-field flags."""


@dataclass(frozen=True)
class FieldSpec:
    """How one KLConfig field is written on a command line."""

    name: str
    """The KLConfig field name (the flag is ``--kl.<name>``)."""
    kind: str
    """``choice`` (text from :attr:`choices`), ``float`` or ``optional_float`` (``none`` too)."""
    default: object
    """The field's default in KLConfig."""
    choices: tuple[str, ...]
    """Valid values of a ``choice`` field (empty for numbers)."""
    help: str
    """First sentence of the field's docstring."""

    @property
    def flag(self) -> str:
        """``--kl.<name>``."""
        return PREFIX + self.name


@functools.lru_cache(maxsize=1)
def _field_docs() -> dict[str, str]:
    """Field name -> the attribute docstring under it in KLConfig's class body."""
    tree = ast.parse(inspect.getsource(config_module))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KLConfig")
    docs: dict[str, str] = {}
    body = cls.body
    for node, nxt in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + ("." if dot else "")


@functools.lru_cache(maxsize=1)
def fields() -> tuple[FieldSpec, ...]:
    """One :class:`FieldSpec` per KLConfig field, in declaration order."""
    docs = _field_docs()
    out = []
    for f in dataclasses.fields(KLConfig):
        annotation = str(f.type).replace(" ", "")
        if f.name in FIELD_CHOICES:
            kind = "choice"
        elif annotation in ("float|None", "None|float", "Optional[float]"):
            kind = "optional_float"
        elif annotation == "float":
            kind = "float"
        else:  # pragma: no cover - a new field type needs a parser here
            raise TypeError(f"KLConfig.{f.name}: no command-line form for type {f.type!r}")
        out.append(
            FieldSpec(
                name=f.name,
                kind=kind,
                default=f.default,
                choices=FIELD_CHOICES.get(f.name, ()),
                help=_first_sentence(docs.get(f.name, f.name)),
            )
        )
    return tuple(out)


def spec(name: str) -> FieldSpec:
    """The spec of field ``name``; ValueError naming the valid flags otherwise."""
    for item in fields():
        if item.name == name:
            return item
    raise ValueError(f"unknown flag {PREFIX}{name}; valid: {valid_flags()}")


def valid_flags() -> str:
    """``--kl NAME, --kl.{coef,estimator,...}`` for error messages."""
    return f"--kl NAME, {PREFIX}{{{','.join(sorted(f.name for f in fields()))}}}"


def parse_value(item: FieldSpec, text: str) -> object:
    """A flag's text as the field's value (numbers checked here, choices by KLConfig)."""
    if item.kind == "choice":
        return text
    if item.kind == "optional_float" and text.strip().lower() in ("none", "null"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{item.flag}={text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{item.flag}={text!r} is not a finite number")
    return value


def long_options(argv: Sequence[str]) -> list[tuple[str, str | None, list[str]]]:
    """Each ``--name[=value]`` of an argv with the tokens after it up to the next ``--`` one.

    ``(name, inline value or None, following tokens)``; tokens before the first option are
    dropped. The shared tokenizer of every library's flag reader (each decides how many of the
    following tokens a flag takes).
    """
    out: list[tuple[str, str | None, list[str]]] = []
    for token in (str(t) for t in argv):
        if token.startswith("--"):
            name, eq, inline = token[2:].partition("=")
            out.append((name, inline if eq else None, []))
        elif out:
            out[-1][2].append(token)
    return out


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Separate ``--kl`` / ``--kl.*`` flags (with their values) from the rest of an argv."""
    ours: list[str] = []
    rest: list[str] = []
    tokens = [str(t) for t in argv]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--kl" or token.startswith((PREFIX, "--kl=")):
            ours.append(token)
            if "=" not in token and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                ours.append(tokens[i + 1])
                i += 1
        else:
            rest.append(token)
        i += 1
    return ours, rest


def parse_tokens(tokens: Sequence[str]) -> tuple[str | None, dict[str, object]]:
    """``--kl NAME --kl.FIELD VALUE ...`` -> (the short name or None, field values)."""
    name: str | None = None
    values: dict[str, object] = {}
    i = 0
    while i < len(tokens):
        flag, eq, inline = tokens[i].partition("=")
        if eq:
            value = inline
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            value = tokens[i + 1]
            i += 1
        else:
            raise ValueError(f"{flag} needs a value")
        i += 1
        if flag == "--kl":
            name = value
            continue
        if not flag.startswith(PREFIX):
            raise ValueError(f"unknown flag {flag}; valid: {valid_flags()}")
        item = spec(flag[len(PREFIX) :])
        values[item.name] = parse_value(item, value)
    return name, values


def build(
    name: str | None, values: Mapping[str, object], base: Mapping[str, Any] | None = None
) -> KLConfig:
    """The KLConfig of a short name plus field values over ``base`` (a dict of fields).

    The short name sets the estimator and placement over ``base``; a ``--kl.estimator`` or
    ``--kl.placement`` that contradicts it is an error. Raises ValueError naming the field, the
    value and the valid choices.
    """
    data: dict[str, Any] = dict(base or {})
    if name is not None:
        short = KLConfig.parse(name)
        fixed = ("placement",) if short.placement == "none" else ("estimator", "placement")
        for key in fixed:
            given = values.get(key)
            if given is not None and KLConfig.coerce({key: given}).to_dict()[key] != getattr(
                short, key
            ):
                raise ValueError(
                    f"--kl {name} sets {key}={getattr(short, key)!r}, but {PREFIX}{key}={given!r} "
                    f"asks for another; drop one of them"
                )
            data[key] = getattr(short, key)
    data.update(values)
    return KLConfig.from_dict(data)


def config_from_tokens(
    tokens: Sequence[str], base: Mapping[str, Any] | None = None
) -> KLConfig | None:
    """The KLConfig of ``--kl``/``--kl.*`` tokens (None when there are none and no ``base``)."""
    if not tokens and base is None:
        return None
    name, values = parse_tokens(tokens)
    return build(name, values, base)


def to_tokens(config: KLConfig) -> list[str]:
    """The shortest ``--kl NAME --kl.FIELD VALUE`` tokens that give ``config`` back."""
    out = ["--kl", config.short_name]
    base = KLConfig.parse(config.short_name).to_dict()
    fixed = ("placement",) if config.placement == "none" else ("estimator", "placement")
    for key, value in config.to_dict().items():
        if key in fixed or value == base[key]:
            continue
        out += [PREFIX + key, "none" if value is None else f"{value!r}".strip("'")]
    return out


# ----------------------------------------------------------------------------- argparse
def add_arguments(parser: argparse.ArgumentParser, name_required: bool = False) -> None:
    """Declare ``--kl NAME`` and every ``--kl.FIELD`` on ``parser`` (an argument group)."""
    group = parser.add_argument_group(
        "KL configuration", "the KLConfig switch: a short name, then any field"
    )
    group.add_argument(
        "--kl",
        dest="kl_name",
        metavar="NAME",
        required=name_required,
        help="short name: k1-in-reward, k3-in-loss, k3-in-both, none, ...",
    )
    for item in fields():
        group.add_argument(
            item.flag,
            dest=f"kl_field_{item.name}",
            metavar="|".join(item.choices) if item.choices else "X",
            default=argparse.SUPPRESS,
            help=f"{item.help} (default {item.default})",
        )


def values_from_namespace(args: argparse.Namespace) -> dict[str, object]:
    """The ``--kl.FIELD`` values given on a parser set up by :func:`add_arguments`."""
    return {
        item.name: parse_value(item, str(getattr(args, f"kl_field_{item.name}")))
        for item in fields()
        if hasattr(args, f"kl_field_{item.name}")
    }


def config_from_namespace(
    args: argparse.Namespace, base: Mapping[str, Any] | None = None
) -> KLConfig | None:
    """The KLConfig of parsed :func:`add_arguments` flags (None when none was given)."""
    values = values_from_namespace(args)
    name = getattr(args, "kl_name", None)
    if name is None and not values and base is None:
        return None
    return build(name, values, base)


def deprecated(old: str, new: str) -> None:
    """Warn (FutureWarning: shown to end users) that an old flag spelling is deprecated."""
    warnings.warn(f"{old} is deprecated; use {new}", FutureWarning, stacklevel=3)
