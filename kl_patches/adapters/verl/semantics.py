"""What a verl launch means in one release: the reader's per-version semantics, from the data.

:func:`semantics` folds :data:`~.history.HISTORY` (one row per KL-relevant change, each with the
``file:line`` of its release) and :mod:`.keysets` (every config key per release) into one
:class:`VerlSemantics`: the defaults, which keys exist, which estimator a name selects, when the
reward-side KL runs (always in 0.1; whenever the KL loss is off in 0.2-0.3.x; under
``algorithm.use_kl_in_reward`` from 0.4.0), k3's clamps, how the loss KL is aggregated, the
``+`` estimators (unknown before 0.6.0, advertised but crashing in 0.6.0-0.7.x, k2's gradient
from 0.8.0) and the entry points a release ships. The reader (:mod:`.read`) calls it once per
launch; for the newest tested release it is the identity on what the reader always did.

A version that is not a recorded release (``0.2.0.dev``, ``0.7.3``) is read with the newest
recorded release not after it (:func:`resolve`); one older than every recorded release with the
oldest. No release shipped the KL-loss sign bug: ``loss.sign`` is ``+`` from 0.2 on (the ``-`` of
PR #124 lived on the main branch from 2025-01-23 to 2025-02-01 only, so only a vendored copy
taken in that window has it, which :func:`vendored_sign_bug` checks in the copy's code).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from kl_patches.adapters.files import MAX_SOURCE_FILE_BYTES, InputError, read_optional
from kl_patches.adapters.history import resolve_release

from .history import HISTORY, RELEASES
from .keysets import keys as config_keys
from .versions import ACTOR, DEFAULTS, TESTED_VERSIONS

__all__ = [
    "ABSENT_VALUES",
    "RELEASES",
    "VerlSemantics",
    "releases",
    "resolve",
    "semantics",
    "source_of",
    "vendored_sign_bug",
    "vendored_version",
]

ABSENT_VALUES: dict[str, Any] = {
    "algorithm.use_kl_in_reward": False,
    ACTOR + "use_kl_loss": False,
    ACTOR + "loss_agg_mode": "token-mean",
    ACTOR + "policy_loss.loss_mode": "vanilla",
    "algorithm.norm_adv_by_std_in_grpo": True,
    "algorithm.rollout_correction.bypass_mode": False,
    "actor_rollout_ref.rollout.multi_turn.enable": False,
    "trainer.use_v1": False,
    "algorithm.gdpo_reward_keys": None,
}
"""What the code does for a setting whose key a release's config does not have yet (GRPO
always divides by the std before ``norm_adv_by_std_in_grpo``; there is no v1 trainer before
0.9.0; no KL loss before 0.2 ...). The reward gate of 0.1-0.3.x is not here: see
:attr:`VerlSemantics.reward_gate`."""

_GATES = {
    "always": "always",
    "not actor_rollout_ref.actor.use_kl_loss": "not_use_kl_loss",
    "algorithm.use_kl_in_reward": "use_kl_in_reward",
}


@dataclass(frozen=True)
class VerlSemantics:
    """verl's KL behaviour in one release, as the reader needs it."""

    version: str
    """The version asked for (as written)."""
    release: str
    """The recorded release whose rows apply (see :func:`resolve`)."""
    defaults: dict[str, Any]
    """Every key the reader reads (:data:`~.versions.DEFAULTS`) -> its value in this release;
    a key the release does not have gets the value its code uses (:data:`ABSENT_VALUES`)."""
    absent: frozenset[str]
    """Keys the reader reads that this release's ``ppo_trainer.yaml`` does not have."""
    reward_gate: str
    """When the reward-side KL runs: ``always`` (0.1), ``not_use_kl_loss`` (0.2-0.3.x: whenever
    ``actor.use_kl_loss`` is false), ``use_kl_in_reward`` (0.4.0 on); ``never`` only for a
    vendored copy whose trainer has no ``apply_kl_penalty`` call (:mod:`.vendored`)."""
    kl_loss: bool
    """Whether the release has a KL loss (``actor.use_kl_loss``; from 0.2)."""
    estimator_names: dict[str, str]
    """verl estimator name -> what it computes (``k1``/``k2``/``k3``, ``abs``,
    ``NotImplementedError``) in this release; other names raise NotImplementedError."""
    plus_names: str
    """``unknown_name_raises`` (before 0.6.0), ``advertised_but_raises`` (0.6.0-0.7.x: the
    ``+`` names are documented but crash), ``base_value_k2_gradient`` (0.8.0 on)."""
    k3_clamps: tuple[float | None, float | None]
    """(log-ratio clamp, value clamp) of verl's k3 (``low_var_kl``) in this release."""
    loss_aggregation_fixed: str | None
    """The loss KL's aggregation when it does not follow ``loss_agg_mode`` (``token_mean``
    before 0.4.0: a masked mean over the micro-batch's tokens), else None."""
    agg_modes: tuple[str, ...]
    """The ``loss_agg_mode`` values the release accepts (empty before 0.4.0: no such key)."""
    gdpo: bool
    """Whether ``adv_estimator=gdpo`` exists (0.7.1 on; it drops the reward KL)."""
    entries: dict[str, str | None] = field(default_factory=dict)
    """Entry module -> what the release ships for it (None: not in this release)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Field -> ``file:line`` of the release row it was folded from."""

    @property
    def exact(self) -> bool:
        """True when :attr:`version` is a recorded release (a local label such as
        ``+vendored`` aside)."""
        try:
            return self.version == self.release or Version(self.version).public == self.release
        except InvalidVersion:
            return False

    def accepted_keys(self, config: str = "ppo_trainer") -> frozenset[str]:
        """Every key of ``config`` composed in :attr:`release` (see :mod:`.keysets`)."""
        return config_keys(self.release, config)

    def estimator_of(self, name: str) -> str | None:
        """The KLConfig estimator a verl name selects in this release (``+`` stripped: the
        value), None when the name raises or computes something KLConfig cannot describe."""
        base = name.removesuffix("+")
        found = self.estimator_names.get(base)
        return found if found in ("k1", "k2", "k3") else None


