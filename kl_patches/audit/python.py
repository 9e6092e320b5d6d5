"""Read a Python training script with :mod:`ast` only: which trainer it builds, with which config.

The script is parsed, never imported or run. The reader walks its syntax tree in order, with a
small evaluator for literals (numbers, strings, lists, dicts, ``dict(...)``, arithmetic,
f-strings of known values, module-level constants, ``os.environ.get(NAME, DEFAULT)`` read as in
a clean environment), and records:

* every construction of a trainer class an adapter names (:class:`~kl_patches.adapters.base.
  PythonApi`: ``GRPOTrainer``, ``RLOOTrainer``, ``PPOTrainer``, subclasses defined in the script,
  kl-patches' own trainers with ``kl=KLConfig...``), with its config object: the keyword literals
  of ``GRPOConfig(...)``, attributes assigned afterwards (``args.beta = 0.0``), or the command
  line when the config comes from a parser (``TrlParser((..., GRPOConfig, ...))``);
* modules that patch the trainers when imported (``unsloth``) and, for a subclass, the methods it
  overrides;
* trainers of other kinds (SFT, DPO, distillation), so "no launch found" can say what runs;
* a marimo notebook saved as ``.py`` (each cell an ``@app.cell`` function, all named ``_``): its
  cells are read in order, each parameter bound to the name an earlier cell returned, so a
  config built in one cell reaches the trainer built in another (imports inside a function
  body count as the script's imports, as everywhere in this reader);
* a Hydra application (``@hydra.main(config_path=..., config_name=...)``) and the libraries the
  script imports, so a fork's copy of a trainer entry point is recognised.

What cannot be resolved (``**kwargs`` built elsewhere, a value computed at run time) is listed in
:attr:`PyLaunch.unresolved` and becomes a finding; it is never guessed.
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kl_patches import adapters
from kl_patches.adapters.base import PythonApi
from kl_patches.audit.checkout_classes import checkout_class
from kl_patches.audit.model import InputError
from kl_patches.config import KLConfig

__all__ = ["PyLaunch", "PyScript", "read_python"]

MAX_STEPS = 200_000
"""Syntax-tree nodes the reader visits at most (a bound for hostile files)."""
MAX_SOURCE_CHARS = 512 * 1024
"""Largest Python source read (parsing costs about 500 bytes of memory per character in the
worst case; training scripts are far smaller)."""
MAX_INT_BITS = 1024
"""Largest integer the evaluator computes or keeps (float's range): a bigger literal or
result, such as ``A = 10**64`` squared forty times, is an unknown value, never computed (no
library could use it as a number)."""


class _Unknown:
    """A value the reader cannot compute without running the script."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"<unknown {self.why}>"


@dataclass
class _ClassRef:
    name: str


class _Classes(_Unknown):
    """One of several classes, chosen under a condition the reader cannot decide
    (``A if use_vllm else B``): unknown as a value, but a call of it builds one of them."""

    def __init__(self, why: str, options: tuple[_ClassRef, ...]) -> None:
        super().__init__(why)
        self.options = options


@dataclass
class _Config:
    library: str
    label: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)
    from_argv: bool = False
    line: int = 0
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class _Parser:
    classes: list[str]
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class PyLaunch:
    """One trainer the script builds."""

    library: str
    """The library whose trainer it is."""
    label: str
    """The trainer label for the adapter's reader (``grpo``, ``rloo``, ``ppo``)."""
    line: int
    """Line of the trainer's construction."""
    kwargs: dict[str, Any]
    """The config's settings the reader could compute."""
    unresolved: list[str]
    """Settings (or ``**name`` expansions) whose value the reader cannot compute."""
    from_argv: bool
    """True when the config comes from the command line (a parser such as ``TrlParser``)."""
    trainer_class: str
    """The class constructed (a subclass's own name when it is one)."""
    subclass: str = ""
    """The script's own subclass of the library's trainer, if that is what it builds."""
    overrides: tuple[str, ...] = ()
    """Methods the subclass overrides."""
    kl: dict[str, Any] | None = None
    """The KLConfig (``to_dict()``) of a kl-patches trainer or ``kl_patches.<lib>.apply``."""
    kl_module: str = ""
    """The kl-patches module whose ``apply`` set :attr:`kl` (``kl_patches.trl``, or
    ``kl_patches.adapters.trl.unsloth``: unsloth's own loss patched); "" otherwise."""
    notes: list[str] = field(default_factory=list)
    """What the reader could not follow exactly."""
    parser_fields: dict[str, str] = field(default_factory=dict)
    """Fields of the script's own dataclasses that its parser reads from the command line
    (name -> ``list``, ``bool`` or ``value``: how HfArgumentParser takes it, :func:`_kind`)."""


