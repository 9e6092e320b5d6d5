"""verl patch-surface data: internally consistent, and consistent with the patch and history.

The change points are recomputed from :data:`SURFACE` (every field but the line number) and must
equal :data:`CHANGE_POINTS`; the wrapped functions and by-name importers that
``kl_patches.adapters.verl.patch`` names for 0.9.1 must match the surface read from the 0.9.1
wheel. Runs with torch, packaging and pytest only (nothing imports verl).
"""

from __future__ import annotations

import dataclasses
import itertools
import os

from packaging.version import Version

from kl_patches.adapters.verl import compat, versions
from kl_patches.adapters.verl.history import HISTORY
from kl_patches.adapters.verl.patch import KNOWN_IMPORTERS, SOURCES
from kl_patches.adapters.verl.versions import SUPPORTED_RANGE

os.environ.setdefault("HF_HUB_OFFLINE", "1")

_FIELDS = ("module", "signature", "body_sha", "importers", "attribute_users", "reexports")


def _by_name(release: str) -> dict[str, compat.Symbol]:
    return {s.name: s for s in compat.SURFACE[release]}


NEW_IN = {"ppo_loss": "0.6.0", "kl_penalty_forward": "0.6.0"}
"""Tracked functions that the oldest releases do not define, and the first release that does."""


def test_releases_cover_04_to_091_and_every_target_once() -> None:
    """SURFACE has exactly RELEASES (ascending, all in the history) and each TARGET once in each
    release that defines it (every one from 0.6.0)."""
    assert list(compat.RELEASES) == sorted(compat.RELEASES, key=Version)
    assert set(compat.RELEASES) <= set(HISTORY.releases)
    assert list(compat.SURFACE) == list(compat.RELEASES)
    for release, symbols in compat.SURFACE.items():
        expected = [
            t for t in compat.TARGETS if Version(release) >= Version(NEW_IN.get(t, "0.4.0"))
        ]
        assert sorted(s.name for s in symbols) == sorted(expected), release


def test_change_points_are_exactly_the_surface_differences() -> None:
    """Recompute (release, name, changed fields) from SURFACE; it must equal CHANGE_POINTS (a
    function new in a release lists its non-empty fields)."""
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
    listed = {(c.release, c.name, c.fields) for c in compat.CHANGE_POINTS}
    assert listed == derived
    assert all(c.reason and "\n" not in c.reason for c in compat.CHANGE_POINTS)


def test_patch_sources_and_importers_match_the_091_surface() -> None:
    """patch.SOURCES' homes are the 0.9.1 definers; KNOWN_IMPORTERS equals the 0.9.1 importers."""
    surface = _by_name("0.9.1")
    for module, attr in SOURCES:
        assert surface[attr].module == module
    wrapped = {attr for _, attr in SOURCES}
    from_surface = {(m, name) for name in wrapped for m in surface[name].importers}
    assert set(KNOWN_IMPORTERS) == from_surface


def test_supported_range_covers_every_release_and_each_change_point_is_tested() -> None:
    """versions.SUPPORTED_RANGE holds every surveyed release (issue 14 widened it from 0.9.x,
    issue 36 from 0.7.0); every release where the surface changes is a change point of the
    patch's path (in the compat matrix) or a surface-only change (in the sweep), never both;
    versions' signatures and per-release importers equal the surface's for each function the
    patch wraps where it wraps it (0.6's workers.roles ppo_loss is another function)."""
    low, high = (Version(v.lstrip("<>=")) for v in SUPPORTED_RANGE)
    inside = [r for r in compat.RELEASES if low <= Version(r) < high]
    assert inside == list(compat.RELEASES) == list(versions.RELEASES)
    changed = {c.release for c in compat.CHANGE_POINTS}
    points, surface_only = dict(versions.CHANGE_POINTS), dict(versions.SURFACE_ONLY)
    assert changed == set(points) | set(surface_only) and not set(points) & set(surface_only)
    assert set(points) | {inside[0], inside[-1]} == set(versions.COMPAT_MATRIX)
    assert [s.version for s in versions.SWEEP_PLAN.steps] == inside
    assert [s.version for s in versions.COMPAT_PLAN.steps] == list(versions.COMPAT_MATRIX)
    for release in inside:
        surface = _by_name(release)
        wrapped = [
            (module, name)
            for module, name in SOURCES
            if name in surface and surface[name].module == module
        ]
        assert {n for _, n in wrapped} >= {"apply_kl_penalty", "compute_advantage"}, release
        for _, name in wrapped:
            assert surface[name].signature in versions.SIGNATURES[name], (release, name)
        from_surface = {(m, name) for _, name in wrapped for m in surface[name].importers}
        assert set(versions.IMPORTERS[release]) == from_surface, release

    def strip(release: str) -> set[tuple[object, ...]]:
        return {
            dataclasses.astuple(dataclasses.replace(s, line=0)) for s in compat.SURFACE[release]
        }

    # Releases between two change points differ in line numbers only.
    for before, after in itertools.pairwise(inside):
        assert (strip(before) == strip(after)) == (after not in changed), after


def test_default_loss_site_agrees_with_history() -> None:
    """The module that computes the KL loss by default is the same in both data sets."""
    assert list(compat.DEFAULT_LOSS_SITE) == list(compat.RELEASES)
    for release, site in compat.DEFAULT_LOSS_SITE.items():
        module = str(HISTORY.at(release)["loss.default_site"]).split(".DataParallelPPOActor")[0]
        assert module in site, release
    # Before 0.8.0 the default site binds kl_penalty by name: a ppo_loss wrapper cannot reach it.
    for release in compat.RELEASES[: compat.RELEASES.index("0.8.0")]:
        assert "verl.workers.actor.dp_actor" in _by_name(release)["kl_penalty"].importers


def test_plus_suffix_fix_is_a_kl_penalty_change_point_in_history_too() -> None:
    """kl_penalty's body changes at 0.8.0 in the surface; the history dates the '+' fix there."""
    assert ("0.8.0", "kl_penalty") in {(c.release, c.name) for c in compat.CHANGE_POINTS}
    assert "0.8.0" in HISTORY.change_points("estimator.plus_suffix")


def test_pending_trainer_utils_move() -> None:
    """PR #7237 moves both reward-side functions; compute_advantage's source is unchanged."""
    move = compat.PENDING_TRAINER_UTILS
    assert len(move.commit) == 40 and move.state.startswith("open")
    moved = {s.name: s for s in move.symbols}
    assert set(moved) == {"apply_kl_penalty", "compute_advantage"}
    assert {s.module for s in move.symbols} == {"verl.trainer.ppo.trainer_utils"}
    current = _by_name("0.9.1")
    assert moved["compute_advantage"].body_sha == current["compute_advantage"].body_sha
    assert moved["compute_advantage"].signature == current["compute_advantage"].signature
    assert moved["apply_kl_penalty"].signature == current["apply_kl_penalty"].signature
    # ray_trainer itself becomes an importer: patching only ray_trainer reaches no trainer.
    for symbol in move.symbols:
        assert "verl.trainer.ppo.ray_trainer" in symbol.importers


def test_install_recipes_put_cpu_torch_first() -> None:
    """Each measured recipe is for a release in range and installs torch==2.13.0 first."""
    assert compat.INSTALL, "no measured recipe"
    for recipe in compat.INSTALL:
        assert recipe.version in compat.RELEASES
        assert "torch==2.13.0" in recipe.commands[0]
        assert recipe.seconds > 0 and recipe.imports
