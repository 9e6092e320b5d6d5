"""Read a verl launch for the audit: the KLConfig it runs plus verl-specific findings.

Works without verl installed (the defaults of the tested version live in :mod:`.versions`).
The theory's verdict is added by the audit itself; the findings here are what only verl does:
estimators that drop the reward KL (GDPO, multi-turn GRPO), both switches on with k3, GRPO's
std normalisation scaling the KL, two coefficients, the aggregation shared with the policy
loss, and the loss KL without importance weights under several updates per batch. It also
turns a ``main_ppo`` command line into its Hydra overrides, and reads ``kl-patches verl``
launches.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kl_patches.adapters.base import Finding, LaunchPayload, NativeReading
from kl_patches.config import KLConfig
from kl_patches.theory import verdict

from .delivery import PatchSpec
from .translate import (
    from_config,
    loss_side,
    patch_spec_of,
    reward_side,
    settings_of,
    to_overrides,
)
from .versions import ACTOR, GRPO_LIKE, MARKER, TESTED_VERSIONS, VERL_ESTIMATORS, installed_version

COVERS = {
    "verl.kl_off": "kl_off",
    "verl.gdpo_drops_kl": "kl_off",
    "verl.multi_turn_drops_kl": "kl_off",
    "verl.mismatched_coefficients": "coef_mismatch",
    "verl.k3_clamp": "kl_clamp",
    "verl.token_mean_loss": "token_mean_loss",
    "verl.off_policy_loss_kl": "off_policy",
}
"""verl finding codes that already say an audit-level finding (the audit does not repeat it)."""

SECTIONS = ("actor_rollout_ref", "algorithm")
"""Top-level mapping keys that mark a YAML file as a verl (Hydra) config."""

HYDRA_VALUE_OPTIONS = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd")
"""Hydra's own command-line options that take a value."""


def is_off_policy(settings: dict[str, Any]) -> bool:
    """Several actor updates per batch: ``ppo_epochs > 1`` or mini-batches smaller than it."""
    epochs = int(settings[ACTOR + "ppo_epochs"])
    mini = int(settings[ACTOR + "ppo_mini_batch_size"])
    return epochs > 1 or mini < int(settings["data.train_batch_size"])


def read(source: Any) -> NativeReading:
    """What a verl config does with the KL: KLConfig, off-policy flag, findings, native fix.

    ``source`` is anything :func:`kl_patches.adapters.verl.translate.settings_of` reads: an
    OmegaConf/dict config, a YAML path or text, or a list of Hydra overrides.
    """
    s = settings_of(source)
    findings: list[Finding] = []
    try:
        config = from_config(s_nested(s))
    except ValueError as exc:
        config = KLConfig(placement="none", coef=0.0)
        findings.append(Finding("verl.unknown_estimator", "error", str(exc), fix=_fix_text(s)))
    off_policy = is_off_policy(s)
    findings += _findings(s, config, off_policy)
    if any(f.code in DROPS_REWARD_KL for f in findings):
        config = _without_reward_side(config)
    adv = str(s["algorithm.adv_estimator"])
    return NativeReading(
        library="verl",
        version=installed_version() or TESTED_VERSIONS[-1],
        trainer=f"main_ppo ({adv})",
        config=config,
        off_policy=off_policy,
        settings=dict(s),
        findings=tuple(findings),
        fix=tuple(_fix(s)),
    )


DROPS_REWARD_KL = ("verl.gdpo_drops_kl", "verl.multi_turn_drops_kl")
"""Findings after which the reward-side KL never reaches the advantage."""


def _without_reward_side(config: KLConfig) -> KLConfig:
    """What verl runs when its advantage estimator discards the reward-side KL."""
    if config.placement == "both":
        return config.replace(placement="loss", coef=config.loss_coef_value, loss_coef=None)
    if config.placement == "reward":
        return KLConfig(placement="none", coef=config.coef)
    return config


