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


@pytest.mark.library("trl")
@pytest.mark.parametrize("cls", ["GRPOConfig", "RLOOConfig"])
def test_a_flag_without_value_is_judged_as_the_installed_parser_does(cls: str) -> None:
    """``needs_value`` says, for every field of the installed config class, what the real
    HfArgumentParser does with ``--name`` given without a value and followed by a flag."""
    import trl
    from transformers import HfArgumentParser

    version = SUPPORT.installed()
    parser = HfArgumentParser((getattr(trl, cls),))
    checked = 0
    for action in parser._actions:
        name = next((o[2:] for o in action.option_strings if o.startswith("--")), None)
        if (
            name is None
            or name.startswith("no_")
            or not dataclasses.is_dataclass(getattr(trl, cls))
        ):
            continue
        judged = fieldsets.needs_value(version, name, (cls,))
        if judged is None:  # a TrainingArguments field of another transformers: not judged
            continue
        try:
            parser.parse_args_into_dataclasses([f"--{name}", "--output_dir", "out"])
            refused = False
        except SystemExit:
            refused = True
        except (ValueError, TypeError):  # accepted by the parser, refused by __post_init__
            refused = False
        assert judged[0] is refused, (name, judged, refused)
        checked += 1
    assert checked > 50
