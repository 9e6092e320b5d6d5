"""README.md's two commands and every shell command of its quickstarts (and of the docs'
Quickstart sections) run as written (see ``tests/quickstart.py`` for what is run how: pip
installs as dry runs, ``nox`` as ``nox --list``, the commands that need a library in that
library's session), and
``.ci/run`` runs the README's test command."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests import quickstart

ROOT = quickstart.ROOT


def _first_block() -> list[str]:
    where, code = quickstart.blocks()[0]
    assert where == "README.md"
    return quickstart.commands(code)


def test_the_readme_opens_with_the_two_commands() -> None:
    setup, test = _first_block()
    assert setup.startswith("python3 -m venv .venv && ") and setup.endswith("kl-patches demo")
    assert "torch==2.13.0" in setup.split("&&")[1]  # the CPU wheel first
    # the test command needs no system-wide pip (PEP 668): nox goes into a venv of its own
    venv, install, nox = quickstart.parts(test)
    assert venv.startswith("python3 -m venv ")
    folder = shlex.split(venv)[3]
    assert install == f"{folder}/bin/pip install nox" and nox == f"{folder}/bin/nox"


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    runs = [
        line
        for line in ci.splitlines()
        if line and not line.startswith(("#", "set ", "cd ", "export "))
    ]
    assert runs == [_first_block()[1]]
    folder = shlex.split(quickstart.parts(_first_block()[1])[0])[3]
    assert f"{folder.strip('./')}/" in (ROOT / ".gitignore").read_text(encoding="utf-8")


def test_no_quickstart_command_needs_a_gpu() -> None:
    for where, command in quickstart.all_commands():
        assert "accelerate launch" not in command, where
        if command.startswith("kl-patches verl --kl") or "-m kl_patches.openrlhf --kl" in command:
            assert "--print" in command or "--check" in command, (where, command)


CORE = [
    (where, command)
    for where, command in quickstart.all_commands()
    if quickstart.needs(command) is None
]


@pytest.mark.parametrize(("where", "command"), CORE, ids=[c for _, c in CORE])
def test_command_runs_as_written(where: str, command: str, tmp_path: Path) -> None:
    done = quickstart.run(command, ROOT, tmp_path)
    assert done.returncode == 0, (where, command, done.stdout[-2000:], done.stderr[-3000:])
    if command.endswith("kl-patches demo"):
        assert "Summary:" in done.stdout and (tmp_path / "out" / "bias_vs_length.png").exists()


def test_the_library_commands_are_the_library_sessions() -> None:
    """The commands left to each library's session (``tests/adapters/<lib>/test_quickstart.py``):
    one CPU trial per library, as the README gives it."""
    readme = [c for where, c in quickstart.all_commands() if where == "README.md"]
    for library in ("trl", "verl", "openrlhf"):
        commands = [c for _, c in quickstart.of(library)]
        assert f"kl-patches smoke {library}" in commands and f"kl-patches smoke {library}" in readme
        assert (ROOT / "tests" / "adapters" / library / "test_quickstart.py").exists()
    assert "python -m kl_patches.trl grpo --help" in [c for _, c in quickstart.of("trl")]
