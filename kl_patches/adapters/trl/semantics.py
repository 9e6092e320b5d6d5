"""What a TRL config means in one release: the reader's per-version semantics, from the data.

:func:`semantics` folds :data:`~.history.HISTORY` (every KL-relevant change of GRPOTrainer,
RLOOTrainer and PPOTrainer from 0.14.0 to 1.16.0, each row with the ``file:line`` of its release)
and :mod:`.fieldsets` (the fields of TRL's config dataclasses per release) into one
:class:`TrlSemantics`. The reader (:mod:`.read`) uses it for the defaults (GRPO's ``beta`` 0.04
until 0.18.2, 0.0 from 0.19.0; ``use_bias_correction_kl`` from 0.26.0, on by default from
1.10.0; ``max_completion_length`` 256 -> 512 in 1.10.0), how each ``loss_type`` aggregates the
k3 term (no ``loss_type`` before 0.17.0: a per-sequence mean in 0.14-0.15, a token mean in 0.16),
the fused Liger loss window (``use_liger_loss`` 0.17.0-0.27.x, ``use_liger_kernel`` 0.25.0-1.13.0:
k3 outside ``_compute_loss``, without the pi/pi_old weight until 1.4.0), RLOO's old PPO-style
trainer (``kl_coef``, 4 PPO epochs per batch) before 0.22.0, and PPOTrainer until 1.12.0; and
for the fields a release's dataclasses declare (a key no dataclass of the release has is
refused by TrlParser / ``GRPOConfig(**kwargs)``).

A version that is not a recorded release is read with the newest recorded release not after it
(:func:`resolve`); one older than 0.14.0 with 0.14.0's semantics and without field checks.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from packaging.version import InvalidVersion, Version

from kl_patches.adapters.files import MAX_SOURCE_FILE_BYTES, read_optional
from kl_patches.adapters.history import resolve_release

from .fieldsets import (
    CLASSES,
    TRAINING_ARGUMENTS,
    fields,
    installed_transformers,
    known_fields,
    training_arguments,
)
from .history import HISTORY, RELEASES
from .versions import GRPO_DEFAULTS, RLOO_DEFAULTS, SUPPORT

__all__ = [
    "AGGREGATION",
    "RELEASES",
    "TrlSemantics",
    "releases",
    "resolve",
    "semantics",
    "source_of",
    "vendored_version",
]

AGGREGATION: dict[str, str] = {
    "seq_mean_token_mean": "seq_mean_token_mean",
    "token_mean_local": "token_mean",
    "token_mean_global": "token_mean",
    "sum_over_B_max_completion_length": "sum",
    "length_weighted_mean_incl_padding": "sum",
    "seq_sum_mean": "sum",
}
"""History's aggregation of the k3 term -> KLConfig.loss_aggregation (``sum_over_B_max_...``
is a per-sequence sum with coefficient ``beta / max_completion_length``; luspo's length-weighted
mean is a per-sequence sum too, with padding positions counted until 1.10.0)."""


@dataclass(frozen=True)
class TrlSemantics:
    """TRL's KL behaviour in one release, as the reader needs it."""

    version: str
    """The version asked for (as written)."""
    release: str
    """The recorded release whose rows apply (see :func:`resolve`)."""
    older_than_recorded: bool
    """True when :attr:`version` predates 0.14.0 (fields are not checked)."""
    grpo_defaults: dict[str, object]
    """GRPOConfig defaults of the keys the reader reads (:data:`~.versions.GRPO_DEFAULTS`) in
    this release; a key the release does not have gets what its code does."""
    grpo_aggregation: dict[str, str]
    """``loss_type`` -> the k3 term's KLConfig aggregation; key ``""`` is the aggregation
    without a ``loss_type`` field (before 0.17.0) or at its default."""
    loss_type_default: str | None
    """The default ``loss_type`` (None before 0.17.0: there is no such field)."""
    bias_correction: bool
    """Whether ``use_bias_correction_kl`` exists (0.26.0 on)."""
    fused_flags: tuple[str, ...]
    """The config flags that switch on the fused (Liger) GRPO loss in this release."""
    fused_kl: str | None
    """What the fused loss does to the KL (None: no fused loss)."""
    rloo_old: bool
    """True before 0.22.0: the PPO-style RLOOTrainer (``kl_coef``, ``num_ppo_epochs``)."""
    rloo_coef_keys: tuple[str, ...]
    """The RLOOConfig keys of the coefficient, the first the canonical one."""
    rloo_defaults: dict[str, object]
    """RLOOConfig defaults of the keys the reader reads in this release."""
    ppo: bool
    """Whether PPOTrainer exists (until 1.12.0)."""
    ppo_estimators: tuple[str, ...]
    """PPOConfig.kl_estimator choices (``k1`` only before 0.17.0)."""
    accepted: frozenset[str] = frozenset()
    """Every field of TRL's dataclasses in this release plus transformers' TrainingArguments."""
    sources: dict[str, str] = field(default_factory=dict)
    """Field -> ``file:line`` of the release row it was folded from."""
    transformers: str | None = None
    """The transformers release a fresh install of this TRL release gets (None: not pinned
    down; :data:`.fieldsets.INSTALLED_TRANSFORMERS`)."""
    gone: frozenset[str] = frozenset()
    """TrainingArguments fields of older transformers that :attr:`transformers` no longer has
    and no TRL dataclass of this release declares (``warmup_ratio`` in 5.24.0)."""

    @property
    def exact(self) -> bool:
        """True when :attr:`version` is a recorded release (a local label such as
        ``+vendored`` aside)."""
        try:
            return self.version == self.release or Version(self.version).public == self.release
        except InvalidVersion:
            return False

    def refused(self, keys: list[str]) -> list[str]:
        """The keys this release refuses: fields TRL's dataclasses declared in some recorded
        release but in none of this one's (and that are not TrainingArguments fields). Other
        unknown keys may belong to a project's own dataclass and are not judged."""
        if self.older_than_recorded:
            return []
        known = known_fields()
        return [k for k in keys if k in known and k not in self.accepted]

    def refused_by_transformers(self, keys: list[str]) -> list[str]:
        """The keys a fresh install of this release refuses because the transformers it gets
        dropped them from ``TrainingArguments`` (:attr:`gone`)."""
        if self.older_than_recorded:
            return []
        return [k for k in keys if k in self.gone]

    def last_release_with(self, key: str) -> str | None:
        """The newest recorded release whose dataclasses declare ``key`` (None if none)."""
        for release in reversed(RELEASES):
            if any(key in (fields(release, c) or ()) for c in CLASSES):
                return release
        return None

    def first_release_with(self, key: str) -> str | None:
        """The oldest recorded release whose dataclasses declare ``key`` (None if none)."""
        for release in RELEASES:
            if any(key in (fields(release, c) or ()) for c in CLASSES):
                return release
        return None