@dataclass
class PyScript:
    """What a Python script builds, as far as its syntax tree says."""

    launches: list[PyLaunch]
    """The trainers it builds."""
    others: list[tuple[int, str]]
    """(line, what it runs) of trainers that are not reference-KL RL trainers."""
    libraries: list[str]
    """Adapter libraries the script imports."""
    imports: list[str]
    """Every module it imports (dotted names)."""
    patchers: list[str]
    """Modules that patch the libraries' trainers when imported (``unsloth``)."""
    hydra: dict[str, str] | None
    """``config_path``/``config_name`` of its ``@hydra.main``, None when it has none."""
    notes: list[str]
    """What the reader could not follow exactly."""
    own_trainers: dict[str, str] = field(default_factory=dict)
    """``*Trainer`` classes the script builds that its checkout defines and no adapter names
    (VLM-R1's ``VLMGRPOTrainer``, TRL's code copied onto transformers' ``Trainer``) ->
    ``file:line`` of the class: what runs is the project's code, which no kl-patches patch
    of the library's trainers reaches."""
    config_copies: dict[str, str] = field(default_factory=dict)
    """Library config class names (``GRPOConfig``) that the script's parser gets from a file
    of its checkout, a project's copy, not the library's class -> ``file:line`` of the copy."""
    parser_fields: dict[str, str] = field(default_factory=dict)
    """Fields of the script's own dataclasses given to a command-line parser it builds
    (``TrlParser((ScriptArguments, GRPOConfig, ModelConfig))`` with the script's own
    ``ScriptArguments``): name -> how HfArgumentParser takes it (:func:`_kind`). A launch of
    the script may pass them, whatever the library's own dataclasses declare."""


def _apis() -> list[tuple[str, PythonApi]]:
    return [(d.name, d.python) for d in adapters.descriptors() if d.python is not None]