def s_nested(flat: dict[str, Any]) -> dict[str, Any]:
    """Flat dotted settings -> nested dict (so they read back through ``settings_of``)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def _scale(s: dict[str, Any]) -> float:
    reward, loss = reward_side(s), loss_side(s)
    if reward.on:
        return reward.coef
    if loss.on:
        return loss.coef
    return float(s["algorithm.kl_ctrl.kl_coef"])


def _fix(s: dict[str, Any]) -> list[str]:
    return to_overrides(KLConfig(estimator="k1", placement="reward", coef=_scale(s)))


def _fix_text(s: dict[str, Any]) -> str:
    return " ".join(_fix(s))


def _findings(s: dict[str, Any], config: KLConfig, off_policy: bool) -> list[Finding]:
    reward, loss = reward_side(s), loss_side(s)
    adv = str(s["algorithm.adv_estimator"])
    fix = _fix_text(s)
    out: list[Finding] = []
    spec = _requested_patch(s)
    if spec is not None and MARKER in (reward.name, loss.name):
        out.append(
            Finding(
                "verl.kl_patches_patch",
                "info",
                f"The KL runs through the kl-patches verl patch ({spec.config}"
                + (", KL outside GRPO's std" if spec.kl_outside_std else "")
                + "): kl-patches must be installed on every node; verl alone raises on the "
                f"estimator name {MARKER!r}.",
            )
        )
    if not reward.on and not loss.on:
        out.append(
            Finding(
                "verl.kl_off",
                "info",
                "Both verl KL switches are off (use_kl_in_reward and actor.use_kl_loss), or their "
                "coefficients are 0: nothing keeps the policy near the reference model.",
                fix=fix,
            )
        )
    if reward.on and adv == "gdpo":
        out.append(
            Finding(
                "verl.gdpo_drops_kl",
                "error",
                "adv_estimator=gdpo rebuilds its scores from algorithm.gdpo_reward_keys and "
                "ignores token_level_rewards, so the KL subtracted by use_kl_in_reward never "
                "reaches the advantage: training runs without the reward KL.",
                fix="algorithm.adv_estimator=grpo (or rloo) with the same KL overrides",
            )
        )
    multi_turn = bool(s["actor_rollout_ref.rollout.multi_turn.enable"])
    if reward.on and multi_turn and adv == "grpo" and bool(s["trainer.use_v1"]):
        out.append(
            Finding(
                "verl.multi_turn_drops_kl",
                "error",
                "Multi-turn GRPO in verl's v1 trainer computes the advantage from the final "
                "output of each trajectory only and broadcasts it, so the reward KL of the "
                "earlier outputs of a trajectory is dropped.",
                fix="algorithm.adv_estimator=rloo, or one output per trajectory",
            )
        )
    if reward.on and loss.on and "k3" in (reward.estimator, _value_estimator(loss.name)):
        exact = verdict(config, off_policy=off_policy).unbiased
        out.append(
            Finding(
                "verl.both_switches_k3",
                "info" if exact else "warning",
                f"Both KL switches are on (reward {reward.name!r}, loss {loss.name!r}) with k3 on "
                "at least one side. "
                + (
                    "With one estimator, one coefficient and a token-sum loss this is the exact "
                    "'both' construction (the reward gives the score-function term, the loss the "
                    "path-wise term); k1 in the reward alone is simpler and has less variance."
                    if exact
                    else "Only the same estimator on both sides, with one coefficient, a "
                    "token-sum loss (loss_agg_mode=seq-mean-token-sum) and no std scaling of the "
                    "reward KL, adds up to the reverse-KL gradient; otherwise k3 in the reward "
                    "cancels most of the regulariser and k3 in the loss follows a forward KL."
                ),
                fix="" if exact else fix,
            )
        )
    if reward.on and loss.on and reward.coef != loss.coef:
        out.append(
            Finding(
                "verl.mismatched_coefficients",
                "warning",
                f"algorithm.kl_ctrl.kl_coef={reward.coef:g} differs from "
                f"actor.kl_loss_coef={loss.coef:g}: the same estimator in both places is unbiased "
                "only with one coefficient.",
                fix=f"{ACTOR}kl_loss_coef={reward.coef!r}",
            )
        )
    if reward.on and loss.on and reward.estimator != loss.estimator:
        out.append(
            Finding(
                "verl.mixed_estimators",
                "warning",
                f"The reward uses {reward.name!r} and the loss {loss.name!r}; the reported "
                "KLConfig describes the reward side's estimator only.",
                fix=fix,
            )
        )
    outside_std = spec is not None and spec.kl_outside_std and reward.name == MARKER
    std_on = bool(s["algorithm.norm_adv_by_std_in_grpo"])
    if reward.on and adv in GRPO_LIKE and std_on and not outside_std:
        out.append(
            Finding(
                "verl.std_scaled_kl",
                "warning",
                "GRPO divides the KL-shaped score by the group's reward std, so the effective KL "
                "coefficient changes from group to group (large where rewards agree)"
                + (
                    "; the loss-side KL is not divided, so the two placements no longer share "
                    "one coefficient."
                    if loss.on
                    else "."
                ),
                fix="algorithm.norm_adv_by_std_in_grpo=False, or kl-patches' kl_outside_std patch",
            )
        )
    if reward.on and str(s["algorithm.kl_ctrl.type"]) == "adaptive":
        out.append(
            Finding(
                "verl.adaptive_kl",
                "info",
                "algorithm.kl_ctrl.type=adaptive moves the reward coefficient towards target_kl "
                "(per-token KL); the loss coefficient, if any, stays fixed.",
                fix="algorithm.kl_ctrl.type=fixed",
            )
        )
    if reward.on and bool(s["algorithm.rollout_correction.bypass_mode"]):
        out.append(
            Finding(
                "verl.bypass_mode_reward_kl",
                "warning",
                "rollout_correction.bypass_mode uses the rollout engine's log-probs as old log-"
                "probs, so the reward KL compares two engines (rollout vs reference model) and "
                "carries their numerical mismatch.",
                fix="algorithm.rollout_correction.bypass_mode=False",
            )
        )
    if loss.on:
        weighted = config.importance_weighting != "none"
        out += _loss_findings(s, loss.name, off_policy and not weighted)
    native_k3 = config.estimator == "k3" and MARKER not in (reward.name, loss.name)
    if native_k3 and config.placement != "none":
        out.append(
            Finding(
                "verl.k3_clamp",
                "info",
                "verl's k3 clamps the log-ratio to [-20, 20] and the value to [-10, 10]; the "
                "clamp on the value saturates for per-token ratios pi_ref/pi above about 14.",
            )
        )
    return out


def _requested_patch(s: dict[str, Any]) -> PatchSpec | None:
    try:
        return patch_spec_of(s)
    except ValueError:
        return None


def _value_estimator(name: str) -> str | None:
    """KLConfig estimator of a verl name's value (``+`` stripped); None if unknown."""
    return VERL_ESTIMATORS.get(name.removesuffix("+"))


