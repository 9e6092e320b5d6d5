"""Write a fix's ``entry_point`` change into a Python script: the kl-patches patch applied in it.

A shell launch switches to the kl-patches launcher (``python -m kl_patches.trl ...``); a
Python script that builds the trainer itself gets the launcher's patch instead:
``import kl_patches.trl`` and one ``kl_patches.trl.apply({...})`` call before the trainer is
built. ``apply`` patches ``trl.GRPOTrainer``/``trl.RLOOTrainer`` in place, so every trainer
constructed afterwards runs the KL config, whatever ``beta`` its config has
(``kl_patches/adapters/trl/patch.py``, module docstring and ``apply``); the audit's reader reads
the call the same way (:mod:`kl_patches.audit.python`, ``kl_patches.<lib>.apply``: the config
of every trainer built after it). The config is written as a dict of the fields that differ
from :class:`~kl_patches.config.KLConfig`'s defaults (``apply`` coerces a dict:
``KLConfig.coerce``).

Where the call goes:

* a plain script: at module level, after the last top-level import written before the first
  trainer construction (after the docstring and ``from __future__`` imports when none is), so
  it runs on every rank before ``main()``;
* a marimo notebook saved as ``.py`` (cells are ``@app.cell`` functions; marimo reads each
  cell's body as its code and recomputes the names it defines and reads, so a statement added
  inside a cell keeps the notebook valid): inside the cell that builds the trainer, right
  before the statement that builds it.

The edited script is read back: every TRL trainer must then be read with the written config
(a :class:`PythonEditError` otherwise, never a silent no-op), e.g. when an ``apply`` already
in the script comes later and wins.

The module may be a patch of a patcher's trainer rather than the launcher's:
``kl_patches.adapters.trl.unsloth`` (the fix of a script that imports unsloth, whose generated
GRPOTrainer the TRL patch refuses) gives ``import kl_patches.adapters.trl.unsloth`` and its
``apply({...})``, placed the same way; the script's ``import unsloth`` comes first there (a
module-level import before the trainer, or, in a marimo notebook, a cell the trainer's cell
depends on), which :mod:`kl_patches.adapters.trl.unsloth` needs (``apply`` after
``import unsloth``).

Deviation: only a launcher value of the form ``MODULE --kl NAME [--kl.FIELD VALUE ...]``
(what the TRL producer, :func:`kl_patches.adapters.trl.fix.patched`, writes) is understood.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import shlex
from typing import Any

from kl_patches.audit.fix.python_edit import libcst_module
from kl_patches.audit.fix.python_values import PythonEditError
from kl_patches.audit.python import read_python
from kl_patches.config import KLConfig

__all__ = ["add_apply", "launcher_config"]

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def launcher_config(value: str) -> tuple[str, KLConfig, set[str]]:
    """(module, KLConfig, fields named) of an ``entry_point`` value
    ``MODULE --kl NAME --kl.FIELD V ...``."""
    words = shlex.split(value)
    if not words or not words[0].startswith("kl_patches."):
        raise PythonEditError(f"the launcher {value!r} is not a kl-patches module")
    module, rest = words[0], words[1:]
    name = "k1-in-reward"
    fields: dict[str, Any] = {}
    if len(rest) % 2:
        raise PythonEditError(f"the launcher {value!r} has a flag without a value")
    for flag, text in zip(rest[::2], rest[1::2], strict=True):
        if flag == "--kl":
            name = text
        elif flag.startswith("--kl."):
            fields[flag[len("--kl.") :]] = _value(text)
        else:
            raise PythonEditError(
                f"the launcher flag {flag} has no place in a script (valid: --kl, --kl.FIELD)"
            )
    try:
        return module, KLConfig.parse(name, **fields), set(fields)
    except (TypeError, ValueError) as err:
        raise PythonEditError(f"the launcher {value!r}: {err}") from err


def _value(text: str) -> Any:
    if _NUMBER.match(text):
        return float(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.lower() == "none":
        return None
    return text


def _short(config: KLConfig, given: set[str]) -> dict[str, Any]:
    """The fields of ``config`` the launcher names (``given``) or that differ from the
    defaults, estimator and placement first."""
    base = KLConfig.parse(config.short_name) if config.placement != "none" else KLConfig()
    out: dict[str, Any] = {"estimator": config.estimator, "placement": config.placement}
    for f in dataclasses.fields(KLConfig):
        value = getattr(config, f.name)
        if f.name not in out and (f.name in given or value != getattr(base, f.name)):
            out[f.name] = value
    return out


def _call_text(module: str, config: KLConfig, given: set[str]) -> str:
    items = ", ".join(f"{k!r}: {v!r}" for k, v in _short(config, given).items())
    items = items.replace("'", '"')
    return f"{module}.apply({{{items}}})"


def add_apply(source: str, value: str, origin: str = "<python>") -> str:
    """``source`` with the kl-patches patch ``value`` (an ``entry_point`` change's launcher)
    applied before its first TRL trainer is built (see the module docstring)."""
    cst = libcst_module()
    module, config, given = launcher_config(value)
    lib = _library(module)
    script = read_python(source, origin)
    launches = [x for x in script.launches if x.library == lib]
    if not launches:
        raise PythonEditError(f"{origin}: no {lib} trainer is built in this script")
    if all(x.kl == config.to_dict() for x in launches):
        return source  # already applied (a second launch of the same script): nothing to add
    first = min(x.line for x in launches)
    try:
        wrapper = cst.MetadataWrapper(cst.parse_module(source))
        positions = wrapper.resolve(importlib.import_module("libcst.metadata").PositionProvider)
    except cst.ParserSyntaxError as err:
        raise PythonEditError(f"{origin}: libcst cannot parse it: {err}") from err
    tree = wrapper.module
    new = [
        cst.parse_statement(f"import {module}\n"),
        cst.parse_statement(f"{_call_text(module, config, given)}\n"),
    ]
    cell = _cell(tree, positions, first, "marimo" in script.imports)
    if cell is not None:
        body = list(cell.body.body)
        at = next(i for i, s in enumerate(body) if _span(positions, s)[1] >= first)
        body[at:at] = new
        edited = tree.deep_replace(cell, cell.with_changes(body=cell.body.with_changes(body=body)))
    else:
        body = list(tree.body)
        at = _module_slot(body, positions, first)
        if at:  # a blank line after the imports; the next statement keeps its own
            new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine()])
        body[at:at] = new
        edited = tree.with_changes(body=body)
    assert isinstance(edited, cst.Module)
    text = edited.code
    _verify(text, lib, config, len(script.launches), origin)
    return text


def _library(module: str) -> str:
    """The library a kl-patches module patches: ``kl_patches.trl`` and
    ``kl_patches.adapters.trl.unsloth`` (unsloth's loss in a TRL trainer) both give trl."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "adapters":
        return parts[2]
    if len(parts) < 2:  # pragma: no cover - launcher_config checks the kl_patches. prefix
        raise PythonEditError(f"{module!r} names no library")
    return parts[1]


def _span(positions: Any, node: Any) -> tuple[int, int]:
    r = positions[node]
    return r.start.line, r.end.line


def _cell(tree: Any, positions: Any, line: int, marimo: bool) -> Any:
    """The marimo cell (``@app.cell`` function at module level) whose body builds the trainer
    at ``line``; None in a plain script."""
    import libcst as cst

    if not marimo:
        return None
    for stmt in tree.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        start, end = _span(positions, stmt)
        decorated = any(
            isinstance(d.decorator, (cst.Attribute, cst.Call)) and _attr(d.decorator) == "cell"
            for d in stmt.decorators
        )
        if decorated and start <= line <= end and isinstance(stmt.body, cst.IndentedBlock):
            return stmt
    return None


def _attr(node: Any) -> str:
    import libcst as cst

    if isinstance(node, cst.Call):
        node = node.func
    return node.attr.value if isinstance(node, cst.Attribute) else ""


def _module_slot(body: list[Any], positions: Any, line: int) -> int:
    """The module-level index after the last import written before ``line`` (else after the
    docstring and ``from __future__`` imports)."""
    import libcst as cst

    def imports(stmt: Any) -> bool:
        return isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        )

    def future(stmt: Any) -> bool:
        return isinstance(stmt, cst.SimpleStatementLine) and any(
            isinstance(s, cst.ImportFrom)
            and isinstance(s.module, cst.Name)
            and s.module.value == "__future__"
            for s in stmt.body
        )

    def docstring(stmt: Any) -> bool:
        return (
            isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
        )

    slot = 0
    for i, stmt in enumerate(body):
        start, _ = _span(positions, stmt)
        if start > line:
            break
        wanted = imports(stmt) or (i == 0 and docstring(stmt)) or future(stmt)
        if wanted and _span(positions, stmt)[1] < line:
            slot = i + 1
    return slot


def _verify(text: str, lib: str, config: KLConfig, count: int, origin: str) -> None:
    """Every ``lib`` trainer of the edited script is read with ``config``."""
    script = read_python(text, origin)
    if len(script.launches) != count:  # pragma: no cover - two statements added, no trainer
        raise PythonEditError(f"{origin}: the edit changed the trainers the script builds")
    want = config.to_dict()
    for launch in script.launches:
        if launch.library == lib and launch.kl != want:
            raise PythonEditError(
                f"{origin}:{launch.line}: after adding {lib}'s kl-patches apply() the audit "
                f"reads {launch.kl!r} for this trainer, not the fix's config (another apply() "
                "or kl= wins there): fix it by hand"
            )
