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


def test_prefix_importance_weights_are_refused_clearly() -> None:
    """The kernel has importance_weighting='sequence'; no adapter runs it yet, so each says so
    instead of running it unweighted."""
    from kl_patches.adapters.openrlhf import is_native, to_args
    from kl_patches.adapters.verl import to_overrides
    from kl_patches.config import KLConfig

    config = KLConfig(importance_weighting="sequence")
    with pytest.raises(ValueError, match="not supported by the verl adapter yet"):
        to_overrides(config)
    with pytest.raises(ValueError, match="not supported by the openrlhf adapter yet"):
        to_args(config)
    assert not is_native(config)