def _loss_findings(s: dict[str, Any], name: str, off_policy: bool) -> list[Finding]:
    out: list[Finding] = []
    mode = str(s[ACTOR + "loss_agg_mode"])
    if mode == "token-mean":
        out.append(
            Finding(
                "verl.token_mean_loss",
                "info",
                "The loss KL is aggregated with loss_agg_mode=token-mean (mean over the mini-"
                "batch's tokens), as is the policy loss: the KL per sequence is weighted by its "
                "length relative to a per-sequence sum, and the step scales with 1/mean length.",
                fix=f"{ACTOR}loss_agg_mode=seq-mean-token-sum",
            )
        )
    elif mode == "seq-mean-token-mean":
        out.append(
            Finding(
                "verl.length_normalised_loss",
                "warning",
                "loss_agg_mode=seq-mean-token-mean divides each sequence's KL by its length: a "
                "length-normalised KL, not the sequence KL.",
                fix=f"{ACTOR}loss_agg_mode=seq-mean-token-sum",
            )
        )
    if name.endswith("+"):
        out.append(
            Finding(
                "verl.straight_through",
                "info",
                f"kl_loss_type={name!r} logs the value of {name[:-1]!r} but takes k2's gradient "
                "(a token-level k2 in the loss, read as k2).",
            )
        )
    if off_policy:
        epochs = s[ACTOR + "ppo_epochs"]
        mini = s[ACTOR + "ppo_mini_batch_size"]
        out.append(
            Finding(
                "verl.off_policy_loss_kl",
                "warning",
                f"ppo_epochs={epochs} and ppo_mini_batch_size={mini} < data.train_batch_size="
                f"{s['data.train_batch_size']} give several updates per batch, but verl's loss KL "
                "has no importance weight pi/pi_old: after the first update it is evaluated on "
                "samples from an older policy.",
                fix="kl-patches importance_weighting='token', or "
                f"{ACTOR}ppo_mini_batch_size=<data.train_batch_size> {ACTOR}ppo_epochs=1",
            )
        )
    return out


def claims(mapping: Mapping[str, Any]) -> bool:
    """A mapping with a verl section (``algorithm``, ``actor_rollout_ref``) is a verl config."""
    return any(isinstance(mapping.get(k), dict) for k in SECTIONS)


def split_hydra_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """(overrides, Hydra's own command-line options) of a Hydra app's argv."""
    overrides: list[str] = []
    options: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if tok.startswith("-") and not tok.startswith("--") and len(tok) > 1 and "=" in tok:
            options.append(tok)
        elif tok.startswith("-"):
            options.append(tok)
            if tok in HYDRA_VALUE_OPTIONS and i < len(argv):
                options.append(argv[i])
                i += 1
        else:
            overrides.append(tok)
    return overrides, options


def entry_payload(
    label: str, argv: list[str], base_dir: Path | None = None, origin: str = ""
) -> LaunchPayload:
    """A ``main_ppo`` launch: its Hydra overrides (Hydra's own options are noted, not read)."""
    overrides, options = split_hydra_options(argv)
    notes: tuple[str, ...] = ()
    if options:
        notes = (
            f"Hydra options not read: {' '.join(options)}; the overrides are read on top of "
            "verl's default config, so KL settings in a custom config file are not seen "
            "(audit that YAML file too)",
        )
    return LaunchPayload(overrides, notes)


def installed_defaults() -> dict[str, Any]:
    """The KL-relevant defaults of the installed verl, read by composing its Hydra config."""
    from .hydra_config import compose
    from .versions import DEFAULTS

    settings = settings_of(compose([]))
    return {key: settings[key] for key in DEFAULTS}
