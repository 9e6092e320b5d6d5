"""The version-aware audit (issue 13): which version a launch is read as, and what that changes.

Detection is tested per source in temporary repositories (a ``.git`` folder marks the root):
pins in each dependency and lock file format, vendored copies of each library, the installed
package, the newest tested release. Each case asserts the version used, its source and the
resulting estimator / placement / coef / status. The table rows are tested through the readers:
version in, reading out, each citing the file and line of the release it was read from (the
same ``file:line`` the adapter's history rows record, checked against them).

The launches are the issue's examples: a TRL GRPO config without ``beta`` (k3 in the loss at
0.04 before 0.19.0, no KL from 0.19.0: ``grpo_config.py:174`` in 0.14.0, ``:413`` in 0.19.0),
a verl launch with ``use_kl_loss=False`` and no ``use_kl_in_reward`` (k1 in the reward at
0.001 before 0.4.0, which gates the reward KL on ``use_kl_in_reward``), OpenRLHF flat flags
(refused from 0.10.2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kl_patches import adapters
from kl_patches.adapters.openrlhf import semantics as openrlhf_semantics
from kl_patches.adapters.trl import semantics as trl_semantics
from kl_patches.adapters.verl import semantics as verl_semantics
from kl_patches.audit import AuditEntry, AuditError, audit
from kl_patches.audit import versions as audit_versions
from kl_patches.audit.findings import (
    VERSION_INSTALLED_DIFFERS,
    VERSION_NEWEST_DIFFERS,
    VERSION_RANGE_DIFFERS,
)
from kl_patches.cli.audit import main
from tests.audit.repo_files import make_repo as _repo

GRPO_NO_BETA = "model_name_or_path: m\nlearning_rate: 1.0e-6\n"
"""A TRL GRPO config that leaves beta at the release's default."""

VERL_LOSS_OFF = (
    "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
    "actor_rollout_ref.actor.use_kl_loss=False\n"
)
"""A verl launch that turns the KL loss off and says nothing about the reward KL."""

OPENRLHF_FLAT = "python3 -m openrlhf.cli.train_ppo_ray --init_kl_coef 0.02 --use_kl_loss\n"
"""An OpenRLHF launch with pre-0.10.2 flat flag names (k1 in the loss at 0.02)."""


pytestmark = pytest.mark.usefixtures("nothing_installed")


def _one(path: Path, version: str | None = None) -> AuditEntry:
    (entry,) = audit(path, version=version)
    return entry


def _kl(entry: AuditEntry) -> tuple[str | None, str, float, str]:
    c = entry.reading.config
    return (c.estimator if c.placement != "none" else None, c.placement, c.coef, entry.status)


K3_LOSS_004 = ("k3", "loss", 0.04, "biased")
"""TRL GRPO before 0.19.0 without beta: beta 0.04 (grpo_config.py:174 in 0.14.0), k3 in loss."""
KL_OFF = (None, "none", 0.0, "kl_off")
"""TRL GRPO from 0.19.0 without beta: beta 0.0 (grpo_config.py:413 in 0.19.0), no KL."""


