"""Read what a TRL launch runs, for the audit: ``read(source) -> NativeReading``.

Accepted sources: a ``GRPOConfig``/``RLOOConfig`` (or any object with the same attributes), a
trainer (TRL's or the kl-patches one), or a dict such as a TRL YAML config; a dict names its
trainer with ``trainer: grpo|rloo`` (default grpo, or rloo when it has RLOO-only keys).
``kl_*`` keys (see :class:`.KLArguments`) mean the run goes through kl-patches. The KLConfig
comes from :mod:`.translate`; this module adds whether the updates are off-policy, TRL-specific
findings and the native fix. It also turns a TRL command line (``--config FILE --key value``,
``TrlParser`` style) into that dict. TRL need not be installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kl_patches.adapters.base import Finding, LaunchPayload, NativeReading
from kl_patches.adapters.files import load_mapping, yaml_module
from kl_patches.adapters.flags import long_options
from kl_patches.config import KLConfig

from .entries import PPO_DEFAULTS, PPO_LAST_RELEASE, PYTHON
from .translate import kind_of, native_config, patched_config, settings_of
from .versions import GRPO_DEFAULTS, RLOO_DEFAULTS, SUPPORT

COVERS = {
    "trl.kl_off": "kl_off",
    "trl.token_mean_loss": "token_mean_loss",
}
"""TRL finding codes that already say an audit-level finding (the audit does not repeat it)."""


def _off_policy(s: dict[str, object]) -> bool:
    spg = s["steps_per_generation"]
    ga = s["gradient_accumulation_steps"]
    return int(s["num_iterations"]) > 1 or (spg is not None and int(spg) > int(ga))  # type: ignore[call-overload]


def _int(value: object, default: int) -> int:
    try:
        return int(value)  # type: ignore[call-overload,no-any-return]
    except (TypeError, ValueError):
        return default


def off_policy_reasons(s: dict[str, object], source: Any) -> list[str]:
    """Why a GRPO/RLOO run's updates are off-policy, with the settings behind each reason.

    ``steps_per_generation`` defaults to ``gradient_accumulation_steps``; a
    ``generation_batch_size`` sets it to ``generation_batch_size / (per_device_train_batch_size
    * processes)`` (one process assumed; noted in the reason)."""
    out: list[str] = []
    iterations = _int(s["num_iterations"], 1)
    if iterations > 1:
        out.append(
            f"num_iterations={iterations}: each generation batch is used for {iterations} "
            "passes of updates"
        )
    ga = _int(s["gradient_accumulation_steps"], 1)
    spg = s["steps_per_generation"]
    assumed = ""
    if spg is None and isinstance(source, dict) and source.get("generation_batch_size"):
        per_device = _int(source.get("per_device_train_batch_size", 8), 8)
        spg = _int(source["generation_batch_size"], 0) // max(1, per_device)
        assumed = " (from generation_batch_size / per_device_train_batch_size, one process)"
    if spg is not None and _int(spg, ga) > ga:
        out.append(
            f"steps_per_generation={spg} > gradient_accumulation_steps={ga}{assumed}: one "
            f"generation batch feeds {_int(spg, ga) // max(1, ga)} optimiser steps"
        )
    return out


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
                    "trl.token_mean_loss",
                    "info",
                    f"loss_type={s['loss_type']!r} averages the k3 term over tokens: the "
                    "regulariser is a length-normalised KL, not the sequence KL.",
                    "loss_type=luspo or dr_grpo (per-sequence sums), or kl-patches",
                )
            )
    if config.has_reward and kind == "GRPO" and s["scale_rewards"] != "none":
        out.append(
            Finding(
                "trl.std_scaled_kl",
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


def _context_findings(
    kind: str,
    patchers: tuple[str, ...],
    subclass: str,
    overrides: tuple[str, ...],
    unresolved: tuple[str, ...],
    entry: str,
    assumed: str,
) -> list[Finding]:
    out: list[Finding] = []
    for module in patchers:
        text = PYTHON.patchers.get(module)
        if text and kind == "GRPO":
            out.append(Finding(f"trl.{module}_loss", "warning", text + "."))
    if subclass:
        kl = [m for m in overrides if m in PYTHON.kl_methods]
        out.append(
            Finding(
                "trl.subclass_overrides",
                "warning" if kl else "info",
                f"{subclass} subclasses {kind}Trainer"
                + (
                    f" and overrides {', '.join(kl)}, which compute the KL: what runs may "
                    "differ from the config's meaning read here"
                    if kl
                    else " without overriding a method that computes the KL"
                )
                + ".",
            )
        )
    if unresolved:
        out.append(
            Finding(
                "trl.unresolved_settings",
                "warning",
                f"{', '.join(unresolved)}: set from values the audit cannot compute without "
                "running the script (a variable from elsewhere, a function call, **kwargs); "
                "read at their defaults.",
            )
        )
    if assumed:
        out.append(
            Finding(
                "trl.entry_assumed",
                "warning",
                f"{entry or 'the script'} is not an entry point kl-patches has recorded; "
                f"{assumed}.",
            )
        )
    return out


def read(
    source: Any,
    *,
    entry: str | None = None,
    version: str | None = None,
    patchers: tuple[str, ...] = (),
    subclass: str = "",
    overrides: tuple[str, ...] = (),
    unresolved: tuple[str, ...] = (),
    assumed: str = "",
    **_: Any,
) -> NativeReading:
    """Full reading of a TRL config, trainer or dict for the audit.

    A dict with ``trainer: ppo`` is read as PPOTrainer (TRL 1.12.0's, its last release). The
    keyword arguments come from the audit's Python reader: ``patchers`` (modules such as
    ``unsloth`` that replace the trainer's loss), ``subclass`` and ``overrides`` (a subclass
    of the trainer and the methods it overrides), ``unresolved`` (settings the script computes
    at run time), ``entry``/``assumed`` (an unrecorded script read as a TRL trainer, and why);
    ``version`` is reserved for version-aware reading (the tested release is read).
    """
    if isinstance(source, dict) and str(source.get("trainer", "")).lower() == "ppo":
        return _read_ppo(source, patchers, subclass, overrides, unresolved, entry or "", assumed)
    kind = kind_of(source)
    s = settings_of(source, kind)
    patched_kl = patched_config(source)
    patched = patched_kl is not None
    config = patched_kl if patched_kl is not None else native_config(kind, s)
    reasons = off_policy_reasons(s, source)
    extra = _context_findings(kind, patchers, subclass, overrides, unresolved, entry or "", assumed)
    return NativeReading(
        library="trl",
        version=SUPPORT.installed() or SUPPORT.tested[-1],
        trainer=(subclass or f"{kind}Trainer")
        + (f" ({kind}Trainer)" if subclass else "")
        + (" (kl-patches)" if patched else ""),
        config=config,
        off_policy=bool(reasons) or _off_policy(s),
        settings=s,
        findings=tuple(_findings(kind, s, config, patched)) + tuple(extra),
        fix=_fix(kind, s, config),
        off_policy_reason="; ".join(reasons),
    )


def _read_ppo(
    source: dict[str, Any],
    patchers: tuple[str, ...],
    subclass: str,
    overrides: tuple[str, ...],
    unresolved: tuple[str, ...],
    entry: str,
    assumed: str,
) -> NativeReading:
    """PPOTrainer as TRL 1.12.0 ran it: per-token k1 (or k3) in the reward, then GAE."""
    s: dict[str, object] = {k: source.get(k, v) for k, v in PPO_DEFAULTS.items()}
    estimator = str(s["kl_estimator"])
    if estimator not in ("k1", "k3"):
        raise ValueError(f"kl_estimator={estimator!r} is not valid; choose one of ['k1', 'k3']")
    coef = float(s["kl_coef"])  # type: ignore[arg-type]
    findings: list[Finding] = [
        Finding(
            "trl.ppo_not_in_release",
            "warning",
            f"PPOTrainer is not in TRL {SUPPORT.tested[-1]} (trl.experimental.ppo was last "
            f"shipped in {PPO_LAST_RELEASE}): read with the semantics of {PPO_LAST_RELEASE}.",
        )
    ]
    if coef > 0:
        config = KLConfig(
            estimator=estimator, placement="reward", coef=coef, reward_shape="reward_to_go"
        )
    else:
        config = KLConfig(placement="none", coef=0.0)
        findings.append(Finding("trl.kl_off", "info", "PPOConfig.kl_coef=0: no KL regularisation."))
    gamma, lam = float(s["gamma"]), float(s["lam"])  # type: ignore[arg-type]
    if coef > 0 and (gamma, lam) != (1.0, 1.0):
        findings.append(
            Finding(
                "trl.ppo_gae_discounts_kl",
                "warning",
                f"GAE with gamma={gamma:g}, lam={lam:g} discounts the per-token KL penalty "
                "through the critic's advantage, so the reward side no longer follows the "
                "sequence KL gradient exactly.",
                "gamma=1.0 lam=1.0",
            )
        )
    if s["whiten_rewards"]:
        findings.append(
            Finding(
                "trl.ppo_whiten_rewards",
                "info",
                "whiten_rewards rescales the KL-shaped rewards from batch to batch.",
            )
        )
    epochs = _int(s["num_ppo_epochs"], 4)
    minis = _int(s["num_mini_batches"], 1)
    reasons = []
    if epochs > 1 or minis > 1:
        reasons.append(
            f"num_ppo_epochs={epochs} x num_mini_batches={minis}: "
            f"{epochs * minis} updates per batch"
        )
    findings += _context_findings("PPO", patchers, subclass, overrides, unresolved, entry, assumed)
    return NativeReading(
        library="trl",
        version=PPO_LAST_RELEASE,
        trainer=(subclass + " (PPOTrainer)") if subclass else "PPOTrainer",
        config=config,
        off_policy=bool(reasons),
        settings=s,
        findings=tuple(findings),
        fix=(
            f"RLOOTrainer with beta={coef if coef > 0 else 0.05:g} (k1 in the reward, per "
            "sequence)",
        ),
        off_policy_reason="; ".join(reasons),
    )


def installed_defaults() -> dict[str, dict[str, object]]:
    """KL-relevant defaults of the installed TRL (imports it), to compare with :mod:`.versions`."""
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


def claims(mapping: dict[str, Any]) -> bool:
    """A flat mapping (no nested sections) is a TRL ``TrlParser`` config."""
    return bool(mapping) and all(not isinstance(v, dict) for v in mapping.values())


KNOWN_KEYS = frozenset({*GRPO_DEFAULTS, *RLOO_DEFAULTS, *PPO_DEFAULTS})
"""TRL config keys the reader reads (for the audit's unknown-script heuristics)."""


def _scalar(text: str) -> Any:
    """A flag value as TRL's parser would type it (YAML scalars: 0.1, true, null, ...)."""
    yaml = yaml_module()
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, (str, int, float, bool)) or value is None else text


