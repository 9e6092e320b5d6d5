"""``kl-patches audit``: inputs, exit codes, JSON schema and the text report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kl_patches.adapters.base import Finding, NativeReading
from kl_patches.audit import AuditError, audit, audit_installed, audit_reading
from kl_patches.audit import report as audit_report
from kl_patches.audit.inputs import inputs_from_argv
from kl_patches.cli.audit import main
from kl_patches.config import KLConfig

CORPUS = Path(__file__).resolve().parents[1] / "audit_corpus"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# ----------------------------------------------------------------------------- exit code 2
@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("python3 -m verl.trainer.main_ppo a='open\n", ".sh", "line 1: unbalanced single quote"),
        ("python3 train.py --lr 1\n", ".sh", "no verl, OpenRLHF or TRL launch found"),
        ("a: [1, 2\n", ".yaml", "not valid YAML"),
        ("- 1\n- 2\n", ".yaml", "must be a mapping"),
        ("model:\n  x: 1\nother:\n  y: 2\n", ".yaml", "cannot tell which library"),
        ("python3 -m openrlhf.cli.train_ppo_ray --algo.kl.estimator k4\n", ".sh", "k4"),
        ("plain words here\n", ".txt", "cannot tell which library"),
    ],
)
def test_unreadable_inputs_exit_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, suffix: str, message: str
) -> None:
    path = tmp_path / f"input{suffix}"
    path.write_text(content, encoding="utf-8")
    code, out, err = run(capsys, str(path))
    assert code == 2
    assert message in err
    assert "Traceback" not in out + err


def test_missing_file_and_directory_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, str(tmp_path / "nope.sh"))[0] == 2
    assert run(capsys, str(tmp_path))[0] == 2
    code, _, err = run(capsys, str(tmp_path / "nope.sh"))
    assert code == 2 and "no such file" in err


def test_unknown_library_and_no_input_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--library", "nemo", "x.sh")
    assert code == 2 and "invalid choice" in err
    code, _, err = run(capsys)
    assert code == 2 and "--installed" in err
    with pytest.raises(AuditError, match="unknown library"):
        audit(["--x"], library="nemo")


def test_unset_variable_in_a_kl_flag_names_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sh"
    path.write_text("python3 -m openrlhf.cli.train_ppo_ray --algo.kl.init_coef $BETA\n")
    code, _, err = run(capsys, str(path))
    assert code == 2 and "$BETA" in err and "--var BETA=VALUE" in err
    code, out, _ = run(capsys, "--plain", "--var", "BETA=0.02", str(path))
    assert code == 0 and "coef=0.02" in out


# ----------------------------------------------------------------------------- argv after --
def test_argv_after_double_dash(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--json", "--", "--algo.kl.use_loss", "--algo.kl.estimator", "k3")
    doc = json.loads(out)
    (t,) = doc["trainers"]
    assert code == 0
    assert (t["library"], t["config"]["estimator"], t["config"]["placement"]) == (
        "openrlhf",
        "k3",
        "loss",
    )
    assert t["verdict"]["gradient"] == "forward_kl_token_length_normalised"


def test_argv_with_a_whole_launch_and_verl_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "--json",
        "--strict",
        "--",
        "python3",
        "-m",
        "verl.trainer.main_ppo",
        "algorithm.use_kl_in_reward=True",
        "algorithm.adv_estimator=rloo",
    )
    (t,) = json.loads(out)["trainers"]
    assert t["library"] == "verl" and t["status"] == "unbiased" and code == 0
    # bare overrides are recognised as verl's
    assert inputs_from_argv(["algorithm.use_kl_in_reward=True"])[0].library == "verl"


def test_trl_flags_need_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--json", "--library", "trl", "--", "--beta", "0.04")
    (t,) = json.loads(out)["trainers"]
    assert code == 0 and t["library"] == "trl" and t["config"]["coef"] == 0.04


# ----------------------------------------------------------------------------- strict
def test_strict_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    ok = str(CORPUS / "verl/grpo_k1_reward.sh")
    biased = str(CORPUS / "verl/k1_loss.sh")
    dropped = str(CORPUS / "verl/gdpo_kl_reward.sh")
    off = str(CORPUS / "trl/grpo_defaults.yaml")
    assert run(capsys, "--strict", ok)[0] == 0
    assert run(capsys, "--strict", off)[0] == 0  # KL deliberately absent is not "dropped"
    assert run(capsys, "--strict", biased)[0] == 1
    assert run(capsys, "--strict", dropped)[0] == 1
    assert run(capsys, "--strict", ok, biased)[0] == 1
    assert run(capsys, biased)[0] == 0  # without --strict a biased setup is only reported


# ----------------------------------------------------------------------------- JSON schema
_TRAINER_KEYS: dict[str, type | tuple[type, ...]] = {
    "origin": str,
    "input_kind": str,
    "library": str,
    "version": (str, type(None)),
    "trainer": str,
    "status": str,
    "refused": bool,  # added by issue 33 (the library refuses to start the launch)
    "kl_on": bool,
    "off_policy": bool,
    "off_policy_reason": str,  # added by issue 12 (the schema only gains fields)
    "library_version": (str, type(None)),  # added by issue 13 (None: an unreadable launch)
    "version_source": str,
    "version_where": str,
    "config": dict,
    "description": str,
    "verdict": dict,
    "findings": list,
    "fix": dict,
    "settings": dict,
    "ignored_keys": list,
    "notes": list,
}


def test_json_schema_is_stable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--json", str(CORPUS / "verl/grpo_k3_loss.sh"))
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"schema", "strict", "exit_code", "notes", "summary", "trainers"}
    assert doc["schema"] == audit_report.SCHEMA == "kl-patches.audit/1"
    assert set(doc["summary"]) == {"trainers", "unbiased", "biased", "kl_off", "error"}
    (t,) = doc["trainers"]
    assert set(t) == set(_TRAINER_KEYS)
    for key, kind in _TRAINER_KEYS.items():
        assert isinstance(t[key], kind), key
    assert set(t["config"]) == set(KLConfig().to_dict())
    assert set(t["verdict"]) == {
        "gradient",
        "unbiased",
        "unbiased_as_run",
        "explanation",
        "advice",
        "caveats",
        "terms",
    }
    assert set(t["fix"]) == {"native", "kl_patches", "label", "checked"}
    for f in t["findings"]:
        assert set(f) == {"code", "severity", "message", "fix", "origin"}
        assert f["severity"] in ("error", "warning", "info")
        assert f["origin"] in ("adapter", "audit")
    # verdict terms: k3 in the loss at 0.001, length-normalised forward KL
    assert t["verdict"]["terms"] == [
        {"basis": "forward_kl_token", "coef": 0.001, "length_normalised": True, "side": "loss"}
    ]
    assert (
        t["fix"]["kl_patches"]
        == "kl-patches verl --kl k1-in-reward --kl.coef 0.001 -- <your overrides>"
    )
    # native only when verl's own parser accepted it; never claimed checked without verl
    from kl_patches.audit.fix.validate import NOT_INSTALLED, installed

    assert t["fix"]["label"] == ("native" if installed("verl") else NOT_INSTALLED)
    assert "algorithm.use_kl_in_reward=True" in t["fix"]["native"]


# ----------------------------------------------------------------------------- report text
def test_plain_report_has_table_details_and_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--plain", "--strict", str(CORPUS / "openrlhf/dapo_k3_loss.sh"))
    lines = out.splitlines()
    assert code == 1
    assert lines[0].split() == [
        "#",
        "source",
        "trainer",
        "KL",
        "as",
        "run",
        "policy",
        "gradient",
        "status",
    ]
    assert lines[2].split()[:4] == ["1", "dapo_k3_loss.sh:3", "openrlhf", "0.11.2:"]
    assert "forward_kl_token_length_normalised" in lines[2] and "BIASED" in lines[2]
    assert any(line.strip().startswith("fix") and "--algo.kl.init_coef" in line for line in lines)
    assert (
        "with kl-patches: kl-patches openrlhf <your train_ppo_ray flags> --kl k1-in-reward "
        "--kl.coef 0.001"
    ) in " ".join(out.split())
    assert lines[-1] == "--strict: FAIL (1 biased or KL-dropping setup(s))"


def test_rich_and_plain_carry_the_same_information() -> None:
    pytest.importorskip("rich")
    entries = audit(CORPUS / "verl/gdpo_kl_reward.sh")
    plain = audit_report.render_plain(entries, strict=True)
    fancy = audit_report.render_rich(entries, strict=True, width=200, color=False)
    for needle in ("verl.gdpo_drops_kl", "ERROR", "main_ppo (gdpo)", "--strict: FAIL"):
        assert needle in plain and needle in fancy


def test_render_falls_back_to_plain_without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit_report, "rich_available", lambda: False)
    entries = audit(CORPUS / "trl/rloo.yaml")
    assert audit_report.render(entries) == audit_report.render_plain(entries)


# ----------------------------------------------------------------------------- audit-level logic
def _reading(config: KLConfig, **kw: object) -> NativeReading:
    base: dict[str, object] = dict(
        library="trl", version="1.16.0", trainer="T", config=config, off_policy=False
    )
    base.update(kw)
    return NativeReading(**base)  # type: ignore[arg-type]


def test_audit_findings_from_the_config_alone() -> None:
    cfg = KLConfig(
        estimator="k3",
        placement="both",
        coef=0.1,
        loss_coef=0.2,
        loss_aggregation="token_mean",
        kl_clamp=10.0,
    )
    entry = audit_reading(_reading(cfg, off_policy=True))
    codes = {f.code: f.severity for f in entry.findings}
    assert codes == {
        "coef_mismatch": "warning",
        "kl_clamp": "info",
        "token_mean_loss": "info",
        "off_policy": "warning",  # KL in the loss, no importance weight
    }
    assert entry.status == "biased" and entry.fails_strict


def test_audit_does_not_repeat_an_adapter_finding() -> None:
    cfg = KLConfig(placement="none", coef=0.0)
    own = Finding("trl.kl_off", "warning", "beta=0")
    entry = audit_reading(_reading(cfg, findings=(own,)))
    assert [f.code for f in entry.findings] == ["trl.kl_off"]
    assert entry.status == "kl_off" and not entry.fails_strict
    error = Finding("x.drops_kl", "error", "dropped")
    assert audit_reading(_reading(cfg, findings=(error,))).status == "error"


def test_unbiased_setup_has_no_fix_and_off_policy_is_only_noted() -> None:
    entry = audit_reading(_reading(KLConfig(coef=0.05), off_policy=True, fix=("beta=0.05",)))
    assert entry.status == "unbiased"
    assert entry.fix_native == () and entry.fix_switch == ""
    assert [f.code for f in entry.findings] == ["off_policy"]
    assert entry.findings[0].severity == "info"


def test_ignored_keys_and_kl_looking_typos(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True "
        "algorithm.kl_ctrl.kl_coeff=0.5 trainer.total_epochs=3\n"
    )
    (entry,) = audit(path)
    assert set(entry.ignored_keys) == {"algorithm.kl_ctrl.kl_coeff", "trainer.total_epochs"}
    typo = [f for f in entry.findings if f.code == "ignored_kl_key"]
    assert len(typo) == 1 and "kl_coeff" in typo[0].message
    assert entry.reading.config.coef == 0.001  # the typo left verl's default in place


def test_python_objects_and_readings() -> None:
    class GRPOConfigLike:  # what TRL's reader accepts: any object with the config's attributes
        beta = 0.02
        loss_type = "dr_grpo"

    (entry,) = audit(GRPOConfigLike(), library="trl")
    assert entry.reading.library == "trl" and entry.kind == "object"
    with pytest.raises(AuditError, match="which library"):
        audit(GRPOConfigLike())
    (entry,) = audit(_reading(KLConfig.parse("k1-in-loss")))
    assert entry.verdict.gradient == "zero" and entry.status == "biased"
    (entry,) = audit({"beta": 0.1}, library="trl")
    assert entry.reading.config.estimator == "k3"


def test_installed_skips_missing_libraries_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    entries, notes = audit_installed()
    for lib in ("verl", "openrlhf", "trl"):
        installed = importlib.util.find_spec(lib) is not None
        assert any(n.startswith(f"{lib}: not installed") for n in notes) == (not installed)
        assert any(e.reading.library == lib for e in entries) == installed
    code, out, err = run(capsys, "--plain", "--installed")
    assert code == (0 if entries else 2) and "Traceback" not in out + err  # none: exit 2


def test_launcher_flags_conflicting_with_native_ones_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sh"
    path.write_text("python -m kl_patches.openrlhf --algo.kl.use_loss --kl k1-in-reward\n")
    code, _, err = run(capsys, str(path))
    assert code == 2 and "kl_patches.openrlhf would refuse this launch" in err


def test_a_key_at_its_default_is_not_reported_as_ignored(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    # kl_estimator=k1 and kl_coef=0.05 equal KLArguments' defaults: removing them changes
    # nothing, but the probe value does (the reader refuses it), so they count as read.
    path.write_text("kl_estimator: k1\nkl_placement: reward\nkl_coef: 0.05\nkl_typo: 3\n")
    (entry,) = audit(path, library="trl")
    assert entry.ignored_keys == ("kl_typo",)
    assert [f.code for f in entry.findings if f.code == "ignored_kl_key"] == ["ignored_kl_key"]


def test_unresolved_variables_are_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("python3 -m openrlhf.cli.train_ppo_ray $EXTRA_KL_FLAGS\n")
    (entry,) = audit(path)
    (finding,) = [f for f in entry.findings if f.code == "unresolved_variables"]
    assert finding.severity == "warning" and "$EXTRA_KL_FLAGS" in finding.message
    (entry,) = audit(path, variables={"EXTRA_KL_FLAGS": "--algo.kl.use_loss"})
    assert entry.reading.config.placement == "loss"
    assert not [f for f in entry.findings if f.code == "unresolved_variables"]


def test_yaml_without_pyyaml_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    path = tmp_path / "cfg.yaml"
    path.write_text("beta: 0.1\n")
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml now raises ImportError
    code, _, err = run(capsys, str(path))
    assert code == 2 and "pip install 'pyyaml>=6'" in err
    # scripts and override files still work without it
    script = tmp_path / "run.sh"
    script.write_text("python3 -m openrlhf.cli.train_ppo_ray --algo.kl.init_coef 0.02\n")
    assert run(capsys, str(script))[0] == 0


def test_a_comment_cutting_non_kl_flags_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m verl.trainer.main_ppo \\\n"
        "  algorithm.use_kl_in_reward=True algorithm.adv_estimator=rloo \\\n"
        "  # trainer.nnodes=2 \\\n"
        "  trainer.total_epochs=3\n"
    )
    (entry,) = audit(path)
    (finding,) = [f for f in entry.findings if f.code == "script_comment_ends_command"]
    assert finding.severity == "warning" and "trainer.total_epochs=3" in finding.message
    assert entry.status == "unbiased"


def test_installed_reads_each_adapters_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every library 'installed': TRL's per-trainer defaults, verl's flat defaults, and
    OpenRLHF (no installed_defaults) from the adapter's recorded defaults, with a note."""
    import importlib.util

    import kl_patches.adapters.openrlhf as openrlhf_adapter
    import kl_patches.adapters.trl as trl_adapter
    import kl_patches.adapters.verl as verl_adapter
    from kl_patches.adapters.trl.versions import GRPO_DEFAULTS, RLOO_DEFAULTS
    from kl_patches.adapters.verl.versions import DEFAULTS as VERL_DEFAULTS

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name in ("verl", "openrlhf", "trl") else real_find_spec(name),
    )
    monkeypatch.setattr(
        trl_adapter, "installed_defaults", lambda: {"GRPO": GRPO_DEFAULTS, "RLOO": RLOO_DEFAULTS}
    )
    monkeypatch.setattr(verl_adapter, "installed_defaults", lambda: dict(VERL_DEFAULTS))
    assert not hasattr(openrlhf_adapter, "installed_defaults")
    entries, notes = audit_installed()
    got = [(e.reading.library, e.reading.trainer, e.status) for e in entries]
    assert got == [
        ("verl", "main_ppo (gae)", "kl_off"),  # both verl switches off by default
        ("openrlhf", "train_ppo_ray (gae)", "unbiased"),  # k1 in the reward, init_coef 0.01
        ("trl", "GRPOTrainer", "kl_off"),  # beta 0
        ("trl", "RLOOTrainer", "unbiased"),  # k1 in the reward, beta 0.05
    ]
    assert notes == []
    assert any("no installed_defaults()" in n for n in entries[1].notes)