# ----------------------------------------------------------------------------- detection
@pytest.mark.parametrize(
    ("files", "version", "where", "kl"),
    [
        ({"requirements.txt": "torch\ntrl==0.18.0\n"}, "0.18.0", "requirements.txt:2", K3_LOSS_004),
        ({"requirements-dev.txt": "trl[vllm]==0.19.0  # pinned\n"}, "0.19.0", ":1", KL_OFF),
        (
            {"setup.py": "from setuptools import setup\nsetup(install_requires=['trl==0.17.0'])\n"},
            "0.17.0",
            "setup.py:2",
            K3_LOSS_004,
        ),
        (
            {"setup.cfg": "[options]\ninstall_requires =\n    numpy\n    trl==0.18.1\n"},
            "0.18.1",
            "setup.cfg:4",
            K3_LOSS_004,
        ),
        (
            {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["trl==0.20.0"]\n'},
            "0.20.0",
            "pyproject.toml:3",
            KL_OFF,
        ),
        (
            {"pyproject.toml": '[tool.poetry.dependencies]\npython = "^3.10"\ntrl = "0.16.0"\n'},
            "0.16.0",
            "pyproject.toml:3",
            K3_LOSS_004,
        ),
        (
            {"environment.yml": "dependencies:\n  - python=3.10\n  - pip:\n    - trl==0.18.2\n"},
            "0.18.2",
            "environment.yml:4",
            K3_LOSS_004,
        ),
        ({"environment.yml": "dependencies:\n  - trl=0.15.0\n"}, "0.15.0", ":2", K3_LOSS_004),
        (
            {"uv.lock": 'version = 1\n[[package]]\nname = "trl"\nversion = "0.19.1"\n'},
            "0.19.1",
            "uv.lock:3",
            KL_OFF,
        ),
        (
            {"poetry.lock": '[[package]]\nname = "trl"\nversion = "0.14.0"\n'},
            "0.14.0",
            "poetry.lock:2",
            K3_LOSS_004,
        ),
    ],
)
def test_a_pin_sets_the_version(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str],
    version: str,
    where: str,
    kl: tuple[str | None, str, float, str],
) -> None:
    root = _repo(tmp_path, {**files, "configs/grpo.yaml": GRPO_NO_BETA})
    monkeypatch.chdir(root)
    entry = _one(root / "configs" / "grpo.yaml")
    assert (entry.library_version, entry.version_source) == (version, "pin")
    assert entry.version_where.endswith(where) or where in entry.version_where, entry.version_where
    assert _kl(entry) == pytest.approx(kl) if kl[0] else _kl(entry) == kl


def test_a_lock_file_wins_over_a_range_and_the_nearest_directory_wins(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {
            "requirements.txt": "trl==0.19.0\n",
            "sub/requirements.txt": "trl>=0.14\n",
            "sub/uv.lock": '[[package]]\nname = "trl"\nversion = "0.18.0"\n',
            "sub/grpo.yaml": GRPO_NO_BETA,
        },
    )
    entry = _one(root / "sub" / "grpo.yaml")
    assert (entry.library_version, entry.version_source) == ("0.18.0", "pin")
    assert "uv.lock" in entry.version_where
    assert _kl(entry) == K3_LOSS_004


def test_pins_above_the_repository_root_are_not_read(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("trl==0.18.0\n")
    root = _repo(tmp_path, {"grpo.yaml": GRPO_NO_BETA})
    entry = _one(root / "grpo.yaml")
    assert (entry.library_version, entry.version_source) == ("1.16.0", "newest")
    assert _kl(entry) == KL_OFF


def test_a_range_pin_reads_its_newest_release_and_says_the_verdict_differs(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"requirements.txt": "trl>=0.18,<=0.24\n", "grpo.yaml": GRPO_NO_BETA})
    entry = _one(root / "grpo.yaml")
    # releases allowed: 0.18.0 ... 0.24.0 (TRL's recorded releases); the newest is read
    assert (entry.library_version, entry.version_source) == ("0.24.0", "pin")
    assert _kl(entry) == KL_OFF
    (found,) = [f for f in entry.findings if f.code == VERSION_RANGE_DIFFERS]
    assert "0.18.0-0.18.2: k3-in-loss" in found.message and "0.19.0-0.24.0: no KL" in found.message


def test_a_range_that_does_not_change_the_verdict_gives_no_finding(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"requirements.txt": "trl>=0.19,<0.20\n", "grpo.yaml": GRPO_NO_BETA})
    entry = _one(root / "grpo.yaml")
    assert entry.library_version == "0.19.1" and _kl(entry) == KL_OFF
    assert VERSION_RANGE_DIFFERS not in {f.code for f in entry.findings}


