"""Mechanical readings of a release's source files, with :mod:`ast` and YAML (never imported).

* :func:`dataclass_fields`: the annotated fields of a class body (TRL's configs), with the
  default each declares (``field(default=...)``, a plain ``= value``, or a factory);
* :func:`argparse_options`: every ``--option`` a module's ``add_argument`` calls define
  (OpenRLHF's trainers), including f-string names built inside ``for x in (...)`` loops, with
  argparse's default, the choices and the action;
* :func:`hydra_leaves`: the leaves of a composed Hydra config (verl's trainer configs), composed
  with hydra-core from the release's own ``trainer/config`` folder;
* :func:`symbol`: where a function or method is defined, its signature text, a hash of its
  source, and the modules that bind it by name, use it as an attribute, or re-export it.

Values are stored as JSON: a literal default as itself (tuples as lists); an expression that is
not a literal as ``{"expr": "<source>"}``; a ``default_factory`` as ``{"factory": "<source>"}``.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .source import Release

Json = Any
"""A JSON-able value (what the data files hold)."""


# --- values -------------------------------------------------------------------------------------


def literal(node: ast.expr) -> Json:
    """The JSON form of a default expression (see the module docstring)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return {"expr": ast.unparse(node)}
    return _jsonable(value, node)


def _jsonable(value: object, node: ast.expr) -> Json:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return (
            value if value == value and abs(value) != float("inf") else {"expr": ast.unparse(node)}
        )
    if isinstance(value, list | tuple):
        items = [_jsonable(v, node) for v in value]
        if any(isinstance(v, dict) and "expr" in v for v in items):
            return {"expr": ast.unparse(node)}
        return items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        out = {k: _jsonable(v, node) for k, v in value.items()}
        if any(isinstance(v, dict) and "expr" in v and len(v) == 1 for v in out.values()):
            return {"expr": ast.unparse(node)}
        return {"dict": out} if ("expr" in out or "factory" in out or "dict" in out) else out
    return {"expr": ast.unparse(node)}


# --- modules ------------------------------------------------------------------------------------


@dataclass
class Module:
    """One parsed module of a release."""

    name: str
    """Dotted module name (``pkg.sub`` for ``pkg/sub/__init__.py``)."""
    path: str
    """Path relative to the release root."""
    source: str
    """The file's text."""
    tree: ast.Module
    """Its syntax tree."""

    @property
    def is_package(self) -> bool:
        """True for an ``__init__.py``."""
        return self.path.endswith("/__init__.py")


def module_name(path: str) -> str:
    """``a/b/c.py`` -> ``a.b.c``; ``a/b/__init__.py`` -> ``a.b``."""
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@dataclass
class Package:
    """Every module of a release's top-level package, parsed lazily."""

    release: Release
    """Where the files are."""
    package: str
    """The top-level package name."""
    _modules: dict[str, Module] = field(default_factory=dict)

    def module(self, path: str) -> Module | None:
        """The module at ``path`` (None when the release has no such file or it does not parse)."""
        if path not in self._modules:
            text = self.release.read(path)
            if text is None:
                return None
            try:
                tree = ast.parse(text)
            except SyntaxError:
                return None
            self._modules[path] = Module(module_name(path), path, text, tree)
        return self._modules[path]

    def modules(self) -> Iterator[Module]:
        """Every parsable module of the package, in path order."""
        for path in self.release.python_files(self.package):
            module = self.module(path)
            if module is not None:
                yield module

    def by_name(self, name: str) -> Module | None:
        """The module called ``name`` (dotted), or None."""
        base = name.replace(".", "/")
        return self.module(f"{base}.py") or self.module(f"{base}/__init__.py")


def find_class(
    package: Package, name: str, paths: tuple[str, ...] = ()
) -> tuple[Module, ast.ClassDef] | None:
    """The first top-level ``class name`` in the files ``paths`` (in order; none of them may
    exist), or in any module of the package when no paths are given."""
    candidates = [m for m in (package.module(p) for p in paths) if m is not None]
    for module in candidates if paths else list(package.modules()):
        for node in module.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return module, node
    return None


# --- dataclass fields ---------------------------------------------------------------------------