def test_installed_reports_a_failing_adapter_as_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    import kl_patches.adapters.trl as trl_adapter

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "trl" else real_find_spec(name),
    )

    def broken() -> dict[str, object]:
        raise RuntimeError("trl 2.0 is installed, tested with >=1.16,<1.17")

    monkeypatch.setattr(trl_adapter, "installed_defaults", broken)
    entries, notes = audit_installed()
    assert not [e for e in entries if e.reading.library == "trl"]
    assert any(n.startswith("trl: installed, but its defaults could not be read") for n in notes)


@pytest.mark.parametrize(
    ("line", "library", "trainer"),
    [
        ("accelerate launch --num_processes 8 trl/scripts/rloo.py --beta 0.02", "trl", "RLOO"),
        ("python -m trl.scripts.grpo --beta 0.01", "trl", "GRPO"),
        ("trl grpo --beta 0.01", "trl", "GRPO"),
        ("kl-patches openrlhf --kl k1-in-reward --kl.coef 0.02", "openrlhf", "(kl-patches)"),
        ("deepspeed --module openrlhf.cli.train_ppo_ray --init_kl_coef 0.1", "openrlhf", "gae"),
        ("python3 verl/trainer/main_ppo.py algorithm.use_kl_in_reward=True", "verl", "main_ppo"),
        ("kl-patches verl --kl k1-in-reward -- algorithm.adv_estimator=rloo", "verl", "rloo"),
    ],
)
def test_launch_forms_are_recognised(tmp_path: Path, line: str, library: str, trainer: str) -> None:
    path = tmp_path / "run.sh"
    path.write_text(f"#!/bin/bash\n{line}\n")
    (entry,) = audit(path)
    assert entry.reading.library == library and trainer in entry.reading.trainer


