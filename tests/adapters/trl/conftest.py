"""TRL adapter tests: one tiny random Qwen2 and a local tokenizer, built once per session."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

# unsloth's tests run in their own session (nox -s unsloth): unsloth pins its own TRL
collect_ignore = [] if importlib.util.find_spec("unsloth") else ["test_unsloth.py"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from kl_patches.experiments import tiny

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("trl")
    return tiny.build_model_dir(root / "model"), root / "out"


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Tests marked ``trl_releases(SPEC)`` run only where the installed TRL is inside SPEC (a
    code path some releases lack): elsewhere they are deselected, not skipped."""
    if importlib.util.find_spec("trl") is None:
        return
    from packaging.specifiers import SpecifierSet

    from kl_patches.adapters.trl.versions import installed_version

    version = installed_version()
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("trl_releases")
        inside = marker is None or SpecifierSet(marker.args[0]).contains(version, prereleases=True)
        (keep if inside else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
