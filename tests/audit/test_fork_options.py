"""A launch of an OpenRLHF copy committed in the project (a fork) is checked against the copy's
own options (issue 38).

The copy's ``openrlhf/cli/train_ppo_ray.py`` defines what its argparse accepts: a fork's own
flags (R1-Searcher's ``--group_method``, LIMR's ``--ref_pretrain``) are not refused, a flag the
copy lacks still is, and the copy's argparse defaults are the KL flags' defaults. The shapes
follow the real forks: a version file beside the package in a sub-folder (R1-Searcher's
``OpenRLHF-RAG/version.txt``), one at the root (MM-EUREKA), and none at all (LIMR's empty
``openrlhf/__init__.py``). Reading the newest release instead (``--library-version`` of another
version) does not read the copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import AuditEntry, audit
from kl_patches.audit.findings import VERSION_RANGE_DIFFERS
from kl_patches.audit.fix.apply import fix_file, write_fix
from tests.audit.fork_copy import checkout, fork_cli

RAG = "0.5.5.post2"
"""The release the sub-folder fork's version file states."""

LAUNCH = (
    "python3 -m openrlhf.cli.train_ppo_ray \\\n"
    "   --pretrain m --init_kl_coef 0.02 \\\n"
    "   --group_method normal\n"
)
"""A launch passing the fork's own ``--group_method``."""


pytestmark = pytest.mark.usefixtures("nothing_installed")


def _rag(tmp_path: Path, launch: str = LAUNCH, **defaults: object) -> Path:
    """R1-Searcher's layout: ``OpenRLHF-RAG/{version.txt,openrlhf/}``, the launch in
    ``scripts/``; the launch's path."""
    root = checkout(
        tmp_path / "repo",
        {
            "OpenRLHF-RAG/version.txt": RAG + "\n",
            "OpenRLHF-RAG/openrlhf/__init__.py": "",
            "OpenRLHF-RAG/openrlhf/cli/train_ppo_ray.py": fork_cli(
                RAG, ("group_method",), defaults
            ),
            "scripts/run.sh": launch,
        },
    )
    return root / "scripts" / "run.sh"


def _one(path: Path, version: str | None = None) -> AuditEntry:
    (entry,) = audit(path, version=version)
    return entry


def _codes(entry: AuditEntry) -> set[str]:
    return {f.code for f in entry.findings}


@pytest.mark.parametrize("version", [None, f"openrlhf={RAG}+vendored"])
def test_a_forks_own_flag_is_accepted_by_its_copy(tmp_path: Path, version: str | None) -> None:
    entry = _one(_rag(tmp_path), version)
    assert "openrlhf.flag_rejected" not in _codes(entry)
    (note,) = [f for f in entry.findings if f.code == "openrlhf.fork_options"]
    assert "OpenRLHF-RAG/openrlhf/cli/train_ppo_ray.py" in note.message
    assert note.severity == "info"
    config = entry.reading.config
    assert (config.estimator, config.placement, config.coef) == ("k1", "reward", 0.02)
    assert entry.status != "error"


def test_a_flag_the_copy_does_not_define_stays_refused(tmp_path: Path) -> None:
    path = _rag(tmp_path, LAUNCH.replace("--group_method normal", "--group_methd_typo x"))
    entry = _one(path, f"openrlhf={RAG}+vendored")
    (refused,) = [f for f in entry.findings if f.code == "openrlhf.flag_rejected"]
    assert "--group_methd_typo" in refused.message and entry.status == "error"


def test_a_unique_prefix_of_a_fork_option_is_that_option(tmp_path: Path) -> None:
    """argparse's allow_abbrev applies to the copy's options as to a release's."""
    path = _rag(tmp_path, LAUNCH.replace("--group_method", "--group_meth"))
    assert "openrlhf.flag_rejected" not in _codes(_one(path, f"openrlhf={RAG}+vendored"))


def test_the_copys_argparse_default_is_the_kl_default(tmp_path: Path) -> None:
    """The copy's ``--init_kl_coef`` default (0.05 here; the release's is 0.01) applies when
    the launch leaves it out."""
    path = _rag(tmp_path, LAUNCH.replace("--init_kl_coef 0.02 ", ""), init_kl_coef=0.05)
    entry = _one(path, f"openrlhf={RAG}+vendored")
    assert entry.reading.config.coef == 0.05


def test_another_given_release_does_not_read_the_copy(tmp_path: Path) -> None:
    entry = _one(_rag(tmp_path), "openrlhf=0.11.2")
    assert "openrlhf.fork_options" not in _codes(entry)
    (refused,) = [f for f in entry.findings if f.code == "openrlhf.flag_rejected"]
    assert "--group_method" in refused.message


def _limr(tmp_path: Path) -> Path:
    """LIMR's layout: an empty ``openrlhf/__init__.py`` (no version anywhere) and a 0.5.7-shaped
    trainer with the fork's ``--ref_pretrain``; the launch in ``scripts/``."""
    root = checkout(
        tmp_path / "repo",
        {
            "openrlhf/__init__.py": "",
            "openrlhf/cli/train_ppo_ray.py": fork_cli("0.5.7", ("ref_pretrain",)),
            "scripts/run.sh": LAUNCH.replace("--group_method normal", "--ref_pretrain m"),
        },
    )
    return root / "scripts" / "run.sh"


def test_a_copy_without_a_version_is_found_by_its_trainer(tmp_path: Path) -> None:
    entry = _one(_limr(tmp_path))
    assert entry.library_version == "0.5.7+vendored"
    assert "openrlhf.flag_rejected" not in _codes(entry)
    assert "openrlhf.fork_options" in _codes(entry)


def test_a_range_given_reads_the_copy_it_allows_across_the_range(tmp_path: Path) -> None:
    """``0.5.x`` allows the copy's 0.5.7: every release of the range is read with the copy's
    options, so none of them is reported as refusing the fork's flag."""
    entry = _one(_limr(tmp_path), "openrlhf=0.5.x")
    assert "openrlhf.flag_rejected" not in _codes(entry)
    assert "openrlhf.fork_options" in _codes(entry)
    assert not [
        f for f in entry.findings if f.code == VERSION_RANGE_DIFFERS and "rejected" in f.message
    ]


def test_a_fork_launch_is_fixed_and_re_audits_clean(tmp_path: Path) -> None:
    """MM-EUREKA's layout (``version.txt`` at the root, 0.6.2): k3 in the loss is rewritten and
    the fork's own flag is kept; the re-audit with the same version is clean."""
    root = checkout(
        tmp_path / "repo",
        {
            "version.txt": "0.6.2\n",
            "openrlhf/__init__.py": "",
            "openrlhf/cli/train_ppo_ray.py": fork_cli("0.6.2", ("train_vlm_mode",)),
            "examples/run.sh": (
                "python3 -m openrlhf.cli.train_ppo_ray \\\n"
                "   --init_kl_coef 0.01 --use_kl_loss --kl_estimator k3 \\\n"
                "   --advantage_estimator group_norm --train_vlm_mode on\n"
            ),
        },
    )
    path = root / "examples" / "run.sh"
    versions = {"openrlhf": "0.6.2+vendored"}
    assert _one(path, "openrlhf=0.6.2+vendored").status in ("biased", "error")
    fix = fix_file(path, versions=versions)
    assert fix.problems == [] and fix.changed
    assert "--train_vlm_mode on" in fix.new_text
    write_fix(fix, backup=False)
    (after,) = audit(path, version="openrlhf=0.6.2+vendored")
    assert after.status not in ("biased", "error")
    assert "openrlhf.flag_rejected" not in _codes(after)