@pytest.mark.parametrize(
    ("files", "launch", "version", "kl"),
    [
        # verl/version/version: verl 0.3.0 gates the reward KL on "not use_kl_loss"
        # (ray_trainer.py:917 in 0.2): k1 in the reward at kl_ctrl.kl_coef 0.001
        ({"verl/version/version": "0.3.0\n"}, VERL_LOSS_OFF, "0.3.0", ("k1", "reward", 0.001)),
        ({"verl/version/version": "0.9.1\n"}, VERL_LOSS_OFF, "0.9.1", (None, "none", 0.0)),
        # OpenRLHF's __init__.py: 0.9.1 has the flat names, --use_kl_loss puts k1 in the loss
        (
            {"openrlhf/__init__.py": '__version__ = "0.9.1"\n'},
            OPENRLHF_FLAT,
            "0.9.1",
            ("k1", "loss", 0.02),
        ),
        # a trl folder: its __init__.py's version
        ({"trl/__init__.py": '__version__ = "0.18.0"\n'}, None, "0.18.0", ("k3", "loss", 0.04)),
    ],
)
def test_a_vendored_copy_sets_the_version(
    tmp_path: Path,
    files: dict[str, str],
    launch: str | None,
    version: str,
    kl: tuple[str | None, str, float],
) -> None:
    name = "scripts/run.sh" if launch else "scripts/grpo.yaml"
    root = _repo(tmp_path, {**files, name: launch or GRPO_NO_BETA})
    entry = _one(root / name)
    assert (entry.library_version, entry.version_source) == (version, "vendored")
    assert _kl(entry)[:3] == pytest.approx(kl) if kl[0] else _kl(entry)[:3] == kl


def test_the_installed_package_is_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _repo(tmp_path, {"grpo.yaml": GRPO_NO_BETA})
    monkeypatch.setattr(audit_versions.metadata, "version", lambda name: "0.18.0")
    entry = _one(root / "grpo.yaml")
    assert (entry.library_version, entry.version_source) == ("0.18.0", "installed")
    assert _kl(entry) == K3_LOSS_004


def test_otherwise_the_newest_tested_release(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"grpo.yaml": GRPO_NO_BETA, "run.sh": VERL_LOSS_OFF})
    entry = _one(root / "grpo.yaml")
    assert (entry.library_version, entry.version_source) == ("1.16.0", "newest")
    entry = _one(root / "run.sh")
    assert (entry.library_version, entry.version_source) == ("0.9.1", "newest")
    assert _kl(entry) == (None, "none", 0.0, "kl_off")


def test_library_version_wins_over_every_pin(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"requirements.txt": "trl==0.19.0\n", "grpo.yaml": GRPO_NO_BETA})
    entry = _one(root / "grpo.yaml", version="trl=0.18.0")
    assert (entry.library_version, entry.version_source) == ("0.18.0", "given")
    assert _kl(entry) == K3_LOSS_004
    entry = _one(root / "grpo.yaml", version="trl>=0.18,<0.19")  # a specifier: its newest
    assert entry.library_version == "0.18.2" and _kl(entry) == K3_LOSS_004
    entry = _one(root / "grpo.yaml", version="verl=0.3.0")  # another library's: not used
    assert (entry.library_version, entry.version_source) == ("0.19.0", "pin")


def test_bad_library_versions_are_refused_in_one_line(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"grpo.yaml": GRPO_NO_BETA})
    with pytest.raises(AuditError, match="unknown library 'nemo'"):
        audit(root / "grpo.yaml", version="nemo=1.0")
    with pytest.raises(AuditError, match="neither a version"):
        audit(root / "grpo.yaml", version="trl=latest")
    with pytest.raises(AuditError, match="allows none of the recorded trl releases"):
        audit(root / "grpo.yaml", version="trl>=9")


# ----------------------------------------------------------------------------- the CLI
def test_cli_reports_the_version_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path, {"grpo.yaml": GRPO_NO_BETA})
    assert main(["--plain", "--library-version", "trl=0.18.0", str(root / "grpo.yaml")]) == 0
    out = capsys.readouterr().out
    assert "version     trl 0.18.0, given with --library-version" in out
    assert main(["--json", str(root / "grpo.yaml")]) == 0
    (t,) = json.loads(capsys.readouterr().out)["trainers"]
    assert (t["library_version"], t["version_source"]) == ("1.16.0", "newest")
    assert t["config"]["placement"] == "none"
    assert main(["--library-version", "trl=banana", str(root / "grpo.yaml")]) == 2
    assert "neither a version" in capsys.readouterr().err


