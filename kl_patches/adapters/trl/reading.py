"""Read what TRL actually runs: ``from_trl_config(cfg) -> KLConfig`` and ``read(...)``.

Pure parsing with the TRL 1.16 defaults written down in :mod:`.native`, so the audit works
without TRL installed. Accepted sources: a ``GRPOConfig``/``RLOOConfig`` (or any object with the
same attributes), a trainer (TRL's or the kl-patches one), or a dict such as a TRL YAML config;
a dict names its trainer with ``trainer: grpo|rloo`` (default grpo, or rloo when it has
RLOO-only keys). ``kl_*`` keys (see :class:`.KLArguments`) mean the run goes through kl-patches.

Native TRL 1.16: GRPO runs k3 in the loss (times pi/pi_old when ``use_bias_correction_kl``),
reduced like its ``loss_type``, or nothing when ``beta == 0`` (its default); RLOO runs k1 in the
reward, summed over the sequence, before the leave-one-out baseline (``beta`` default 0.05).
"""

from __future__ import annotations

from typing import Any

from kl_patches.config import KLConfig
from kl_patches.reading import Finding, NativeReading

from .native import GRPO_DEFAULTS, GRPO_LOSS_AGGREGATION, RLOO_DEFAULTS, TESTED_MIN

_RLOO_ONLY = ("normalize_advantages", "reward_clip_range")
_KL_KEYS = (
    "kl_estimator",
    "kl_placement",
    "kl_coef",
    "kl_loss_coef",
    "kl_granularity",
    "kl_reward_shape",
    "kl_loss_aggregation",
    "kl_importance_weighting",
    "kl_log_ratio_clamp",
    "kl_clamp",
)


def _kind(source: Any) -> str:
    if isinstance(source, dict):
        name = str(source.get("trainer", "")).lower()
        if name in ("grpo", "rloo"):
            return name.upper()
        if name:
            raise ValueError(f"trainer={name!r} is not valid; choose one of ['grpo', 'rloo']")
        return "RLOO" if any(k in source for k in _RLOO_ONLY) else "GRPO"
    cls_names = [c.__name__ for c in type(source).__mro__]
    if any(n.startswith("RLOO") for n in cls_names):
        return "RLOO"
    if any(n.startswith("GRPO") for n in cls_names):
        return "GRPO"
    return "RLOO" if any(hasattr(source, k) for k in _RLOO_ONLY) else "GRPO"


def _settings(source: Any, kind: str) -> dict[str, object]:
    defaults = GRPO_DEFAULTS if kind == "GRPO" else RLOO_DEFAULTS
    args = getattr(source, "args", source)  # a trainer carries its config in .args
    out: dict[str, object] = {}
    for key, default in defaults.items():
        if isinstance(args, dict):
            out[key] = args.get(key, default)
        else:
            out[key] = getattr(args, key, default)
    if kind == "GRPO" and isinstance(out["scale_rewards"], bool):
        out["scale_rewards"] = "group" if out["scale_rewards"] else "none"
    return out


def _patched_config(source: Any) -> KLConfig | None:
    config = source.__dict__.get("_kl_config") if hasattr(source, "__dict__") else None
    if isinstance(config, KLConfig):
        return config
    if isinstance(source, dict) and any(k in source for k in _KL_KEYS):
        from .arguments import KLArguments

        return KLArguments(**{k: source[k] for k in _KL_KEYS if k in source}).to_config()
    return None


def _native_config(kind: str, s: dict[str, object]) -> KLConfig:
    beta = float(s["beta"])  # type: ignore[arg-type]
    if beta == 0.0:
        return KLConfig(placement="none", coef=0.0)
    if kind == "RLOO":
        return KLConfig(estimator="k1", placement="reward", coef=beta)
    loss_type = str(s["loss_type"])
    if loss_type not in GRPO_LOSS_AGGREGATION:
        raise ValueError(
            f"loss_type={loss_type!r} is not valid for TRL {'.'.join(map(str, TESTED_MIN))}; "
            f"choose one of {sorted(GRPO_LOSS_AGGREGATION)}"
        )
    coef = beta
    if loss_type == "dr_grpo":  # sum / (B * max_completion_length): a sum with beta / L
        coef = beta / float(s["max_completion_length"])  # type: ignore[arg-type]
    return KLConfig(
        estimator="k3",
        placement="loss",
        coef=coef,
        loss_aggregation=GRPO_LOSS_AGGREGATION[loss_type],
        importance_weighting="token" if s["use_bias_correction_kl"] else "none",
    )


def from_trl_config(source: Any) -> KLConfig:
    """The KLConfig a TRL config, trainer or dict runs (the kl-patches one when patched)."""
    patched = _patched_config(source)
    if patched is not None:
        return patched
    kind = _kind(source)
    return _native_config(kind, _settings(source, kind))