def releases() -> tuple[str, ...]:
    """Every recorded TRL release, ascending."""
    return RELEASES


def resolve(version: str) -> str:
    """The recorded release whose semantics ``version`` has (itself, else the newest not after
    it, else the oldest). ValueError for text that is not a PEP 440 version."""
    return resolve_release(RELEASES, version, "TRL", "0.18.0")


def source_of(key: str, release: str) -> str:
    """``file:line (TRL SINCE)`` of the history row giving ``key`` its value in ``release``."""
    change = HISTORY.latest(key, release)
    return f"{change.source} (TRL {change.since})" if change is not None else ""


def _fused(flag: object) -> tuple[str, ...]:
    if flag is None:
        return ()
    return tuple(re.findall(r"use_liger_\w+", str(flag)))


@cache
def semantics(version: str | None = None) -> TrlSemantics:
    """The semantics of ``version`` (default: the newest tested release)."""
    asked = version or SUPPORT.tested[-1]
    release = resolve(asked)
    rows = HISTORY.at(release)
    beta = rows["grpo.beta_default"]
    loss_type_default = rows.get("grpo.loss_type_default")
    bias = "grpo.use_bias_correction_kl_default" in rows
    grpo: dict[str, object] = dict(GRPO_DEFAULTS)
    grpo.update(
        {
            "beta": beta,
            "use_bias_correction_kl": bool(rows.get("grpo.use_bias_correction_kl_default")),
            "loss_type": loss_type_default,
            "scale_rewards": _scale(rows.get("grpo.scale_rewards_default", True)),
            "importance_sampling_level": rows.get("grpo.importance_sampling_level_default")
            or "token",
            "num_iterations": rows.get("grpo.num_iterations_default", 1),
            "steps_per_generation": None,
            "vllm_importance_sampling_correction": bool(
                rows.get("grpo.vllm_importance_sampling_correction_default", False)
            ),
            "max_completion_length": rows["grpo.max_completion_length_default"],
            "temperature": rows["grpo.temperature_default"],
            "sync_ref_model": bool(rows.get("grpo.sync_ref_model_default", False)),
        }
    )
    aggregation = {
        k.removeprefix("grpo.kl_aggregation."): AGGREGATION[str(v)]
        for k, v in rows.items()
        if k.startswith("grpo.kl_aggregation.") and v is not None
    }
    aggregation[""] = aggregation.pop("default")
    old = rows["rloo.implementation"] == "onpolicy_ppo_style"
    alias = rows.get("rloo.kl_coef_alias")
    coef_keys: tuple[str, ...] = (str(rows["rloo.kl_coef_name"]),)
    if alias:
        coef_keys += ("kl_coef",)
    rloo: dict[str, object] = dict(RLOO_DEFAULTS)
    rloo.update(
        {
            "beta": rows["rloo.kl_coef_default"],
            "temperature": rows["rloo.temperature_default"],
            "num_iterations": 1,
        }
    )
    if old:
        rloo.update({"num_ppo_epochs": rows["rloo.update_epochs_default"], "num_mini_batches": 1})
    own: set[str] = set()
    for cls in CLASSES:
        own |= fields(release, cls) or frozenset()
    accepted = set(TRAINING_ARGUMENTS) | own
    transformers = installed_transformers(release)
    gone = (
        TRAINING_ARGUMENTS - training_arguments(transformers) - own
        if transformers is not None
        else frozenset()
    )
    estimators = rows.get("ppo.kl_estimator_choices")
    fused_kl = rows.get("grpo.fused_loss_kl")
    return TrlSemantics(
        version=asked,
        release=release,
        older_than_recorded=Version(asked) < Version(RELEASES[0]),
        grpo_defaults=grpo,
        grpo_aggregation=aggregation,
        loss_type_default=None if loss_type_default is None else str(loss_type_default),
        bias_correction=bias,
        fused_flags=_fused(rows.get("grpo.fused_loss_flag")),
        fused_kl=None if fused_kl is None else str(fused_kl),
        rloo_old=old,
        rloo_coef_keys=coef_keys,
        rloo_defaults=rloo,
        ppo=rows.get("ppo.module") is not None,
        ppo_estimators=tuple(estimators) if isinstance(estimators, tuple) else (),
        accepted=frozenset(accepted),
        transformers=transformers,
        gone=frozenset(gone),
        sources={
            "beta": source_of("grpo.beta_default", release),
            "use_bias_correction_kl": source_of("grpo.use_bias_correction_kl_default", release),
            "loss_type": source_of("grpo.loss_type_default", release)
            or source_of("grpo.kl_aggregation.default", release),
            "max_completion_length": source_of("grpo.max_completion_length_default", release),
            "fused": source_of("grpo.fused_loss_flag", release),
            "fused_kl": source_of("grpo.fused_loss_kl", release),
            "rloo": source_of("rloo.implementation", release),
            "rloo_coef": source_of("rloo.kl_coef_name", release),
            "ppo": source_of("ppo.module", release),
        },
    )