class _Reader:
    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.apis = _apis()
        self.trainers: dict[str, tuple[str, str]] = {}
        self.configs: dict[str, tuple[str, str]] = {}
        self.parsers: set[str] = set()
        self.others: dict[str, str] = {}
        self.kl_classes: dict[str, tuple[str, str]] = {}
        for lib, api in self.apis:
            for cls, label in api.trainers.items():
                self.trainers[cls] = (lib, label)
            for cls, label in api.configs.items():
                self.configs[cls] = (lib, label)
            self.parsers.update(api.parsers)
            self.others.update(api.other)
        self.subclasses: dict[str, tuple[str, str, tuple[str, ...]]] = {}
        self.launches: list[PyLaunch] = []
        self.other_runs: list[tuple[int, str]] = []
        self.imports: list[str] = []
        self.patchers: list[str] = []
        self.kl_imports: dict[str, tuple[str, str]] = {}
        self.kl_apply: dict[str, str] = {}
        self.kl_apply_module: dict[str, str] = {}
        self.applied: dict[str, dict[str, Any]] = {}
        self.applied_by: dict[str, str] = {}
        self.hydra: dict[str, str] | None = None
        self.notes: list[str] = []
        self.steps = 0
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.defined: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        """Every function defined, in order (several may share a name: marimo's ``_`` cells)."""
        self.cell_names: dict[str, Any] = {}
        """Names the marimo cells read so far return (what later cells take as parameters)."""
        self.config_defaults: dict[str, dict[str, Any]] = {}
        """Config subclass defined in the script -> the field defaults it sets."""
        self.own_fields: dict[str, dict[str, str]] = {}
        """Dataclass defined in the script -> its fields, inherited from the script's own
        classes included (name -> :func:`_kind`)."""
        self.parser_fields: dict[str, str] = {}
        """Fields of the script's own dataclasses given to a parser it builds."""
        self.from_imports: dict[str, tuple[str, int, str]] = {}
        """Name bound by ``from MODULE import NAME`` -> (module, level of dots, name)."""
        self.own_trainers: dict[str, str] = {}
        """A trainer class of the project's own the script builds -> ``file:line``."""
        self.config_copies: dict[str, str] = {}
        """A library config class name whose class the parser gets is the project's own (a
        copy in a checkout file) -> ``file:line`` of its definition."""

    # ------------------------------------------------------------------ walking
    def _tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise InputError(f"{self.origin}: more than {MAX_STEPS} syntax nodes to read")

    def run(self, tree: ast.Module) -> None:
        env: dict[str, Any] = {"__name__": "__main__"}
        self.block(tree.body, env)
        # functions never called at module level are read too (main() under a guard is)
        for fn in list(self.defined):
            if not getattr(fn, "_kl_read", False):
                self._function(fn, env, [])

    def block(self, body: list[ast.stmt], env: dict[str, Any]) -> None:
        for stmt in body:
            self.stmt(stmt, env)

    def stmt(self, node: ast.stmt, env: dict[str, Any]) -> None:
        self._tick()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node, env)
        elif isinstance(node, ast.Assign):
            value = self.expr(node.value, env)
            for target in node.targets:
                self._bind(target, value, env, node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self._bind(node.target, self.expr(node.value, env), env, node.value)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                env[node.target.id] = _Unknown(ast.unparse(node)[:60])
        elif isinstance(node, ast.Expr):
            self.expr(node.value, env)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions[node.name] = node
            self.defined.append(node)
            for deco in node.decorator_list:
                self._decorator(deco, env)
            if self._marimo_cell(node):
                self._cell(node, env)
        elif isinstance(node, ast.ClassDef):
            self._class(node, env)
        elif isinstance(node, ast.If):
            test = self.expr(node.test, env)
            if test is True or (not isinstance(test, _Unknown) and bool(test) and test is not None):
                self.block(node.body, env)
            elif isinstance(test, _Unknown):
                self.block(node.body, env)
                self.block(node.orelse, env)
            else:
                self.block(node.orelse, env)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            self.block(node.body, env)
            self.block(node.orelse, env)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            self.block(node.body, env)
        elif isinstance(node, ast.Try):
            self.block(node.body, env)
            for handler in node.handlers:
                self.block(handler.body, env)
            self.block(node.orelse, env)
            self.block(node.finalbody, env)
        elif isinstance(node, ast.Return) and node.value is not None:
            env["__return__"] = self.expr(node.value, env)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child, env)

    def _import(self, node: ast.Import | ast.ImportFrom, env: dict[str, Any]) -> None:
        if isinstance(node, ast.Import):
            for item in node.names:
                self.imports.append(item.name)
                env[item.asname or item.name.split(".")[0]] = _Unknown(f"module {item.name}")
            names: list[tuple[str, str]] = []
            module = ""
        else:
            module = node.module or ""
            self.imports.append(module)
            names = [(a.name, a.asname or a.name) for a in node.names]
            for name, alias in names:
                self.from_imports[alias] = (module, node.level, name)
        for lib, api in self.apis:
            for mod in (self.imports[-1], *[a.name for a in getattr(node, "names", [])]):
                root = mod.split(".")[0]
                if root in api.patchers and root not in self.patchers:
                    self.patchers.append(root)
            if module and any(
                module == m or module.startswith(m + ".") for m in api.kl_patches_modules
            ):
                for name, alias in names:
                    if name in api.trainers:
                        self.kl_imports[alias] = (lib, api.trainers[name])
                    if name == "apply":
                        self.kl_apply[alias] = lib
                        self.kl_apply_module[alias] = module
            for name, alias in names:
                if alias != name and name in api.trainers:
                    self.trainers.setdefault(alias, (lib, api.trainers[name]))
                if alias != name and name in api.configs:
                    self.configs.setdefault(alias, (lib, api.configs[name]))
        for name, alias in names:
            env.setdefault(alias, _ClassRef(name))

    def _decorator(self, deco: ast.expr, env: dict[str, Any]) -> None:
        if not isinstance(deco, ast.Call):
            return
        name = _dotted(deco.func)
        if name in ("hydra.main", "main") and (name == "hydra.main" or "hydra" in self.imports):
            found: dict[str, str] = {}
            for kw in deco.keywords:
                value = self.expr(kw.value, env)
                if kw.arg in ("config_path", "config_name") and isinstance(value, str):
                    found[kw.arg] = value
            self.hydra = found

    def _marimo_cell(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A marimo notebook cell: ``@app.cell`` (or ``@app.cell(...)``) in a script that
        imports marimo (a notebook saved as ``.py``, each cell a function named ``_``)."""
        return "marimo" in self.imports and any(
            _dotted(d).rsplit(".", 1)[-1] == "cell" and "." in _dotted(d) for d in fn.decorator_list
        )

    def _cell(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, env: dict[str, Any]) -> None:
        """Read a marimo cell where it stands, as marimo runs it: each parameter is the value
        of the name an earlier cell returned (marimo binds a cell's parameters to the names
        other cells define, and a cell defines what it returns, ``return (a, b)``); the names
        it returns become visible to the cells after it. marimo orders cells by those
        dependencies; a notebook it saved lists them in a runnable order, which is the order
        read here (a parameter no earlier cell defined is unknown)."""
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        known = [self.cell_names[p] if p in self.cell_names else _Unknown(p) for p in params]
        result = self._function(fn, env, known)
        returned = [s.value for s in fn.body if isinstance(s, ast.Return) and s.value is not None]
        if not returned:
            return
        value = returned[-1]
        names = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        values = result if isinstance(result, tuple) else (result,)
        if not isinstance(result, tuple) and len(names) != 1:
            values = tuple(_Unknown(ast.unparse(n)) for n in names)
        for node, item in zip(names, values, strict=False):
            if isinstance(node, ast.Name):
                self.cell_names[node.id] = item

    def _checkout(self, cls: str) -> tuple[ast.ClassDef, Path] | None:
        """The definition of a class the script imports from a file of its checkout (not
        from a library): :func:`.checkout_classes.checkout_class`; None otherwise."""
        where = self.from_imports.get(cls)
        if where is None or not os.path.isfile(self.origin):
            return None
        module, level, name = where
        roots = {m for _, api in self.apis for m in api.modules}
        if not level and module.split(".")[0] in roots:
            return None
        return checkout_class(Path(self.origin), module, level, name)

    def _checkout_fields(self, cls: str) -> dict[str, str]:
        """The fields of a dataclass the script imports from a file of its checkout. A library
        config's name bound to such a class (a project's copy of ``GRPOConfig``) is noted in
        :attr:`config_copies`: the parser gets the copy, not the library's class."""
        found = self._checkout(cls)
        if found is None:
            return {}
        node, path = found
        if cls in self.configs:
            self.config_copies[cls] = f"{path}:{node.lineno}"
        return _declared(node)

    def _class(self, node: ast.ClassDef, env: dict[str, Any]) -> None:
        methods = tuple(
            s.name for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
        )
        parents = [_dotted(b).rsplit(".", 1)[-1] for b in node.bases]
        if any(_dotted(d).rsplit(".", 1)[-1] == "dataclass" for d in node.decorator_list) or any(
            p in self.own_fields for p in parents
        ):
            from_bases: dict[str, str] = {}
            for base_name in reversed(parents):  # the first base wins, as in the MRO
                from_bases.update(self.own_fields.get(base_name, {}))
            self.own_fields[node.name] = {**from_bases, **_declared(node)}
        for base in node.bases:
            name = _dotted(base).rsplit(".", 1)[-1]
            if name in self.configs:  # a project's config dataclass extending GRPOConfig
                self.configs[node.name] = self.configs[name]
                inherited = self.config_defaults.get(name, {})
                self.config_defaults[node.name] = {**inherited, **self._fields(node, env)}
                return
            if name in self.trainers:
                lib, label = self.trainers[name]
                self.subclasses[node.name] = (lib, label, methods)
                return
            if name in self.subclasses:
                lib, label, parent = self.subclasses[name]
                self.subclasses[node.name] = (lib, label, tuple(dict.fromkeys(parent + methods)))
                return
            if name in self.kl_imports:
                lib, label = self.kl_imports[name]
                self.subclasses[node.name] = (lib, label, methods)
                return

    def _fields(self, node: ast.ClassDef, env: dict[str, Any]) -> dict[str, Any]:
        """The class-level defaults a config subclass sets (``beta: float = 0.0``, or
        ``field(default=0.0, ...)``); a default the reader cannot compute is unknown."""
        out: dict[str, Any] = {}
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                target, value = item.target.id, item.value
            elif (
                isinstance(item, ast.Assign)
                and len(item.targets) == 1
                and isinstance(item.targets[0], ast.Name)
            ):
                target, value = item.targets[0].id, item.value
            else:
                continue
            if value is None:
                continue
            if isinstance(value, ast.Call) and _dotted(value.func).rsplit(".", 1)[-1] == "field":
                given = {kw.arg: kw.value for kw in value.keywords if kw.arg}
                if "default" not in given:
                    continue  # default_factory or none: the parent's default stands
                value = given["default"]
            out[target] = self.expr(value, env)
        return out

    def _bind(self, target: ast.expr, value: Any, env: dict[str, Any], source: ast.expr) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = value if isinstance(value, (list, tuple)) else None
            for k, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):
                    continue
                if items is not None and k < len(items):
                    self._bind(elt, items[k], env, source)
                else:
                    self._bind(elt, _Unknown(ast.unparse(source)[:60]), env, source)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            obj = env.get(target.value.id)
            if isinstance(obj, _Config):
                if isinstance(value, _Unknown):
                    obj.kwargs.pop(target.attr, None)
                    if target.attr not in obj.unresolved:
                        obj.unresolved.append(target.attr)
                else:
                    obj.kwargs[target.attr] = value
                    if target.attr in obj.unresolved:
                        obj.unresolved.remove(target.attr)

    def _function(
        self,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        env: dict[str, Any],
        args: list[Any],
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        """Read ``fn``'s body with its parameters bound as a call binds them: positional
        ``args``, then ``kwargs`` by name, then the parameter's default (a helper such as
        ``def make_config(beta=0.04): return GRPOConfig(beta=beta)``); anything else unknown."""
        if getattr(fn, "_kl_reading", False):
            return _Unknown(f"{fn.name}() (recursive)")
        fn._kl_reading = True  # type: ignore[union-attr]
        fn._kl_read = True  # type: ignore[union-attr]
        local = dict(env)
        kwargs = kwargs or {}
        positional = [*fn.args.posonlyargs, *fn.args.args]
        defaults: dict[str, ast.expr] = {
            a.arg: d for a, d in zip(positional[::-1], fn.args.defaults[::-1], strict=False)
        }
        defaults |= {
            a.arg: d
            for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True)
            if d is not None
        }
        for k, param in enumerate([*positional, *fn.args.kwonlyargs]):
            name = param.arg
            if k < len(args) and k < len(positional):
                local[name] = args[k]
            elif name in kwargs:
                local[name] = kwargs[name]
            elif name in defaults:
                local[name] = self.expr(defaults[name], env)
            else:
                local[name] = _Unknown(f"argument {name}")
        try:
            self.block(fn.body, local)
        finally:
            fn._kl_reading = False  # type: ignore[union-attr]
        return local.get("__return__", _Unknown(f"{fn.name}()"))

    # ------------------------------------------------------------------ expressions
    def expr(self, node: ast.expr, env: dict[str, Any]) -> Any:
        self._tick()
        if isinstance(node, ast.Constant):
            if _bits(node.value) > MAX_INT_BITS:
                return _Unknown(f"an integer literal of more than {MAX_INT_BITS} bits")
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            return _ClassRef(node.id)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out: list[Any] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    inner = self.expr(elt.value, env)
                    if isinstance(inner, (list, tuple)):
                        out.extend(inner)
                    else:
                        return _Unknown(ast.unparse(node)[:60])
                else:
                    out.append(self.expr(elt, env))
            return tuple(out) if isinstance(node, ast.Tuple) else out
        if isinstance(node, ast.Dict):
            result: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values, strict=True):
                value = self.expr(v, env)
                if k is None:
                    if isinstance(value, dict):
                        result.update(value)
                    else:
                        result[f"**{ast.unparse(v)[:40]}"] = _Unknown(ast.unparse(v)[:40])
                    continue
                key = self.expr(k, env)
                if isinstance(key, (str, int, float, bool)):
                    result[key] = value
            return result
        if isinstance(node, ast.UnaryOp):
            v = self.expr(node.operand, env)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if isinstance(node.op, ast.USub):
                    return -v
                if isinstance(node.op, ast.UAdd):
                    return v
            if isinstance(node.op, ast.Not) and not isinstance(v, (_Unknown, _ClassRef)):
                return not v
            return _Unknown(ast.unparse(node)[:60])
        if isinstance(node, ast.BinOp):
            return self._binop(node, env)
        if isinstance(node, ast.Compare):
            return self._compare(node, env)
        if isinstance(node, ast.BoolOp):
            values = [self.expr(v, env) for v in node.values]
            if any(isinstance(v, (_Unknown, _ClassRef)) for v in values):
                return _Unknown(ast.unparse(node)[:60])
            if isinstance(node.op, ast.And):
                out_v: Any = True
                for v in values:
                    out_v = v
                    if not v:
                        return v
                return out_v
            for v in values:
                if v:
                    return v
            return values[-1]
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                elif isinstance(value, ast.FormattedValue):
                    inner = self.expr(value.value, env)
                    if isinstance(inner, (_Unknown, _ClassRef)):
                        return _Unknown(ast.unparse(node)[:60])
                    parts.append(str(inner))
            return "".join(parts)
        if isinstance(node, ast.Subscript):
            base = self.expr(node.value, env)
            key = self.expr(node.slice, env)
            if isinstance(base, (dict, list, tuple)) and not isinstance(key, _Unknown):
                try:
                    return base[key]
                except (KeyError, IndexError, TypeError):
                    return _Unknown(ast.unparse(node)[:60])
            return _Unknown(ast.unparse(node)[:60])
        if isinstance(node, ast.Attribute):
            base = self.expr(node.value, env)
            if isinstance(base, _Config):
                if node.attr in base.kwargs:
                    return base.kwargs[node.attr]
                return _Unknown(ast.unparse(node)[:60])
            if isinstance(base, _ClassRef):
                return _ClassRef(f"{base.name}.{node.attr}")
            return _Unknown(ast.unparse(node)[:60])
        if isinstance(node, ast.Call):
            return self._call(node, env)
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test, env)
            if isinstance(test, (_Unknown, _ClassRef)):
                branches = (self.expr(node.body, env), self.expr(node.orelse, env))
                if all(isinstance(b, _ClassRef) for b in branches):
                    return _Classes(ast.unparse(node)[:60], branches)  # type: ignore[arg-type]
                return _Unknown(ast.unparse(node)[:60])
            return self.expr(node.body if test else node.orelse, env)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, env)
        return _Unknown(ast.unparse(node)[:60])

    def _binop(self, node: ast.BinOp, env: dict[str, Any]) -> Any:
        a, b = self.expr(node.left, env), self.expr(node.right, env)
        numbers = (int, float)
        what = ast.unparse(node)[:60]
        if isinstance(a, str) and isinstance(b, str) and isinstance(node.op, ast.Add):
            return a + b if len(a) + len(b) < 100_000 else _Unknown(what)
        if not (isinstance(a, numbers) and isinstance(b, numbers)):
            return _Unknown(what)
        if isinstance(a, bool) or isinstance(b, bool):
            return _Unknown(what)
        if _bits(a) + _bits(b) > MAX_INT_BITS and not isinstance(
            node.op, (ast.Add, ast.Sub, ast.FloorDiv, ast.Mod, ast.Div)
        ):
            return _Unknown(f"{what} (an integer of more than {MAX_INT_BITS} bits)")
        try:
            if isinstance(node.op, ast.Add):
                out: Any = a + b
            elif isinstance(node.op, ast.Sub):
                out = a - b
            elif isinstance(node.op, ast.Mult):
                out = a * b
            elif isinstance(node.op, ast.Div):
                out = a / b
            elif isinstance(node.op, ast.FloorDiv):
                out = a // b
            elif isinstance(node.op, ast.Mod):
                out = a % b
            elif isinstance(node.op, ast.Pow):
                if abs(b) > 64 or abs(a) > 1e6:
                    return _Unknown(what)
                out = a**b
            else:
                return _Unknown(what)
        except (ZeroDivisionError, OverflowError, ValueError):
            return _Unknown(what)
        if _bits(out) > MAX_INT_BITS:
            return _Unknown(f"{what} (an integer of more than {MAX_INT_BITS} bits)")
        return out

    def _compare(self, node: ast.Compare, env: dict[str, Any]) -> Any:
        left = self.expr(node.left, env)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = self.expr(comp, env)
            if isinstance(left, (_Unknown, _ClassRef)) or isinstance(right, (_Unknown, _ClassRef)):
                return _Unknown(ast.unparse(node)[:60])
            try:
                if isinstance(op, ast.Eq):
                    ok = left == right
                elif isinstance(op, ast.NotEq):
                    ok = left != right
                elif isinstance(op, ast.Lt):
                    ok = left < right
                elif isinstance(op, ast.LtE):
                    ok = left <= right
                elif isinstance(op, ast.Gt):
                    ok = left > right
                elif isinstance(op, ast.GtE):
                    ok = left >= right
                elif isinstance(op, ast.In):
                    ok = left in right
                elif isinstance(op, ast.NotIn):
                    ok = left not in right
                else:
                    return _Unknown(ast.unparse(node)[:60])
            except TypeError:
                return _Unknown(ast.unparse(node)[:60])
            if not ok:
                return False
            left = right
        return True

    def _call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        name = _dotted(node.func)
        short = name.rsplit(".", 1)[-1]
        what = ast.unparse(node)[:60]
        args = [self.expr(a, env) for a in node.args if not isinstance(a, ast.Starred)]
        kwargs: dict[str, Any] = {}
        unresolved: list[str] = []
        for kw in node.keywords:
            value = self.expr(kw.value, env)
            if kw.arg is None:
                if isinstance(value, dict):
                    for k, v in value.items():
                        if isinstance(v, _Unknown):
                            unresolved.append(str(k))
                        else:
                            kwargs[str(k)] = v
                else:
                    unresolved.append(f"**{ast.unparse(kw.value)[:40]}")
            else:
                kwargs[kw.arg] = value
        if any(isinstance(a, ast.Starred) for a in node.args):
            unresolved.append("*args")
        # pure builtins and the environment (read as a clean one)
        if name in ("dict",):
            if unresolved:
                result = dict(kwargs)
                for u in unresolved:
                    result[u] = _Unknown(u)
                return result
            return dict(kwargs)
        if name in ("float", "int", "str", "bool") and len(args) == 1:
            value = args[0]
            if isinstance(value, (_Unknown, _ClassRef)):
                return _Unknown(what)
            try:
                return {"float": float, "int": int, "str": str, "bool": bool}[name](value)
            except (TypeError, ValueError, OverflowError):
                return _Unknown(what)
        if name in ("os.environ.get", "os.getenv", "environ.get", "getenv"):
            self.notes.append(
                f"{what}: the environment is not read; the default is used, as in a clean one"
            )
            return args[1] if len(args) > 1 else kwargs.get("default")
        if short in ("PatchFastRL",):
            if "unsloth" not in self.patchers:
                self.patchers.append("unsloth")
            return None
        # kl-patches
        if short in ("parse", "KLConfig", "coerce") and (
            name.startswith("KLConfig") or short == "KLConfig"
        ):
            return self._klconfig(short, args, kwargs, what)
        if (short == "apply" and name.startswith("kl_patches.")) or name in self.kl_apply:
            module = self.kl_apply_module.get(name) or name.rsplit(".", 1)[0]
            lib = self.kl_apply.get(name) or self._kl_library(module)
            config = args[0] if args else kwargs.get("config")
            kl = self._kl_dict(config)
            if kl is not None and lib:
                self.applied[lib] = kl
                self.applied_by[lib] = module
            return None
        # parsers, configs, trainers
        if short in self.parsers:
            classes = []
            spec = args[0] if args else kwargs.get("dataclass_types")
            for item in spec if isinstance(spec, (list, tuple)) else [spec]:
                if isinstance(item, _ClassRef):
                    classes.append(item.name.rsplit(".", 1)[-1])
            fields: dict[str, str] = {}
            for cls in reversed(classes):
                fields.update(self.own_fields.get(cls, {}) or self._checkout_fields(cls))
            self.parser_fields.update(fields)
            return _Parser(classes, fields)
        if isinstance(node.func, ast.Attribute):
            owner = self.expr(node.func.value, env)
            if isinstance(owner, _Parser) and short.startswith("parse"):
                parsed: list[Any] = []
                for cls in owner.classes:
                    if cls in self.configs:
                        lib, label = self.configs[cls]
                        parsed.append(
                            _Config(
                                lib, label, from_argv=True, line=node.lineno, fields=owner.fields
                            )
                        )
                    else:
                        parsed.append(_Unknown(f"{cls} from the command line"))
                return tuple(parsed) if len(parsed) != 1 else parsed[0]
        if short in self.configs:
            lib, label = self.configs[short]
            kwargs = {**self.config_defaults.get(short, {}), **kwargs}
            known = {k: v for k, v in kwargs.items() if not isinstance(v, (_Unknown, _ClassRef))}
            unknown = [k for k in kwargs if k not in known]
            return _Config(lib, label, known, [*unknown, *unresolved], line=node.lineno)
        if short in self.trainers or short in self.subclasses or short in self.kl_imports:
            self._trainer(node, short, args, kwargs, unresolved)
            return _Unknown(f"{short} instance")
        if short in self.others:
            self.other_runs.append((node.lineno, f"{short}: {self.others[short]}"))
            return _Unknown(f"{short} instance")
        if name in self.functions and isinstance(node.func, ast.Name):
            return self._function(self.functions[name], env, args, kwargs)
        self._own_trainer(node, env)
        return _Unknown(what)

    def _own_trainer(self, node: ast.Call, env: dict[str, Any]) -> None:
        """Note a ``*Trainer`` class of the project's own that the script builds (called by
        its name or through a variable bound to it, ``trainer_cls = VLMGRPOTrainer``, or to
        one of several under an undecided condition, each the project's own), imported from a
        file of its checkout: :attr:`own_trainers`."""
        bound = env.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if isinstance(bound, _Classes):  # every class it may be must be the project's own
            names = [c.name.rsplit(".")[-1] for c in bound.options]
        else:
            names = [(bound.name if isinstance(bound, _ClassRef) else _dotted(node.func))]
        own: dict[str, str] = {}
        known = (self.trainers, self.subclasses, self.others, self.kl_imports)
        for cls in (n.rsplit(".")[-1] for n in names):
            if "Trainer" not in cls or any(cls in k for k in known):
                return
            found = self._checkout(cls)
            bases = [] if found is None else [_dotted(b) for b in found[0].bases]
            if found is None or not (
                cls.endswith("Trainer") or any(b.endswith("Trainer") for b in bases)
            ):
                return  # R1-V's ``Qwen2VLGRPOVLLMTrainerModified(Trainer)`` is one
            own[cls] = f"{found[1]}:{found[0].lineno}"
        for cls, where in own.items():
            self.own_trainers.setdefault(cls, where)

    def _klconfig(self, short: str, args: list[Any], kwargs: dict[str, Any], what: str) -> Any:
        if any(isinstance(a, _Unknown) for a in args) or any(
            isinstance(v, _Unknown) for v in kwargs.values()
        ):
            return _Unknown(what)
        try:
            if short == "KLConfig":
                return KLConfig(*args, **kwargs)
            return KLConfig.parse(*args, **kwargs) if short == "parse" else KLConfig.coerce(args[0])
        except (TypeError, ValueError, IndexError) as err:
            raise InputError(f"{self.origin}: {what}: {err}") from err

    def _kl_dict(self, value: Any) -> dict[str, Any] | None:
        if isinstance(value, KLConfig):
            return value.to_dict()
        if isinstance(value, str):
            try:
                return KLConfig.parse(value).to_dict()
            except ValueError:
                return None
        if isinstance(value, dict) and not any(isinstance(v, _Unknown) for v in value.values()):
            try:  # apply() and the trainers coerce a dict (KLConfig.coerce: from_dict)
                return KLConfig.from_dict(value).to_dict()
            except (TypeError, ValueError):
                return None
        return None

    def _trainer(
        self,
        node: ast.Call,
        short: str,
        args: list[Any],
        kwargs: dict[str, Any],
        unresolved: list[str],
    ) -> None:
        subclass = ""
        overrides: tuple[str, ...] = ()
        if short in self.subclasses:
            lib, label, overrides = self.subclasses[short]
            subclass = short
        elif short in self.kl_imports:
            lib, label = self.kl_imports[short]
        else:
            lib, label = self.trainers[short]
        api = dict(self.apis)[lib]
        config = kwargs.get(api.config_argument)
        if config is None and len(args) >= 3:
            config = args[2]
        notes: list[str] = []
        if isinstance(config, _Config):
            cfg = config
        elif config is None:
            cfg = _Config(lib, label)
            notes.append(f"{short} is built without a config: the config class defaults apply")
        else:
            cfg = _Config(lib, label, unresolved=[api.config_argument])
        kl = None
        kl_module = ""
        if short in self.kl_imports or (subclass and self._kl_based(short)):
            kl = self._kl_dict(kwargs.get(api.kl_argument))
            if kl is None and api.kl_argument in kwargs:
                cfg.unresolved.append(api.kl_argument)
        elif lib in self.applied:
            kl = dict(self.applied[lib])
            kl_module = self.applied_by.get(lib, "")
        self.launches.append(
            PyLaunch(
                library=lib,
                label=cfg.label if cfg.label else label,
                line=node.lineno,
                kwargs=dict(cfg.kwargs),
                unresolved=list(dict.fromkeys([*cfg.unresolved])),
                from_argv=cfg.from_argv,
                trainer_class=short,
                subclass=subclass,
                overrides=overrides,
                kl=kl,
                kl_module=kl_module,
                notes=notes,
                parser_fields=dict(cfg.fields),
            )
        )

    def _kl_library(self, module: str) -> str:
        """The adapter library whose kl-patches module ``module`` is (``kl_patches.trl``,
        ``kl_patches.adapters.trl.unsloth``: trl); the name after ``kl_patches.`` otherwise."""
        for lib, api in self.apis:
            if any(module == m or module.startswith(m + ".") for m in api.kl_patches_modules):
                return lib
        return module.split(".")[1] if module.count(".") else ""

    def _kl_based(self, name: str) -> bool:
        return any(name == alias for alias in self.kl_imports)


