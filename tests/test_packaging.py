"""The package installs beside the library a user already runs, and the base install audits.

The library extras of ``pyproject.toml`` must be the ranges the adapters support (their
``versions.SUPPORT``), never one release: ``pip install kl-patches[trl]`` beside the oldest
supported TRL must keep it. The resolution tests ask pip for a dry run (``--dry-run
--report``: nothing is installed) of this checkout's extra together with the oldest supported
release, and read pip's own report of what it would install; they need the package index, as
every install does.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from kl_patches.adapters.openrlhf.versions import SUPPORT as OPENRLHF
from kl_patches.adapters.trl.versions import SUPPORT as TRL
from kl_patches.adapters.verl.versions import SUPPORT as VERL

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SUPPORTS = {"trl": TRL, "verl": VERL, "openrlhf": OPENRLHF}


def _requirement(extra: str, name: str) -> Requirement:
    found = [Requirement(r) for r in PROJECT["optional-dependencies"][extra]]
    matches = [r for r in found if r.name == name]
    assert len(matches) == 1, f"extra {extra!r} should name {name} once: {found}"
    return matches[0]


@pytest.mark.parametrize("library", sorted(SUPPORTS))
def test_each_library_extra_is_the_adapters_supported_range(library: str) -> None:
    requirement = _requirement(library, library)
    assert requirement.specifier == SpecifierSet(SUPPORTS[library].supported)
    assert not any(s.operator in ("==", "===") for s in requirement.specifier)


def test_the_base_install_has_what_the_audit_imports() -> None:
    base = {Requirement(r).name for r in PROJECT["dependencies"]}
    assert {"packaging", "pyyaml", "rich"} <= base


def _dry_run(tmp_path: Path, *requirements: str) -> dict[str, str]:
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report",
               str(report), *requirements]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    items = json.loads(report.read_text(encoding="utf-8"))["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in items}


def _oldest(library: str) -> str:
    """The lower bound of the adapter's supported range (its ``>=`` clause)."""
    (low,) = [s.version for s in SpecifierSet(SUPPORTS[library].supported) if s.operator == ">="]
    return low


@pytest.mark.parametrize("library", ["trl", "verl"])
def test_the_extra_resolves_beside_the_oldest_supported_release(
    library: str, tmp_path: Path
) -> None:
    """The extra keeps the oldest supported release and changes no installed package that the
    library's own install would leave alone (verl 0.4.0 itself downgrades numpy here: that is
    the user's library's requirement, already met where it runs, not the plugin's)."""
    oldest = _oldest(library)
    assert oldest in SpecifierSet(SUPPORTS[library].supported)
    alone = _dry_run(tmp_path, f"{library}=={oldest}")
    plan = _dry_run(tmp_path, f".[{library}]", f"{library}=={oldest}")
    assert plan.get(library) == oldest
    installed = {d.metadata["Name"].lower() for d in importlib.metadata.distributions()}
    changed = sorted(
        name
        for name in plan
        if name in installed and name != "kl-patches" and plan[name] != alone.get(name)
    )
    assert changed == []  # torch above all: an unpinned one would pull a CUDA build
