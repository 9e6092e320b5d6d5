"""The patch is active on every rank of a 2-process ``accelerate launch`` CPU (gloo) run.  Runs the
real launcher (``python -m kl_patches.trl grpo --config run.yaml``) under ``accelerate launch
--multi_gpu --num_processes 2`` (torchrun; with no GPU, accelerate runs MULTI_CPU with the gloo
backend; ``--cpu`` would start a single process): TRL's own GRPO script, a local JSONL dataset,
the tiny model and a reward function imported by dotted path. Each rank prints its KL config and
the number of times each hook ran; both ranks must report k1-in-reward and non-zero hook counts,
and the launcher exits non-zero if a rank's hooks never ran.

No retry: the run must end by itself every time (the launcher ends each rank with ``os._exit``
so that gloo's destructors cannot deadlock; ``benchmarks/reliability_two_rank_exit.py`` repeats this
run to measure it). A run that does not end within the timeout fails, and every process it
started is killed first: torchrun starts each rank in its own session, and a hung rank outlives
the launcher, so the processes are found by a marker in their environment, not by their group.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
pytest.importorskip("trl")
pytest.importorskip("accelerate")

from kl_patches.experiments import tiny

MARKER = "KL_PATCHES_TEST_RUN"
"""Environment variable set to a fresh value per run; every process of the run inherits it."""
TIMEOUT_S = 240.0
"""A run that has not ended after this long has hung (a run takes about 30 s on 2 busy cores)."""
REPORT = re.compile(
    r"kl_patches\.trl rank (\d)/2: (k1-in-reward, coef=0\.05).*?hook calls (\{.*\})"
)


def processes_of(run_id: str) -> list[int]:
    """PIDs of the live processes whose environment carries ``MARKER=run_id``."""
    needle = f"{MARKER}={run_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone, or not ours to read
            continue
        if state != "Z" and needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def kill_run(run_id: str) -> list[int]:
    """SIGKILL every process of the run until none is left; returns the PIDs killed."""
    killed: list[int] = []
    for _ in range(50):
        pids = processes_of(run_id)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    return sorted(set(killed))


@dataclass(frozen=True)
class Outcome:
    """How one guarded run ended."""

    returncode: int | None
    """The launcher's exit code (None when it had to be killed)."""
    stdout: str
    """The launcher's and the ranks' stdout."""
    stderr: str
    """The launcher's and the ranks' stderr."""
    hung: bool
    """True when the run had not ended after the timeout."""
    killed: tuple[int, ...]
    """Processes of the run still alive at the end (killed); empty after a clean run."""
    left: tuple[int, ...]
    """Processes of the run still alive after the kill (must be empty)."""
    wall_s: float
    """Wall time of the run."""


def run_guarded(cmd: list[str], env: dict[str, str], timeout: float = TIMEOUT_S) -> Outcome:
    """Run ``cmd``; on timeout, or if any process of the run outlives it, kill them all."""
    run_id = uuid.uuid4().hex
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        env={**env, MARKER: run_id},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    hung = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hung = True
        kill_run(run_id)
        out, err = proc.communicate()  # the pipes close once every holder is dead
    wall = time.monotonic() - start
    killed = kill_run(run_id)
    code = None if hung else proc.returncode
    return Outcome(code, out, err, hung, tuple(killed), tuple(processes_of(run_id)), wall)


def write_run(tmp_path: Path, native: bool = False) -> Path:
    """The model, the dataset and the YAML of the run (``native``: TRL's own, no kl_* keys)."""
    model_dir = tiny.build_model_dir(tmp_path / "model")
    data_dir = tmp_path / "data"
    data_dir.mkdir(exist_ok=True)
    with open(data_dir / "train.jsonl", "w") as f:
        for prompt in tiny.PROMPTS * 2:
            f.write(json.dumps({"prompt": prompt}) + "\n")
    run: dict[str, object] = {
        "model_name_or_path": str(model_dir),
        "dataset_name": str(data_dir),
        "reward_funcs": ["kl_patches.experiments.tiny.target_reward"],
        "kl_estimator": "k1",
        "kl_placement": "reward",
        "kl_coef": 0.05,
        "scale_rewards": "none",
        **tiny.common_args(tmp_path / "out", per_device_train_batch_size=4, max_steps=2),
    }
    if native:
        run = {k: v for k, v in run.items() if not k.startswith("kl_")}
    config = tmp_path / ("native.yaml" if native else "run.yaml")
    config.write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in run.items()) + "\n")
    return config


def launch_env() -> dict[str, str]:
    """The environment of the run: offline, one thread per rank, the reward module importable."""
    return dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    )


def launch_command(config: Path, native: bool = False, *extra: str) -> list[str]:
    """``accelerate launch`` of 2 CPU ranks running the launcher (or TRL's own GRPO script)."""
    target = ["trl.scripts.grpo"] if native else ["kl_patches.trl", "grpo"]
    return [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "-m", *target, "--config", str(config), *extra,
    ]  # fmt: skip


def test_two_rank_accelerate_launch(tmp_path: Path) -> None:
    config = write_run(tmp_path)
    done = run_guarded(launch_command(config), launch_env())
    assert not done.hung, (
        f"hung after {TIMEOUT_S:.0f} s; killed {done.killed}\n{done.stderr[-4000:]}"
    )
    assert done.left == (), f"processes of the run survive a SIGKILL: {done.left}"
    assert done.killed == (), f"processes outlived the launcher: {done.killed}"
    assert done.returncode == 0, done.stderr[-4000:]
    reports = REPORT.findall(done.stderr)
    assert sorted(r[0] for r in reports) == ["0", "1"], done.stderr[-4000:]
    block = "kl_patches.trl: KL regulariser for TRL\n"
    assert done.stderr.count(block) == 1, done.stderr[-4000:]  # said once, by rank 0
    assert done.stderr.index(block) < min(m.start() for m in REPORT.finditer(done.stderr))
    for _, _, calls in reports:
        counts = eval(calls, {})  # a dict literal printed by the launcher
        assert counts["__init__"] == 1
        assert counts["_generate_and_score_completions"] >= 1
        assert counts["_calculate_rewards"] >= 1
        assert counts["_compute_loss"] >= 2


def test_bad_kl_value_on_two_ranks_is_one_line_each(tmp_path: Path) -> None:
    """A bad KL flag stops the ranks before TRL loads: one line from a rank, no traceback of
    kl-patches (torchrun then prints its own ChildFailedError summary, which is not ours; it
    may stop the second rank before that one prints, so one or two lines)."""
    config = tmp_path / "run.yaml"
    config.write_text("output_dir: out\n")
    done = run_guarded(
        launch_command(config, False, "--kl.estimator", "k9"), launch_env(), timeout=120
    )
    assert not done.hung and done.left == () and done.killed == ()
    assert done.returncode not in (0, None)
    ours = [line for line in done.stderr.splitlines() if line.startswith("kl_patches.trl: ")]
    expected = "kl_patches.trl: --kl.estimator='k9' is not valid; choose one of ['k1', 'k2', 'k3']"
    assert ours and set(ours) == {expected}, done.stderr[-3000:]
    assert f"{os.sep}kl_patches{os.sep}" not in done.stderr, done.stderr[-3000:]
