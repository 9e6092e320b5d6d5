"""Hostile inputs to ``kl-patches audit``: each answers quickly with a clear one-line message.

Every case runs the real command line in a subprocess with a timeout; the timeout is the
failure (the audit hung or exhausted the machine). Nothing else about timing is asserted. Each
case also checks the exit code (2 for an input the audit refuses, 0 when it is read) and that
the message is the audit's own, never "internal error" or a traceback. :data:`CASES` lists the
cases as (category, name) so that a counting script can report how many bad inputs are tried
per category.

Import time dominates a run (the audit's descriptors import torch through the TRL adapter
package, several seconds on a loaded 2-core machine), so the timeout is generous against that
and still far below the minutes or the unbounded time the unbounded reader took.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 90.0
"""Seconds a case may take (dominated by interpreter and torch import); a hang is far longer."""


@dataclass(frozen=True)
class Case:
    """One hostile input: how to build it, what the command line must answer."""

    category: str
    """What the input attacks: files, shell, arithmetic, loops, yaml, python, values."""
    name: str
    """Short name of the case."""
    build: Callable[[Path], list[str]]
    """Writes the input under a temporary folder; returns the audit's arguments."""
    code: int
    """Expected exit code."""
    message: str
    """A substring the output (stdout or stderr) must contain."""


def _write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return path


def _fifo(tmp: Path) -> list[str]:
    path = tmp / "fifo"
    os.mkfifo(path)
    return [str(path)]


def _config_fifo(tmp: Path) -> list[str]:
    os.mkfifo(tmp / "cfg.fifo")
    return [str(_write(tmp, "run.sh", f"trl grpo --config {tmp / 'cfg.fifo'} --beta 0.1\n"))]


