"""The recorded release data: every adapter's files load, cover the history's releases, and
answer name-set questions (which releases accept a set of names) the way the releases do.

The facts asserted here are the release notes' own (a field or flag that appeared in a known
release), so a wrong recording shows as a wrong first release.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kl_patches.adapters import openrlhf, releases, trl, verl  # noqa: F401  (packages load)
from kl_patches.adapters.openrlhf import flagsets
from kl_patches.adapters.openrlhf.history import HISTORY as OPENRLHF_HISTORY
from kl_patches.adapters.trl import fieldsets
from kl_patches.adapters.trl.history import HISTORY as TRL_HISTORY
from kl_patches.adapters.verl import keysets
from kl_patches.adapters.verl.history import HISTORY as VERL_HISTORY

HISTORIES = {"trl": TRL_HISTORY, "verl": VERL_HISTORY, "openrlhf": OPENRLHF_HISTORY}


@pytest.mark.parametrize("library", sorted(HISTORIES))
def test_every_history_release_is_recorded_in_order(library: str) -> None:
    data = releases.recording(f"kl_patches.adapters.{library}")
    assert data.library == library
    assert set(HISTORIES[library].releases) <= set(data.releases)
    assert list(data.releases) == sorted(data.releases, key=releases.Version)
    for record in data.records:
        assert record.library == library


def test_the_files_are_named_by_their_release_and_in_the_current_format() -> None:
    for library in HISTORIES:
        folder = resources.files(f"kl_patches.adapters.{library}").joinpath("data")
        for item in folder.iterdir():
            if item.name.endswith(".json"):
                data = json.loads(item.read_text(encoding="utf-8"))
                assert data["format"] == releases.FORMAT
                assert item.name == f"{data['release']}.json"


def test_an_unrecorded_release_is_refused_with_the_recorded_ones() -> None:
    with pytest.raises(ValueError, match=r"trl release '0\.1\.0' is not recorded; choose one of"):
        fieldsets.data().at("0.1.0")


def test_trl_fields_first_release() -> None:
    # use_bias_correction_kl appeared in 0.26.0; importance_sampling_level in 0.20.0.
    accepting = fieldsets.releases_accepting({"use_bias_correction_kl", "beta"})
    assert accepting[0] == "0.26.0" and accepting[-1] == fieldsets.data().releases[-1]
    assert fieldsets.releases_accepting({"importance_sampling_level"})[0] == "0.20.0"
    # max_prompt_length left GRPOConfig in 0.28.0: only older releases accept it.
    old = fieldsets.releases_accepting({"max_prompt_length"})
    assert old[0] == "0.14.0" and old[-1] == "0.27.2"
    # transformers' own fields are accepted by every release.
    assert fieldsets.releases_accepting({"learning_rate", "seed"}) == fieldsets.data().releases
    assert fieldsets.releases_accepting({"no_such_field"}) == ()


def test_trl_defaults_are_recorded_with_their_line() -> None:
    beta_014 = fieldsets.data().at("0.14.0").entry("GRPOConfig", "beta")
    beta_019 = fieldsets.data().at("0.19.0").entry("GRPOConfig", "beta")
    assert beta_014 is not None and beta_019 is not None
    assert beta_014["default"] == 0.04 and beta_019["default"] == 0.0
    # The history's rows cite the same lines.
    assert beta_014["at"] == TRL_HISTORY.latest("grpo.beta_default", "0.14.0").source  # type: ignore[union-attr]
    assert beta_019["at"] == TRL_HISTORY.latest("grpo.beta_default", "0.19.0").source  # type: ignore[union-attr]


def test_verl_keys_first_release_and_defaults() -> None:
    assert keysets.releases_accepting({"algorithm.use_kl_in_reward"})[0] == "0.4.0"
    assert keysets.default("0.1", "algorithm.kl_ctrl.kl_coef") == 0.001
    assert keysets.default("0.4.0", "algorithm.use_kl_in_reward") is False
    with pytest.raises(KeyError):
        keysets.default("0.1", "algorithm.use_kl_in_reward")
    with pytest.raises(KeyError):  # a mapping has no default
        keysets.default("0.9.1", "algorithm")


def test_openrlhf_flags_first_release_choices_and_defaults() -> None:
    assert flagsets.releases_accepting({"algo.kl.estimator"})[0] == "0.10.2"
    assert flagsets.releases_accepting({"kl_estimator"})[0] == "0.6.0.post1"
    assert flagsets.releases_accepting({"algo.kl.unbiased_gradient"})[0] == "0.11.1"
    # --kl_estimator left in the 0.10.2 rename: a launch using it dates to 0.6.0.post1-0.10.1.post2
    assert flagsets.releases_accepting({"kl_estimator"})[-1] == "0.10.1.post2"
    entry = flagsets.entry("0.11.2", "algo.kl.estimator")
    assert entry is not None and entry["default"] == "k1"
    assert entry["choices"] == ["k1", "k2", "k3"]
    assert flagsets.entry("0.5.0", "algo.kl.estimator") is None


def test_symbols_load_as_surface_symbols() -> None:
    record = releases.recording("kl_patches.adapters.verl").at("0.9.1")
    symbol = record.symbol("apply_kl_penalty")
    assert symbol is not None and symbol.module == "verl.trainer.ppo.ray_trainer"
    assert symbol.signature.startswith("apply_kl_penalty(")
    old = releases.recording("kl_patches.adapters.openrlhf").at("0.10.0")
    assert old.symbol("aggregate_loss") is None  # new in 0.10.3
    with pytest.raises(KeyError):
        old.symbol("never_recorded")


def test_parse_refuses_another_format() -> None:
    with pytest.raises(ValueError, match="format"):
        releases.parse(json.dumps({"format": 99}))


def test_openrlhf_history_flag_rows_agree_with_the_recorded_options() -> None:
    """The history's ``flag.`` / ``default.`` / ``choices.`` rows (reviewed, citing the line of
    the ``--option``) state what the recording read: the same value at the same line. The one
    reading the recording cannot make: ``--use_kl_estimator_k3`` (a store_true switch) is the
    estimator flag with default k1 and choices (k1, k3)."""
    interpreted = {("0.5.0", "default.algo.kl.estimator"), ("0.5.0", "choices.algo.kl.estimator")}
    compared = 0
    for change in OPENRLHF_HISTORY.changes:
        kind, _, name = change.key.partition(".")
        if kind not in ("flag", "default", "choices"):
            continue
        spelling = OPENRLHF_HISTORY.at(change.since).get(f"flag.{name}")
        entry = flagsets.entry(change.since, str(spelling))
        assert entry is not None, change
        assert entry["at"] == change.source, change
        if kind == "flag" or (change.since, change.key) in interpreted:
            continue
        value = entry["default" if kind == "default" else "choices"]
        assert (tuple(value) if isinstance(value, list) else value) == change.value, change
        compared += 1
    assert compared >= 25


def test_verl_history_default_rows_agree_with_the_recorded_keys() -> None:
    """Each ``default.<key>`` row of the verl history equals the recorded composed default of
    that release (a None row: the key is gone, or its default is null)."""
    compared = 0
    for change in VERL_HISTORY.changes:
        if not change.key.startswith("default."):
            continue
        key = change.key.removeprefix("default.")
        if change.value is None and key not in keysets.keys(change.since):
            pass
        else:
            value = keysets.default(change.since, key)
            assert value == change.value and type(value) is type(change.value), change
        compared += 1
    assert compared >= 20


def test_trl_history_default_rows_agree_with_the_recorded_fields() -> None:
    """The TRL history's ``grpo.<field>_default`` / ``rloo.<field>_default`` rows and the
    compat surface's ``grpo.config.<field>`` rows state the recorded field default at the
    recorded line; a removal row (``path:0``) names a field the release does not have. Named
    readings the recording cannot make: RLOO's ``token_level_kl`` kept but ignored in 0.22-0.24,
    and ``update_epochs`` (``num_ppo_epochs`` in 0.14, ``num_iterations`` from 0.22)."""
    from kl_patches.adapters.trl.compat import SURFACE

    readings = {
        ("0.22.0", "rloo.token_level_kl_default"),
        ("0.14.0", "rloo.update_epochs_default"),
        ("0.22.0", "rloo.update_epochs_default"),
    }
    compared = 0
    for history, marker in ((TRL_HISTORY, "_default"), (SURFACE, "config.")):
        for change in history.changes:
            trainer, _, rest = change.key.partition(".")
            if trainer not in ("grpo", "rloo") or (change.since, change.key) in readings:
                continue
            if marker == "_default" and rest.endswith(marker) and "." not in rest:
                field = rest.removesuffix(marker)
            elif marker == "config." and rest.startswith(marker):
                field = rest.removeprefix(marker)
            else:
                continue
            cls = "GRPOConfig" if trainer == "grpo" else "RLOOConfig"
            entry = fieldsets.data().at(change.since).entry(cls, field)
            if change.source.endswith(":0"):
                assert entry is None, change
                continue
            assert entry is not None and entry["at"] == change.source, change
            value = entry.get("default")
            assert value == change.value and type(value) is type(change.value), change
            compared += 1
    assert compared >= 50
