"""The shared version guard: PEP 440 ranges, pre-releases outside, one force variable, and the
behaviour canaries (inside the range a failure is an error; above it all passing is one warning).
"""

from __future__ import annotations

import warnings

import pytest

from kl_patches.adapters.support import (
    FORCE_ENV,
    Canary,
    CanaryError,
    UnsupportedVersionError,
    UntestedVersionWarning,
    VersionSupport,
    run_canaries,
)

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


# ------------------------------------------------------------------ positions and canaries
@pytest.mark.parametrize(
    ("version", "position"),
    [("0.9.0", "inside"), ("0.9.1", "inside"), ("0.10.0", "above"), ("1.0", "above"),
     ("0.10.0rc1", "prerelease"), ("0.9.2.dev0", "prerelease"), ("0.8.9", "below"),
     ("not-a-version", "invalid")],
)  # fmt: skip
def test_position(version: str, position: str) -> None:
    assert SUPPORT.position(version) == position


def _canary(got: str | None, name: str = "lib.f") -> Canary:
    return Canary(name, "the sum of its inputs", lambda: got)


def _broken() -> str | None:
    raise KeyError("beta")


def test_canary_run_names_the_function_and_what_it_computed() -> None:
    assert _canary(None).run() is None
    assert _canary("3.0").run() == "lib.f computed 3.0; the adapter assumes the sum of its inputs"
    failure = Canary("lib.g", "a loss", _broken).run()
    assert failure is not None and failure.startswith("lib.g could not be run on a synthetic")
    assert "KeyError" in failure and "beta" in failure
    assert run_canaries([_canary(None), _canary("x", "a.b"), _canary(None)]) == [
        "a.b computed x; the adapter assumes the sum of its inputs"
    ]


def test_inside_the_range_a_failed_canary_is_an_error() -> None:
    assert SUPPORT.check("0.9.1", canaries=[_canary(None)]) == "0.9.1"
    with pytest.raises(CanaryError) as info:
        SUPPORT.check("0.9.1", canaries=[_canary(None), _canary("4.0", "lib.mean")])
    text = str(info.value)
    assert "1 behaviour canary failed on fake 0.9.1 (inside fake>=0.9.0,<0.10" in text
    assert "lib.mean computed 4.0; the adapter assumes the sum of its inputs" in text
    assert FORCE_ENV in text


def test_above_the_range_canaries_decide_with_one_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert SUPPORT.check("0.10.0", canaries=[_canary(None), _canary(None)]) == "0.10.0"
    assert [w.category for w in caught] == [UntestedVersionWarning]
    assert "fake 0.10.0 is newer than the tested range" in str(caught[0].message)
    with pytest.raises(UnsupportedVersionError, match=r"lib\.f computed 2\.0") as info:
        SUPPORT.check("0.10.0", canaries=[_canary("2.0")])
    assert not isinstance(info.value, CanaryError)
    assert "outside fake>=0.9.0,<0.10" in str(info.value)


def test_prerelease_and_below_refused_before_any_canary_runs() -> None:
    ran: list[str] = []

    def probe() -> str | None:
        ran.append("ran")
        return None

    for version in ("0.10.0rc1", "0.8.0"):
        with pytest.raises(UnsupportedVersionError, match=r"fake>=0\.9\.0,<0\.10"):
            SUPPORT.check(version, canaries=[Canary("lib.f", "x", probe)])
    assert ran == []


def test_forced_failures_are_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.warns(UserWarning, match=r"running anyway"):
        assert SUPPORT.check("0.9.1", force=True, canaries=[_canary("1")]) == "0.9.1"
    monkeypatch.setenv(FORCE_ENV, "1")
    with pytest.warns(UserWarning, match=r"lib\.f computed 1"):
        assert SUPPORT.check("0.8.0", canaries=[_canary("1")]) == "0.8.0"


def test_gate_then_verify_is_check() -> None:
    assert SUPPORT.gate("0.9.1") == "0.9.1"
    assert SUPPORT.verify("0.9.1", canaries=[_canary(None)]) == "0.9.1"
    with pytest.raises(UnsupportedVersionError):
        SUPPORT.gate("0.10.0rc1")


# ------------------------------------------------------------------ compat plans
_ALL_RELEASES = {
    "trl": "kl_patches.adapters.trl.versions:SWEEP_RELEASES",
    "verl": "kl_patches.adapters.verl.versions:RELEASES",
    "openrlhf": "kl_patches.adapters.openrlhf.versions:RELEASES",
}


@pytest.mark.parametrize("library", sorted(_ALL_RELEASES))
def test_sweep_plan_is_the_compat_plan_on_every_release_of_the_range(library: str) -> None:
    """``nox -s compat`` tests the matrix (oldest, change points, newest, plus releases only
    canaries can cover); ``nox -s compat_sweep`` the same tests on every release of the range,
    each step installing exactly its release and deselecting what the matrix step of the same
    release deselects."""
    import importlib
    import json

    module, name = _ALL_RELEASES[library].split(":")
    releases = tuple(getattr(importlib.import_module(module), name))
    versions = importlib.import_module(f"kl_patches.adapters.{library}.versions")
    matrix, sweep = versions.COMPAT_PLAN, versions.SWEEP_PLAN
    assert tuple(s.version for s in sweep.steps) == releases
    assert (sweep.base, sweep.tests, sweep.install_env) == (
        matrix.base,
        matrix.tests,
        matrix.install_env,
    )
    in_matrix = [s.version for s in matrix.steps]
    assert in_matrix == [v for v in releases if v in in_matrix]
    assert {releases[0], releases[-1]} <= set(in_matrix)
    by_version = {s.version: s for s in matrix.steps}
    for step in sweep.steps:
        assert ("--no-deps", f"{library}=={step.version}") in step.install  # after any pins
        assert step.reason and "\n" not in step.reason
        if step.version in by_version:
            assert step == by_version[step.version]
        else:
            assert step.reason.startswith("sweep only")
    assert json.loads(sweep.to_json())["steps"][-1]["version"] == releases[-1]
