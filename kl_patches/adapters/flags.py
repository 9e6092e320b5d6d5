"""One command-line syntax for a KLConfig, generated from its fields: ``--kl NAME --kl.FIELD V``.

``--kl`` takes a short name (``k1-in-reward``, ``k3-in-both``, ``none``); ``--kl.FIELD VALUE`` sets
any :class:`~kl_patches.config.KLConfig` field (``none`` for an optional number). Every command
and launcher uses this module, so the flags, their choices and their help text are the config
dataclass itself: a new field is a new flag everywhere. The help text is the first sentence of
the field's docstring in :mod:`kl_patches.config`, in plain words (:func:`plain` drops the
reStructuredText markup).

The flag is the field's name, except that ``KLConfig.kl_clamp`` is written ``--kl.clamp`` (under
``--kl.`` the ``kl_`` says nothing; :data:`CLI_NAMES`); ``--kl.kl_clamp`` still works, with a
deprecation warning. A YAML file uses the same names under a ``kl:`` mapping
(:func:`tokens_from_mapping`). Old spellings warn through :func:`deprecated`, which names the
user's own file and line (or the command line) and the new spelling.

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
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kl_patches import config as config_module
from kl_patches.config import FIELD_CHOICES, KLConfig

PREFIX = "--kl."
"""Prefix of the per-field flags."""

CLI_NAMES: dict[str, str] = {"kl_clamp": "clamp"}
"""KLConfig field -> its name after ``--kl.`` (and under ``kl:`` in YAML) where they differ."""

OLD_NAMES: dict[str, str] = {field: field for field in CLI_NAMES}
"""Deprecated names after ``--kl.`` -> the KLConfig field (``--kl.kl_clamp``)."""

COMMAND_LINE = "<command line>"
"""The "file" a deprecation warning names for a flag given on the command line."""


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
    """First sentence of the field's docstring, in plain words."""

    @property
    def cli(self) -> str:
        """The name after ``--kl.`` and under ``kl:`` (:data:`CLI_NAMES`; else the field's)."""
        return CLI_NAMES.get(self.name, self.name)

    @property
    def flag(self) -> str:
        """``--kl.<cli name>``."""
        return PREFIX + self.cli


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
    """The first sentence; the first two when the first is only a heading ("Loss side only.")."""
    head, dot, rest = text.partition(". ")
    if dot and len(head) < 40:
        second, dot2, _ = rest.partition(". ")
        return f"{head}. {second}" + ("." if dot2 else "")
    return head + ("." if dot else "")


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def plain(text: str) -> str:
    """Docstring text without reStructuredText markup: ``:func:`~a.b.f``` -> ``f``, double
    backquotes dropped, so help texts read as plain words."""
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text)
    return text.replace("``", "")


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
                help=plain(_first_sentence(docs.get(f.name, f.name))),
            )
        )
    return tuple(out)


def spec(name: str) -> FieldSpec:
    """The spec of a field by its KLConfig name or its name after ``--kl.``; ValueError naming
    the valid flags otherwise (a deprecated name such as ``kl_clamp`` is accepted here)."""
    for item in fields():
        if name in (item.name, item.cli):
            return item
    raise ValueError(f"unknown flag {PREFIX}{name}; valid: {valid_flags()}")


def field_of_flag(name: str, where: str = COMMAND_LINE, line: int = 0) -> FieldSpec:
    """The spec for ``--kl.<name>`` as a user wrote it: a deprecated name (``kl_clamp``) warns
    with :func:`deprecated` naming ``where``/``line``; an unknown one raises ValueError."""
    item = spec(name)
    if name != item.cli:
        old = f"{PREFIX}{name}" if where == COMMAND_LINE else f"kl: {name}"
        new = item.flag if where == COMMAND_LINE else f"kl: {item.cli}"
        deprecated(old, new, where, line)
    return item


def valid_flags() -> str:
    """``--kl NAME, --kl.{coef,estimator,...}`` for error messages."""
    return f"--kl NAME, {PREFIX}{{{','.join(sorted(f.cli for f in fields()))}}}"


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


BOOL_WORDS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
"""The values an on/off ``--kl.<switch>`` takes (none: on)."""


