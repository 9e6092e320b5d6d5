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


def read(source: Any) -> NativeReading:
    """Full reading of a TRL config, trainer or dict for the audit."""
    kind = kind_of(source)
    s = settings_of(source, kind)
    patched_kl = patched_config(source)
    patched = patched_kl is not None
    config = patched_kl if patched_kl is not None else native_config(kind, s)
    return NativeReading(
        library="trl",
        version=SUPPORT.installed() or SUPPORT.tested[-1],
        trainer=f"{kind}Trainer" + (" (kl-patches)" if patched else ""),
        config=config,
        off_policy=_off_policy(s),
        settings=s,
        findings=tuple(_findings(kind, s, config, patched)),
        fix=_fix(kind, s, config),
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
    """A ``trl grpo|rloo`` (or ``trl.scripts.*``) launch as the reader's dict."""
    return LaunchPayload(argv_dict(argv, label.split()[-1], base_dir))


def bare_payload(words: list[str]) -> dict[str, Any]:
    """TRL flags without an entry point (``--library trl``) as the reader's dict."""
    return argv_dict(words, None, None)
