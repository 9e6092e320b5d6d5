"""The ``verl.plugins`` entry point defers the patch until verl has finished importing.

verl loads every ``verl.plugins`` entry point while ``import verl`` runs, in discovery order. A
platform registered by a plugin loaded after ours (here: a fake distribution appended to
``sys.path`` whose entry point registers a CPU platform selected by ``VERL_PLATFORM``) must be
in place before the patch imports verl's trainer stack and runs its canaries; before the fix
the plugin imported that stack inside ``import verl`` and failed with "Unknown platform".
Each case runs in a fresh interpreter (the import order is the point).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("verl")

from kl_patches.adapters.verl import patch, plugin
from kl_patches.config import KLConfig

REPO = Path(__file__).resolve().parents[3]
SPEC = json.dumps({"estimator": "k2", "granularity": "sequence", "placement": "loss"})


def _late_platform_plugin(root: Path) -> Path:
    """A distribution (on a path searched after site-packages) whose verl.plugins entry point
    registers the platform ``kp_late``."""
    dist = root / "kp_late_platform-0.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: kp-late-platform\nVersion: 0.0.0\n"
    )
    (dist / "entry_points.txt").write_text("[verl.plugins]\nzz_late = kp_late_platform\n")
    (root / "kp_late_platform.py").write_text(
        textwrap.dedent(
            """
            from verl.plugin.platform.platform_manager import PlatformRegistry
            from kl_patches.experiments.cpu.verl_platform import PlatformCPU

            PlatformRegistry.register(platform="kp_late")(PlatformCPU)
            """
        )
    )
    return root


PROBE = """
import sys
sys.path.append({root!r})  # after site-packages: its entry point loads after kl_patches'
import verl
from kl_patches.adapters.verl import patch, plugin
before = patch.active()
from verl.workers.utils import losses  # verl's KL code: the patch applies once it is imported
from verl.utils.device import get_device_name
active = patch.active().to_json()
print("RESULT", before is None, plugin.LOAD_ERROR is None, active, get_device_name())
"""


def _probe(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ, PYTHONPATH=str(REPO), VERL_PLATFORM="kp_late", **env)
    environ.pop("VERL_USE_EXTERNAL_MODULES", None)
    return subprocess.run(
        [sys.executable, "-c", PROBE.format(root=str(root))],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_platform_registered_by_a_later_plugin_is_in_place(tmp_path: Path) -> None:
    done = _probe(_late_platform_plugin(tmp_path), KL_PATCHES_VERL=SPEC)
    assert done.returncode == 0, done.stderr[-3000:]
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert result, done.stdout[-2000:] + done.stderr[-2000:]
    # the plugin before the fix: "could not apply the verl patch ... Unknown platform 'kp_late'"
    assert "could not apply the verl patch" not in done.stderr, done.stderr[-3000:]
    _, deferred, no_error, active, device = result[0].split(" ")
    assert deferred == "True"  # nothing applied inside import verl
    assert no_error == "True"
    assert json.loads(active) == json.loads(SPEC)
    assert device == "cpu"
    assert "verl patch active in pid" in done.stderr  # at WARNING, under verl's logging


def test_plugin_names_the_modules_the_patch_wraps() -> None:
    assert set(plugin.KL_MODULES) == {module for module, _ in patch.SOURCES}


def test_setup_applies_at_once_when_verl_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    import verl.workers.utils.losses  # noqa: F401

    config = KLConfig.parse("k2-in-loss", coef=0.1, granularity="sequence")
    from kl_patches.adapters.verl.delivery import PatchSpec

    monkeypatch.setenv("KL_PATCHES_VERL", PatchSpec(config).to_json())
    try:
        assert plugin.setup() == PatchSpec(config) == patch.active()
    finally:
        patch.revert()
