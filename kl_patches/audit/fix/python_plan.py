"""Where a TRL trainer's config settings are written in a script, as libcst nodes, and the
edits that change them (used by :mod:`.python_edit`).

:class:`Script` parses the source once (with positions), finds the config classes (TRL's, their
``import ... as`` aliases, the script's own subclasses), and collects edits keyed by node;
:meth:`Script.render` writes them all in one pass. :class:`Plan` follows one trainer
construction to its config the way :mod:`kl_patches.audit.python` does and lists, for a key,
every place that writes it (:class:`Writer`), in the reader's order of precedence: the
subclass's default, the config call's keyword arguments and ``**`` dict entries, then attributes
assigned afterwards. Every case it cannot follow is a :class:`~.python_values.PythonEditError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from kl_patches import adapters
from kl_patches.adapters.trl.versions import GRPO_DEFAULTS, RLOO_DEFAULTS
from kl_patches.audit.fix.change import Change
from kl_patches.audit.fix.python_cst import append_arg, literal_text, remove_arg, remove_element
from kl_patches.audit.fix.python_values import PythonEditError, literal_value
from kl_patches.audit.python import PyLaunch

__all__ = ["Plan", "Script", "Writer"]

MAX_DEPTH = 12
"""Assignments, helper returns and dict expansions followed at most from the trainer."""

_Scope = cst.Module | cst.FunctionDef | cst.ClassDef
_Pos = tuple[int, int]
_Assign = cst.Assign | cst.AnnAssign | cst.AugAssign


@dataclass
class Writer:
    """One place that writes a config key."""

    kind: str
    """``field`` (a subclass default), ``kwarg`` (config call), ``dict_entry`` (a dict literal's
    entry), ``dict_kw`` (a ``dict(...)`` keyword), ``attr`` (``cfg.key = ...``)."""
    owner: cst.CSTNode
    """The call, dict or statement line that holds it."""
    index: int
    """Its position among the owner's arguments or entries (0 for statements)."""
    key: cst.CSTNode
    """The node naming the key (a Name or a string)."""
    value: cst.BaseExpression
    """The value written."""
    line: int
    """Its line in the script."""


@dataclass
class _Binding:
    """One assignment of a name."""

    target: cst.BaseExpression
    """What is assigned (the name, or a tuple holding it)."""
    value: cst.BaseExpression
    """The right-hand side."""
    scope: _Scope
    """The function, class or module whose body holds the assignment."""
    pos: _Pos
    """(line, column) of the statement."""


@dataclass
class _Source:
    """What the trainer's config is: a config call, or a config parsed from the command line."""

    call: cst.Call | None
    """The config class call; None for a config parsed from the command line."""
    scope: _Scope
    """Where the call (or the parse) is."""
    argv_line: int = 0
    """For a parsed config: the line that gets it (for messages)."""
    ranges: list[tuple[str, _Scope, _Pos, _Pos]] = field(default_factory=list)
    """(variable, scope, from, to): where ``variable.key = ...`` applies to this config."""