def test_a_script_without_a_launch_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\naccelerate launch my_train.py --lr 1e-6\n")
    code, _, err = run(capsys, str(path))
    assert code == 2 and "no verl, OpenRLHF or TRL launch found" in err
    assert "accelerate launch my_train.py" in err
    path.write_text("kl-patches verl --no-such-option -- a=1\n")
    code, _, err = run(capsys, str(path))
    assert code == 2 and "kl-patches verl cannot parse" in err


def test_flat_openrlhf_names_count_as_read(tmp_path: Path) -> None:
    """Pre-0.10.2 flag names alias the dotted settings; removing or probing them changes the
    reading, so they are not reported as ignored (the group test finds them). The file is
    pinned to a release that has them (0.10.2 and later refuse them: test_versions.py)."""
    (tmp_path / "requirements.txt").write_text("openrlhf==0.9.1\n")
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --pretrain m --init_kl_coef 0.02 "
        "--use_kl_loss --kl_estimator k3 --save_path /x --kl_horizn 5\n"
    )
    (entry,) = audit(path)
    assert entry.reading.config.placement == "loss" and entry.reading.config.coef == 0.02
    assert entry.ignored_keys == ("pretrain", "save_path", "kl_horizn")
    (typo,) = [f for f in entry.findings if f.code == "ignored_kl_key"]
    assert "kl_horizn" in typo.message


