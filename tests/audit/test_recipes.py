"""Every shipped recipe (recipes/<library>/*.sh, *.yaml) is readable by the audit, and the
recipes named after k1-in-reward are unbiased; grid scripts get one trainer per configuration,
each with theory's verdict for the configuration it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import audit
from kl_patches.config import KLConfig
from kl_patches.experiments.demo import is_loop_data
from kl_patches.theory import verdict

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
NOT_LAUNCHES = {"verl/grid.yaml", "openrlhf/grid.txt"}
"""Recipe files that are data for another script (a grid's run list), not a launch."""
LAUNCHES = sorted(
    str(p.relative_to(RECIPES))
    for p in RECIPES.rglob("*")
    if p.suffix in (".sh", ".yaml", ".yml", ".overrides")
    and p.is_file()
    and str(p.relative_to(RECIPES)) not in NOT_LAUNCHES
)


def test_loop_data_files_are_marked() -> None:
    """The demo skips exactly the files listed here, through the mark on their first line."""
    marked = {
        str(p.relative_to(RECIPES)) for p in RECIPES.rglob("*") if p.is_file() and is_loop_data(p)
    }
    assert marked == NOT_LAUNCHES


def test_there_are_recipes_to_audit() -> None:
    assert LAUNCHES, f"no recipes found under {RECIPES}"


@pytest.mark.parametrize("name", LAUNCHES)
def test_recipe_is_read(name: str) -> None:
    entries = audit(RECIPES / name)
    assert entries, name
    for entry in entries:
        assert entry.reading.library == name.split("/")[0]
        if "k1_in_reward" in name:
            assert entry.status == "unbiased", (entry.origin, entry.status)
        loop = entry.origin.partition(" [name=")[2].rstrip("]")
        if loop:  # a grid: the loop value names the configuration it runs
            want = verdict(KLConfig.parse(loop, coef=entry.reading.config.coef))
            assert entry.reading.config.short_name == loop
            assert entry.verdict.gradient == want.gradient, entry.origin