def dataclass_fields(module: Module, node: ast.ClassDef) -> dict[str, dict[str, Json]]:
    """``name -> {"default": ..., "at": "path:line"}`` for each annotated field of the body.

    ``at`` is the line of the default's value when there is one (``default=`` inside
    ``field(...)`` may be on a later line than the name), else the line of the annotation.
    ``ClassVar`` annotations are not fields and are skipped."""
    out: dict[str, dict[str, Json]] = {}
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        if "ClassVar" in ast.unparse(item.annotation):
            continue
        entry: dict[str, Json] = {}
        line = item.lineno
        value = item.value
        if isinstance(value, ast.Call) and ast.unparse(value.func) in (
            "field",
            "dataclasses.field",
        ):
            for keyword in value.keywords:
                if keyword.arg == "default":
                    entry["default"] = literal(keyword.value)
                    line = keyword.value.lineno
                elif keyword.arg == "default_factory":
                    entry["default"] = {"factory": ast.unparse(keyword.value)}
                    line = keyword.value.lineno
        elif value is not None:
            entry["default"] = literal(value)
            line = value.lineno
        entry["at"] = f"{module.path}:{line}"
        out[item.target.id] = entry
    return out


# --- argparse options ---------------------------------------------------------------------------


def _text(node: ast.expr, env: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
            elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name):
                if part.value.id not in env:
                    return None
                parts.append(env[part.value.id])
            else:
                return None
        return "".join(parts)
    return None


_ACTION_DEFAULTS = {"store_true": False, "store_false": True}


def argparse_options(module: Module) -> dict[str, dict[str, Json]]:
    """``option -> {"default", "choices"?, "action"?, "type"?, "nargs"?, "at"}`` for every
    ``--option`` an ``add_argument`` call of ``module`` defines (without the dashes); ``at`` is
    the line of the ``"--option"`` string (a call may span several lines).

    ``default`` is what argparse gives when the option is absent: the ``default=`` value, else
    False for ``store_true``, True for ``store_false``, None otherwise. Calls inside
    ``for name in ("a", "b"):`` are read once per element, so f-string names expand."""
    out: dict[str, dict[str, Json]] = {}

    def record(call: ast.Call, env: dict[str, str]) -> None:
        named = [(a, t) for a, t in ((a, _text(a, env)) for a in call.args) if t]
        names = [t for _, t in named if t.startswith("--")]
        if not names:
            return
        first = next(a for a, t in named if t.startswith("--"))
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        entry: dict[str, Json] = {}
        action = keywords.get("action")
        action_name = _text(action, env) if action is not None else None
        if "default" in keywords:
            entry["default"] = literal(keywords["default"])
        else:
            entry["default"] = _ACTION_DEFAULTS.get(action_name or "")
        if "choices" in keywords:
            entry["choices"] = literal(keywords["choices"])
        if action is not None:
            entry["action"] = (
                action_name if action_name is not None else {"expr": ast.unparse(action)}
            )
        if "type" in keywords:
            entry["type"] = ast.unparse(keywords["type"])
        if "nargs" in keywords:
            entry["nargs"] = literal(keywords["nargs"])
        entry["at"] = f"{module.path}:{first.lineno}"
        for name in names:
            out.setdefault(name[2:], entry)

    def visit(node: ast.AST, env: dict[str, str]) -> None:
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, ast.Tuple | ast.List)
        ):
            for element in node.iter.elts:
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    for statement in node.body:
                        visit(statement, {**env, node.target.id: element.value})
            return
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            record(node, env)
        for child in ast.iter_child_nodes(node):
            visit(child, env)

    visit(module.tree, {})
    return out


# --- Hydra configs ------------------------------------------------------------------------------


def hydra_leaves(config_dir: Path, config_name: str) -> dict[str, Json] | None:
    """Dotted path -> default of every leaf of ``config_name`` composed from ``config_dir``
    (interpolations unresolved; an empty mapping is a leaf ``{}``); None when the config does
    not exist there. The key set is the leaves and all their prefixes. Needs hydra-core."""
    if not (config_dir / f"{config_name}.yaml").is_file():
        return None
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import DictConfig, ListConfig, OmegaConf

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir.resolve()), version_base=None):
        composed = compose(config_name=config_name)
    GlobalHydra.instance().clear()
    out: dict[str, Json] = {}

    def walk(node: DictConfig, prefix: str) -> None:
        for key in node:
            path = f"{prefix}.{key!s}" if prefix else str(key)
            child = node._get_node(key)
            if isinstance(child, DictConfig) and not child._is_none() and len(child) > 0:
                walk(child, path)
            elif isinstance(child, DictConfig | ListConfig):
                out[path] = OmegaConf.to_container(child, resolve=False)
            else:
                out[path] = child._value() if child is not None else None

    walk(composed, "")
    return out


# --- symbols ------------------------------------------------------------------------------------


