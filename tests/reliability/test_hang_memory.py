"""Inputs that used to hang the audit or exhaust the machine (issue 32, "hang / memory"): each now
answers in seconds with bounded memory, with the correct reading or a note naming the cause.

Cases that could block or allocate gigabytes in the old code run in a subprocess limited in time
and address space (:func:`tests.reliability.reliability3.bounded`: the time running out is the
failure); the others run in-process. Nothing about speed is asserted beyond that bound; the
many-files case counts directory listings instead of timing them.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

import kl_patches
from tests.reliability.cli_support import no_work, one_line_error, run
from tests.reliability.reliability3 import (
    GRPO_NO_BETA,
    VERL_LAUNCH,
    audit_json,
    bounded,
    clean,
    notes,
    nothing_installed,
    repo,
    trainer,
)

CASES: list[tuple[str, str]] = [
    ("hang-memory", "vendored-version-fifo"),
    ("hang-memory", "vendored-version-dev-zero"),
    ("hang-memory", "vendored-openrlhf-version-txt-fifo"),
    ("hang-memory", "vendored-sign-bug-fifo"),
    ("hang-memory", "setup-cfg-interpolation-bomb"),
    ("hang-memory", "lock-file-60000-pins"),
    ("hang-memory", "pyproject-100000-part-key"),
    ("hang-memory", "setup-py-million-constants"),
    ("hang-memory", "python-repeated-multiplication"),
    ("hang-memory", "bias-batch-size-ten-million"),
    ("hang-memory", "bias-plot-vocab-too-big"),
    ("hang-memory", "reproduce-steps-unbounded"),
    ("hang-memory", "reproduce-seeds-unbounded"),
    ("hang-memory", "reproduce-estimate-before-long-run"),
    ("hang-memory", "many-files-one-listing-per-directory"),
    ("hang-memory", "many-files-progress-on-a-terminal"),
    ("hang-memory", "slow-input-bounded-in-time"),
]
"""Every case of this module as (category, name); the test parameter id is the name."""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    nothing_installed(monkeypatch)


# ----------------------------------------------------------------------------- vendored readers
@pytest.mark.parametrize("name", ["vendored-version-fifo"])
def test_a_fifo_as_a_vendored_version_file_is_refused_with_a_note(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: TRL's VERSION beside a trl package was opened as it is: a FIFO blocked forever."""
    root = repo(tmp_path, {"trl/__init__.py": "", "grpo.yaml": GRPO_NO_BETA})
    os.mkfifo(root / "VERSION")
    done = bounded(["audit", "--json", str(root / "grpo.yaml")], tmp_path)
    text = clean(done)
    doc = json.loads(done.stdout)
    assert done.returncode == 0, text[-2000:]
    assert trainer(doc)["version_source"] == "newest"
    assert "VERSION: a FIFO (named pipe), not a regular file" in notes(doc)


@pytest.mark.parametrize("name", ["vendored-version-dev-zero"])
def test_dev_zero_as_verl_version_file_is_refused_with_a_note(name: str, tmp_path: Path) -> None:
    """Before: a ``verl/version/version`` symlink to /dev/zero read 5 GB in 8 s."""
    root = repo(tmp_path, {"run.sh": VERL_LAUNCH})
    (root / "verl" / "version").mkdir(parents=True)
    (root / "verl" / "version" / "version").symlink_to("/dev/zero")
    done = bounded(["audit", "--json", str(root / "run.sh")], tmp_path)
    text = clean(done)
    doc = json.loads(done.stdout)
    assert done.returncode == 0, text[-2000:]
    assert trainer(doc)["version_source"] == "newest"
    assert "version: a character device, not a regular file" in notes(doc)


@pytest.mark.parametrize("name", ["vendored-openrlhf-version-txt-fifo"])
def test_a_fifo_as_openrlhf_version_txt_is_refused_with_a_note(name: str, tmp_path: Path) -> None:
    """OpenRLHF's ``version.txt`` beside an ``openrlhf`` package was opened as it is too."""
    launch = "python3 -m openrlhf.cli.train_ppo_ray --algo.kl.init_coef 0.02\n"
    root = repo(tmp_path, {"openrlhf/__init__.py": "", "run.sh": launch})
    os.mkfifo(root / "version.txt")
    done = bounded(["audit", "--json", str(root / "run.sh")], tmp_path)
    text = clean(done)
    doc = json.loads(done.stdout)
    assert done.returncode == 0, text[-2000:]
    assert trainer(doc)["version_source"] == "newest"
    assert "version.txt: a FIFO (named pipe), not a regular file" in notes(doc)


