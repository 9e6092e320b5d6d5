"""``kl-patches smoke``: what it says before anything runs (the runs themselves are tested in
each library's session: ``tests/adapters/<library>/test_smoke.py``)."""

from __future__ import annotations

import importlib.util

import pytest

from kl_patches.cli import smoke
from kl_patches.experiments.cpu import trial


@pytest.mark.parametrize("library", ["verl", "openrlhf"])
def test_a_missing_library_says_what_to_install(
    library: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if importlib.util.find_spec(library) is not None:
        pytest.skip(f"{library} is installed here: its session runs the trial")
    assert smoke.main([library, "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one line, before anything is built or launched
    assert err[0].startswith(f"kl-patches smoke: smoke {library} needs ")
    assert trial.module(library).INSTALL in err[0]
    assert f"missing: {trial.module(library).IMPORTS[library]}" in err[0]


def test_every_trial_dependency_is_named_by_its_import() -> None:
    for library in trial.NAMES:
        imports = trial.module(library).IMPORTS
        assert library in imports
        for name in imports:  # each import's install name appears in the install line
            install = imports[name].split(" ")[0].split("==")[0]
            assert install.lower() in trial.module(library).INSTALL.lower(), (library, name)


@pytest.mark.parametrize("library", smoke.LIBRARIES)
def test_the_estimate_grows_with_the_steps(library: str) -> None:
    short, long = smoke.estimate(library, 1), smoke.estimate(library, 60)
    assert short != long and long.startswith("about ") and long.endswith(" minutes")


def test_an_unknown_library_names_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert smoke.main(["deepspeed"]) == 2
    assert "'trl', 'verl', 'openrlhf'" in capsys.readouterr().err


def test_the_step_table_has_a_row_per_kl_metric_and_a_column_per_step() -> None:
    steps = {1: {"actor/reward_kl_penalty": "0.0", "critic/score/mean": "0.25", "loss": 1.0},
             2: {"actor/reward_kl_penalty": "0.0125", "critic/score/mean": "0.5"}}  # fmt: skip
    lines = smoke.step_table(steps, "title").splitlines()
    header = next(line for line in lines if "metric" in line).split()
    assert header == ["metric", "step", "1", "step", "2"]
    rows = {line.split()[0]: line for line in lines if "/" in line}
    assert set(rows) == {"critic/score/mean", "actor/reward_kl_penalty"}  # "loss": no KL
    assert "0.0125" in rows["actor/reward_kl_penalty"]