def signature_text(name: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """``name(args) -> returns`` as :func:`ast.unparse` writes the ``def``."""
    text = f"{name}({ast.unparse(node.args)})"
    if node.returns is not None:
        text += f" -> {ast.unparse(node.returns)}"
    return text


def body_sha(module: Module, node: ast.AST) -> str:
    """First 12 hex digits of the sha256 of the node's source lines, ``def`` to its end, with
    their indentation (a method's lines keep the class indent)."""
    segment = ast.get_source_segment(module.source, node, padded=True) or ""
    return hashlib.sha256(segment.encode("utf-8")).hexdigest()[:12]


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _top_level_imports(module: Module) -> Iterator[ast.ImportFrom | ast.Import]:
    """Imports executed when the module loads: the body, and inside top-level if/try blocks
    (not under ``if TYPE_CHECKING:``, which only type checkers read)."""

    def walk(body: list[ast.stmt]) -> Iterator[ast.ImportFrom | ast.Import]:
        for stmt in body:
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                yield stmt
            elif isinstance(stmt, ast.If):
                if ast.unparse(stmt.test) not in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                    yield from walk(stmt.body)  # type-checking imports never run
                yield from walk(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                yield from walk(stmt.body)
                for handler in stmt.handlers:
                    yield from walk(handler.body)
                yield from walk(stmt.orelse)
                yield from walk(stmt.finalbody)

    yield from walk(module.tree.body)


def find_definition(
    package: Package, qualname: str, modules: tuple[str, ...] = ()
) -> tuple[Module, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The ``def`` of ``qualname`` (``func`` or ``Class.method``) at module level: in the
    dotted ``modules`` given, in order, else the first module (by path) that defines it."""
    owner, _, attr = qualname.rpartition(".")
    listed = [m for m in (package.by_name(name) for name in modules) if m is not None]
    for module in listed or list(package.modules()):
        for node in module.tree.body:
            if owner and isinstance(node, ast.ClassDef) and node.name == owner:
                for item in node.body:
                    if (
                        isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                        and item.name == attr
                    ):
                        return module, item
            if (
                not owner
                and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name == attr
            ):
                return module, node
    return None


def symbol(
    package: Package, qualname: str, modules: tuple[str, ...] = ()
) -> dict[str, Json] | None:
    """The record of ``qualname`` in this release (None when it is not defined).

    ``importers``: modules that bind the top-level name (the function, or a method's class) with
    ``from <definer or re-exporter> import name`` when they load; ``reexports``: package
    ``__init__`` modules among them (a lazy ``__getattr__`` re-export, as TRL's ``_LazyModule``,
    binds nothing at load and is not listed); ``attribute_users``: modules that bind the defining
    module object and read ``<it>.name``."""
    found = find_definition(package, qualname, modules)
    if found is None:
        return None
    definer, node = found
    owner, _, attr = qualname.rpartition(".")
    bound = owner or attr
    providers = {definer.name}
    importers: set[str] = set()
    reexports: set[str] = set()
    users: set[str] = set()
    all_modules = list(package.modules())
    changed = True
    while changed:  # re-exports of re-exports
        changed = False
        for module in all_modules:
            if module.name in providers or not module.is_package:
                continue
            for stmt in _top_level_imports(module):
                if (
                    isinstance(stmt, ast.ImportFrom)
                    and _resolve(module, stmt) in providers
                    and any(alias.name == bound for alias in stmt.names)
                ):
                    providers.add(module.name)
                    reexports.add(module.name)
                    changed = True
    parent, _, leaf = definer.name.rpartition(".")
    for module in all_modules:
        if module.name == definer.name or module.name in reexports:
            continue
        aliases: set[str] = set()
        for stmt in _top_level_imports(module):
            if isinstance(stmt, ast.ImportFrom):
                source = _resolve(module, stmt)
                for alias in stmt.names:
                    if source in providers and alias.name == bound:
                        importers.add(module.name)
                    if source == parent and alias.name == leaf:
                        aliases.add(alias.asname or alias.name)
            else:
                for alias in stmt.names:
                    if alias.name == definer.name and alias.asname:
                        aliases.add(alias.asname)
        if not owner and aliases:
            for sub in ast.walk(module.tree):
                if (
                    isinstance(sub, ast.Attribute)
                    and sub.attr == attr
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id in aliases
                ):
                    users.add(module.name)
                    break
    return {
        "module": definer.name,
        "at": f"{definer.path}:{node.lineno}",
        "signature": signature_text(attr, node),
        "body_sha": body_sha(definer, node),
        "importers": sorted(importers),
        "attribute_users": sorted(users),
        "reexports": sorted(reexports),
    }