def _walk(node: cst.CSTNode, nested: bool = True) -> Iterator[cst.CSTNode]:
    """``node`` and everything under it; ``nested=False`` stops at functions and classes."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if (
            not nested
            and current is not node
            and isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
        ):
            continue
        stack.extend(reversed(current.children))


def _last(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return ""


def _string(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _literal_like(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return isinstance(node.expression, (cst.Integer, cst.Float))
    return False


class Script:
    """A parsed script, the edits collected for it, and its config classes."""

    def __init__(self, source: str, origin: str) -> None:
        self.origin = origin
        try:
            self.wrapper = MetadataWrapper(cst.parse_module(source))
            self.positions = self.wrapper.resolve(PositionProvider)
        except cst.ParserSyntaxError as err:
            raise PythonEditError(f"{origin}: libcst cannot parse it: {err}") from err
        except RecursionError as err:
            raise PythonEditError(f"{origin}: Python nested too deeply to edit") from err
        self.module = self.wrapper.module
        self.scopes: dict[int, _Scope] = {}
        self._scopes(self.module)
        self.values: dict[int, cst.BaseExpression] = {}
        self.names: dict[int, str] = {}
        self.strings: dict[int, str] = {}
        self.adds: dict[int, list[cst.Arg]] = {}
        self.drops: dict[int, set[int]] = {}
        self.removed: set[int] = set()
        self.classes: dict[str, list[cst.ClassDef]] = {}
        self.functions: dict[str, list[cst.FunctionDef]] = {}
        self.calls: list[cst.Call] = []
        self.assigns: list[tuple[cst.SimpleStatementLine, _Assign]] = []
        for node in _walk(self.module):
            if isinstance(node, cst.ClassDef):
                self.classes.setdefault(node.name.value, []).append(node)
            elif isinstance(node, cst.FunctionDef):
                self.functions.setdefault(node.name.value, []).append(node)
            elif isinstance(node, cst.Call):
                self.calls.append(node)
            elif isinstance(node, cst.SimpleStatementLine):
                for small in node.body:
                    if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                        self.assigns.append((node, small))
        self.config_classes = self._config_classes()

    def _scopes(self, root: cst.Module) -> None:
        """Each node's scope: the function or class whose body holds it, else the module."""
        stack: list[tuple[cst.CSTNode, _Scope]] = [(root, root)]
        while stack:
            node, scope = stack.pop()
            for child in node.children:
                self.scopes[id(child)] = scope
                inner = child if isinstance(child, (cst.FunctionDef, cst.ClassDef)) else scope
                stack.append((child, inner))

    def scope(self, node: cst.CSTNode) -> _Scope:
        return self.scopes.get(id(node), self.module)

    def pos(self, node: cst.CSTNode) -> _Pos:
        start = self.positions[node].start
        return (start.line, start.column)

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def code(self, node: cst.CSTNode) -> str:
        text = self.module.code_for_node(node).strip()
        return text if len(text) <= 60 else text[:57] + "..."

    def _config_classes(self) -> set[str]:
        api = adapters.get("trl").python
        names = set(api.configs) if api is not None else set()
        for node in _walk(self.module):
            if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    if alias.asname is not None and _last(alias.name) in names:
                        target = alias.asname.name
                        if isinstance(target, cst.Name):
                            names.add(target.value)
        grew = True
        while grew:
            grew = False
            for name, defs in self.classes.items():
                if name not in names and any(
                    _last(base.value) in names for d in defs for base in d.bases
                ):
                    names.add(name)
                    grew = True
        return names

    # ------------------------------------------------------------------ rendering
    def render(self) -> str:
        """The source with every collected edit."""
        try:
            return self.module.visit(_Editor(self)).code
        except RecursionError as err:
            raise PythonEditError(f"{self.origin}: Python nested too deeply to edit") from err


class _Editor(cst.CSTTransformer):
    def __init__(self, script: Script) -> None:
        super().__init__()
        self.s = script

    def on_leave(self, original_node: Any, updated_node: Any) -> Any:
        key = id(original_node)
        s = self.s
        if key in s.removed:
            return cst.RemovalSentinel.REMOVE
        if key in s.values:
            return s.values[key]
        if key in s.names and isinstance(updated_node, cst.Name):
            return updated_node.with_changes(value=s.names[key])
        if key in s.strings and isinstance(updated_node, cst.SimpleString):
            return updated_node.with_changes(value=s.strings[key])
        if isinstance(updated_node, cst.Call):
            for index in sorted(s.drops.get(key, ()), reverse=True):
                updated_node = remove_arg(updated_node, index)
            for arg in s.adds.get(key, []):
                updated_node = append_arg(updated_node, arg)
        elif isinstance(updated_node, cst.Dict):
            for index in sorted(s.drops.get(key, ()), reverse=True):
                updated_node = remove_element(updated_node, index)
        elif isinstance(updated_node, cst.IndentedBlock) and not updated_node.body:
            updated_node = updated_node.with_changes(
                body=[cst.SimpleStatementLine(body=[cst.Pass()])]
            )
        return updated_node


