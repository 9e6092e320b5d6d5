"""The options of an OpenRLHF copy committed in a project, read from its own code (issue 38).

:func:`~kl_patches.adapters.openrlhf.fork.copy_options` reads the copy's trainer with the
recorder's reader (literal and f-string ``add_argument`` names, defaults, choices);
:func:`~kl_patches.adapters.openrlhf.fork.package_of` finds the package from each kind of
version file; a copy that states no version is given the recorded release whose options it
shares most of (:func:`~kl_patches.adapters.openrlhf.semantics.vendored_version`). No OpenRLHF
is imported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.adapters.openrlhf import flagsets
from kl_patches.adapters.openrlhf.fork import copy_options, nearest_release, package_of
from kl_patches.adapters.openrlhf.read import read
from kl_patches.adapters.openrlhf.semantics import vendored_version
from tests.audit.fork_copy import checkout, fork_cli

LOOP_CLI = """import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--init_kl_coef", type=float, default=0.03)
parser.add_argument("--use_kl_loss", action="store_true")
parser.add_argument("--kl_estimator", type=str, default="k2", choices=["k1", "k2", "k3"])
for prefix in ("actor", "critic"):
    parser.add_argument(f"--{prefix}_fork_lr", type=float, default=1e-6)
"""
"""A small fork trainer: literal options and per-prefix f-string ones."""


def test_the_copys_options_are_its_add_argument_calls(tmp_path: Path) -> None:
    root = checkout(tmp_path, {"openrlhf/cli/train_ppo_ray.py": LOOP_CLI})
    found = copy_options(root / "openrlhf")
    assert found is not None
    assert set(found) == {
        "init_kl_coef",
        "use_kl_loss",
        "kl_estimator",
        "actor_fork_lr",
        "critic_fork_lr",
    }
    assert found["init_kl_coef"]["default"] == 0.03
    assert found["use_kl_loss"]["default"] is False
    assert found["kl_estimator"]["choices"] == ["k1", "k2", "k3"]


def test_a_missing_or_broken_trainer_gives_none(tmp_path: Path) -> None:
    root = checkout(tmp_path, {"openrlhf/cli/train_ppo_ray.py": "def (:\n"})
    assert copy_options(root / "openrlhf") is None
    assert copy_options(root / "openrlhf", "train_ppo") is None
    with pytest.raises(ValueError, match="train_ppo_ray"):
        copy_options(root / "openrlhf", "train_sft")


def test_an_edited_copy_is_read_again(tmp_path: Path) -> None:
    root = checkout(tmp_path, {"openrlhf/cli/train_ppo_ray.py": LOOP_CLI})
    assert "extra_flag" not in (copy_options(root / "openrlhf") or {})
    cli = root / "openrlhf" / "cli" / "train_ppo_ray.py"
    cli.write_text(LOOP_CLI + 'parser.add_argument("--extra_flag", default=None)\n')
    assert "extra_flag" in (copy_options(root / "openrlhf") or {})


@pytest.mark.parametrize(
    "version_file",
    [
        "OpenRLHF-RAG/version.txt",
        "OpenRLHF-RAG/openrlhf/__init__.py",
        "OpenRLHF-RAG/openrlhf/cli/train_ppo_ray.py",
    ],
)
def test_the_package_is_found_from_each_version_file(tmp_path: Path, version_file: str) -> None:
    root = checkout(
        tmp_path,
        {
            "OpenRLHF-RAG/version.txt": "0.5.5\n",
            "OpenRLHF-RAG/openrlhf/__init__.py": "",
            "OpenRLHF-RAG/openrlhf/cli/train_ppo_ray.py": LOOP_CLI,
        },
    )
    assert package_of(root / version_file) == root / "OpenRLHF-RAG" / "openrlhf"
    assert package_of(root / "elsewhere" / "version.txt") is None


@pytest.mark.parametrize("release", ["0.5.0", "0.6.2", "0.11.2"])
def test_a_release_shaped_copy_is_nearest_to_a_release_with_its_options(release: str) -> None:
    names = flagsets.options(release) or frozenset()
    assert flagsets.options(nearest_release(names)) == names


def test_a_copy_without_a_version_gets_the_nearest_release(tmp_path: Path) -> None:
    root = checkout(
        tmp_path,
        {
            "openrlhf/__init__.py": "",
            "openrlhf/cli/train_ppo_ray.py": fork_cli("0.6.2", ("fork_only",)),
        },
    )
    found = vendored_version(root)
    assert found is not None
    version, where = found
    assert where == str(root / "openrlhf" / "cli" / "train_ppo_ray.py")
    assert version.endswith("+vendored")
    assert flagsets.options(version.removesuffix("+vendored")) == flagsets.options("0.6.2")


def test_the_reader_checks_options_against_the_copy(tmp_path: Path) -> None:
    root = checkout(
        tmp_path,
        {
            "version.txt": "0.6.2\n",
            "openrlhf/__init__.py": "",
            "openrlhf/cli/train_ppo_ray.py": fork_cli("0.6.2", ("fork_only",), {"gamma": 0.9}),
        },
    )
    argv = ["--init_kl_coef", "0.02", "--fork_only", "x", "--not_defined", "1"]
    copy = read(argv, version="0.6.2+vendored", version_file=str(root / "version.txt"))
    (refused,) = [f for f in copy.findings if f.code == "openrlhf.flag_rejected"]
    assert "--not_defined" in refused.message and "--fork_only" not in refused.message
    assert copy.settings["algo.advantage.gamma"] == 0.9  # the copy's default
    release = read(argv, version="0.6.2+vendored")
    (refused,) = [f for f in release.findings if f.code == "openrlhf.flag_rejected"]
    assert "--fork_only" in refused.message
    assert release.settings["algo.advantage.gamma"] == 1