# ----------------------------------------------------------------------------- findings
def test_pinned_and_newest_disagree(tmp_path: Path) -> None:
    """The issue's example: written for TRL 0.18 (beta 0.04); on 1.16 the same file has no KL."""
    root = _repo(tmp_path, {"requirements.txt": "trl==0.18.0\n", "grpo.yaml": GRPO_NO_BETA})
    entry = _one(root / "grpo.yaml")
    (found,) = [f for f in entry.findings if f.code == VERSION_NEWEST_DIFFERS]
    assert found.severity == "info"
    assert "k3-in-loss (token_mean), coef 0.04" in found.message
    assert "on trl 1.16.0 (the newest tested release) the same file runs no KL" in found.message
    assert "beta 0.04 -> 0.0" in found.message  # the default that changed


def test_pinned_and_installed_disagree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _repo(tmp_path, {"requirements.txt": "trl==0.18.0\n", "grpo.yaml": GRPO_NO_BETA})
    monkeypatch.setattr(audit_versions.metadata, "version", lambda name: "1.16.0")
    assert adapters.get("trl").support.installed() == "1.16.0"
    entry = _one(root / "grpo.yaml")
    (found,) = [f for f in entry.findings if f.code == VERSION_INSTALLED_DIFFERS]
    assert found.severity == "warning" and "the installed trl 1.16.0" in found.message
    assert "runs no KL" in found.message and found.fix == "pip install trl==0.18.0"


def test_same_reading_on_both_versions_gives_no_finding(tmp_path: Path) -> None:
    root = _repo(
        tmp_path, {"requirements.txt": "trl==0.19.0\n", "grpo.yaml": GRPO_NO_BETA}
    )  # 0.19.0 and 1.16.0 both run no KL for this file, with the same settings that matter
    codes = {f.code for f in _one(root / "grpo.yaml").findings}
    assert not codes & {VERSION_NEWEST_DIFFERS, VERSION_INSTALLED_DIFFERS}


def test_a_flag_the_version_rejects_is_an_error(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"run.sh": OPENRLHF_FLAT})
    # OpenRLHF 0.11.2: flat names were renamed in 0.10.2 (without --library-version the names
    # select the release instead: tests/audit/test_names.py)
    entry = _one(root / "run.sh", version="openrlhf=0.11.2")
    assert entry.status == "error"
    (found,) = [f for f in entry.findings if f.code == "openrlhf.flag_rejected"]
    assert "--init_kl_coef (unrecognized arguments: --init_kl_coef)" in found.message
    # left out, the release's defaults run: k1 in the reward at 0.01 (train_ppo_ray.py 0.11.2)
    assert _kl(entry)[:3] == ("k1", "reward", 0.01)
    entry = _one(root / "run.sh", version="openrlhf=0.9.1")
    assert "openrlhf.flag_rejected" not in {f.code for f in entry.findings}
    assert _kl(entry)[:3] == ("k1", "loss", 0.02)


def test_a_trl_field_the_version_lacks_is_an_error(tmp_path: Path) -> None:
    # use_bias_correction_kl arrived in TRL 0.26.0 (grpo_config.py:763)
    root = _repo(tmp_path, {"grpo.yaml": "beta: 0.1\nuse_bias_correction_kl: true\n"})
    entry = _one(root / "grpo.yaml", version="trl=0.19.0")
    (found,) = [f for f in entry.findings if f.code == "trl.field_rejected"]
    assert found.severity == "error" and "use_bias_correction_kl (TRL 0.26.0 and later" in (
        found.message
    )
    assert entry.status == "error"
    assert not [f for f in _one(root / "grpo.yaml").findings if f.code == "trl.field_rejected"]


