"""The recorded TRL config fields against the installed release's dataclasses."""

from __future__ import annotations

import dataclasses

import pytest

from kl_patches.adapters.trl import fieldsets
from kl_patches.adapters.trl.versions import SUPPORT


@pytest.mark.parametrize("cls", ["GRPOConfig", "RLOOConfig"])
def test_installed_config_fields_are_recorded(cls: str) -> None:
    import transformers
    import trl

    version = SUPPORT.installed()
    assert version in fieldsets.RELEASES, version
    klass = getattr(trl, cls)
    own = {f.name for f in dataclasses.fields(klass)} - {
        f.name for f in dataclasses.fields(transformers.TrainingArguments)
    }
    recorded = fieldsets.fields(version, cls)
    assert recorded is not None
    assert own <= set(recorded) | fieldsets.TRAINING_ARGUMENTS, sorted(own - set(recorded))
    assert set(recorded) <= {f.name for f in dataclasses.fields(klass)}, sorted(
        set(recorded) - {f.name for f in dataclasses.fields(klass)}
    )
