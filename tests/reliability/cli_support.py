"""Helpers of the reliability suite's command-line tests: run a command in-process with no
training or launch able to start, and check the one-line error path.

Every bad input must be refused before any work starts: :func:`no_work` replaces each long
run (bias tables, training runs, the verl trainer subprocess, Ray, TRL) by a function that
raises, so a check that came too late shows as a wrong message instead of a minutes-long run.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from kl_patches import cli


class WorkStarted(Exception):
    """Raised by the stand-ins of :func:`no_work`: the command went past its checks."""


def _refuse(*_: Any, **__: Any) -> Any:
    raise WorkStarted("the run started before the input was refused")


def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every long run of every command raise :class:`WorkStarted`."""
    from kl_patches.adapters.openrlhf import launch as openrlhf_launch
    from kl_patches.adapters.verl import launch as verl_launch
    from kl_patches.cli import demo as demo_cli
    from kl_patches.experiments import bias, reproduce

    for name in ("run_table", "run_sweep", "run_off_policy", "run_off_policy_sweep"):
        monkeypatch.setattr(bias, name, _refuse)
    monkeypatch.setattr(reproduce, "reproduce", _refuse)
    monkeypatch.setattr(demo_cli, "run_training", _refuse)
    monkeypatch.setattr(verl_launch.subprocess, "call", _refuse)
    monkeypatch.setattr(openrlhf_launch, "ray_init", _refuse)
    monkeypatch.setitem(sys.modules, "trl", None)  # importing TRL fails: it must not get there


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    """``kl-patches ARGV`` in-process: (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(code: int, out: str, err: str, fragment: str, stdout: bool = False) -> str:
    """Assert the error path: exit 2, one line on stderr holding ``fragment``, no traceback,
    nothing on stdout (unless ``stdout``); returns the line."""
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in out + err
    assert "WorkStarted" not in err and "internal error" not in err, err
    if not stdout:
        assert out == "", out
    return lines[0]