def releases() -> tuple[str, ...]:
    """Every recorded verl release, ascending."""
    return RELEASES


def resolve(version: str) -> str:
    """The recorded release whose semantics a version has: itself when recorded, else the
    newest recorded release not after it (the oldest for a version older than all of them).
    ValueError for text that is not a PEP 440 version."""
    return resolve_release(RELEASES, version, "verl", "0.4.1")


def source_of(key: str, release: str) -> str:
    """``file:line (verl SINCE)`` of the history row that gives ``key`` its value in
    ``release`` (empty when no row does)."""
    change = HISTORY.latest(key, release)
    return f"{change.source} (verl {change.since})" if change is not None else ""


@cache
def semantics(version: str | None = None) -> VerlSemantics:
    """The semantics of ``version`` (default: the newest tested release)."""
    asked = version or TESTED_VERSIONS[-1]
    release = resolve(asked)
    rows = HISTORY.at(release)
    present = config_keys(release, "ppo_trainer")
    defaults: dict[str, Any] = {}
    absent: set[str] = set()
    for key, value in DEFAULTS.items():
        row = f"default.{key}"
        if key.startswith("ray_kwargs."):
            defaults[key] = value
            continue
        if key not in present:
            absent.add(key)
            defaults[key] = ABSENT_VALUES.get(key, value)
        elif row in rows and rows[row] is not None:
            defaults[key] = rows[row]
        else:
            defaults[key] = value
    names = {k.removeprefix("estimator.select."): str(v) for k, v in rows.items()
             if k.startswith("estimator.select.")}  # fmt: skip
    gate = _GATES[str(rows["reward.gate"])]
    options = rows["placement.options"]
    aggregation = str(rows.get("loss.aggregation", ""))
    modes = rows.get("loss.agg_modes")
    entries = {
        "verl.trainer.main_ppo_sync": _entry(rows.get("entry.main_ppo_sync")),
        "verl.experimental.one_step_off_policy.main_ppo": _entry(
            rows.get("entry.one_step_off_policy"), "verl.experimental"
        ),
        "verl.experimental.fully_async_policy.fully_async_main": _entry(
            rows.get("entry.fully_async"), "verl.experimental"
        ),
    }
    sources = {
        "reward_gate": source_of("reward.gate", release),
        "kl_loss": source_of("placement.options", release),
        "plus_names": source_of("estimator.plus_suffix", release),
        "k3_clamps": source_of("estimator.k3.log_ratio_clamp", release)
        or source_of("estimator.k3.value_clamp", release),
        "loss_aggregation": source_of("loss.aggregation", release),
        "gdpo": source_of("reward.dropped.gdpo", release),
    }
    return VerlSemantics(
        version=asked,
        release=release,
        defaults=defaults,
        absent=frozenset(absent),
        reward_gate=gate,
        kl_loss=isinstance(options, tuple) and "loss" in options,
        estimator_names=names,
        plus_names=str(rows["estimator.plus_suffix"]),
        k3_clamps=(
            _float(rows.get("estimator.k3.log_ratio_clamp")),
            _float(rows.get("estimator.k3.value_clamp")),
        ),
        loss_aggregation_fixed="token_mean" if aggregation.startswith("masked_mean") else None,
        agg_modes=tuple(modes) if isinstance(modes, tuple) else (),
        gdpo=bool(rows.get("reward.dropped.gdpo")),
        entries=entries,
        sources=sources,
    )


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _entry(value: object, prefix: str = "") -> str | None:
    """What a release ships for an entry row (None: not shipped; a recipe row is not verl's)."""
    if value is None:
        return None
    text = str(value)
    if prefix and not text.startswith(prefix):
        return None
    return text


