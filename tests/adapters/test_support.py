"""The shared version guard: PEP 440 ranges, pre-releases outside, one force variable."""

from __future__ import annotations

import pytest

from kl_patches.adapters.support import FORCE_ENV, UnsupportedVersionError, VersionSupport

SUPPORT = VersionSupport("fake", ">=0.9.0,<0.10", ("0.9.1",), legacy_force_env="FAKE_FORCE")


@pytest.fixture(autouse=True)
def _no_force(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORCE_ENV, raising=False)
    monkeypatch.delenv("FAKE_FORCE", raising=False)


@pytest.mark.parametrize(
    ("version", "inside"),
    [("0.9.0", True), ("0.9.1", True), ("0.9.9.post1", True), ("0.10.0rc1", False),
     ("0.10.0", False), ("0.8.9", False), ("0.9.2.dev0", False), ("not-a-version", False)],
)  # fmt: skip
def test_contains(version: str, inside: bool) -> None:
    assert SUPPORT.contains(version) is inside


def test_check_names_range_tested_pip_and_force() -> None:
    assert SUPPORT.check("0.9.1") == "0.9.1"
    with pytest.raises(UnsupportedVersionError) as info:
        SUPPORT.check("0.10.0rc1")
    text = str(info.value)
    for part in (
        "fake>=0.9.0,<0.10",
        "tested: 0.9.1",
        "pip install 'fake>=0.9.0,<0.10'",
        FORCE_ENV,
    ):
        assert part in text
    assert isinstance(info.value, RuntimeError)


def test_force_argument_and_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SUPPORT.check("1.0", force=True) == "1.0"
    monkeypatch.setenv(FORCE_ENV, "1")
    assert SUPPORT.check("1.0") == "1.0"
    monkeypatch.delenv(FORCE_ENV)
    monkeypatch.setenv("FAKE_FORCE", "1")
    with pytest.warns(FutureWarning, match=FORCE_ENV):
        assert SUPPORT.check("1.0") == "1.0"


def test_not_installed_and_bad_definitions() -> None:
    with pytest.raises(UnsupportedVersionError, match="not installed"):
        VersionSupport("kl-patches-no-such-distribution", ">=1", ("1.0",)).check()
    with pytest.raises(ValueError, match="outside"):
        VersionSupport("fake", ">=1,<2", ("2.0",))
    with pytest.raises(ValueError, match="supported"):
        VersionSupport("fake", "1.0 or later", ())
