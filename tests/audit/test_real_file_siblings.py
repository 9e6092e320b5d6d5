"""The real-file benchmark's checkout of a Hydra launch: its config chain, symlinks kept.

``benchmarks/audit_real_files/hydra_siblings.py`` lists what a ``--config-name`` launch
composes (the defaults chain, a symlinked config and its target); ``mirror.materialise`` writes a
symlink of the repository as a symlink, so the config it points to resolves in the scorer's tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "audit_real_files"
sys.path.insert(0, str(BENCH))

hydra_siblings = pytest.importorskip("hydra_siblings")
mirror = pytest.importorskip("mirror")


def _tree(root: Path) -> None:
    (root / "sub" / "trainer").mkdir(parents=True)
    (root / "sub" / "trainer" / "ppo_trainer.yaml").write_text("defaults:\n  - actor: dp\nk: 1\n")
    cfg = root / "config"
    (cfg / "env").mkdir(parents=True)
    (cfg / "ppo_trainer.yaml").symlink_to("../sub/trainer/ppo_trainer.yaml")
    (cfg / "base.yaml").write_text(
        "defaults:\n  - ppo_trainer\n  - env@es: small\n  - optional nothing\n"
        "  - model: ${kind}_model\n  - _self_\nkind: dp\n"
    )
    (cfg / "env" / "small.yaml").write_text("defaults:\n  - tiny\nn: 2\n")
    (cfg / "env" / "tiny.yaml").write_text("m: 1\n")
    (cfg / "game.yaml").write_text("defaults:\n  - base\n")
    (cfg / "unused.yaml").write_text("x: 1\n")


def test_the_chain_follows_defaults_groups_and_symlinks(tmp_path: Path) -> None:
    _tree(tmp_path)
    files = hydra_siblings.chain(tmp_path, tmp_path / "config", "game")
    assert [f.path for f in files] == [
        "config/game.yaml",
        "config/base.yaml",
        "config/ppo_trainer.yaml",
        "config/env/small.yaml",
        "config/env/tiny.yaml",  # relative to its own group
    ]
    link = files[2]
    assert link.link_target == "sub/trainer/ppo_trainer.yaml"
    assert all(f.link_target is None for f in files if f is not link)
    assert hydra_siblings.chain(tmp_path, tmp_path / "config", "absent") == []


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_materialise_writes_a_symlink_as_a_symlink(tmp_path: Path) -> None:
    work = tmp_path / "work"
    _tree(work)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    gdir = work / ".git"
    dest = tmp_path / "dest"
    for path in ("config/ppo_trainer.yaml", "sub/trainer/ppo_trainer.yaml"):
        mirror.materialise(gdir, "HEAD", path, mirror.blob_of(gdir, "HEAD", path), dest)
    out = dest / "config" / "ppo_trainer.yaml"
    assert out.is_symlink()
    assert out.read_text() == (work / "sub" / "trainer" / "ppo_trainer.yaml").read_text()
