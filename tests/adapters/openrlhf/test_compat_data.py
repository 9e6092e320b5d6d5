"""OpenRLHF patch-surface data: internally consistent, and consistent with the adapter.

The change points are recomputed from :data:`SURFACE` and :data:`FLAG_SURFACE` and must equal
:data:`CHANGE_POINTS`; the adapter's ``patch.TARGETS`` and ``translate.FLAGS`` must match what the
0.11.2 wheel ships; the flag spellings must agree with the history. Runs with torch, packaging
and pytest only (nothing imports OpenRLHF).
"""

from __future__ import annotations

import os

from packaging.version import Version

from kl_patches.adapters.openrlhf import compat
from kl_patches.adapters.openrlhf.history import HISTORY
from kl_patches.adapters.openrlhf.patch import TARGETS
from kl_patches.adapters.openrlhf.translate import FLAGS
from kl_patches.adapters.openrlhf.versions import DOTTED_SINCE

os.environ.setdefault("HF_HUB_OFFLINE", "1")

_FIELDS = ("module", "signature", "body_sha", "importers", "attribute_users", "reexports")


def _by_name(release: str) -> dict[str, compat.Symbol]:
    return {s.name: s for s in compat.SURFACE[release]}


def test_releases_cover_080_to_0112() -> None:
    """SURFACE and FLAG_SURFACE have exactly RELEASES, ascending and part of the history."""
    assert list(compat.RELEASES) == sorted(compat.RELEASES, key=Version)
    assert set(compat.RELEASES) <= set(HISTORY.releases)
    assert list(compat.SURFACE) == list(compat.RELEASES) == list(compat.FLAG_SURFACE)
    for release in compat.RELEASES:
        names = set(_by_name(release))
        expected = set(compat.TARGETS)
        if Version(release) < Version("0.10.3"):
            expected.discard("aggregate_loss")
        assert names == expected, release


def test_function_change_points_are_exactly_the_surface_differences() -> None:
    """(release, name, changed fields) recomputed from SURFACE equals the function rows."""
    derived = set()
    for before, after in zip(compat.RELEASES, compat.RELEASES[1:], strict=False):
        old, new = _by_name(before), _by_name(after)
        for name in compat.TARGETS:
            if name not in new:
                continue
            if name not in old:
                changed = tuple(f for f in _FIELDS if getattr(new[name], f) not in ((), ""))
            else:
                changed = tuple(
                    f for f in _FIELDS if getattr(old[name], f) != getattr(new[name], f)
                )
            if changed:
                derived.add((after, name, changed))
    listed = {(c.release, c.name, c.fields) for c in compat.CHANGE_POINTS if ":" not in c.name}
    assert listed == derived


def test_flag_change_points_are_exactly_the_flag_surface_differences() -> None:
    """The 0.10.2 rename touches every flag that had a flat name; then two flags are added."""
    derived: dict[str, set[tuple[str, tuple[str, ...]]]] = {}
    for before, after in zip(compat.RELEASES, compat.RELEASES[1:], strict=False):
        for dotted, (spelling, default) in compat.FLAG_SURFACE[after].items():
            old_spelling, old_default = compat.FLAG_SURFACE[before][dotted]
            changed = tuple(
                f
                for f, a, b in (
                    ("spelling", old_spelling, spelling),
                    ("default", old_default, default),
                )
                if a != b
            )
            if changed:
                derived.setdefault(after, set()).add((dotted, changed))
    renamed = {(f.dotted, ("spelling",)) for f in FLAGS if f.flat}
    assert derived.pop("0.10.2") == renamed
    listed = {
        (c.release, c.name.removeprefix("flag:"), c.fields)
        for c in compat.CHANGE_POINTS
        if c.name.startswith("flag:") and c.name != "flag:*"
    }
    assert {(r, d, f) for r, rows in derived.items() for d, f in rows} == listed


def test_patch_targets_exist_in_0112() -> None:
    """Each patch.TARGETS entry is a method defined there, or a by-name import there."""
    surface = _by_name("0.11.2")
    for target in TARGETS:
        if target.owner is None:
            assert target.module in surface[target.attr].importers, target.name
        else:
            assert surface[f"{target.owner}.{target.attr}"].module == target.module


def test_flags_module_matches_the_flag_surface() -> None:
    """translate.FLAGS defaults are 0.11.2's; flat names are 0.10.1.post2's; dotted from 0.10.2."""
    latest, flat = compat.FLAG_SURFACE["0.11.2"], compat.FLAG_SURFACE["0.10.1.post2"]
    for flag in FLAGS:
        spelling, default = latest[flag.dotted]
        assert spelling == flag.dotted and default == flag.default, flag.dotted
        assert flat[flag.dotted][0] == flag.flat, flag.dotted
    first_dotted = next(
        r
        for r in compat.RELEASES
        if compat.FLAG_SURFACE[r]["algo.kl.init_coef"][0] == "algo.kl.init_coef"
    )
    assert Version(first_dotted) == Version(DOTTED_SINCE)


def test_unbiased_gradient_release_agrees_with_history() -> None:
    """The flag first parses in 0.11.1 in both data sets."""
    first = next(
        r for r in compat.RELEASES if compat.FLAG_SURFACE[r]["algo.kl.unbiased_gradient"][0]
    )
    assert first == compat.UNBIASED_GRADIENT_SINCE == "0.11.1"
    assert HISTORY.change_points("flag.algo.kl.unbiased_gradient") == (first,)


def test_flag_spellings_agree_with_history_in_range() -> None:
    """Where the history tracks a flag, its spelling per release equals FLAG_SURFACE's."""
    tracked = {c.key for c in HISTORY.changes if c.key.startswith("flag.")}
    compared = 0
    for release in compat.RELEASES:
        state = HISTORY.at(release)
        for dotted, (spelling, _) in compat.FLAG_SURFACE[release].items():
            if f"flag.{dotted}" in tracked:
                assert state.get(f"flag.{dotted}") == spelling, (release, dotted)
                compared += 1
    assert compared >= 10 * 15


def test_install_recipes_put_cpu_torch_first() -> None:
    """Each measured recipe is for a release in range and installs torch==2.13.0 first."""
    assert compat.INSTALL, "no measured recipe"
    for recipe in compat.INSTALL:
        assert recipe.version in compat.RELEASES
        assert "torch==2.13.0" in recipe.commands[0]
        assert recipe.seconds > 0 and recipe.imports
