"""The package's import graph: no cycle anywhere, and ``import kl_patches`` stays light.

The graph is read from the source with ``ast`` (every ``import`` statement, module level or
inside a function, except ``if TYPE_CHECKING:`` blocks), so a lazy import inside a function
counts: a cycle through one is still a cycle. The adapters' descriptors name functions as
``"module:function"`` strings on purpose (a lazy registry); those are not imports.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kl_patches"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()
    skip: set[int] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            skip.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    return {m for m in out if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_walker_sees_a_planted_cycle() -> None:
    graph = _graph()
    assert "kl_patches.core" in graph["kl_patches.oracle"]  # it reads real edges
    planted = {k: set(v) for k, v in graph.items()}
    planted["kl_patches.config"].add("kl_patches.oracle")
    assert _cycle(planted) is not None


def test_no_import_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_kernel_imports_nothing_above_it() -> None:
    graph = _graph()
    kernel = {"kl_patches.config", "kl_patches.core", "kl_patches.theory", "kl_patches.oracle"}
    for module in kernel:
        assert graph[module] <= kernel, (module, graph[module] - kernel)


def test_only_the_cli_imports_the_cli() -> None:
    """The CLI sits on top: no library, audit or experiment module imports it (lazily either)."""
    graph = _graph()
    for module, targets in graph.items():
        if module.startswith("kl_patches.cli") or module == "kl_patches.__main__":
            continue
        if module.startswith(("kl_patches.experiments", "kl_patches.audit")) or module in {
            "kl_patches.config",
            "kl_patches.core",
            "kl_patches.theory",
            "kl_patches.oracle",
        }:
            assert not {t for t in targets if t.startswith("kl_patches.cli")}, module


def test_import_kl_patches_imports_no_training_library() -> None:
    code = (
        "import sys, kl_patches, kl_patches.trl, kl_patches.openrlhf, kl_patches.audit, "
        "kl_patches.adapters.verl, kl_patches.cli; "
        "heavy = [m for m in ('verl', 'trl', 'openrlhf', 'ray', 'transformers') "
        "if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