def test_an_unset_variable_in_one_array_element_is_blamed_on_that_element(tmp_path: Path) -> None:
    """``"${DATA[@]}"`` gives each element its own taint: $HOME in data.train_files does not
    make data.train_batch_size (another element) or an algorithm key "empty because $HOME"."""
    path = tmp_path / "run.sh"
    path.write_text(
        "DATA=(\n"
        "  data.train_files=\"['$HOME/train.parquet']\"\n"
        "  data.train_batch_size=1024\n"
        "  actor_rollout_ref.actor.kl_loss_type=$KL_TYPE\n"
        ")\n"
        'python3 -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True "${DATA[@]}"\n'
    )
    (entry,) = audit(path, version={"verl": "0.9.1"})
    (finding,) = [f for f in entry.findings if f.code == "unresolved_variables"]
    assert finding.message.startswith(
        "actor_rollout_ref.actor.kl_loss_type is empty because $KL_TYPE"
    )
    assert "$HOME" not in finding.message and "train_batch_size" not in finding.message
    # an element assigned afterwards drops the per-element record: the joint taint applies
    path.write_text(path.read_text().replace("python3", "DATA[1]=data.train_batch_size=8\npython3"))
    (entry,) = audit(path, version={"verl": "0.9.1"})
    (finding,) = [f for f in entry.findings if f.code == "unresolved_variables"]
    assert "data.train_batch_size is empty because $HOME, $KL_TYPE" in finding.message
