"""Every adapter is one registry line and one descriptor; no descriptor imports its library."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kl_patches import adapters
from kl_patches.adapters.base import JOBS, AdapterDescriptor
from kl_patches.audit.findings import CODES


def test_registry_lists_three_descriptors() -> None:
    assert adapters.names() == ("verl", "openrlhf", "trl")
    for d in adapters.descriptors():
        assert isinstance(d, AdapterDescriptor) and d.name == d.support.library
        assert d.entries and d.launchers
    with pytest.raises(ValueError, match=r"unknown library 'x'; choose one of \['verl'"):
        adapters.get("x")


def test_descriptor_functions_resolve_and_covers_name_audit_codes() -> None:
    for d in adapters.descriptors():
        for job, (_, required) in JOBS.items():
            found = d.function(job)
            assert callable(found) if required else found is None or callable(found), (d, job)
        assert set(d.covers.values()) <= set(CODES)
        assert all(code.startswith(d.name + ".") for code in d.covers)
        assert d.reads_config_files != bool(d.config_files)
    with pytest.raises(ValueError, match="unknown adapter job"):
        adapters.get("trl").function("train")


def test_descriptors_import_no_training_library() -> None:
    code = (
        "import sys; from kl_patches import adapters; [d.name for d in adapters.descriptors()];"
        "heavy = [m for m in ('verl', 'trl', 'openrlhf', 'ray', 'transformers') "
        "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_prefix_importance_weights_move_the_reward_kl_into_the_loss() -> None:
    """importance_weighting='sequence' runs in every adapter's loss (its prefix weights change
    at every update): verl's reward-time KL is off and its actor KL loss on with the marker;
    OpenRLHF's flags keep the reference log-probs (use_loss) and need the loss-side patch."""
    from kl_patches.adapters.openrlhf import is_native, to_args
    from kl_patches.adapters.verl import to_overrides
    from kl_patches.adapters.verl.versions import ACTOR, MARKER
    from kl_patches.config import KLConfig

    config = KLConfig(importance_weighting="sequence")
    overrides = to_overrides(config)
    assert "algorithm.use_kl_in_reward=False" in overrides
    assert f"{ACTOR}kl_loss_type={MARKER}" in overrides
    assert "--algo.kl.use_loss" in to_args(config)
    assert not is_native(config)
