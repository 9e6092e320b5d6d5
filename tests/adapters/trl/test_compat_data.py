"""The TRL 1.x patch-surface data is consistent, and says what the adapter assumes.

Checks ``kl_patches.adapters.trl.compat`` without TRL: releases ascending, every change point a
known release and exactly the releases where a signature or a surface row changes, every stored
signature parses as a ``def`` and keeps the parameters the hooks pass positionally, the surface
agrees with the KL history and with versions.py at 1.16, the install recipes cover every 1.x
release once. With ``KL_PATCHES_TRL_WHEELS`` set (unpacked wheels, ``<dir>/<version>/trl/...``)
the whole table is re-read from the releases.
"""

from __future__ import annotations

import ast
import itertools
import os
import re

import pytest
from packaging.version import Version

from kl_patches.adapters.trl import compat
from kl_patches.adapters.trl.history import HISTORY, RELEASES
from kl_patches.adapters.trl.patch import HOOKED
from kl_patches.adapters.trl.versions import GRPO_DEFAULTS, RLOO_DEFAULTS

os.environ.setdefault("HF_HUB_OFFLINE", "1")

_WHEELS = os.environ.get("KL_PATCHES_TRL_WHEELS", "")
_METHODS = [f"{cls}.{name}" for cls in compat.TRAINER_FILES for name in compat.HOOKED_METHODS]


def _params(text: str) -> ast.arguments:
    function = ast.parse(f"def f{text}:\n    pass").body[0]
    assert isinstance(function, ast.FunctionDef)
    return function.args


def test_releases_are_every_1x_release_in_order() -> None:
    versions = [Version(v) for v in compat.RELEASES_1X]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert tuple(v for v in RELEASES if Version(v) >= Version("1.0.0")) == compat.RELEASES_1X
    assert compat.SURFACE.releases == compat.RELEASES_1X


def test_hooked_methods_are_the_patched_ones() -> None:
    assert compat.HOOKED_METHODS == HOOKED


@pytest.mark.parametrize("method", _METHODS)
def test_signature_steps_parse_and_change(method: str) -> None:
    steps = compat.SIGNATURES[method]
    assert steps[0][0] == compat.RELEASES_1X[0]
    sinces = [Version(since) for since, _ in steps]
    assert sinces == sorted(sinces) and all(since in compat.RELEASES_1X for since, _ in steps)
    texts = [text for _, text in steps]
    assert all(a != b for a, b in itertools.pairwise(texts)), "a step must change"
    path = compat.TRAINER_FILES[method.split(".")[0]]
    for since, text in steps:
        args = _params(text)
        assert args.args[0].arg == "self"
        assert re.fullmatch(re.escape(path) + r":\d+", compat.SIGNATURE_SOURCES[(method, since)])
    assert set(compat.SIGNATURES) == set(_METHODS)


@pytest.mark.parametrize("version", compat.RELEASES_1X)
def test_signatures_keep_what_the_hooks_pass(version: str) -> None:
    """The positional layout hooks.py and patching.py rely on holds in every 1.x release."""
    for cls in compat.TRAINER_FILES:
        init = [a.arg for a in _params(compat.signature_at(f"{cls}.__init__", version)).args]
        assert init[:4] == ["self", "model", "reward_funcs", "args"]  # patching's init wrapper
        loss = _params(compat.signature_at(f"{cls}._compute_loss", version))
        assert [a.arg for a in loss.args] == ["self", "model", "inputs"]
        score = _params(compat.signature_at(f"{cls}._generate_and_score_completions", version))
        assert [a.arg for a in score.args] == ["self", "inputs"]
        rewards = _params(compat.signature_at(f"{cls}._calculate_rewards", version))
        assert [a.arg for a in rewards.args][1:] == [
            "inputs",
            "prompts",
            "completions",
            "completion_ids_list",
        ]
        logps = _params(compat.signature_at(f"{cls}._get_per_token_logps_and_entropies", version))
        names = [a.arg for a in logps.args]
        assert names[:2] == ["self", "model"]
        if logps.vararg is None:  # 1.14.x GRPO forwards *args unchanged
            assert names[2:6] == ["input_ids", "attention_mask", "logits_to_keep", "batch_size"]
        else:
            assert cls == "GRPOTrainer" and Version(version) in (
                Version("1.14.0"),
                Version("1.14.1"),
                Version("1.14.2"),
            )


def test_signature_at_follows_the_steps() -> None:
    method = "GRPOTrainer._get_per_token_logps_and_entropies"
    assert "*args" in compat.signature_at(method, "1.14.2")
    assert "*args" not in compat.signature_at(method, "1.15.0")
    assert compat.signature_at(method, "1.6.0") == compat.signature_at(method, "1.1.0")
    with pytest.raises(KeyError):
        compat.signature_at(method, "0.29.1")


