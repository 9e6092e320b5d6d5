"""The recorded OpenRLHF option sets against the installed release's own argparse code.

``flagsets.options(V)`` must be exactly the ``--options`` that ``openrlhf/cli/train_ppo_ray.py``
of the installed release defines: the literal ``add_argument("--name", ...)`` calls and the
f-string ones inside ``for prefix in ("actor", "critic"):`` (read with :mod:`ast`, never run).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from kl_patches.adapters.openrlhf import flagsets
from kl_patches.adapters.openrlhf.versions import SUPPORT


def _defined_options(path: Path) -> set[str]:
    out: set[str] = set()

    def visit(node: ast.AST, env: dict[str, str]) -> None:
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, (ast.Tuple, ast.List))
        ):
            for element in node.iter.elts:
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    for child in node.body:
                        visit(child, {**env, node.target.id: element.value})
            return
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            for arg in node.args:
                text = None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    text = arg.value
                elif isinstance(arg, ast.JoinedStr):
                    parts = []
                    for part in arg.values:
                        if isinstance(part, ast.Constant):
                            parts.append(str(part.value))
                        elif isinstance(part, ast.FormattedValue) and isinstance(
                            part.value, ast.Name
                        ):
                            parts.append(env[part.value.id])
                    text = "".join(parts)
                if text and text.startswith("--"):
                    out.add(text[2:])
        for child in ast.iter_child_nodes(node):
            visit(child, env)

    visit(ast.parse(path.read_text(encoding="utf-8")), {})
    return out


def test_installed_release_options_match_the_data() -> None:
    spec = importlib.util.find_spec("openrlhf")
    assert spec is not None and spec.origin is not None
    version = SUPPORT.installed()
    assert version in flagsets.RELEASES, version
    source = Path(spec.origin).parent / "cli" / "train_ppo_ray.py"
    defined = _defined_options(source)
    recorded = flagsets.options(version, "train_ppo_ray")
    assert recorded is not None
    assert set(recorded) == defined, (
        sorted(set(recorded) - defined)[:10],
        sorted(defined - set(recorded))[:10],
    )
    # the loop options (0.11.2: the loop at line 484, --{prefix}.adam.lr at line 502)
    assert {"actor.adam.lr", "critic.adam.lr", "actor.optim"} <= defined


@pytest.mark.parametrize("release", ["0.10.1.post2", "0.10.2"])
def test_the_loop_options_start_in_0_10_2(release: str) -> None:
    options = flagsets.options(release, "train_ppo_ray")
    assert options is not None
    assert ("actor.adam.lr" in options) == (release == "0.10.2")
