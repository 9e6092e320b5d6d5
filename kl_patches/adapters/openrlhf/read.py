"""Read an OpenRLHF ``train_ppo_ray`` command line for the audit (no OpenRLHF needed).

:func:`read` returns a :class:`~kl_patches.adapters.base.NativeReading`: the KLConfig OpenRLHF runs
(:func:`~kl_patches.adapters.openrlhf.translate.from_args`), whether the updates are off-policy, and
the findings that are specific to OpenRLHF 0.11.2. The audit adds the theory's verdict itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kl_patches.adapters.base import Finding, NativeReading
from kl_patches.config import KLConfig

from .entries import LEGACY_FLAGS, facts
from .translate import (
    config_from_settings,
    is_off_policy,
    parse_settings,
    to_args,
    updates_per_rollout,
)
from .versions import (
    GROUP_ESTIMATORS,
    IS_WEIGHT_CLIP,
    NATIVE_KL_CLAMP,
    TESTED_VERSION,
    WHITENED_ESTIMATORS,
    installed_version,
)

TRAINER = "train_ppo_ray"

COVERS = {
    "openrlhf.kl_off": "kl_off",
    "openrlhf.kl_clamp": "kl_clamp",
    "openrlhf.kl_loss_token_mean": "token_mean_loss",
    "openrlhf.off_policy_kl_loss": "off_policy",
}
"""OpenRLHF finding codes that already say an audit-level finding (not repeated by the audit)."""


def _flags(args: list[str]) -> str:
    return " ".join(args)


def findings_for(settings: dict[str, object], given: frozenset[str]) -> tuple[Finding, ...]:
    """OpenRLHF-specific findings for parsed ``train_ppo_ray`` settings."""
    out: list[Finding] = []
    coef = float(settings["algo.kl.init_coef"])  # type: ignore[arg-type]
    use_loss = bool(settings["algo.kl.use_loss"])
    estimator = str(settings["algo.kl.estimator"])
    adv = str(settings["algo.advantage.estimator"])
    off_policy = is_off_policy(settings)
    recommended = _flags(to_args(KLConfig(coef=coef if coef > 0 else 0.01)))

    if coef <= 0:
        asked = given & {"algo.kl.use_loss", "algo.kl.estimator", "algo.kl.unbiased_gradient"}
        out.append(
            Finding(
                "openrlhf.kl_off",
                "error" if asked else "warning",
                f"--algo.kl.init_coef {coef:g} builds no reference model, so every KL term is "
                "zero"
                + (f" although {sorted('--' + g for g in asked)} ask for one" if asked else "")
                + ". There is no KL regularisation at all.",
                f"{recommended} (or drop the other KL flags if no KL is intended)",
            )
        )
        return tuple(out)

    out.append(
        Finding(
            "openrlhf.kl_clamp",
            "info",
            f"OpenRLHF clamps every per-token estimator value to [-{NATIVE_KL_CLAMP:g}, "
            f"{NATIVE_KL_CLAMP:g}] (k1 included); tokens beyond it lose their KL gradient.",
            "python -m kl_patches.openrlhf ... --kl.kl_clamp none (the core's unclamped maths)",
        )
    )
    if not use_loss:
        if adv in GROUP_ESTIMATORS:
            scaled = (
                " divided by the group std while the KL is not, so beta is relative to a "
                "unit-std task reward and does not transfer from libraries that normalise "
                "after adding the KL"
                if adv == "group_norm"
                else ""
            )
            out.append(
                Finding(
                    "openrlhf.kl_after_baseline",
                    "info",
                    f"With {adv}, the KL penalty is added per token after the group baseline of "
                    f"the scalar reward: it is not baselined (unbiased, more variance), the task "
                    f"reward is{scaled or ' baselined alone'}.",
                    "python -m kl_patches.openrlhf ... --kl k1-in-reward --kl.reward_shape "
                    "sequence (KL inside the group baseline, as in the paper's RLOO runs)",
                )
            )
        if adv in WHITENED_ESTIMATORS:
            out.append(
                Finding(
                    "openrlhf.kl_whitened",
                    "info",
                    f"With {adv}, advantages (task reward and KL together) are whitened over "
                    "the batch, which rescales the effective beta from batch to batch.",
                    "--algo.advantage.no_std_norm keeps the scale (mean-centring only)",
                )
            )
        gamma = float(settings["algo.advantage.gamma"])  # type: ignore[arg-type]
        lambd = float(settings["algo.advantage.lambd"])  # type: ignore[arg-type]
        if (adv == "reinforce" and gamma != 1.0) or (adv == "gae" and (gamma, lambd) != (1, 1)):
            out.append(
                Finding(
                    "openrlhf.kl_discounted",
                    "warning",
                    f"gamma={gamma:g}, lambd={lambd:g} discount the per-token KL penalty, so "
                    "the reward side no longer follows the sequence KL gradient.",
                    "--algo.advantage.gamma 1 --algo.advantage.lambd 1",
                )
            )
    else:
        if settings["actor.loss_agg_mode"] != "token-mean":
            out.append(
                Finding(
                    "openrlhf.kl_loss_token_mean",
                    "info",
                    "--actor.loss_agg_mode changes only the policy loss: the KL loss stays a "
                    "token mean over the step's tokens (a length-normalised KL).",
                )
            )
        if settings["algo.kl.unbiased_gradient"]:
            out.append(
                Finding(
                    "openrlhf.unbiased_gradient_token_level",
                    "info",
                    f"--algo.kl.unbiased_gradient backpropagates w*k1 per token (w = pi/pi_old "
                    f"clipped at {IS_WEIGHT_CLIP:g}), whatever --algo.kl.estimator ({estimator}) "
                    "says: the own-token part of the reverse-KL gradient only, not the "
                    "sequence-level one.",
                    recommended,
                )
            )
        elif off_policy:
            out.append(
                Finding(
                    "openrlhf.off_policy_kl_loss",
                    "warning",
                    f"{updates_per_rollout(settings)} updates per rollout batch (or async) with "
                    "the KL in the loss and no importance weight: the KL-loss gradient is taken "
                    "on samples from an older policy.",
                    "--algo.kl.unbiased_gradient (or k1 in the reward: " + recommended + ")",
                )
            )
    if settings["algo.kl.target"] is not None:
        out.append(
            Finding(
                "openrlhf.adaptive_controller",
                "warning",
                "--algo.kl.target enables the adaptive KL controller, which OpenRLHF itself marks "
                "as incompatible with its trainer (TODO in ppo_trainer.py); beta drifts"
                + (
                    ", and under --algo.kl.use_loss it is driven by the aggregated KL loss, not "
                    "the per-sample KL"
                    if use_loss
                    else ""
                )
                + ".",
                "drop --algo.kl.target (fixed controller)",
            )
        )
    return tuple(out)


def modernise(argv: Sequence[str]) -> tuple[list[str], list[Finding]]:
    """An argv with flags of older releases rewritten as the current flags they mean."""
    out: list[str] = []
    findings: list[Finding] = []
    for token in (str(t) for t in argv):
        name = token[2:].split("=", 1)[0] if token.startswith("--") else ""
        if name in LEGACY_FLAGS:
            replacement, text = LEGACY_FLAGS[name]
            out.extend(replacement)
            findings.append(Finding("openrlhf.legacy_flag", "info", text))
            continue
        out.append(token)
    return out, findings


def off_policy_reasons(settings: dict[str, object]) -> list[str]:
    """Why an OpenRLHF run's updates are off-policy, with the flags behind each reason."""
    out: list[str] = []
    n = updates_per_rollout(settings)
    if n > 1:
        out.append(
            f"{n} optimiser steps per rollout batch (rollout.batch_size "
            f"{settings['rollout.batch_size']} x n_samples_per_prompt "
            f"{settings['rollout.n_samples_per_prompt']} / train.batch_size "
            f"{settings['train.batch_size']}, x train.max_epochs {settings['train.max_epochs']})"
        )
    if settings["train.async_enable"]:
        out.append("train.async_enable: rollouts are generated by an older policy")
    return out


