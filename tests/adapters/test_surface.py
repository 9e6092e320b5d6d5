"""The shared per-release records: one definition used by every adapter's compat data."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util

import pytest

from kl_patches.adapters import surface

LIBRARIES = ("verl", "openrlhf")


@pytest.mark.parametrize("library", LIBRARIES)
def test_compat_data_uses_the_shared_records(library: str) -> None:
    compat = importlib.import_module(f"kl_patches.adapters.{library}.compat")
    assert compat.Symbol is surface.Symbol
    assert compat.ChangePoint is surface.ChangePoint
    assert compat.InstallRecipe is surface.InstallRecipe
    symbols = [s for release in compat.SURFACE.values() for s in release]
    assert symbols and all(type(s) is surface.Symbol for s in symbols)
    assert compat.CHANGE_POINTS and all(
        type(c) is surface.ChangePoint for c in compat.CHANGE_POINTS
    )
    assert compat.INSTALL and all(type(r) is surface.InstallRecipe for r in compat.INSTALL)


def test_records_are_frozen_and_default_to_no_importers() -> None:
    sym = surface.Symbol("f", "pkg.mod", 3, "(x)", "0123456789ab")
    assert (sym.importers, sym.attribute_users, sym.reexports) == ((), (), ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        sym.line = 4  # type: ignore[misc]


def test_every_field_is_documented() -> None:
    source = importlib.util.find_spec("kl_patches.adapters.surface")
    assert source is not None and source.origin is not None
    with open(source.origin, encoding="utf-8") as fh:
        text = fh.read()
    for cls in (surface.Symbol, surface.ChangePoint, surface.InstallRecipe):
        for field in dataclasses.fields(cls):
            after = text.split(f"    {field.name}: ", 1)[1].split("\n", 2)[1]
            assert after.strip().startswith('"""'), (cls.__name__, field.name)