def _off_policy(s: dict[str, object]) -> bool:
    spg = s["steps_per_generation"]
    ga = s["gradient_accumulation_steps"]
    return int(s["num_iterations"]) > 1 or (spg is not None and int(spg) > int(ga))  # type: ignore[call-overload]


def _findings(kind: str, s: dict[str, object], config: KLConfig, patched: bool) -> list[Finding]:
    out: list[Finding] = []
    beta = float(s["beta"])  # type: ignore[arg-type]
    if not patched and beta == 0.0:
        out.append(
            Finding(
                "trl.kl_off",
                "warning" if kind == "GRPO" else "info",
                f"{kind}Config.beta=0: no KL regularisation and no reference model"
                + (" (GRPO's default since TRL 0.19)." if kind == "GRPO" else "."),
                "kl_placement=reward kl_estimator=k1 kl_coef=0.05 via kl_patches.trl",
            )
        )
    if not patched and kind == "GRPO" and beta != 0.0:
        if s["use_bias_correction_kl"] and s["importance_sampling_level"] == "sequence":
            out.append(
                Finding(
                    "trl.sequence_ratio_on_token_kl",
                    "warning",
                    "use_bias_correction_kl with importance_sampling_level='sequence' multiplies "
                    "each token's k3 by the sequence-mean ratio (TRL issue #6586), adding a "
                    "spurious gradient term; read as token weighting here.",
                    "use_bias_correction_kl=false, or the kl-patches loss side",
                )
            )
        if s["use_vllm"]:
            out.append(
                Finding(
                    "trl.kl_not_is_corrected",
                    "info",
                    "With vLLM, TRL's importance-sampling correction multiplies the policy loss "
                    "but not the k3 term.",
                )
            )
        if config.loss_aggregation != "sum":
            out.append(
                Finding(
                    "token_mean_loss",
                    "info",
                    f"loss_type={s['loss_type']!r} averages the k3 term over tokens: the "
                    "regulariser is a length-normalised KL, not the sequence KL.",
                    "loss_type=luspo or dr_grpo (per-sequence sums), or kl-patches",
                )
            )
    if config.has_reward and kind == "GRPO" and s["scale_rewards"] != "none":
        out.append(
            Finding(
                "std_scaled_kl",
                "warning",
                f"KL in the reward with scale_rewards={s['scale_rewards']!r}: reward minus KL is "
                "divided by the group std, so the effective coefficient varies per group.",
                "scale_rewards=none",
            )
        )
    return out


def _fix(kind: str, s: dict[str, object], config: KLConfig) -> tuple[str, ...]:
    beta = float(s["beta"])  # type: ignore[arg-type]
    coef = config.coef if config.placement != "none" and config.coef > 0 else (beta or 0.05)
    if kind == "RLOO":
        return (f"beta={coef:g}",)
    return (
        f"kl_estimator=k1 kl_placement=reward kl_coef={coef:g} (kl_patches.trl: GRPOTrainer "
        "kl=..., KLArguments, or apply())",
        "beta=0.0 (kl-patches manages the reference model)",
        "scale_rewards=none",
    )


def read(source: Any) -> NativeReading:
    """Full reading of a TRL config, trainer or dict for the audit."""
    kind = _kind(source)
    s = _settings(source, kind)
    patched_config = _patched_config(source)
    patched = patched_config is not None
    config = patched_config if patched_config is not None else _native_config(kind, s)
    version: str | None
    try:
        from importlib.metadata import version as _version

        version = _version("trl")
    except Exception:
        version = ".".join(map(str, TESTED_MIN))
    return NativeReading(
        library="trl",
        version=version,
        trainer=f"{kind}Trainer" + (" (kl-patches)" if patched else ""),
        config=config,
        off_policy=_off_policy(s),
        settings=s,
        findings=tuple(_findings(kind, s, config, patched)),
        fix=_fix(kind, s, config),
    )


def installed_defaults() -> dict[str, dict[str, object]]:
    """KL-relevant defaults of the installed TRL (imports it), to compare with :mod:`.native`."""
    import trl

    out: dict[str, dict[str, object]] = {}
    for kind, cls, keys in (
        ("GRPO", trl.GRPOConfig, GRPO_DEFAULTS),
        ("RLOO", trl.RLOOConfig, RLOO_DEFAULTS),
    ):
        cfg = cls(output_dir="/tmp/kl-patches-defaults", use_cpu=True, bf16=False)
        values = {k: getattr(cfg, k) for k in keys}
        values["steps_per_generation"] = None  # TRL fills it from gradient_accumulation_steps
        out[kind] = values
    return out