def split_argv(argv: Sequence[str], switches: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Separate ``--kl`` / ``--kl.*`` flags (with their values) from the rest of an argv.

    ``switches``: names of on/off ``--kl.<name>`` options of a launcher, which take a value only
    when the next word is one of :data:`BOOL_WORDS`.
    """
    ours: list[str] = []
    rest: list[str] = []
    tokens = [str(t) for t in argv]
    flag_switches = {PREFIX + s for s in switches}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--kl" or token.startswith((PREFIX, "--kl=")):
            ours.append(token)
            takes = i + 1 < len(tokens) and not tokens[i + 1].startswith("--")
            if token in flag_switches:
                takes = takes and tokens[i + 1].lower() in BOOL_WORDS
            if "=" not in token and takes:
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
        item = field_of_flag(flag[len(PREFIX) :])
        values[item.name] = parse_value(item, value)
    return name, values


def tokens_from_mapping(
    mapping: Mapping[str, Any], where: str, lines: Mapping[str, int] | None = None
) -> list[str]:
    """The ``--kl``/``--kl.FIELD`` tokens of a ``kl:`` mapping of a YAML file (``where``).

    The keys are the flag names (``coef``, ``estimator``, ``clamp``, ...) and ``name`` for the
    short name of ``--kl``; ``none``/``null`` is None for an optional number. An unknown key is
    a ValueError naming the file, the key and the valid keys; a deprecated one warns naming its
    line (``lines``: key -> line number).
    """
    out: list[str] = []
    for key, value in mapping.items():
        line = (lines or {}).get(str(key), 0)
        if key == "name":
            out += ["--kl", str(value)]
            continue
        try:
            item = field_of_flag(str(key), where, line)
        except ValueError:
            valid = ["name", *sorted(f.cli for f in fields())]
            raise ValueError(
                f"{where}:{line}: kl: {key} is not a KL setting; valid keys under kl: {valid}"
            ) from None
        text = "none" if value is None else str(value).lower() if isinstance(value, bool) else value
        out += [item.flag, str(text)]
    return out


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
        out += [spec(key).flag, "none" if value is None else f"{value!r}".strip("'")]
    return out


LAUNCH_ARGUMENTS = {
    "verl": "<your overrides>",
    "openrlhf": "<your train_ppo_ray flags>",
    "trl": "<your TRL flags>",
}
"""The placeholder a printed kl-patches command shows for the user's own launch arguments."""


def launcher_command(
    library: str, config: KLConfig, trainer: str = "", extra: str = "", options: str = ""
) -> str:
    """The complete ``kl-patches <library>`` command that runs ``config`` (the user's launch
    arguments as the :data:`LAUNCH_ARGUMENTS` placeholder; ``extra``: the library's own
    arguments the fix adds; ``options``: the launcher's own, such as ``--kl.outside_std``); for
    a library without a launcher, the Python API's ``KLConfig.parse(...)``. ``trainer``: TRL's
    (``RLOOTrainer``, or ``PPOTrainer``, run as RLOO; GRPO otherwise). The coefficient is always
    written: each launcher has its own default."""
    tokens = to_tokens(config)
    fields = [
        f"{tokens[i]} {tokens[i + 1]}"
        for i in range(2, len(tokens), 2)
        if tokens[i] != PREFIX + "coef"
    ]
    kl = " ".join(
        w
        for w in ("--kl", config.short_name, PREFIX + "coef", repr(config.coef), *fields, options)
        if w
    )
    theirs = " ".join(w for w in (LAUNCH_ARGUMENTS.get(library, ""), extra) if w)
    if library == "verl":
        return f"kl-patches verl {kl} -- {theirs}"
    if library == "openrlhf":
        return f"kl-patches openrlhf {theirs} {kl}"
    if library == "trl":
        script = "rloo" if "RLOO" in trainer or "PPO" in trainer else "grpo"
        return f"kl-patches trl {script} {theirs} {kl}"
    base = KLConfig.parse(config.short_name).to_dict()
    changed = {"coef": config.coef} | {
        k: v
        for k, v in config.to_dict().items()
        if k not in ("estimator", "placement", "coef") and v != base[k]
    }
    args = [f", {k}={v!r}" for k, v in changed.items()]
    return f"KLConfig.parse({config.short_name!r}{''.join(args)})"


# ----------------------------------------------------------------------------- defaults
@dataclass(frozen=True)
class Default:
    """A launcher's default for one field, and where it comes from (said in ``--help``)."""

    value: object
    """The value used when the flag is not given."""
    source: str
    """Where it comes from, in words (``verl's own algorithm.kl_ctrl.kl_coef``)."""


def default_text(item: FieldSpec, defaults: Mapping[str, Default] | None = None) -> str:
    """``default 0.001: verl's own ...`` for ``--help`` (KLConfig's default otherwise)."""
    own = (defaults or {}).get(item.name)
    if own is not None:
        return f"default {own.value}: {own.source}"
    shown = "none" if item.default is None else item.default
    return f"default {shown}: KLConfig's default"


def base_of(defaults: Mapping[str, Default] | None) -> dict[str, Any] | None:
    """The field values of a launcher's defaults, as ``build``'s ``base`` (None: no defaults)."""
    return {k: d.value for k, d in defaults.items()} if defaults else None


# ----------------------------------------------------------------------------- argparse
NAME_HELP = (
    "the KL regulariser by its short name: k1-in-reward (the unbiased choice), k3-in-loss, "
    "k3-in-both, k2-in-loss, none, ...: estimator k1|k2|k3, then where it goes: reward, loss "
    "or both"
)
"""Help text of ``--kl NAME``."""


def add_arguments(
    parser: argparse.ArgumentParser,
    name_required: bool = False,
    defaults: Mapping[str, Default] | None = None,
) -> None:
    """Declare ``--kl NAME`` and every ``--kl.FIELD`` on ``parser`` (an argument group).

    ``defaults``: the launcher's own defaults (field -> :class:`Default`), said in the help;
    pass :func:`base_of` of them to :func:`build`. A deprecated name (``--kl.kl_clamp``) is
    accepted, hidden from the help, and warns when used (:func:`values_from_namespace`).
    """
    group = parser.add_argument_group(
        "KL configuration", "the KLConfig switch: a short name, then any field"
    )
    group.add_argument(
        "--kl", dest="kl_name", metavar="NAME", required=name_required, help=NAME_HELP
    )
    for item in fields():
        group.add_argument(
            item.flag,
            dest=f"kl_field_{item.name}",
            metavar="|".join(item.choices) if item.choices else "X",
            default=argparse.SUPPRESS,
            help=f"{item.help} ({default_text(item, defaults)})",
        )
        if item.cli != item.name:
            group.add_argument(
                PREFIX + item.name,
                dest=f"kl_old_{item.name}",
                default=argparse.SUPPRESS,
                help=argparse.SUPPRESS,
            )


def values_from_namespace(args: argparse.Namespace) -> dict[str, object]:
    """The ``--kl.FIELD`` values given on a parser set up by :func:`add_arguments` (a
    deprecated name warns; the current one wins when both are given)."""
    out: dict[str, object] = {}
    for item in fields():
        if hasattr(args, f"kl_old_{item.name}"):
            deprecated(PREFIX + item.name, item.flag)
            out[item.name] = parse_value(item, str(getattr(args, f"kl_old_{item.name}")))
        if hasattr(args, f"kl_field_{item.name}"):
            out[item.name] = parse_value(item, str(getattr(args, f"kl_field_{item.name}")))
    return out


def config_from_namespace(
    args: argparse.Namespace, base: Mapping[str, Any] | None = None
) -> KLConfig | None:
    """The KLConfig of parsed :func:`add_arguments` flags (None when none was given)."""
    values = values_from_namespace(args)
    name = getattr(args, "kl_name", None)
    if name is None and not values and base is None:
        return None
    return build(name, values, base)


def deprecated(old: str, new: str, where: str = COMMAND_LINE, line: int = 0) -> None:
    """Warn (FutureWarning: shown to end users) that an old spelling is deprecated.

    The warning names where the user wrote it: ``where`` is a file (a YAML config: ``line`` is
    its line, and Python's warning display prints that line) or :data:`COMMAND_LINE`, never
    a line of kl-patches' own code.
    """
    warnings.warn_explicit(
        f"{old} is deprecated; use {new}",
        FutureWarning,
        filename=where,
        lineno=line,
        module="kl_patches.deprecated",
    )