@pytest.mark.parametrize("name", ["vendored-sign-bug-fifo"])
def test_a_fifo_as_dp_actor_is_not_read(name: str, tmp_path: Path) -> None:
    """The verl sign-bug check read ``workers/actor/dp_actor.py`` beside a vendored version
    file unguarded: a FIFO there blocked (now: skipped, the version is still read)."""
    root = repo(tmp_path, {"run.sh": VERL_LAUNCH, "verl/version/version": "0.3.0\n"})
    (root / "verl" / "workers" / "actor").mkdir(parents=True)
    os.mkfifo(root / "verl" / "workers" / "actor" / "dp_actor.py")
    done = bounded(["audit", "--json", str(root / "run.sh")], tmp_path)
    text = clean(done)
    doc = json.loads(done.stdout)
    assert done.returncode == 0, text[-2000:]
    assert (trainer(doc)["library_version"], trainer(doc)["version_source"]) == (
        "0.3.0",
        "vendored",
    )


# ----------------------------------------------------------------------------- pin files
@pytest.mark.parametrize("name", ["setup-cfg-interpolation-bomb"])
def test_setup_cfg_interpolation_is_not_expanded(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ConfigParser expanded ``%(a)s`` references: a 1 KB file ran for minutes at
    700 MB and rising. setuptools reads setup.cfg without interpolation, and so does the
    audit now: the pin is read."""
    text = "[options]\ninstall_requires = trl==0.18.0\n[x]\na0 = x\n"
    for i in range(1, 30):
        text += f"a{i} = %(a{i - 1})s%(a{i - 1})s\n"
    assert len(text) < 1100
    root = repo(tmp_path, {"setup.cfg": text, "grpo.yaml": GRPO_NO_BETA})
    done = bounded(["audit", "--json", str(root / "grpo.yaml")], tmp_path)
    clean(done)
    t = trainer(json.loads(done.stdout))
    assert (t["library_version"], t["version_source"]) == ("0.18.0", "pin")


@pytest.mark.parametrize("name", ["lock-file-60000-pins"])
def test_a_lock_file_with_60000_pins_is_read_in_linear_time(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: each pin's line was searched from the top (quadratic: > 60 s)."""
    block = '[[package]]\nname = "trl"\nversion = "0.18.0"\n'
    root = repo(tmp_path, {"uv.lock": "version = 1\n" + block * 60_000, "grpo.yaml": GRPO_NO_BETA})
    done = bounded(["audit", "--json", str(root / "grpo.yaml")], tmp_path)
    clean(done)
    t = trainer(json.loads(done.stdout))
    assert (t["library_version"], t["version_source"]) == ("0.18.0", "pin")
    assert t["version_where"] == "repo/uv.lock:3"  # relative to the working directory


@pytest.mark.parametrize("name", ["pyproject-100000-part-key"])
def test_a_dotted_key_of_100000_parts_is_a_note(name: str, tmp_path: Path) -> None:
    """Before: Python's TOML reader took > 60 s and 3 GB on a 200 KB pyproject.toml."""
    text = '[project]\ndependencies = ["trl==0.18.0"]\n' + "a" + ".a" * 100_000 + " = 1\n"
    root = repo(tmp_path, {"pyproject.toml": text, "grpo.yaml": GRPO_NO_BETA})
    done = bounded(["audit", "--json", str(root / "grpo.yaml")], tmp_path)
    clean(done)
    doc = json.loads(done.stdout)
    assert trainer(doc)["version_source"] == "newest"
    assert "pyproject.toml:3: a dotted key of 100001 parts (more than 64)" in notes(doc)


@pytest.mark.parametrize("name", ["setup-py-million-constants"])
def test_a_setup_py_of_a_million_constants_is_a_note(name: str, tmp_path: Path) -> None:
    """Before: every string constant of setup.py was parsed as a requirement: 48 s."""
    text = "X = [" + "'a'," * 1_000_000 + "]\nsetup(install_requires=['trl==0.18.0'])\n"
    root = repo(tmp_path, {"setup.py": text, "grpo.yaml": GRPO_NO_BETA})
    done = bounded(["audit", "--json", str(root / "grpo.yaml")], tmp_path)
    clean(done)
    doc = json.loads(done.stdout)
    assert trainer(doc)["version_source"] == "newest"
    assert "setup.py: 4000047 bytes, over the audit's limit of 262144 bytes" in notes(doc)


@pytest.mark.parametrize("name", ["python-repeated-multiplication"])
def test_repeated_multiplication_in_python_is_not_computed(name: str, tmp_path: Path) -> None:
    """Before: ``**`` was bounded but ``A = A*A`` forty times was computed (10**(64 * 2**40))."""
    text = (
        "import trl\nA = 10**64\n"
        + "A = A*A\n" * 40
        + "args = trl.GRPOConfig(output_dir='o', beta=0.1)\n"
        + "trainer = trl.GRPOTrainer(model='m', args=args)\n"
    )
    root = repo(tmp_path, {"train.py": text})
    done = bounded(["audit", "--json", str(root / "train.py")], tmp_path)
    clean(done)
    t = trainer(json.loads(done.stdout))
    assert t["config"]["coef"] == 0.1 and t["config"]["placement"] == "loss"


# ----------------------------------------------------------------------------- bias / reproduce
@pytest.mark.parametrize("name", ["bias-batch-size-ten-million"])
def test_bias_batch_size_is_bounded_by_memory(name: str, tmp_path: Path) -> None:
    """Before: ``bias --batch-size 10000000`` tried to allocate 32 GB."""
    done = bounded(["bias", "--batch-size", "10000000", "--quiet"], tmp_path)
    text = clean(done)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "--batch-size x --num-batches='10000000 x 400' is not valid" in line, text
    assert "GiB of gradients" in line and "keep batch-size x num-batches <= " in line


@pytest.mark.parametrize("name", ["bias-plot-vocab-too-big"])
def test_bias_plot_sweep_is_bounded(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--plot`` sweeps T=1..6: with --vocab 10 that is 10**6 sequences (never finished)."""
    pytest.importorskip("matplotlib")
    no_work(monkeypatch)
    argv = ["bias", "--vocab", "10", "--length", "2", "--plot", str(tmp_path / "p.png")]
    one_line_error(*run(capsys, argv), "--plot sweeps T=1..6, so V**6 must be <= 20000")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(
            ["reproduce", "--steps", "1000000"],
            "--steps=1000000 is not valid; use at most 100000",
            id="reproduce-steps-unbounded",
        ),
        pytest.param(
            ["reproduce", "--seeds", "1000", "--steps", "100000"],
            "over the limit of 10000000",
            id="reproduce-seeds-unbounded",
        ),
    ],
)
def test_reproduce_sizes_are_bounded(
    argv: list[str],
    fragment: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: any --steps/--seeds started a run of days (or memory beyond the machine)."""
    no_work(monkeypatch)
    one_line_error(*run(capsys, argv), fragment)


@pytest.mark.parametrize("name", ["reproduce-estimate-before-long-run"])
def test_reproduce_says_its_estimate_before_a_long_run(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run of many updates says what it will do, and about how long, before it starts."""
    from kl_patches.experiments import reproduce

    no_work(monkeypatch)
    monkeypatch.setattr(reproduce, "estimate_seconds", lambda jobs, workers: 3000.0)
    code, _, err = run(capsys, ["reproduce", "--steps", "20000", "--seeds", "2", "--quiet"])
    lines = err.strip().splitlines()
    assert code == 2 and "WorkStarted" not in lines[0] and len(lines) == 2, err
    assert lines[0] == (
        "kl-patches reproduce: 66 runs x 20000 updates of 16 samples (1320000 updates): about "
        "50 min with 2 worker(s) (timed on a few updates here); Ctrl-C stops it"
    )


# ----------------------------------------------------------------------------- many files
def _many(tmp_path: Path, n: int) -> list[str]:
    root = repo(tmp_path, {})
    paths = []
    for i in range(n):
        path = root / f"run{i}.sh"
        path.write_text(VERL_LAUNCH, encoding="utf-8")
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("name", ["many-files-one-listing-per-directory"])
def test_many_files_list_each_directory_once(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: every file re-listed (and stat-ed) its whole directory for pins and vendored
    copies: 10,000 files in one folder took > 60 s. Now each folder is read once per library."""
    paths = _many(tmp_path, 200)
    listed: list[str] = []
    original = Path.iterdir

    def counting(self: Path):  # type: ignore[no-untyped-def]
        listed.append(str(self))
        return original(self)

    monkeypatch.setattr(Path, "iterdir", counting)
    code, doc, _ = audit_json(capsys, paths)
    assert code == 0 and len(doc["trainers"]) == 200
    # the user's folders; kl-patches' own recorded data is listed once per process at most
    package = str(Path(kl_patches.__file__).parent)
    users = [d for d in listed if not d.startswith(package)]
    assert len(users) <= 1, users
    assert len(listed) - len(users) == len(set(listed) - set(users))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("name", ["many-files-progress-on-a-terminal"])
def test_progress_on_a_terminal_only(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Many inputs draw a progress bar on stderr when it is a terminal, and only then."""
    import sys

    paths = _many(tmp_path, 25)
    code, _, err = audit_json(capsys, paths)
    assert code == 0 and err == ""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    code, _, _ = audit_json(capsys, paths)
    shown = terminal.getvalue()
    assert code == 0 and "audit" in shown and "25/25" in shown


@pytest.mark.parametrize("name", ["slow-input-bounded-in-time"])
def test_an_input_that_takes_too_long_is_reported_and_the_others_read(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each input has a wall-time bound (the backstop behind every reader's own bounds)."""
    import time

    from kl_patches.cli import audit as audit_cli

    slow, fast = _many(tmp_path, 2)
    real = audit_cli.audit

    def audit(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if path == slow:
            time.sleep(30)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(audit_cli, "SECONDS_PER_INPUT", 1)
    monkeypatch.setattr(audit_cli, "audit", audit)
    code, doc, err = audit_json(capsys, [slow, fast])
    assert code == 2 and [t["origin"] for t in doc["trainers"]] == [f"{fast}:1"]
    (item,) = doc["errors"]
    assert item["origin"] == slow and "not read within 1 s" in item["message"]
    assert err.strip() == (
        f"kl-patches audit: {slow}: not read within 1 s (the audit's bound per input); the "
        "other inputs are still audited"
    )
