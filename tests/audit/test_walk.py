"""``kl-patches audit DIR``: a repository is walked for the launch files the audit recognises,
skipping what git ignores; ``--installed`` with no library installed says so and exits 2."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kl_patches.audit import walk
from kl_patches.cli import audit as audit_cli

VERL_SH = (
    "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo \\\n"
    "    algorithm.use_kl_in_reward=True\n"
)
TRL_YAML = "model_name_or_path: m\nbeta: 0.04\nloss_type: grpo\n"
TRAIN_PY = (
    "from trl import GRPOConfig, GRPOTrainer\n"
    "trainer = GRPOTrainer(model='m', reward_funcs=[], args=GRPOConfig(beta=0.0))\n"
)


def _repo(root: Path) -> Path:
    files = {
        "scripts/run_grpo.sh": VERL_SH,
        "configs/grpo.yaml": TRL_YAML,
        "configs/grpo.overrides": "algorithm.adv_estimator=grpo\n",
        "train.py": TRAIN_PY,
        "utils.py": "import trl\nprint(trl.__version__)\n",  # names TRL, launches nothing
        ".github/ci.yaml": "name: ci\non: push\n",  # a flat YAML that is no TRL config
        "notes.md": "python -m verl.trainer.main_ppo\n",  # not a launch file
        "outputs/old_run.sh": VERL_SH,  # ignored by .gitignore
        ".venv/lib/run.sh": VERL_SH,  # never entered
        ".gitignore": "outputs/\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


EXPECTED = {
    "scripts/run_grpo.sh",
    "configs/grpo.yaml",
    "configs/grpo.overrides",
    "train.py",
    "utils.py",
}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_git_repository_is_walked_skipping_what_git_ignores(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    found, notes = walk.launch_files(root)
    assert {p.relative_to(root).as_posix() for p in found} == EXPECTED
    assert any("ignored by git check-ignore" in n for n in notes)


def test_a_plain_folder_applies_its_gitignore_or_says_it_cannot(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    found, notes = walk.launch_files(root)
    names = {p.relative_to(root).as_posix() for p in found}
    if importlib.util.find_spec("pathspec") is not None:
        assert names == EXPECTED and any("ignored by .gitignore (pathspec)" in n for n in notes)
    else:
        assert names == EXPECTED | {"outputs/old_run.sh"}
        assert any(".gitignore not applied" in n for n in notes)


def test_the_audit_of_a_folder_reads_each_launch_and_notes_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    assert audit_cli.main([str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    sources = {
        Path(t["origin"].split(":")[0]).relative_to(root).as_posix() for t in doc["trainers"]
    }
    assert sources == EXPECTED - {"utils.py"}
    assert any("launch no trainer" in n and "utils.py" in n for n in doc["notes"])
    assert "errors" not in doc


def test_a_folder_without_launch_files_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "README.md").write_text("nothing\n")
    assert audit_cli.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no launch file of verl, OpenRLHF or TRL recognised in this folder" in err


def test_installed_with_nothing_installed_says_so_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    libraries = {"trl", "verl", "openrlhf"}
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in libraries else real(name, *a)
    )
    assert audit_cli.main(["--installed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        line for line in err if line.startswith("kl-patches audit: --installed: none of verl")
    ]
    assert len(err) == 1 and "run it in the environment you train in" in err[0]