def test_trl_before_0_19_ignores_an_unknown_config_file_key(tmp_path: Path) -> None:
    # TrlParser before 0.19.0 drops the config keys no dataclass took (trl/scripts/utils.py
    # at v0.18.0); a flag on the command line is still refused by HfArgumentParser
    root = _repo(
        tmp_path,
        {
            "grpo.yaml": "beta: 0.1\nuse_bias_correction_kl: true\n",
            "run.sh": "trl grpo --config grpo.yaml --vllm_device auto\n",
        },
    )
    entry = _one(root / "grpo.yaml", version="trl=0.18.0")
    codes = {f.code: f for f in entry.findings}
    assert "trl.field_rejected" not in codes and entry.status != "error"
    assert codes["trl.config_key_ignored"].severity == "warning"
    assert "use_bias_correction_kl" in codes["trl.config_key_ignored"].message
    # vllm_device is a 0.14-0.17 field: refused as a flag by 0.18.0; the file's key ignored
    launch = _one(root / "run.sh", version="trl=0.18.0")
    found = {f.code: f.message for f in launch.findings}
    assert "vllm_device" in found["trl.field_rejected"]
    assert "use_bias_correction_kl" in found["trl.config_key_ignored"]


def test_a_verl_key_the_version_lacks_is_an_error(tmp_path: Path) -> None:
    # algorithm.use_kl_in_reward arrived in verl 0.4.0 (ppo_trainer.yaml:234)
    root = _repo(
        tmp_path, {"run.sh": "python3 -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True\n"}
    )
    entry = _one(root / "run.sh", version="verl=0.3.0")
    (found,) = [f for f in entry.findings if f.code == "verl.key_rejected"]
    assert found.severity == "error" and "algorithm.use_kl_in_reward" in found.message
    assert "verl.key_rejected" not in {f.code for f in _one(root / "run.sh").findings}


# ----------------------------------------------------------------------------- table rows
def _source(module: object, key: str, release: str) -> str:
    return str(module.source_of(key, release))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("library", "version", "text", "suffix", "kl", "key", "cited"),
    [
        # TRL GRPO beta default: 0.04 until 0.18.2, 0.0 from 0.19.0
        (
            "trl",
            "0.18.2",
            GRPO_NO_BETA,
            ".yaml",
            K3_LOSS_004[:3],
            "grpo.beta_default",
            "trl/trainer/grpo_config.py:174 (TRL 0.14.0)",
        ),
        (
            "trl",
            "0.19.0",
            GRPO_NO_BETA,
            ".yaml",
            (None, "none", 0.0),
            "grpo.beta_default",
            "trl/trainer/grpo_config.py:413 (TRL 0.19.0)",
        ),
        # RLOO: kl_coef is the coefficient before 0.22.0 (k1 in the reward), then beta
        (
            "trl",
            "0.21.0",
            "trainer: rloo\nkl_coef: 0.1\n",
            ".yaml",
            ("k1", "reward", 0.1),
            "rloo.kl_coef_name",
            "trl/trainer/rloo_config.py:75 (TRL 0.14.0)",
        ),
        (
            "trl",
            "0.22.0",
            "trainer: rloo\nbeta: 0.1\n",
            ".yaml",
            ("k1", "reward", 0.1),
            "rloo.kl_coef_name",
            "trl/trainer/rloo_config.py:422 (TRL 0.22.0)",
        ),
        # verl: the reward KL whenever the loss KL is off (0.2-0.3), use_kl_in_reward from 0.4.0
        (
            "verl",
            "0.3.0",
            VERL_LOSS_OFF,
            ".sh",
            ("k1", "reward", 0.001),
            "reward.gate",
            "verl/trainer/ppo/ray_trainer.py:917 (verl 0.2)",
        ),
        (
            "verl",
            "0.4.0",
            VERL_LOSS_OFF,
            ".sh",
            (None, "none", 0.0),
            "reward.gate",
            "verl/trainer/ppo/ray_trainer.py:1124 (verl 0.4.0)",
        ),
        # OpenRLHF: --use_kl_estimator_k3 (0.5.0-0.6.0) selects k3; --init_kl_coef its coef
        (
            "openrlhf",
            "0.6.0",
            "python3 -m openrlhf.cli.train_ppo_ray --init_kl_coef 0.03 --use_kl_estimator_k3\n",
            ".sh",
            ("k3", "reward", 0.03),
            "flag.algo.kl.estimator",
            "openrlhf/cli/train_ppo_ray.py:283 (OpenRLHF 0.5.0)",
        ),
        (
            "openrlhf",
            "0.9.1",
            OPENRLHF_FLAT,
            ".sh",
            ("k1", "loss", 0.02),
            "flag.algo.kl.init_coef",
            "openrlhf/cli/train_ppo_ray.py:281 (OpenRLHF 0.5.0)",
        ),
    ],
)
def test_rows_through_the_reader(
    tmp_path: Path,
    library: str,
    version: str,
    text: str,
    suffix: str,
    kl: tuple[str | None, str, float],
    key: str,
    cited: str,
) -> None:
    module = {"trl": trl_semantics, "verl": verl_semantics, "openrlhf": openrlhf_semantics}
    assert _source(module[library], key, version) == cited
    name = f"launch{suffix}"
    root = _repo(tmp_path, {name: text})
    entry = _one(root / name, version=f"{library}={version}")
    assert entry.library_version == version
    got = _kl(entry)[:3]
    assert got[:2] == kl[:2] and got[2] == pytest.approx(kl[2]), (got, kl)