def _big_yaml(tmp: Path) -> list[str]:
    path = tmp / "big.yaml"
    line = "k" + "x" * 60 + ": 1\n"
    with path.open("w", encoding="utf-8") as handle:
        handle.write("beta: 0.1\n")
        handle.write(line * (50 * 1024 * 1024 // len(line)))
    return [str(path)]


def _alias_bomb(tmp: Path) -> list[str]:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        text += f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]\n"
    assert len(text) < 2048  # a 2 KB file that expands to 9**9 nodes
    return [str(_write(tmp, "bomb.yaml", text))]


def _nested_loops(tmp: Path) -> list[str]:
    lines = ["  " * i + f"for v{i} in 1 2 3 4 5 6 7 8 9 10; do" for i in range(8)]
    lines.append("  " * 8 + "python -m verl.trainer.main_ppo x=$v0")
    lines += ["  " * i + "done" for i in reversed(range(8))]
    return [str(_write(tmp, "loops.sh", "\n".join(lines) + "\n"))]


def _script(text: str, name: str = "run.sh") -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return [str(_write(tmp, name, text))]

    return build


def _literal(*args: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return list(args)

    return build


_LAUNCH = "python -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True"

ALL: tuple[Case, ...] = (
    Case("files", "fifo", _fifo, 2, "FIFO (named pipe), not a regular file"),
    Case("files", "dev_zero", _literal("/dev/zero"), 2, "not a regular file"),
    Case("files", "dev_stdin", _literal("/dev/stdin"), 2, "not a regular file"),
    Case("files", "config_fifo", _config_fifo, 2, "FIFO (named pipe), not a regular file"),
    Case(
        "files",
        "config_dev_zero",
        _script("trl grpo --config /dev/zero --beta 0.1\n"),
        2,
        "/dev/zero: a character device",
    ),
    Case(
        "files",
        "config_dev_stdin",
        _script("trl grpo --config /dev/stdin --beta 0.1\n"),
        2,
        "not a regular file",
    ),
    Case("files", "yaml_50mb", _big_yaml, 2, "over the audit's limit"),
    Case(
        "files", "directory", lambda tmp: [str(tmp)], 2, "no launch file of verl, OpenRLHF or TRL"
    ),
    Case(
        "arithmetic",
        "pow_9_9_9",
        _script(f"N=$((9**9**9))\n{_LAUNCH} trainer.total_epochs=$N\n"),
        0,
        "main_ppo",
    ),
    Case(
        "arithmetic",
        "nested_parentheses",
        _script("echo $((" + "(" * 5000 + "1" + ")" * 5000 + "))\n"),
        2,
        "nested too deeply",
    ),
    Case(
        "arithmetic",
        "division_by_zero",
        _script(f"N=$((1/0))\n{_LAUNCH} trainer.total_epochs=$N\n"),
        0,
        "main_ppo",
    ),
    Case("loops", "eight_nested_for", _nested_loops, 2, "unrolls into more than"),
    Case("loops", "recursive_function", _script("f() { f; }\nf\n"), 2, "nested too deeply"),
    Case("loops", "fork_bomb", _script(":(){ :|:& };:\n"), 2, "nested too deeply"),
    Case("loops", "self_source", _script("source ./run.sh\n"), 2, "nested too deeply"),
    Case("loops", "brace_range", _script("echo {1..100000000}\n"), 2, "brace expansion"),
    Case(
        "loops",
        "doubling_string",
        _script('A=x\nfor i in $(seq 1 40); do A="$A$A"; done\necho "$A"\n'),
        2,
        "1000000 characters",
    ),
    Case("yaml", "alias_bomb_2kb", _alias_bomb, 2, "alias bomb"),
    Case(
        "yaml",
        "deep_nesting",
        _script("a: " + "[" * 50000 + "]" * 50000 + "\n", "deep.yaml"),
        2,
        "nested too deeply",
    ),
    Case(
        "yaml",
        "deep_json",
        _script("[" * 100000 + "]" * 100000, "deep.json"),
        2,
        "nested too deeply",
    ),
    Case("yaml", "inf_beta", _script("beta: .inf\n", "cfg.yaml"), 2, "finite"),
    Case(
        "shell",
        "deep_substitution",
        _script("X=" + "$(" * 2000 + "echo" + ")" * 2000 + "\n"),
        2,
        "nested too deeply",
    ),
    Case(
        "shell",
        "deep_braces",
        _script("{ " * 3000 + "true; " + "}; " * 3000 + "\n"),
        2,
        "nested too deeply",
    ),
    Case(
        "shell",
        "deep_if",
        _script("if true; then " * 2000 + "true; " + "fi; " * 2000 + "\n"),
        2,
        "nested too deeply",
    ),
    Case(
        "python",
        "deep_parentheses",
        _script("x = " + "(" * 200000 + "1" + ")" * 200000 + "\n", "deep.py"),
        2,
        "nested too deeply",
    ),
    Case(
        "python",
        "deep_attribute_chain",
        _script("import trl\nx = a" + ".b" * 100000 + "\n", "chain.py"),
        2,
        "nested too deeply",
    ),
    Case(
        "values",
        "inf_coefficient",
        _script("python -m openrlhf.cli.train_ppo_ray --algo.kl.init_coef inf\n"),
        2,
        "finite",
    ),
    Case(
        "values",
        "nan_coefficient",
        _script(f"{_LAUNCH} algorithm.kl_ctrl.kl_coef=nan\n"),
        2,
        "finite",
    ),
)
"""Every hostile case."""

CASES: list[tuple[str, str]] = [(c.category, c.name) for c in ALL]
"""(category, name) of every case, for counting scripts."""


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "kl_patches", "audit", "--json", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"the audit did not answer within {TIMEOUT_S:g} s: {args}")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_cases_are_listed_once() -> None:
    assert len(set(CASES)) == len(CASES) == len(ALL)
    assert {c for c, _ in CASES} == {
        "files",
        "arithmetic",
        "loops",
        "yaml",
        "shell",
        "python",
        "values",
    }


@pytest.mark.parametrize("case", ALL, ids=[f"{c.category}-{c.name}" for c in ALL])
def test_hostile_input_is_answered(case: Case, tmp_path: Path) -> None:
    args = case.build(tmp_path)
    done = _run(args, tmp_path)
    text = done.stdout + done.stderr
    assert done.returncode == case.code, text[-2000:]
    assert case.message in text, text[-2000:]
    assert "internal error" not in text and "Traceback" not in text, text[-2000:]