def read(
    argv: Sequence[str],
    *,
    entry: str | None = None,
    version: str | None = None,
    assumed: str = "",
    **_: Any,
) -> NativeReading:
    """The audit's view of an OpenRLHF ``train_ppo_ray`` command line.

    ``entry`` is the entry point (``openrlhf.cli.train_ppo`` reads the same flags; an
    unrecorded one gives a finding naming ``assumed``); ``version`` is reserved for
    version-aware reading (the tested release is read).
    """
    argv, legacy = modernise(argv)
    settings, given = parse_settings(argv)
    config = config_from_settings(settings)
    coef = config.coef if config.coef > 0 else 0.01
    fix_config = KLConfig(coef=coef, reward_shape="reward_to_go", kl_clamp=NATIVE_KL_CLAMP)
    fix = tuple(to_args(fix_config))
    if settings["algo.kl.use_loss"]:
        fix += ("(remove --algo.kl.use_loss)",)
    if settings["algo.kl.unbiased_gradient"]:
        fix += ("(remove --algo.kl.unbiased_gradient)",)
    extra: list[Finding] = list(legacy)
    name = TRAINER
    if entry and entry not in ("openrlhf.cli.train_ppo_ray", TRAINER):
        name = entry.rsplit(".", 1)[-1] if facts(entry) is not None else entry
        if facts(entry) is None:
            extra.append(
                Finding(
                    "openrlhf.entry_assumed",
                    "warning",
                    f"{entry} is not an entry point kl-patches has recorded"
                    + (f" ({assumed})" if assumed else "")
                    + "; its flags are read as OpenRLHF train_ppo_ray's.",
                )
            )
    reasons = off_policy_reasons(settings)
    return NativeReading(
        library="openrlhf",
        version=installed_version() or TESTED_VERSION,
        trainer=f"{name} ({settings['algo.advantage.estimator']})",
        config=config,
        off_policy=is_off_policy(settings),
        settings=dict(settings),
        findings=findings_for(settings, given) + tuple(extra),
        fix=fix,
        off_policy_reason="; ".join(reasons),
    )