# ----------------------------------------------------------------------------- verl specifics
def test_plus_estimators_crash_before_0_8(tmp_path: Path) -> None:
    """'k3+' is advertised from 0.6.0 but raises before 0.8.0 (core_algos.py:1404 in 0.6.0);
    0.8.0 strips the '+' and takes k2's gradient (core_algos.py:2139)."""
    assert _source(verl_semantics, "estimator.plus_suffix", "0.7.0") == (
        "verl/trainer/ppo/core_algos.py:1404 (verl 0.6.0)"
    )
    launch = (
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.use_kl_loss=True "
        "actor_rollout_ref.actor.kl_loss_type=k3+\n"
    )
    root = _repo(tmp_path, {"run.sh": launch})
    entry = _one(root / "run.sh", version="verl=0.7.0")
    (found,) = [f for f in entry.findings if f.code == "verl.plus_estimator_crashes"]
    assert found.severity == "error" and entry.status == "error"
    entry = _one(root / "run.sh", version="verl=0.8.0")
    assert "verl.plus_estimator_crashes" not in {f.code for f in entry.findings}
    assert "verl.straight_through" in {f.code for f in entry.findings}


def test_a_vendored_copy_with_the_kl_loss_sign_bug(tmp_path: Path) -> None:
    """The subtracting line (main branch 2025-01-23 to 2025-02-01) in a vendored dp_actor.py."""
    actor = "        policy_loss = policy_loss - kl_loss * self.config.kl_loss_coef\n"
    launch = (
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.use_kl_loss=True "
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl\n"
    )
    files = {"verl/version/version": "0.1\n", "run.sh": launch}
    root = _repo(tmp_path, {**files, "verl/workers/actor/dp_actor.py": "x = 1\n" + actor})
    entry = _one(root / "run.sh")
    assert (entry.library_version, entry.version_source) == ("0.1", "vendored")
    (found,) = [f for f in entry.findings if f.code == "verl.kl_loss_sign_bug"]
    assert found.severity == "error" and "dp_actor.py:2" in found.message
    fixed = _repo(
        tmp_path / "b", {**files, "verl/workers/actor/dp_actor.py": actor.replace("-", "+")}
    )
    assert "verl.kl_loss_sign_bug" not in {f.code for f in _one(fixed / "run.sh").findings}


