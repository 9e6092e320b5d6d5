"""The real-file benchmark's checkout of a project whose verl is a git submodule (issue 38).

A project that records verl as a submodule (DeepMath's, RAGEN's ``verl`` pointing at a fork)
runs the fork once cloned recursively and installed (``pip install -e verl``): the pin is the
fork's version file at the gitlink commit (``derive.find_pin``), and the scorer writes what
such a checkout holds for the pinned reading, the fork's code (``submodule_code``) and its
Hydra config folder (``vendored_config``), whose keys the launch may override. Synthetic
repositories of the same shape: a fork adding one data key, a project launching
``verl.trainer.main_ppo`` from ``scripts/train/``. The checkout also gets the ``.git``
folder a clone has (empty, so not a repository to git).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH / "audit_real_files"))
sys.path.insert(0, str(BENCH))

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

FORK_CONFIG = """\
data:
  train_batch_size: 64
  drop_system_prompt: False
actor_rollout_ref:
  actor:
    ppo_mini_batch_size: 64
    ppo_epochs: 1
    use_kl_loss: False
    kl_loss_coef: 0.001
    kl_loss_type: low_var_kl
  rollout:
    n: 1
algorithm:
  adv_estimator: gae
  kl_penalty: kl
  kl_ctrl:
    type: fixed
    kl_coef: 0.001
"""
"""The fork's trainer config: ``data.drop_system_prompt`` is the fork's own key."""

LAUNCH = """\
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=64 \\
    data.drop_system_prompt=True \\
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.rollout.n=4
"""


def _git(work: Path, *args: str) -> str:
    cmd = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def _mirror(mirrors: Path, repo: str, work: Path) -> None:
    """A bare mirror of ``work`` where the scorer looks for ``repo`` (``owner+name/repo``)."""
    dest = mirrors / repo.replace("/", "+") / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(dest)], check=True)


def _repos(tmp_path: Path) -> tuple[Path, str]:
    """Mirrors of a fork (``o/fork``) and of a project (``o/project``) whose ``verl`` is a
    gitlink to the fork's commit; the fork's commit."""
    mirrors = tmp_path / "mirrors"
    fork = tmp_path / "fork"
    files = {
        "verl/version/version": "0.2.0.dev\n",
        "verl/trainer/config/ppo_trainer.yaml": FORK_CONFIG,
        "verl/trainer/config/generation.yaml": "model:\n  path: x\n",
        "verl/trainer/config/README.md": "not a config\n",
        "verl/trainer/ppo/core_algos.py": "def kl_penalty(a, b, kl_penalty):\n    return a - b\n",
    }
    for name, text in files.items():
        (fork / name).parent.mkdir(parents=True, exist_ok=True)
        (fork / name).write_text(text)
    _git(fork, "init", "-q")
    _git(fork, "add", "-A")
    _git(fork, "commit", "-qm", "fork")
    fork_commit = _git(fork, "rev-parse", "HEAD")
    _mirror(mirrors, "o/fork", fork)
    project = tmp_path / "project"
    (project / "scripts" / "train").mkdir(parents=True)
    (project / "scripts" / "train" / "run.sh").write_text(LAUNCH)
    (project / ".gitmodules").write_text('[submodule "verl"]\n\tpath = verl\n\turl = x\n')
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "update-index", "--add", "--cacheinfo", f"160000,{fork_commit},verl")
    _git(project, "commit", "-qm", "project")
    _mirror(mirrors, "o/project", project)
    return mirrors, fork_commit


def _item(mirrors: Path) -> dict[str, Any]:
    """The project's launch as files.yaml holds it: pin found as derive.py finds it."""
    derive = pytest.importorskip("derive")
    from mirror import blob_of, git_dir

    listed = {
        "id": "project-run",
        "repo": "o/project",
        "path": "scripts/train/run.sh",
        "library": "verl",
        "kind": "shell",
        "pin": {
            "submodule": "verl",
            "version_from": {"repo": "o/fork", "file": "verl/version/version"},
        },
    }
    gdir = git_dir(mirrors, "o/project")
    commit = derive.rev(gdir, "HEAD")
    pin = derive.find_pin(mirrors, gdir, commit, listed)
    return {
        **listed,
        "pin": pin,
        "commit": commit,
        "blob": blob_of(gdir, commit, listed["path"]),
        "siblings": [],
        "launches": [{"entry": "verl.trainer.main_ppo", "via": "python3", "cwd": "."}],
    }


def test_the_pin_is_the_forks_version_at_the_gitlink(tmp_path: Path) -> None:
    mirrors, fork_commit = _repos(tmp_path)
    pin = _item(mirrors)["pin"]
    assert pin["version"] == "0.2.0.dev"
    assert pin["commit"] == fork_commit
    assert pin["where"].startswith("submodule verl -> o/fork@")


def test_the_checkout_holds_the_forks_config_and_the_audit_accepts_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import audit_real_files as scorer

    from kl_patches.audit import audit
    from kl_patches.audit import versions as audit_versions

    def missing(name: str) -> str:
        raise audit_versions.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(audit_versions.metadata, "version", missing)  # nothing installed

    mirrors, _ = _repos(tmp_path)
    item = _item(mirrors)
    dest = tmp_path / "checkout"
    path = scorer.materialise_item(mirrors, item, dest)
    sub = dest / "verl" / "verl"
    assert (sub / "version" / "version").read_text() == "0.2.0.dev\n"  # submodule_code
    # before the fork's config is written the audit reads the key with a release's config
    (before,) = audit(path)
    assert "verl.key_rejected" in {f.code for f in before.findings}
    written = scorer.vendored_config(mirrors, item, dest)
    config = sub / "trainer" / "config"
    assert written == 2  # the two YAML files, not the README
    assert (config / "ppo_trainer.yaml").read_text() == FORK_CONFIG
    assert (config / "generation.yaml").is_file()
    assert not (config / "README.md").exists()
    assert not (dest / "verl" / "trainer").exists()  # under the submodule's path only
    (after,) = audit(path)
    assert "verl.key_rejected" not in {f.code for f in after.findings}
    assert any("verl/verl/trainer/config/ppo_trainer.yaml" in n for n in after.notes)
    assert scorer.vendored_config(mirrors, item, dest) == 0  # written files are kept


def test_a_project_without_a_submodule_pin_gets_no_submodule_files(tmp_path: Path) -> None:
    import audit_real_files as scorer

    mirrors, _ = _repos(tmp_path)
    item = {**_item(mirrors), "pin": None}
    assert scorer.submodule_source(item) is None
    assert scorer.submodule_code(item) == []
    assert scorer.vendored_config(mirrors, item, tmp_path / "checkout") == 0


def test_the_checkout_has_an_empty_git_folder_git_does_not_read(tmp_path: Path) -> None:
    """A clone has ``.git``, and the audit looks a script up by its path's suffix only inside
    a checkout (R1-V's ``src/scripts`` launches): the scorer's checkout gets an empty one,
    which git does not take for a repository."""
    import audit_real_files as scorer

    mirrors, _ = _repos(tmp_path)
    dest = tmp_path / "checkout"
    scorer.materialise_item(mirrors, _item(mirrors), dest)
    assert (dest / ".git").is_dir()
    assert not any((dest / ".git").iterdir())
    inside = subprocess.run(
        ["git", "-C", str(dest), "rev-parse", "--is-inside-work-tree"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert inside.returncode != 0, inside.stdout
