"""The ``kl-patches`` dispatcher and ``python -m kl_patches``."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from kl_patches import cli


def test_every_command_resolves_to_a_function() -> None:
    for name, target in cli.COMMANDS.items():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func)), name


def test_help_and_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in cli.COMMANDS) and set(cli.SUMMARIES) == set(cli.COMMANDS)
    assert "``" not in out and ":mod:" not in out  # plain words
    assert cli.main(["frobnicate"]) == 2
    assert "valid commands" in capsys.readouterr().err


def test_python_dash_m_kl_patches() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kl_patches", "verdict", "k1-in-reward"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "unbiased:    yes" in done.stdout


def test_version_names_the_package_and_each_librarys_release(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from importlib import metadata

    from kl_patches.adapters.trl.versions import SUPPORT

    assert cli.main(["--version"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"kl-patches {metadata.version('kl-patches')}"
    trl = next(line for line in lines if line.split()[0] == "trl")
    found = SUPPORT.installed()
    assert ("not installed" in trl) == (found is None) and f"range {SUPPORT.supported}" in trl
    assert {line.split()[0] for line in lines[1:]} == {"trl", "verl", "openrlhf"}