def test_the_kl_loss_sign_bug_is_no_error_without_the_kl_loss(tmp_path: Path) -> None:
    """The subtracting line is only reached under use_kl_loss: with it off (the fix moves the
    KL into the reward) the copy's bug is a note, and the launch is read as its reward KL."""
    actor = "        policy_loss = policy_loss - kl_loss * self.config.kl_loss_coef\n"
    launch = (
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.use_kl_loss=False "
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl algorithm.kl_ctrl.kl_coef=0.001\n"
    )
    files = {"verl/version/version": "0.1\n", "run.sh": launch}
    root = _repo(tmp_path, {**files, "verl/workers/actor/dp_actor.py": actor})
    entry = _one(root / "run.sh")
    codes = {f.code: f.severity for f in entry.findings}
    assert "verl.kl_loss_sign_bug" not in codes
    assert codes["verl.kl_loss_sign_bug_unused"] == "info"
    assert entry.status != "error"
    on = _repo(
        tmp_path / "on",
        {
            **files,
            "run.sh": launch.replace("=False", "=True"),
            "verl/workers/actor/dp_actor.py": actor,
        },
    )
    assert {f.code for f in _one(on / "run.sh").findings} >= {"verl.kl_loss_sign_bug"}


# ----------------------------------------------------------------------------- --installed
def test_installed_reads_the_installed_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """--installed goes through the same tables: TRL 0.18.0 installed runs GRPO with beta
    0.04 (k3 in the loss), 1.16.0 with beta 0.0."""
    import importlib.util

    import kl_patches.adapters.trl as trl_adapter
    from kl_patches.audit.run import audit_installed

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "trl" else real_find_spec(name),
    )
    monkeypatch.setattr(trl_adapter, "installed_defaults", lambda: {"GRPO": {}})
    for installed, kl in (("0.18.0", K3_LOSS_004), ("1.16.0", KL_OFF)):
        monkeypatch.setattr(audit_versions.metadata, "version", lambda name, v=installed: v)
        entries, _ = audit_installed()
        (entry,) = [e for e in entries if e.reading.library == "trl"]
        assert (entry.library_version, entry.version_source) == (installed, "installed")
        assert _kl(entry) == kl


# ----------------------------------------------------------------------------- several launches
def test_an_unreadable_launch_is_reported_beside_the_others(tmp_path: Path) -> None:
    script = (
        "python3 -m openrlhf.cli.train_ppo_ray --algo.kl.estimator k4\n"
        "python3 -m openrlhf.cli.train_ppo_ray --algo.kl.use_loss --algo.kl.estimator k1\n"
    )
    root = _repo(tmp_path, {"run.sh": script})
    bad, good = sorted(audit(root / "run.sh"), key=lambda e: e.status != "error")
    assert bad.status == "error" and bad.library_version is None
    (found,) = bad.findings
    assert found.code == "launch_unreadable" and "k4" in found.message
    assert _kl(good)[:2] == ("k1", "loss")
    (root / "run.sh").write_text(script.splitlines()[0] + "\n" + script.splitlines()[0] + "\n")
    with pytest.raises(AuditError, match="k4"):
        audit(root / "run.sh")


def test_the_corpus_pins_the_newest_tested_releases() -> None:
    """tests/audit_corpus/requirements.txt says the corpus is read as the newest releases."""
    corpus = Path(__file__).resolve().parents[1] / "audit_corpus"
    for d in adapters.descriptors():
        (pin,) = audit_versions.pins_in(corpus / "requirements.txt", d.name)
        assert pin.exact == d.support.tested[-1], d.name


def test_every_refused_key_is_named(tmp_path: Path) -> None:
    """The first refusals come with Hydra's reason, the rest by name: the user (and the fix's
    list of choices) needs every name to rename or delete."""
    keys = [f"my_project.option_{i}" for i in range(7)]
    launch = "python3 -m verl.trainer.main_ppo " + " ".join(f"{k}=1" for k in keys) + "\n"
    root = _repo(tmp_path, {"run.sh": launch})
    (found,) = [f for f in _one(root / "run.sh").findings if f.code == "verl.key_rejected"]
    assert all(k in found.message for k in keys)
    assert "(and 3 more: " in found.message