def test_change_points_are_exactly_where_the_surface_changes() -> None:
    points = [since for since, _ in compat.CHANGE_POINTS]
    assert [Version(v) for v in points] == sorted(Version(v) for v in set(points))
    assert all(v in compat.RELEASES_1X for v in points)
    assert compat.RELEASES_1X[0] not in points and compat.RELEASES_1X[-1] not in points
    signature_steps = {since for steps in compat.SIGNATURES.values() for since, _ in steps[1:]}
    expected = set(compat.SURFACE.change_points()) | signature_steps
    assert set(points) == expected - {compat.RELEASES_1X[-1]}  # the newest is in the matrix anyway
    for _, reason in compat.CHANGE_POINTS:
        assert reason and "\n" not in reason


def test_surface_rows_are_well_formed() -> None:
    idents = [(row.key, row.since) for row in compat.SURFACE.changes]
    assert len(idents) == len(set(idents))
    assert set(compat.SURFACE_EVIDENCE) == set(idents)
    assert set(compat.SURFACE_ANCHORS) <= set(idents) and set(compat.SURFACE_BEFORE) <= set(idents)
    for row in compat.SURFACE.changes:
        assert row.since in compat.RELEASES_1X
        value = row.value
        assert value is None or isinstance(value, bool | int | float | str | tuple), value
        if isinstance(value, tuple):  # names, never a string split into characters
            assert all(re.fullmatch(r"[a-z_]{2,}", item) for item in value), value
        assert re.fullmatch(r"trl/[\w/]+\.py:\d+", row.source), row.source
        re.compile(compat.SURFACE_EVIDENCE[(row.key, row.since)])


@pytest.mark.parametrize("version", compat.RELEASES_1X)
def test_surface_agrees_with_the_history(version: str) -> None:
    surface, history = compat.SURFACE.at(version), HISTORY.at(version)
    for key in (
        "grpo.global_token_normalizer",
        "grpo.num_items_in_batch",
        "grpo.kl_aggregation.luspo",
        "grpo.old_logps_when",
    ):
        assert surface[key] == history[key], key
    pairs = {
        "grpo.config.beta": "grpo.beta_default",
        "grpo.config.use_bias_correction_kl": "grpo.use_bias_correction_kl_default",
        "grpo.config.max_completion_length": "grpo.max_completion_length_default",
        "grpo.config.loss_type": "grpo.loss_type_default",
        "rloo.config.beta": "rloo.kl_coef_default",
        "rloo.config.max_completion_length": "rloo.max_completion_length_default",
    }
    for key, other in pairs.items():
        assert surface[key] == history[other], key
    assert surface["grpo.liger_bypasses_compute_loss"] == (
        history["grpo.fused_loss_flag"] is not None
    )


def test_surface_at_1_16_is_what_native_py_assumes() -> None:
    now = compat.SURFACE.at("1.16.0")
    for field, value in GRPO_DEFAULTS.items():
        if f"grpo.config.{field}" in now:
            assert now[f"grpo.config.{field}"] == value, field
    for field, value in RLOO_DEFAULTS.items():
        if f"rloo.config.{field}" in now:
            assert now[f"rloo.config.{field}"] == value, field
    assert (
        now["grpo.advantages"]
        == now["rloo.advantages"]
        == ("nan-aware (advantages.py copies this)")
    )
    assert "clamp" in str(now["grpo.global_token_normalizer"])  # hooks.grpo_loss_scaling
    assert now["grpo.config.use_liger_loss"] is None  # the field hooks.validate reads is gone
    nanstd = _params(str(now["nanstd"]))  # trl.trainer.utils.nanstd(tensor, dim=None, ...)
    assert [a.arg for a in nanstd.args] == ["tensor", "dim", "keepdim"]


def test_install_recipes_cover_every_1x_release_once() -> None:
    ranges = [
        r.releases for r in compat.INSTALL_RECIPES if re.fullmatch(r"[\d.]+-[\d.]+", r.releases)
    ]
    covered: list[str] = []
    for text in ranges:
        low, high = (Version(v) for v in text.split("-"))
        covered += [v for v in compat.RELEASES_1X if low <= Version(v) <= high]
    assert sorted(covered, key=Version) == list(compat.RELEASES_1X)
    for recipe in compat.INSTALL_RECIPES:
        assert recipe.commands[0] == "pip install torch==2.13.0"  # CPU wheel first


@pytest.mark.wheels  # selected by nox -s record_check, deselected elsewhere
def test_everything_against_the_released_wheels() -> None:
    assert _WHEELS, "set KL_PATCHES_TRL_WHEELS to unpacked trl wheels (nox -s record_check)"
    assert compat.check(_WHEELS) == []