_VERSION_FILE = ("verl", "version", "version")


def vendored_version(directory: Path) -> tuple[str, str] | None:
    """(version, file) of a verl copy inside ``directory`` (``verl/version/version``, or one
    folder deeper in a checkout named after verl: ``verl/verl/version/version``,
    ``verl-main/verl/version/version``); None when there is none. Read through the audit's
    guarded reader: a version file that is a FIFO, a device or too big is an InputError."""
    candidates = [directory.joinpath(*_VERSION_FILE)]
    try:
        children = sorted(p for p in directory.iterdir() if "verl" in p.name.lower() and p.is_dir())
    except OSError:
        children = []
    candidates += [child.joinpath(*_VERSION_FILE) for child in children[:16]]
    for path in candidates:
        text = (read_optional(path) or "").strip()  # InputError: a FIFO, a device, too big
        first = text.splitlines()[0].strip() if text else ""
        if re.fullmatch(r"[0-9][0-9A-Za-z.+\-]*", first):
            return first, str(path)
    return None


_SIGN_BUG = re.compile(r"policy_loss\s*=\s*policy_loss\s*-\s*kl_loss\s*\*")


def vendored_sign_bug(version_file: str) -> str | None:
    """``file:line`` of the maximised KL loss in a vendored copy (``policy_loss = policy_loss -
    kl_loss * coef``, on verl's main branch 2025-01-23 to 2025-02-01 only), None without it."""
    root = Path(version_file).parent.parent
    path = root / "workers" / "actor" / "dp_actor.py"
    try:
        text = read_optional(path, MAX_SOURCE_FILE_BYTES)
    except InputError:  # a FIFO, a device or an oversized file is not verl's dp_actor.py
        return None
    lines = (text or "").splitlines()
    for number, line in enumerate(lines, 1):
        if _SIGN_BUG.search(line):
            return f"{path}:{number}"
    return None
