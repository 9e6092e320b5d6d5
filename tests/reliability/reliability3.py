"""Helpers of the third reliability round (issue 32): repositories in a temporary folder, the
audit's command line in-process with its JSON report, and a subprocess bounded in time and
memory for the inputs that used to hang or exhaust the machine.

Every case module lists its cases in ``CASES`` as ``(category, name)``; each case runs as one
test whose parameter id is its name (``benchmarks/reliability_counts.py`` counts them).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kl_patches import cli

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 90.0
"""Seconds a bounded subprocess may take: interpreter and torch import dominate (seconds on a
loaded 2-core machine); the inputs it guards against took minutes or never ended."""
MEMORY_BYTES = 3 * 1024**3
"""Address space of a bounded subprocess (torch's import needs about 0.7 GiB of it); the inputs
it guards against asked for 5 GB to 32 GB."""

GRPO_NO_BETA = "model_name_or_path: m\nlearning_rate: 1.0e-6\n"
"""A TRL GRPO config without beta: k3 in the loss at 0.04 before TRL 0.19.0, no KL from it."""
VERL_LAUNCH = "python -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True\n"
"""A verl launch with the reward KL on."""


def repo(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    """A repository root (a ``.git`` folder) under ``tmp_path`` holding ``files``."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
    return root


def nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Version detection must not see this environment's packages."""
    from kl_patches.audit import versions

    def missing(name: str) -> str:
        raise versions.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(versions.metadata, "version", missing)


def audit_json(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> tuple[int, dict[str, Any], str]:
    """``kl-patches audit --json ARGS`` in-process: (exit code, the JSON report, stderr)."""
    code = cli.main(["audit", "--json", *args])
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "internal error" not in out.err, out.err
    return code, json.loads(out.out), out.err


def trainer(doc: dict[str, Any], k: int = 0) -> dict[str, Any]:
    """The ``k``-th trainer of a JSON report."""
    return doc["trainers"][k]  # type: ignore[no-any-return]


def notes(doc: dict[str, Any]) -> str:
    """Every note of every trainer, one per line."""
    return "\n".join(n for t in doc["trainers"] for n in t.get("notes", []))


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def bounded(
    args: list[str], cwd: Path, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m kl_patches ARGS`` (or ``python -c CODE``) in a subprocess limited to
    :data:`TIMEOUT_S` and :data:`MEMORY_BYTES`; the test fails when the time runs out."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", code] if code is not None else [
        sys.executable, "-m", "kl_patches", *args
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_limit_memory,
    )
    try:
        out, err = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"no answer within {TIMEOUT_S:g} s: {args or code}")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def clean(done: subprocess.CompletedProcess[str]) -> str:
    """stdout + stderr of a bounded run, asserting neither a traceback nor an internal error
    nor a memory error."""
    text = done.stdout + done.stderr
    for bad in ("Traceback", "internal error", "MemoryError", "Cannot allocate"):
        assert bad not in text, text[-3000:]
    return text
