"""The KL rules a vendored verl copy's own code runs, where its version file says another release.

verl's main branch kept ``verl/version/version`` at ``0.1`` until the 0.2 release, and at
``0.2.0.dev`` until 0.3; projects vendored copies from main between tags (TinyZero, rllm,
RAGEN, Search-R1 ...). Such a copy can already have what its version file's release lacks (the
KL loss ``use_kl_loss`` in the actor, the reward KL gated on ``use_kl_in_reward``), or a
project may have changed it (rllm comments the ``apply_kl_penalty`` call out). For each KL rule
that differs between main and the tags, :func:`read_code` reads the copy's code with
:mod:`ast` (never imported or run):

* the reward gate: the ``apply_kl_penalty(...)`` call in ``trainer/ppo/ray_trainer.py``'s
  ``fit`` (else any method of the file) and the ``if`` around it: ``use_kl_in_reward`` in its
  test -> ``use_kl_in_reward``; ``not ... use_kl_loss`` (or the ``else`` of ``if ...
  use_kl_loss``) -> ``not_use_kl_loss``; no ``if`` -> ``always``; no call (commented out,
  removed) -> ``never``;
* the KL loss: ``use_kl_loss`` named in ``workers/actor/dp_actor.py``;
* the estimator names: the strings ``trainer/ppo/core_algos.py``'s ``kl_penalty`` (and
  ``kl_penalty_forward``, 0.4 on) compare their name parameter with (``kl_penalty == "mse"``,
  ``kl_penalty in ("kl", "k1")``); any other name raises ``NotImplementedError`` there.

The sign of the KL loss (main from 2025-01-23 to 2025-02-01) is read by
:func:`.semantics.vendored_sign_bug`. Deviation: a call inside a nested ``if`` is judged by
the innermost test that names a KL switch; a gate written another way (a helper function) is
not recognised and leaves the release's rule (said in :attr:`VendoredCode.notes`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from kl_patches.adapters.files import MAX_SOURCE_FILE_BYTES, InputError, read_optional

__all__ = ["VendoredCode", "read_code"]


@dataclass(frozen=True)
class VendoredCode:
    """What a vendored copy's code does for the KL rules that moved between main and tags."""

    reward_gate: str | None
    """``use_kl_in_reward``, ``not_use_kl_loss``, ``always``, ``never`` (see the module
    docstring); None when the trainer file is missing or not readable."""
    reward_where: str
    """``path:line`` of the call (or of the trainer file, for ``never``); empty when None."""
    kl_loss: bool | None
    """Whether the actor names ``use_kl_loss``; None when the actor file is missing."""
    kl_loss_where: str
    """``path`` of the actor file read (empty when None)."""
    estimator_names: frozenset[str] | None = None
    """The estimator names the copy's ``kl_penalty`` accepts; None when ``core_algos.py`` is
    missing or has no such function (the release's names are read)."""
    estimator_where: str = ""
    """``path:line`` of the ``kl_penalty`` read (empty when None)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """What could not be read."""


def _parse(path: Path) -> ast.Module | None:
    try:
        text = read_optional(path, MAX_SOURCE_FILE_BYTES)
    except InputError:
        return None
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _calls(tree: ast.AST, name: str) -> list[tuple[ast.Call, list[tuple[ast.If, bool]]]]:
    """Every call of ``name`` (a function or method name) under ``tree``, with the ``if``
    statements around it, outermost first, and whether the call is in their ``else``."""
    out: list[tuple[ast.Call, list[tuple[ast.If, bool]]]] = []

    def visit(node: ast.AST, ifs: list[tuple[ast.If, bool]]) -> None:
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called == name:
                out.append((node, list(ifs)))
        if isinstance(node, ast.If):
            visit(node.test, ifs)
            for stmt in node.body:
                visit(stmt, [*ifs, (node, False)])
            for stmt in node.orelse:
                visit(stmt, [*ifs, (node, True)])
            return
        for child in ast.iter_child_nodes(node):
            visit(child, ifs)

    visit(tree, [])
    return out


def _gate(ifs: list[tuple[ast.If, bool]]) -> str:
    for node, in_else in reversed(ifs):
        test = ast.unparse(node.test)
        if "use_kl_in_reward" in test:
            return "never" if in_else else "use_kl_in_reward"
        if "use_kl_loss" in test:
            negated = isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
            return "not_use_kl_loss" if negated != in_else else "never"
    return "always"


def _reward_gate(root: Path) -> tuple[str | None, str, str]:
    path = root / "trainer" / "ppo" / "ray_trainer.py"
    tree = _parse(path)
    if tree is None:
        return None, "", f"{path} not read: the reward gate is the release's"
    methods = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name != "apply_kl_penalty"
    ]
    fit = [m for m in methods if m.name == "fit"]
    for group in (fit, methods):
        for method in group:
            found = _calls(method, "apply_kl_penalty")
            if found:
                call, ifs = found[0]
                return _gate(ifs), f"{path}:{call.lineno}", ""
    return "never", str(path), ""


_PENALTY_FUNCTIONS = ("kl_penalty", "kl_penalty_forward")


def _estimator_names(root: Path) -> tuple[frozenset[str] | None, str]:
    """The names ``kl_penalty`` of the copy's ``core_algos.py`` tests its name parameter
    against (``==`` or ``in`` a tuple/list/set), and where; (None, "") when not read."""
    path = root / "trainer" / "ppo" / "core_algos.py"
    tree = _parse(path)
    if tree is None:
        return None, ""
    functions = [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name in _PENALTY_FUNCTIONS and n.args.args
    ]
    if not functions:
        return None, ""
    names: set[str] = set()
    for fn in functions:
        param = fn.args.args[-1].arg  # (logprob, ref_logprob, kl_penalty) in every release
        for node in ast.walk(fn):
            if not isinstance(node, ast.Compare) or not isinstance(node.left, ast.Name):
                continue
            if node.left.id != param:
                continue
            for op, right in zip(node.ops, node.comparators, strict=False):
                if isinstance(op, ast.Eq) and isinstance(right, ast.Constant):
                    values = [right.value]
                elif isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
                    values = [e.value for e in right.elts if isinstance(e, ast.Constant)]
                else:
                    continue
                names.update(v for v in values if isinstance(v, str))
    if not names:
        return None, ""
    return frozenset(names), f"{path}:{functions[0].lineno}"


def read_code(version_file: str) -> VendoredCode:
    """The KL rules of the copy whose version file is ``version_file``
    (``<copy>/verl/version/version``; the package is two folders up)."""
    root = Path(version_file).parent.parent
    gate, where, note = _reward_gate(root)
    actor = root / "workers" / "actor" / "dp_actor.py"
    tree = _parse(actor)
    if tree is None:
        kl_loss: bool | None = None
        notes = [note, f"{actor} not read: the KL loss is the release's"]
    else:
        kl_loss = any(
            (isinstance(n, ast.Attribute) and n.attr == "use_kl_loss")
            or (isinstance(n, ast.Constant) and n.value == "use_kl_loss")
            for n in ast.walk(tree)
        )
        notes = [note]
    names, names_where = _estimator_names(root)
    return VendoredCode(
        gate,
        where,
        kl_loss,
        str(actor) if kl_loss is not None else "",
        names,
        names_where,
        tuple(n for n in notes if n),
    )