LIST_TYPES = frozenset({"list", "List"})
"""Annotations HfArgumentParser gives ``nargs="+"`` (a field whose type, ``Optional`` removed,
is a subclass of ``list``: transformers hf_argparser.py ``_parse_dataclass_field``,
``issubclass(origin_type, list)``, line 220 in 4.56.2)."""


def _kind(annotation: ast.expr) -> str:
    """How HfArgumentParser takes a dataclass field annotated ``annotation``: ``list`` (several
    words, ``nargs="+"``), ``bool`` (``--name`` alone is True) or ``value`` (one word).
    ``Optional[X]``, ``Union[X, None]`` and ``X | None`` are read as ``X``, as the parser does
    (it drops ``NoneType`` from the union)."""
    node = annotation
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "list[str]"
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return "value"
    if isinstance(node, ast.Subscript) and _dotted(node.value).rsplit(".", 1)[-1] in (
        "Optional",
        "Union",
    ):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        kept = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
        kept = [p for p in kept if _dotted(p) != "NoneType"]
        node = kept[0] if len(kept) == 1 else node
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [node.left, node.right]
        kept = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
        node = kept[0] if len(kept) == 1 else node
    head = node.value if isinstance(node, ast.Subscript) else node
    name = _dotted(head).rsplit(".", 1)[-1]
    if name in LIST_TYPES:
        return "list"
    return "bool" if name == "bool" else "value"