def _scale(value: object) -> object:
    if value is True:
        return "group"
    if value is False:
        return "none"
    return value


_VERSION = re.compile(r"""__version__\s*=\s*["']([^"']+)["']""")


def vendored_version(directory: Path) -> tuple[str, str] | None:
    """(version, file) of a TRL copy inside ``directory``: ``trl/__init__.py``'s
    ``__version__``, else the ``VERSION`` file beside a ``trl`` package (TRL's own layout), also
    one folder deeper in a checkout named after it; None when there is none. Read through the
    audit's guarded reader: a file there that is a FIFO, a device or too big is an InputError."""
    bases = [directory]
    with contextlib.suppress(OSError):
        named = [p for p in directory.iterdir() if "trl" in p.name.lower() and p.is_dir()]
        bases += sorted(named)[:16]
    for base in bases:
        package = base / "trl"
        if not (package / "__init__.py").is_file():
            continue
        found = _VERSION.search(read_optional(package / "__init__.py", MAX_SOURCE_FILE_BYTES) or "")
        if found:
            return found.group(1), str(package / "__init__.py")
        path = base / "VERSION"
        text = (read_optional(path) or "").strip()
        if re.fullmatch(r"[0-9][0-9A-Za-z.+\-]*", text):
            return text, str(path)
    return None
