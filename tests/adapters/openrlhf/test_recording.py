"""record --check for the installed openrlhf release: its data file is exactly what its files say.

Reads the installed distribution (the same release, so no wheel and no network), as
``python -m kl_patches.dev record --check openrlhf --installed --offline`` does.
"""

from __future__ import annotations

import subprocess
import sys

from kl_patches.dev.record import check, installed


def test_the_installed_release_is_recorded_exactly() -> None:
    assert check("openrlhf", [installed("openrlhf")], download=False) == []


def test_the_command_exits_zero_on_no_difference() -> None:
    command = [sys.executable, "-m", "kl_patches.dev", "record", "--check", "openrlhf"]
    done = subprocess.run(
        [*command, "--installed", "--offline"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("1 release(s), no difference")