class Plan:
    """One trainer construction of the script, followed to its config."""

    def __init__(self, script: Script, launch: PyLaunch, launch_index: int) -> None:
        self.s = script
        self.launch = launch
        self.launch_index = launch_index
        self.written: dict[str, Any] = {}
        """Key -> the value :meth:`apply` wrote for it (what the reader must read back)."""
        self.trainer = self._trainer()
        self.source = self._config()

    def fail(self, why: str, node: cst.CSTNode | None = None) -> PythonEditError:
        where = f"{self.s.origin}:{self.s.line(node)}" if node is not None else self.s.origin
        return PythonEditError(f"{where}: {why}")

    # ------------------------------------------------------------------ finding the config
    def _trainer(self) -> cst.Call:
        found = [
            c
            for c in self.s.calls
            if self.s.line(c) == self.launch.line and _last(c.func) == self.launch.trainer_class
        ]
        if len(found) != 1:
            raise PythonEditError(
                f"{self.s.origin}:{self.launch.line}: {len(found)} calls of "
                f"{self.launch.trainer_class} on this line; cannot tell which builds the trainer"
            )
        return found[0]

    def _config(self) -> _Source:
        api = adapters.get("trl").python
        keyword = api.config_argument if api is not None else "args"
        expr: cst.BaseExpression | None = None
        positional = [a for a in self.trainer.args if a.keyword is None and not a.star]
        for arg in self.trainer.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                expr = arg.value
        if expr is None and len(positional) >= 3:
            expr = positional[2].value
        if expr is None:
            raise self.fail(
                f"{self.launch.trainer_class} is built without a config ({keyword}=): add "
                f"{keyword}=<Config>(...) by hand",
                self.trainer,
            )
        scope = self.s.scope(self.trainer)
        return self._resolve(expr, scope, self.s.pos(self.trainer), 0)

    def _resolve(
        self, expr: cst.BaseExpression, scope: _Scope, before: _Pos, depth: int
    ) -> _Source:
        if depth > MAX_DEPTH:
            raise self.fail("the config is passed through too many assignments", expr)
        if isinstance(expr, cst.Call):
            name = _last(expr.func)
            if name in self.s.config_classes:
                return _Source(expr, scope)
            helpers = self.s.functions.get(name, []) if isinstance(expr.func, cst.Name) else []
            if len(helpers) == 1:
                fn = helpers[0]
                returns = [
                    n
                    for n in _walk(fn.body, nested=False)
                    if isinstance(n, cst.Return) and n.value is not None
                ]
                if len(returns) != 1 or returns[0].value is None:
                    raise self.fail(
                        f"the config comes from {name}(), which returns in {len(returns)} "
                        "places; cannot tell which to edit",
                        expr,
                    )
                return self._resolve(returns[0].value, fn, self.s.pos(returns[0]), depth + 1)
            raise self.fail(f"the config is built by `{self.s.code(expr)}`", expr)
        if isinstance(expr, cst.Name):
            if self.launch.from_argv and self._parameter(expr.value, scope, before):
                # main(script_args, training_args, ...) called with a parser's dataclasses
                src = _Source(None, scope, argv_line=self.s.line(expr))
                src.ranges.append((expr.value, scope, self.s.pos(scope), before))
                return src
            if isinstance(scope, cst.FunctionDef) and self._parameter(expr.value, scope, before):
                cell = self._cell_value(scope, expr.value, expr)
                if cell is not None:  # a marimo cell's parameter: the name a cell returns
                    binding, end = cell
                    src = self._resolve(binding.value, binding.scope, binding.pos, depth + 1)
                    src.ranges.append((expr.value, binding.scope, binding.pos, end))
                    src.ranges.append((expr.value, scope, self.s.pos(scope), before))
                    return src
                given, caller = self._argument(scope, expr.value, expr)
                src = self._resolve(given, self.s.scope(caller), self.s.pos(caller), depth + 1)
                src.ranges.append((expr.value, scope, self.s.pos(scope), before))
                return src
            binding = self._binding(expr.value, scope, before, expr)
            if isinstance(binding.target, (cst.Tuple, cst.List)):
                if not self.launch.from_argv:
                    raise self.fail(
                        f"{expr.value} is unpacked from `{self.s.code(binding.value)}`", expr
                    )
                src = _Source(None, binding.scope, argv_line=binding.pos[0])
            else:
                src = self._resolve(binding.value, binding.scope, binding.pos, depth + 1)
            src.ranges.append((expr.value, binding.scope, binding.pos, before))
            return src
        raise self.fail(f"the config is `{self.s.code(expr)}`, not a config call", expr)

    def _parameter(self, name: str, scope: _Scope, before: _Pos) -> bool:
        """Whether ``name`` is a parameter of the function ``scope`` not assigned before."""
        if not isinstance(scope, cst.FunctionDef):
            return False
        if any(b.pos < before for b in self._bindings(name, scope)):
            return False
        params = scope.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        return any(p.name.value == name for p in every)

    def _cell_value(
        self, fn: cst.FunctionDef, name: str, use: cst.CSTNode
    ) -> tuple[_Binding, _Pos] | None:
        """For ``name``, a parameter of a marimo cell ``fn`` (an ``@app.cell`` function at
        module level): its one assignment in the last earlier cell that returns it, and the
        position of that ``return`` (marimo binds a cell's parameters to the names other cells
        define, and a saved notebook's cells return what they define; the reader reads the
        cells in order, :meth:`kl_patches.audit.python._Reader._cell`). None when ``fn`` is
        not a cell."""
        if not _is_cell(fn) or self.s.scope(fn) is not self.s.module:
            return None
        start = self.s.pos(fn)
        found: tuple[cst.FunctionDef, cst.Return] | None = None
        for stmt in self.s.module.body:
            if not isinstance(stmt, cst.FunctionDef) or not _is_cell(stmt):
                continue
            if self.s.pos(stmt) >= start:
                break
            for ret in _walk(stmt.body, nested=False):
                if (
                    isinstance(ret, cst.Return)
                    and ret.value is not None
                    and _names(ret.value, name)
                ):
                    found = (stmt, ret)
        if found is None:
            raise self.fail(
                f"{name} is a parameter of a marimo cell, and no cell before it returns {name}",
                use,
            )
        cell, ret = found
        return self._binding(name, cell, self.s.pos(ret), use), self.s.pos(ret)

    def _argument(
        self, fn: cst.FunctionDef, name: str, use: cst.CSTNode
    ) -> tuple[cst.BaseExpression, cst.Call]:
        """The argument the one call of ``fn`` in the script passes as its parameter ``name``
        (the reader binds a function's parameters from the call it reads)."""
        calls = [
            c
            for c in self.s.calls
            if isinstance(c.func, cst.Name) and c.func.value == fn.name.value
        ]
        if len(calls) != 1:
            raise self.fail(
                f"{name} is a parameter of {fn.name.value}(), called {len(calls)} times in this "
                "script; cannot tell which call's config to edit",
                use,
            )
        call = calls[0]
        order = [p.name.value for p in [*fn.params.posonly_params, *fn.params.params]]
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg.value, call
        positional = [a for a in call.args if a.keyword is None]
        index = order.index(name) if name in order else len(positional)
        if any(a.star for a in positional[: index + 1]) or index >= len(positional):
            raise self.fail(f"cannot tell what {fn.name.value}() gets as {name}", call)
        return positional[index].value, call

    def _binding(self, name: str, scope: _Scope, before: _Pos, use: cst.CSTNode) -> _Binding:
        found = [b for b in self._bindings(name, scope) if b.pos < before]
        if not found and not isinstance(scope, cst.Module):
            found = self._bindings(name, self.s.module)
        if not found:
            raise self.fail(f"{name} is never assigned in this script", use)
        if len(found) > 1:
            lines = ", ".join(str(b.pos[0]) for b in found)
            raise self.fail(
                f"{name} is assigned at lines {lines}; cannot tell which one the trainer gets", use
            )
        return found[0]

    def _bindings(self, name: str, scope: _Scope) -> list[_Binding]:
        out: list[_Binding] = []
        for line, small in self.s.assigns:
            if self.s.scope(line) is not scope:
                continue
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    if _binds(target.target, name):
                        out.append(_Binding(target.target, small.value, scope, self.s.pos(line)))
            elif (
                isinstance(small, cst.AnnAssign)
                and small.value is not None
                and _binds(small.target, name)
            ):
                out.append(_Binding(small.target, small.value, scope, self.s.pos(line)))
        return out

    def same_config(self, other: Plan) -> bool:
        a, b = self.source, other.source
        if a.call is not None or b.call is not None:
            return a.call is b.call and self._attr_lines() == other._attr_lines()
        return a.argv_line == b.argv_line and self._attr_lines() == other._attr_lines()

    def _attr_lines(self) -> list[int]:
        return sorted(self.s.line(w.owner) for w in self._attrs(None))

    # ------------------------------------------------------------------ writers of a key
    def writers(self, key: str) -> tuple[list[Writer], list[str]]:
        """Every place that writes ``key`` (reader's precedence order, the last one wins) and
        the ``**`` expansions the reader cannot see into."""
        out: list[Writer] = []
        opaque: list[str] = []
        call = self.source.call
        if call is not None:
            out.extend(self._fields(_last(call.func), key, 0))
            for index, arg in enumerate(call.args):
                if arg.keyword is not None and arg.keyword.value == key:
                    out.append(Writer("kwarg", call, index, arg.keyword, arg.value, self._l(arg)))
                elif arg.star == "**":
                    out.extend(self._dict(arg.value, key, self.source.scope, opaque, 0))
                elif arg.star == "*":
                    opaque.append(f"*{self.s.code(arg.value)}")
        out.extend(self._attrs(key))
        return out, opaque

    def _l(self, node: cst.CSTNode) -> int:
        return self.s.line(node)

    def _fields(self, cls: str, key: str, depth: int) -> list[Writer]:
        defs = self.s.classes.get(cls, [])
        if not defs or depth > MAX_DEPTH:
            return []
        if len(defs) > 1:
            raise self.fail(f"the config class {cls} is defined {len(defs)} times", defs[1])
        node = defs[0]
        inherited: list[Writer] = []
        for base in node.bases:
            if _last(base.value) in self.s.config_classes:
                inherited = self._fields(_last(base.value), key, depth + 1)
                break
        own: list[Writer] = []
        for stmt in node.body.body if isinstance(node.body, cst.IndentedBlock) else []:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                target: cst.BaseExpression | None = None
                value: cst.BaseExpression | None = None
                if isinstance(small, cst.AnnAssign):
                    target, value = small.target, small.value
                elif isinstance(small, cst.Assign) and len(small.targets) == 1:
                    target, value = small.targets[0].target, small.value
                if not (isinstance(target, cst.Name) and target.value == key) or value is None:
                    continue
                if isinstance(value, cst.Call) and _last(value.func) == "field":
                    given = [a for a in value.args if a.keyword and a.keyword.value == "default"]
                    if not given:
                        continue  # default_factory or none: the parent's default stands
                    value = given[0].value
                own.append(Writer("field", stmt, 0, target, value, self._l(stmt)))
        return [*inherited, *own]

    def _dict(
        self,
        expr: cst.BaseExpression,
        key: str,
        scope: _Scope,
        opaque: list[str],
        depth: int,
    ) -> list[Writer]:
        if depth > MAX_DEPTH:
            opaque.append(self.s.code(expr))
            return []
        out: list[Writer] = []
        if isinstance(expr, cst.Dict):
            for index, item in enumerate(expr.elements):
                if isinstance(item, cst.DictElement):
                    if _string(item.key) == key:
                        out.append(
                            Writer("dict_entry", expr, index, item.key, item.value, self._l(item))
                        )
                elif isinstance(item, cst.StarredDictElement):
                    out.extend(self._dict(item.value, key, scope, opaque, depth + 1))
            return out
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Name)
            and (expr.func.value == "dict")
        ):
            for index, arg in enumerate(expr.args):
                if arg.keyword is not None and arg.keyword.value == key:
                    out.append(Writer("dict_kw", expr, index, arg.keyword, arg.value, self._l(arg)))
                elif arg.star == "**":
                    out.extend(self._dict(arg.value, key, scope, opaque, depth + 1))
                elif arg.keyword is None:
                    opaque.append(f"dict({self.s.code(arg.value)})")
            return out
        if isinstance(expr, cst.Name):
            binding = self._binding(expr.value, scope, self.s.pos(expr), expr)
            self._no_item_writes(expr.value, binding.scope, key)
            return self._dict(binding.value, key, binding.scope, opaque, depth + 1)
        opaque.append(f"**{self.s.code(expr)}")
        return out

    def _no_item_writes(self, name: str, scope: _Scope, key: str) -> None:
        """PythonEditError when the dict ``name`` gets ``key`` (or a key not written as a
        literal) after it is built, which the reader does not follow: ``name["key"] = ...``,
        ``name.update(key=...)``, ``name |= {...}``."""
        for line, small in self.s.assigns:
            if self.s.scope(line) is not scope:
                continue
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, cst.AugAssign):
                targets = [small.target]
                if _is_name(small.target, name) and self._may_hold(small.value, key):
                    raise self._unread(name, key, line)
            else:
                continue
            for t in targets:
                if not (isinstance(t, cst.Subscript) and _is_name(t.value, name)):
                    continue
                given = t.slice[0].slice if len(t.slice) == 1 else None
                index = given.value if isinstance(given, cst.Index) else None
                if index is None or _string(index) in (None, key):
                    raise self._unread(name, key, line)
        for call in self.s.calls:
            func = call.func
            if (
                self.s.scope(call) is scope
                and isinstance(func, cst.Attribute)
                and _is_name(func.value, name)
                and func.attr.value in ("update", "setdefault", "__setitem__", "pop")
                and any(self._may_hold(a.value, key, a.keyword) for a in call.args)
            ):
                raise self._unread(name, key, call)

    def _may_hold(
        self, value: cst.BaseExpression, key: str, keyword: cst.Name | None = None
    ) -> bool:
        """Whether an argument of ``update(...)`` and the like may set ``key``."""
        if keyword is not None:
            return keyword.value == key
        if isinstance(value, cst.SimpleString):
            return _string(value) == key
        if isinstance(value, cst.Dict):
            return any(
                not isinstance(e, cst.DictElement) or _string(e.key) in (None, key)
                for e in value.elements
            )
        return True

    def _unread(self, name: str, key: str, node: cst.CSTNode) -> PythonEditError:
        return self.fail(
            f"{name} may get {key} here, after it is built, which the audit does not read; "
            f"edit {key} by hand",
            node,
        )

    def _attrs(self, key: str | None) -> list[Writer]:
        """``var.key = value`` statements on the config (any key when ``key`` is None)."""
        out: list[Writer] = []
        seen: set[int] = set()
        for var, scope, start, end in self.source.ranges:
            for line, small in self.s.assigns:
                if self.s.scope(line) is not scope or id(small) in seen:
                    continue
                if not start < self.s.pos(line) < end:
                    continue
                targets = (
                    [t.target for t in small.targets]
                    if isinstance(small, cst.Assign)
                    else [small.target]
                )
                for t in targets:
                    if not (
                        isinstance(t, cst.Attribute)
                        and isinstance(t.value, cst.Name)
                        and t.value.value == var
                        and (key is None or t.attr.value == key)
                    ):
                        continue
                    if isinstance(small, cst.AugAssign):
                        raise self.fail(f"{self.s.code(small)} computes {t.attr.value}", line)
                    if len(targets) > 1 or len(line.body) > 1:
                        raise self.fail(
                            f"{t.attr.value} is assigned together with other names here", line
                        )
                    seen.add(id(small))
                    value = small.value
                    assert value is not None
                    out.append(Writer("attr", line, 0, t.attr, value, self._l(line)))
        out.sort(key=lambda w: self.s.pos(w.owner))
        return out

    # ------------------------------------------------------------------ edits
    def apply(self, change: Change) -> None:
        writers, opaque = self.writers(change.key)
        if change.action == "set":
            self._set(change, writers, opaque)
        elif change.action == "unset":
            self._unset(change, writers, opaque)
        else:
            self._rename(change, writers, opaque)

    def _hidden(self, change: Change, opaque: list[str]) -> PythonEditError:
        return self.fail(
            f"{change.key} may be set inside {', '.join(opaque)}, which the audit cannot read; "
            f"{change.action} it by hand",
            self.source.call,
        )

    def _set(self, change: Change, writers: list[Writer], opaque: list[str]) -> None:
        assert change.value is not None
        if not writers and opaque:
            raise self._hidden(change, opaque)
        if not writers and self.source.call is None:
            raise PythonEditError(
                f"{self.s.origin}:{self.source.argv_line}: the config is read from the command "
                f"line (a parser) and this script does not assign {change.key}: set "
                f"--{change.key} in the launch command or its --config file"
            )
        target = writers[-1] if writers else None
        if target is not None and not _literal_like(target.value):
            raise self.fail(
                f"{change.key} is computed from `{self.s.code(target.value)}`; writing a "
                f"literal there would change what it means: set {change.key}={change.value} by "
                "hand",
                target.value,
            )
        text = self._literal(change, target)
        self.written[change.key] = literal_value(text)
        new = cst.parse_expression(text)
        if target is not None:
            self.s.values[id(target.value)] = new
            return
        call = self.source.call
        assert call is not None
        equal = cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        )
        for arg in call.args:
            if arg.keyword is not None and isinstance(arg.equal, cst.AssignEqual):
                equal = arg.equal
        arg = cst.Arg(value=new, keyword=cst.Name(change.key), equal=equal)
        self.s.adds.setdefault(id(call), []).append(arg)

    def _literal(self, change: Change, target: Writer | None) -> str:
        assert change.value is not None
        defaults = RLOO_DEFAULTS if self.launch.label == "rloo" else GRPO_DEFAULTS
        like: type | None = None
        if change.key in defaults and defaults[change.key] is not None:
            like = type(defaults[change.key])
        elif target is not None:
            like = _type_of(target.value)
        quote = '"'
        strings = [
            n for n in _walk(self.source.call or self.s.module) if isinstance(n, cst.SimpleString)
        ]
        if target is not None and isinstance(target.value, cst.SimpleString):
            strings = [target.value]
        if strings and strings[0].quote in ("'", '"'):
            quote = strings[0].quote
        try:
            return literal_text(change.value, like, quote)
        except ValueError as err:
            raise PythonEditError(
                f"{self.s.origin}: {change.key}={change.value}: {err}"
                + (f" ({like.__name__} field)" if like else "")
            ) from err

    def _unset(self, change: Change, writers: list[Writer], opaque: list[str]) -> None:
        if not writers:
            if opaque:
                raise self._hidden(change, opaque)
            where = "the launch command" if self.source.call is None else "this script"
            raise self.fail(
                f"{change.key} is not set in this script (nothing to unset); it comes from "
                f"{'the command line' if self.source.call is None else 'the default'}"
                + (f": unset it in {where}" if self.source.call is None else ""),
                self.trainer,
            )
        for w in writers:
            if w.kind in ("kwarg", "dict_kw", "dict_entry"):
                self.s.drops.setdefault(id(w.owner), set()).add(w.index)
            else:
                self.s.removed.add(id(w.owner))

    def _rename(self, change: Change, writers: list[Writer], opaque: list[str]) -> None:
        assert change.new_key is not None
        if not writers:
            if opaque:
                raise self._hidden(change, opaque)
            raise self.fail(f"{change.key} is not set in this script (nothing to rename)")
        clash, _ = self.writers(change.new_key)
        if clash:
            raise self.fail(
                f"cannot rename {change.key} to {change.new_key}: {change.new_key} is already set",
                clash[0].owner,
            )
        for w in writers:
            if isinstance(w.key, cst.SimpleString):
                quote = w.key.quote
                self.s.strings[id(w.key)] = f"{w.key.prefix}{quote}{change.new_key}{quote}"
            else:
                self.s.names[id(w.key)] = change.new_key


def _is_cell(fn: cst.FunctionDef) -> bool:
    """A marimo cell: decorated ``@<app>.cell`` or ``@<app>.cell(...)``."""
    for d in fn.decorators:
        node = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if isinstance(node, cst.Attribute) and node.attr.value == "cell":
            return True
    return False


def _names(value: cst.BaseExpression, name: str) -> bool:
    """``return name`` or ``return (..., name, ...)``."""
    if isinstance(value, (cst.Tuple, cst.List)):
        return any(_is_name(e.value, name) for e in value.elements)
    return _is_name(value, name)


def _is_name(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(e.value, name) for e in target.elements)
    return False


def _type_of(node: cst.BaseExpression) -> type | None:
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    if isinstance(node, cst.Integer):
        return int
    if isinstance(node, cst.Float):
        return float
    if isinstance(node, cst.SimpleString):
        return str
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return bool
    return None