def _declared(node: ast.ClassDef) -> dict[str, str]:
    """The fields a dataclass body declares (annotated names, ``ClassVar`` left out) and how
    the command-line parser takes each (:func:`_kind`)."""
    out: dict[str, str] = {}
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            head = item.annotation
            if isinstance(head, ast.Subscript):
                head = head.value
            if _dotted(head).rsplit(".", 1)[-1] == "ClassVar":
                continue
            out[item.target.id] = _kind(item.annotation)
    return out


def _bits(value: Any) -> int:
    """Bits of an int's magnitude (0 for anything else)."""
    return abs(value).bit_length() if isinstance(value, int) else 0


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def read_python(text: str, origin: str) -> PyScript:
    """What a Python script builds, read from its syntax tree (never imported or run).

    InputError for text that is not Python, larger than :data:`MAX_SOURCE_CHARS`, or nested
    too deeply to parse."""
    if len(text) > MAX_SOURCE_CHARS:
        raise InputError(
            f"{origin}: {len(text)} characters of Python, over the reader's limit of "
            f"{MAX_SOURCE_CHARS} (training scripts are far smaller; is it the right file?)"
        )
    try:
        tree = ast.parse(text, filename=origin)
    except SyntaxError as err:
        if "too many nested" in str(err) or "too complex" in str(err):
            raise InputError(f"{origin}: Python nested too deeply to read ({err.msg})") from err
        if "integer string conversion" in str(err) or "Exceeds the limit" in str(err):
            raise InputError(
                f"{origin}: line {err.lineno}: an integer literal longer than Python compiles "
                f"({getattr(sys, 'get_int_max_str_digits', lambda: 4300)()} digits), so the "
                "script cannot run"
            ) from err
        raise InputError(f"{origin}: not valid Python (line {err.lineno}: {err.msg})") from err
    except (RecursionError, MemoryError) as err:
        raise InputError(f"{origin}: Python nested too deeply to read") from err
    reader = _Reader(origin)
    try:
        reader.run(tree)
    except RecursionError as err:
        raise InputError(f"{origin}: Python nested too deeply to read") from err
    libraries = [
        lib
        for lib, api in reader.apis
        if any(m.split(".")[0] in api.modules for m in reader.imports)
    ]
    for d in adapters.descriptors():
        if d.name not in libraries and any(m.split(".")[0] == d.name for m in reader.imports):
            libraries.append(d.name)
    for launch in reader.launches:
        if reader.patchers and launch.library in libraries:
            launch.notes.append(f"imports {', '.join(reader.patchers)}")
    return PyScript(
        launches=reader.launches,
        others=reader.other_runs,
        libraries=libraries,
        imports=list(dict.fromkeys(reader.imports)),
        patchers=list(reader.patchers),
        hydra=reader.hydra,
        notes=list(dict.fromkeys(reader.notes)),
        parser_fields=dict(reader.parser_fields),
        config_copies=dict(reader.config_copies),
        own_trainers=dict(reader.own_trainers),
    )