def _resolve(name: str, base_dir: Path | None) -> Path:
    path = Path(name)
    if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
        return base_dir / path
    return path


def argv_dict(argv: list[str], trainer: str | None, base_dir: Path | None) -> dict[str, Any]:
    """``--config FILE --key value ...`` (TrlParser style) as one mapping; flags win."""
    out: dict[str, Any] = {}
    flags: dict[str, Any] = {}
    for name, inline, following in long_options(argv):
        value = inline if inline is not None else (following[0] if following else "true")
        if name == "config":
            out.update(load_mapping(_resolve(value, base_dir), what="TRL config"))
            continue
        flags[name] = _scalar(value)
    out.update(flags)
    if trainer is not None:
        out["trainer"] = trainer
    return out


def entry_payload(
    label: str, argv: list[str], base_dir: Path | None, origin: str = ""
) -> LaunchPayload:
    """A ``trl grpo|rloo|ppo`` (or ``trl.scripts.*``) launch as the reader's dict."""
    trainer = label.split()[-1]
    return LaunchPayload(argv_dict(argv, trainer, base_dir), context={"entry": label})


def bare_payload(words: list[str]) -> dict[str, Any]:
    """TRL flags without an entry point (``--library trl``) as the reader's dict."""
    return argv_dict(words, None, None)
