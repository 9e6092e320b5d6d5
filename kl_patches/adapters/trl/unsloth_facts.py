"""What unsloth does to GRPO's KL, release by release, and what an unsloth launch runs.

Unsloth (``import unsloth`` on a GPU machine, or ``PatchFastRL``) generates
``UnslothGRPOTrainer`` from TRL's source into ``unsloth_compiled_cache`` and rebinds
``trl.GRPOTrainer`` and ``trl.GRPOConfig`` to it. Its ``compute_loss`` never calls TRL's
``_compute_loss``: the loss is ``grpo_compute_loss`` of ``unsloth_zoo.rl_replacements``, copied
into the generated module. The KL there is always k3 in the loss at ``beta``, aggregated like the
``loss_type`` (the same aggregations as TRL), with these differences from TRL, each a reviewed row
of ``data/unsloth/history.json`` citing the released wheel's ``file:line``:

* defaults: ``beta`` is TRL's until unsloth 2025.6.4, 0.001 from 2025.6.5, and from 2026.9.12
  0.0 when the loss type is dapo or dr_grpo, else 0.001; ``loss_type`` is TRL's until 2025.8.10,
  bnpo from 2025.9.1, and from 2026.9.12 dapo (bnpo on TRL < 0.22). From 2025.6.5 to 2025.11.3
  ``loss_type='dapo'`` also forces ``beta=0.0`` (and runs bnpo until 2025.10.11);
* ``use_bias_correction_kl`` (TRL 0.26+, default True from TRL 1.10) is ignored by unsloth_zoo
  before 2026.9.3: its k3 is never multiplied by pi/pi_old;
* from unsloth_zoo 2026.9.8 the log-ratio is clamped to [-20, 20] and each k3 value to
  [-10, 10] (TRL clamps neither); from 2026.10.9 the clamp applies after the pi/pi_old weight.

:func:`resolve_settings` applies unsloth's defaults to the settings a launch gives, :func:`native`
turns TRL's reading of those settings into the KLConfig unsloth_zoo computes, :func:`findings`
and :func:`fix` say what differs and what to do. Nothing here imports unsloth, TRL or torch: the
audit reads unsloth launches with it (as the newest recorded releases, :data:`NEWEST`, unless a
release is given). :func:`check_sources` re-reads every row from unpacked wheels.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from kl_patches.adapters.base import Finding
from kl_patches.adapters.history import Change, History
from kl_patches.config import KLConfig
from kl_patches.theory import verdict

__all__ = [
    "PACKAGES",
    "Row",
    "check_sources",
    "facts",
    "findings",
    "fix",
    "history",
    "native",
    "native_config",
    "newest",
    "patch_advice",
    "resolve_settings",
    "rows",
    "trl_pin",
    "wheels",
]

PACKAGES = ("unsloth", "unsloth_zoo")
"""The two distributions whose releases the rows are keyed by (config defaults / loss code)."""

DATA = "data/unsloth/history.json"
"""The rows, inside this package."""

AGGREGATION: dict[str, str] = {
    "grpo": "seq_mean_token_mean",
    "sapo": "seq_mean_token_mean",
    "bnpo": "token_mean",
    "dapo": "token_mean",
    "cispo": "token_mean",
    "vespo": "token_mean",
    "dr_grpo": "sum",
    "luspo": "sum",
}
"""How unsloth_zoo 2026.10.9's ``grpo_compute_loss`` reduces its per-token loss (and so the k3
term), per ``loss_type`` (unsloth_zoo/rl_replacements.py:1223-1247): TRL's reductions; bnpo
divides by the micro-batch's own token count, dapo/cispo/vespo by the window's
(``num_items_in_batch``), dr_grpo by ``B * max_completion_length`` (a per-sequence sum at
``beta / max_completion_length``)."""


@dataclass(frozen=True)
class Row(Change):
    """One reviewed row: :class:`~kl_patches.adapters.history.Change` plus where it was read."""

    package: str = "unsloth"
    """``unsloth`` (the trainer and config generator) or ``unsloth_zoo`` (the loss code)."""
    before: str = ""
    """The release before :attr:`since` that was read too (it shows the previous value)."""
    evidence: str = ""
    """Regex the cited line of :attr:`source` matches in the ``since`` wheel."""
    gone: str = ""
    """Regex found in the ``before`` wheel's file and nowhere in the ``since`` wheel's; empty:
    :attr:`evidence` itself must match nowhere in the ``before`` wheel (or the file is absent)."""


@cache
def _data() -> dict[str, Any]:
    text = resources.files("kl_patches.adapters.trl").joinpath(DATA).read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


@cache
def rows() -> tuple[Row, ...]:
    """Every reviewed row of :data:`DATA`."""
    out = []
    for raw in _data()["changes"]:
        if raw["package"] not in PACKAGES:
            raise ValueError(f"{DATA}: package {raw['package']!r} is not one of {PACKAGES}")
        out.append(
            Row(
                since=raw["since"],
                key=raw["key"],
                value=raw["value"],
                source=raw["source"],
                note=raw.get("note", ""),
                package=raw["package"],
                before=raw.get("before", ""),
                evidence=raw.get("evidence", ""),
                gone=raw.get("gone", ""),
            )
        )
    return tuple(out)


@cache
def history(package: str) -> History:
    """The rows of one of :data:`PACKAGES` as a :class:`~kl_patches.adapters.history.History`."""
    if package not in PACKAGES:
        raise ValueError(f"package={package!r} is not valid; choose one of {list(PACKAGES)}")
    mine = tuple(r for r in rows() if r.package == package)
    releases = sorted({r.since for r in mine} | {newest(package)}, key=Version)
    return History(package, tuple(releases), mine)


def newest(package: str) -> str:
    """The newest release of ``package`` the rows were checked against (the reading's default)."""
    return str(_data()["newest"][package])


def _release(package: str, release: str | None) -> str:
    found = newest(package) if release is None else str(release)
    try:
        Version(found)
    except InvalidVersion:
        raise ValueError(
            f"{package} version {found!r} is not a PEP 440 version (e.g. {newest(package)})"
        ) from None
    return found


def facts(package: str, release: str | None = None) -> dict[str, object]:
    """The folded rows of ``package`` at ``release`` (default: :func:`newest`)."""
    return history(package).at(_release(package, release))


def trl_pin(release: str | None = None) -> tuple[str, str] | None:
    """(the unsloth release whose wheel metadata showed it, the ``trl`` requirement) of the
    newest recorded pin not after ``release``; None before the first recorded one."""
    target = Version(_release("unsloth", release))
    seen = [p for p in _data()["trl_pins"] if Version(p["unsloth"]) <= target]
    if not seen:
        return None
    last = max(seen, key=lambda p: Version(p["unsloth"]))
    return str(last["unsloth"]), str(last["trl"])


# ------------------------------------------------------------------------------ the reading
def resolve_settings(
    settings: dict[str, object],
    given: frozenset[str] | None,
    trl_version: str,
    unsloth: str | None = None,
    zoo: str | None = None,
) -> dict[str, object]:
    """TRL's GRPO settings of a launch with unsloth's defaults and rewrites applied.

    ``settings`` are TRL's reading (its defaults filled in); ``given`` the keys the launch sets
    itself (None: a config object, every field already set). ``beta`` and ``loss_type`` that the
    launch leaves unset take unsloth ``unsloth``'s defaults; ``loss_type='dapo'`` is rewritten as
    that release did; ``use_bias_correction_kl`` reads False where unsloth_zoo ``zoo`` ignores it.
    """
    s = dict(settings)
    rel = facts("unsloth", unsloth)
    keys: frozenset[str] = frozenset() if given is None else given
    unset = given is not None
    if unset and "loss_type" not in keys and s.get("loss_type") is not None:
        default = rel.get("grpo.loss_type_default")
        if default == "bnpo":
            s["loss_type"] = "bnpo"
        elif default == "dapo_from_trl_0.22":
            s["loss_type"] = "dapo" if Version(trl_version) >= Version("0.22.0") else "bnpo"
    if unset and "beta" not in keys:
        default = rel.get("grpo.beta_default")
        if isinstance(default, float):
            s["beta"] = default
        elif default == "by_loss_type":
            s["beta"] = 0.0 if str(s.get("loss_type")).lower() in ("dapo", "dr_grpo") else 0.001
    if str(s.get("loss_type")).lower() == "dapo":
        if rel.get("grpo.dapo_forces_beta_zero"):
            s["beta"] = 0.0
        if rel.get("grpo.dapo_runs_bnpo"):
            s["loss_type"] = "bnpo"
    if not facts("unsloth_zoo", zoo).get("grpo.bias_correction_read"):
        s["use_bias_correction_kl"] = False
    return s


def native(config: KLConfig, zoo: str | None = None) -> KLConfig:
    """TRL's reading ``config`` of the resolved settings (k3 in the loss, or none) as unsloth_zoo
    ``zoo`` computes it: with its clamps."""
    if config.placement == "none":
        return config
    z = facts("unsloth_zoo", zoo)
    ratio, value = z.get("grpo.log_ratio_clamp"), z.get("grpo.kl_clamp")
    return config.replace(
        log_ratio_clamp=float(ratio) if isinstance(ratio, (int, float)) else None,
        kl_clamp=float(value) if isinstance(value, (int, float)) else None,
    )


def native_config(
    beta: float,
    loss_type: str,
    *,
    max_completion_length: int = 512,
    use_bias_correction_kl: bool = False,
    zoo: str | None = None,
) -> KLConfig:
    """The KLConfig of unsloth_zoo ``zoo``'s ``grpo_compute_loss(..., beta, ..., loss_type=...,
    use_bias_correction_kl=...)``: k3 in the loss (placement ``none`` at ``beta=0``)."""
    if beta == 0.0:
        return KLConfig(placement="none", coef=0.0)
    if loss_type not in AGGREGATION:
        raise ValueError(
            f"loss_type={loss_type!r} is not valid; choose one of {sorted(AGGREGATION)}"
        )
    weighted = use_bias_correction_kl and bool(
        facts("unsloth_zoo", zoo).get("grpo.bias_correction_read")
    )
    coef = beta / max_completion_length if loss_type == "dr_grpo" else beta
    base = KLConfig(
        estimator="k3",
        placement="loss",
        coef=coef,
        loss_aggregation=AGGREGATION[loss_type],
        importance_weighting="token" if weighted else "none",
    )
    return native(base, zoo)


def _default_words(release: str, key: str) -> str:
    value = facts("unsloth", release).get(key)
    if value == "trl":
        return "TRL's own default"
    if value == "by_loss_type":
        return "0.0 under loss_type dapo or dr_grpo, else 0.001"
    if value == "dapo_from_trl_0.22":
        return "dapo (bnpo on TRL < 0.22)"
    return repr(value)


def _source(package: str, key: str, release: str) -> str:
    row = history(package).latest(key, release)
    return f"{package} {row.since} {row.source}" if row is not None else package


def findings(
    settings: dict[str, object],
    resolved: dict[str, object],
    given: frozenset[str] | None,
    trl_version: str,
    unsloth: str | None = None,
    zoo: str | None = None,
    config: KLConfig | None = None,
) -> list[Finding]:
    """What unsloth changes against TRL's reading of the same launch (``settings``: TRL's,
    ``resolved``: :func:`resolve_settings`'s, ``config``: :func:`native`'s reading of them)
    and, when it runs a KL, what kl-patches can do about it."""
    rel, zrel = _release("unsloth", unsloth), _release("unsloth_zoo", zoo)
    out: list[Finding] = []
    if config is not None and config.placement != "none":
        nearest = KLConfig(estimator="k3", placement="loss", importance_weighting="token")
        out.append(
            Finding(
                "trl.unsloth_kl",
                "warning",
                f"unsloth_zoo {zrel}'s grpo_compute_loss runs "
                f"{config.short_name} ({_source('unsloth_zoo', 'grpo.kl_estimator', zrel)}): no "
                "setting of unsloth puts the KL in the reward, and its nearest native setting "
                "(loss_type='dr_grpo' with use_bias_correction_kl=True) still follows "
                f"{verdict(nearest).gradient}; kl-patches can replace the k3 inside unsloth's "
                "loss: the fix, called after `import unsloth`, runs k2 on the sequence log-ratio "
                "in unsloth's own loss (reverse_kl: unbiased).",
                patch_advice(config, resolved),
            )
        )
    for key, row_key in (("loss_type", "grpo.loss_type_default"), ("beta", "grpo.beta_default")):
        if given is not None and key not in given and resolved.get(key) != settings.get(key):
            out.append(
                Finding(
                    f"trl.unsloth_default_{key}",
                    "warning",
                    f"{key} is not set: unsloth {rel} makes it {resolved.get(key)!r} "
                    f"({_default_words(rel, row_key)}, {_source('unsloth', row_key, rel)}) where "
                    f"TRL {trl_version} alone would use {settings.get(key)!r}. Set it "
                    "explicitly: the same run under unsloth and TRL, and across unsloth releases.",
                    f"{key}={resolved.get(key)}",
                )
            )
    f = facts("unsloth", rel)
    dapo = str(settings.get("loss_type")).lower() == "dapo"
    if dapo and f.get("grpo.dapo_forces_beta_zero") and settings.get("beta") not in (0, None):
        out.append(
            Finding(
                "trl.unsloth_dapo_drops_kl",
                "error",
                f"unsloth {rel} sets beta=0.0 whenever loss_type='dapo' "
                f"({_source('unsloth', 'grpo.dapo_forces_beta_zero', rel)}): the beta of "
                f"{settings.get('beta')!r} is dropped and the run has no KL.",
                "pip install 'unsloth>=2025.11.4' or loss_type=bnpo",
            )
        )
    if (
        settings.get("use_bias_correction_kl")
        and not resolved.get("use_bias_correction_kl")
        and float(resolved.get("beta") or 0.0) != 0.0  # type: ignore[arg-type]
    ):
        out.append(
            Finding(
                "trl.unsloth_ignores_bias_correction",
                "warning",
                f"use_bias_correction_kl=True is ignored by unsloth_zoo {zrel} "
                f"({_source('unsloth_zoo', 'grpo.bias_correction_read', zrel)}): its k3 is not "
                "multiplied by pi/pi_old, unlike TRL's with the same config.",
                "pip install 'unsloth_zoo>=2026.9.3'",
            )
        )
    pin = trl_pin(rel)
    if pin is not None:
        spec = SpecifierSet(pin[1].removeprefix("trl"))
        try:
            outside = not spec.contains(trl_version, prereleases=True)
        except InvalidVersion:
            outside = False
        if outside:
            out.append(
                Finding(
                    "trl.unsloth_trl_outside_pin",
                    "info",
                    f"TRL {trl_version} is outside what unsloth {rel} installs "
                    f"({pin[1]}, from unsloth {pin[0]}'s wheel metadata); the reading uses TRL "
                    f"{trl_version}'s fields with unsloth {rel}'s loss.",
                )
            )
    return out


def _coef(config: KLConfig, settings: dict[str, object]) -> float:
    if config.placement != "none" and config.coef > 0:
        return config.loss_coef_value
    return float(settings.get("beta") or 0.0) or 0.05  # type: ignore[arg-type]


def patch_advice(config: KLConfig, settings: dict[str, object]) -> str:
    """The kl-patches change under unsloth: its loss-side patch with the unbiased loss-side
    setting (reverse-KL gradient, :mod:`kl_patches.theory`)."""
    coef = _coef(config, settings)
    unbiased = KLConfig(
        estimator="k2", placement="loss", coef=coef, granularity="sequence", loss_aggregation="sum"
    )
    assert verdict(unbiased).unbiased  # the advice is the unbiased loss-side setting
    return (
        "kl_patches.adapters.trl.unsloth.apply(KLConfig.parse('k2-in-loss', "
        f"granularity='sequence', coef={coef!r}))"
    )


def fix(config: KLConfig, settings: dict[str, object]) -> tuple[str, ...]:
    """The flags that change ``settings`` (:func:`resolve_settings`'s) into the nearest native
    setting under unsloth (its k3 cannot leave the loss): the importance-weighted k3 summed per
    sequence, whose expected gradient is each token's own reverse-KL term
    (:mod:`kl_patches.theory`); empty when the launch already runs it."""
    beta = float(settings.get("beta") or 0.0) or _coef(config, settings)  # type: ignore[arg-type]
    out = []
    if settings.get("loss_type") not in ("dr_grpo", "luspo"):
        out.append("loss_type=dr_grpo")
    if not settings.get("use_bias_correction_kl"):
        out.append("use_bias_correction_kl=true")
    if float(settings.get("beta") or 0.0) == 0.0:  # type: ignore[arg-type]
        out.append(f"beta={beta:g}")
    return tuple(out)


# ------------------------------------------------------------------------------ evidence
def wheels() -> tuple[tuple[str, str], ...]:
    """(package, release) of every wheel :func:`check_sources` reads (each row's ``since`` and
    ``before``), sorted."""
    needed = {(r.package, r.since) for r in rows()} | {(r.package, r.before) for r in rows()}
    return tuple(sorted(needed, key=lambda p: (p[0], Version(p[1]))))


def _wheel_file(root: Path, package: str, release: str, path: str) -> Path:
    return root / f"{package}-{release}" / path


def check_sources(root: str | Path) -> list[str]:
    """Re-read every row from unpacked wheels under ``root`` (``<package>-<release>/<path>``):
    the cited line of ``since`` matches :attr:`Row.evidence`; the ``before`` release does not
    show it (or shows :attr:`Row.gone`, which ``since`` no longer does). Returns the problems
    (empty when every row holds); a missing wheel is a problem."""
    base = Path(root)
    problems: list[str] = []
    for row in rows():
        path, _, line = row.source.rpartition(":")
        label = f"{row.package} {row.since} {row.key}={row.value!r}"
        if not row.evidence:
            problems.append(f"{label}: no evidence regex")
            continue
        since = _wheel_file(base, row.package, row.since, path)
        if not since.is_file():
            problems.append(f"{label}: {since} is missing")
            continue
        lines = since.read_text(encoding="utf-8", errors="replace").splitlines()
        number = int(line)
        if not 0 < number <= len(lines) or not re.search(row.evidence, lines[number - 1]):
            problems.append(f"{label}: {row.source} does not match {row.evidence!r}")
        if not row.before:
            continue
        if not (base / f"{row.package}-{row.before}").is_dir():
            problems.append(f"{label}: the wheel of {row.before} is missing")
            continue
        earlier = _wheel_file(base, row.package, row.before, path)
        old = earlier.read_text(encoding="utf-8", errors="replace") if earlier.is_file() else ""
        if row.gone:
            if not re.search(row.gone, old, re.MULTILINE):
                problems.append(f"{label}: {row.before} does not show {row.gone!r}")
            if re.search(row.gone, "\n".join(lines), re.MULTILINE):
                problems.append(f"{label}: {row.since} still shows {row.gone!r}")
        elif re.search(row.evidence, old, re.MULTILINE):
            problems.append(f"{label}: {row.before} already shows {row.evidence!r}")
    return problems
