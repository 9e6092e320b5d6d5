"""TRL 0.14-0.26: the KL config through TRL's own ``beta``, or a refusal that says why.

These releases lack hook points the 1.x hooks (:mod:`.hooks`) need (:data:`.versions.
WHY_NOT_HOOKED`), so nothing of TRL's scoring or loss is replaced. What they express natively
runs natively: GRPO's ``beta`` is k3 in the loss, reduced like its ``loss_type`` (a per-sequence
token mean before 0.17, which had no ``loss_type``), never importance-weighted (no
``use_bias_correction_kl`` before 0.26); the online RLOOTrainer (0.22+) puts ``beta * sum_t k1``
in the reward. The patched ``__init__`` sets ``beta`` to the value that runs the KL config and
checks that TRL took it. GRPO's KL in the reward (sequence-level) runs as one more reward
function (:mod:`.legacy_reward`). Any other KL config is refused at construction with the
nearest one ``beta`` runs (:func:`native_beta`). The PPO-style RLOOTrainer (before 0.22) is
refused.

Deviation from the 1.x adapter: the KL term keeps TRL's own aggregation and placement, so a
config is accepted only when it names them (``loss_aggregation``), not translated.

The canary of these releases (:func:`canaries`) is the source of the method holding GRPO's KL
term (``compute_loss`` before 0.17, ``_compute_loss`` from 0.17): its hash must be one recorded
for a 0.14-0.26 release (``data/<release>.json``), whose behaviour the compat tests checked.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import inspect
import math
from typing import Any

from kl_patches.adapters.releases import recording
from kl_patches.adapters.support import Canary
from kl_patches.config import KLConfig

from . import legacy_reward, translate
from .versions import (
    ABSENT_MEANS,
    NATIVE_ONLY,
    ONLINE_RLOO_FROM,
    installed_version,
    online_rloo,
    why_not_hooked,
)


def settings(kind: str, args: Any) -> dict[str, object]:
    """The KL-relevant settings of a live ``GRPOConfig``/``RLOOConfig`` of an old release."""
    out = translate.settings_of(args, kind)
    for key, meaning in ABSENT_MEANS.items():
        if key in out and not hasattr(args, key):
            out[key] = meaning
    return out


def native_config_of(args: Any, kind: str = "GRPO") -> KLConfig:
    """The KLConfig TRL runs natively for the live ``args`` of an old release."""
    return translate.native_config(kind, settings(kind, args))


def native_beta(kind: str, args: Any, config: KLConfig, version: str) -> float:
    """The ``beta`` that makes TRL ``version`` run ``config`` with ``args``; ValueError naming
    the nearest config TRL runs natively (and why nothing else can run) otherwise."""
    if kind == "RLOO" and not online_rloo(version):
        raise ValueError(
            f"kl_patches.trl: RLOOTrainer in TRL {version} is the PPO-style trainer (kl_coef, "
            f"its own reward model); the adapter patches RLOOTrainer from {ONLINE_RLOO_FROM} "
            "(pip install 'trl>=0.22'); GRPOTrainer is patched here through its beta"
        )
    if config.placement == "none":
        return 0.0
    found = settings(kind, args)
    scale = 1.0
    if kind == "GRPO" and found["loss_type"] == "dr_grpo":  # TRL divides by L itself
        scale = float(found["max_completion_length"])  # type: ignore[arg-type]
    beta = (config.coef if config.has_reward else config.loss_coef_value) * scale
    native = translate.native_config(kind, {**found, "beta": beta})
    if math.isclose(native.coef, config.coef, rel_tol=1e-12) and (
        native.replace(coef=config.coef) == config
    ):
        return beta
    raise ValueError(
        f"kl_patches.trl: TRL {version} runs a KL config only through its beta "
        f"({why_not_hooked(version)}). With these {kind}Config settings beta runs "
        f"KLConfig(**{native.to_dict()}), not {config}: pass kl=that config (or 'none')"
        + _reward_hint(kind)
        + ", or install trl>=0.27 for any KL config"
    )


def _reward_hint(kind: str) -> str:
    if kind != "GRPO":
        return ""
    return ", or KL in the reward alone (reward_shape='sequence', no importance weighting)"


def reward_side(kind: str, config: KLConfig) -> bool:
    """True when ``config`` runs as the penalty reward function (:mod:`.legacy_reward`), on
    every release of :data:`.versions.NATIVE_ONLY`."""
    return kind == "GRPO" and config.has_reward and legacy_reward.refusal(config) is None


def check(kind: str, args: Any, config: KLConfig, version: str) -> None:
    """ValueError unless the patched ``__init__`` of TRL ``version`` runs ``config`` with the
    live ``args`` (what :func:`prepare` refuses, without building anything)."""
    if reward_side(kind, config):
        if not config.coef > 0:
            raise ValueError("kl_patches.trl: KL in the reward needs coef > 0 (or use 'none')")
        if getattr(args, "use_liger_loss", False) is True:  # 0.17-0.27
            raise ValueError(
                "kl_patches.trl: use_liger_loss=True computes GRPO's loss in Liger's fused loss, "
                "built with beta at construction (grpo_trainer.py:584 in 0.18.2), so TRL's k3 "
                "term cannot be switched off while the KL runs in the reward; set "
                "use_liger_loss=False"
            )
        return
    native_beta(kind, args, config, version)


def prepare(
    kind: str, model: Any, args: Any, reward_funcs: Any, config: KLConfig, version: str
) -> tuple[Any, Any]:
    """``(args, reward_funcs)`` for TRL's ``__init__``: a copy of ``args`` (TRL's default
    config when None) with ``beta`` set for ``config``, and the reward functions (plus the
    penalty function when the KL is in the reward)."""
    import trl

    if kind == "RLOO" and not online_rloo(version):
        native_beta(kind, args, config, version)  # raises: the PPO-style trainer
    if args is None:
        name = model if isinstance(model, str) else model.config._name_or_path
        config_cls = trl.GRPOConfig if kind == "GRPO" else trl.RLOOConfig
        args = config_cls(f"{str(name).split('/')[-1]}-{kind}")
    else:
        args = copy.copy(args)
    if reward_side(kind, config):
        check(kind, args, config, version)
        args.beta = config.coef  # non-zero: TRL builds and runs the reference model
        return args, legacy_reward.prepare(args, reward_funcs)
    args.beta = native_beta(kind, args, config, version)
    return args, reward_funcs


def after_init(trainer: Any, kind: str, config: KLConfig, beta: float, version: str) -> None:
    """Record the config on the trainer and fail loudly unless TRL took ``beta``; connect the
    penalty function when the KL is in the reward."""
    took = float(getattr(trainer, "beta", float("nan")))
    if took != beta:
        raise RuntimeError(
            f"kl_patches.trl: {type(trainer).__name__}.beta is {took} after TRL's __init__, not "
            f"{beta}: the KL config {config} would silently not run"
        )
    trainer._kl_config = config
    trainer._kl_native = True
    if reward_side(kind, config):
        legacy_reward.bind(trainer, config)


# ---------------------------------------------------------------------------------- canaries
KL_METHOD_FROM = (("0.14.0", "compute_loss"), ("0.17.0", "_compute_loss"))
"""``(since, name)``: the GRPOTrainer method that adds ``beta * k3`` to the loss."""


def kl_method(version: str) -> str:
    """The name of the GRPOTrainer method holding the KL term in TRL ``version``."""
    from packaging.version import Version

    return [name for since, name in KL_METHOD_FROM if Version(since) <= Version(version)][-1]


def recorded_hashes(method: str) -> dict[str, str]:
    """Body hash -> the first 0.x release of :data:`.versions.NATIVE_ONLY` with that body."""
    from packaging.specifiers import SpecifierSet

    data = recording("kl_patches.adapters.trl")
    out: dict[str, str] = {}
    for release in data.releases:
        if not SpecifierSet(NATIVE_ONLY).contains(release):
            continue
        record = data.at(release).symbols.get(method)
        if record is not None:
            out.setdefault(str(record["body_sha"]), release)
    return out


def body_hash(cls: type, name: str) -> str:
    """The recorder's hash of ``cls.name``'s source (``def`` to its end, class indent kept)."""
    source = inspect.getsource(inspect.getmodule(cls))  # type: ignore[arg-type]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    segment = ast.get_source_segment(source, item, padded=True) or ""
                    return hashlib.sha256(segment.encode("utf-8")).hexdigest()[:12]
    raise LookupError(f"{cls.__name__}.{name} is not defined in {cls.__module__}")


def _probe_kl_source() -> str | None:
    import trl

    name = kl_method(installed_version())
    found = body_hash(trl.GRPOTrainer, name)
    known = recorded_hashes(f"GRPOTrainer.{name}")
    if found in known:
        return None
    return (
        f"GRPOTrainer.{name} has source {found}, none of the bodies recorded for TRL "
        f"{NATIVE_ONLY} ({', '.join(f'{h} ({v})' for h, v in known.items())})"
    )


def canaries() -> tuple[Canary, ...]:
    """The canary of a release patched through ``beta`` only."""
    return (
        Canary(
            "trl.GRPOTrainer KL term",
            "the method adding beta * k3 to the loss is one recorded for TRL 0.14-0.26",
            _probe_kl_source,
        ),
    )
