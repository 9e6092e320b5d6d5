"""verl's own KL switches: :class:`KLConfig` -> Hydra overrides, and a verl config -> KLConfig.

verl 0.9.1 has two independent KL switches. KL in the reward (``algorithm.use_kl_in_reward``,
estimator ``algorithm.kl_penalty``, coefficient ``algorithm.kl_ctrl.kl_coef``) subtracts
``beta * k_t`` from every token's reward, computed from the behaviour policy's log-probs; the
advantage estimator then sums it (GRPO, RLOO: one penalty per sequence) or accumulates it from t
onwards (REINFORCE++, GAE: reward-to-go). KL in the loss (``actor.use_kl_loss``,
``kl_loss_type``, ``kl_loss_coef``) adds ``coef * agg_loss(k_t)`` to the actor loss, aggregated
with the policy loss's own ``loss_agg_mode``.

Deviations this module writes down rather than hides: verl's k3 clamps the log-ratio to
[-20, 20] and the value to [-10, 10] (a KLConfig read from verl carries those clamps); names with
a trailing ``+`` keep the value of their estimator but take the k2 gradient, so in the loss they
are read as k2; what verl cannot express natively (sequence-level estimators, an
importance-weighted loss KL, a KL kept out of GRPO's std normalisation) is selected with the
estimator name :data:`MARKER` and carried out by :mod:`kl_patches.adapters.verl.patch`.

Nothing here imports verl: the defaults of the tested version are in :mod:`.versions`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kl_patches.adapters.files import load_mapping_text, read_text
from kl_patches.config import KLConfig

from . import offpolicy
from .delivery import PatchSpec
from .versions import (
    ACTOR,
    AGG_FROM_VERL,
    AGG_TO_VERL,
    DEFAULTS,
    ENV_VAR,
    MARKER,
    NATIVE_CLAMPS,
    NATIVE_NAME,
    REWARD_TO_GO_ESTIMATORS,
    RUNTIME_ENV_PREFIX,
    VERL_ESTIMATORS,
)


def reward_needs_patch(config: KLConfig, kl_outside_std: bool = False) -> bool:
    """True when verl's ``apply_kl_penalty`` cannot produce the reward side of ``config``."""
    if not config.has_reward:
        return False
    return (
        config.granularity == "sequence"
        or config.importance_weighting == "sequence"  # computed in the loss (offpolicy.py)
        or kl_outside_std
        or not _native_clamps(config)
    )


def loss_needs_patch(config: KLConfig) -> bool:
    """True when verl's ``ppo_loss`` cannot produce the loss side of ``config``."""
    if not config.has_loss:
        return False
    return (
        config.granularity == "sequence"
        or config.importance_weighting != "none"
        or not _native_clamps(config)
    )


def needs_patch(config: KLConfig, kl_outside_std: bool = False) -> bool:
    """True when ``config`` needs :func:`kl_patches.adapters.verl.apply` in verl's processes."""
    return reward_needs_patch(config, kl_outside_std) or loss_needs_patch(config)


def _native_clamps(config: KLConfig) -> bool:
    clamps = (config.log_ratio_clamp, config.kl_clamp)
    return clamps == (None, None) or clamps == NATIVE_CLAMPS[config.estimator]


def policy_aggregation_changed(
    config: KLConfig, policy_loss_agg_mode: str | None = None
) -> str | None:
    """The ``loss_agg_mode`` :func:`to_overrides` sets for ``config``, or None when it leaves
    the user's (``policy_loss_agg_mode``; None: verl's default ``token-mean``) alone.

    verl aggregates the policy loss and its own KL loss with the same ``loss_agg_mode``. Only
    placement ``both`` needs it changed: its reward-side KL reaches the gradient through the
    policy loss, which must then be aggregated like the loss-side KL (``loss_aggregation``) for
    the two to add up to one ``coef * KL``. A loss-only config keeps the user's policy loss: when
    its aggregation differs, the patched ``ppo_loss`` aggregates the KL itself.
    """
    cfg = KLConfig.coerce(config)
    current = policy_loss_agg_mode or str(DEFAULTS[ACTOR + "loss_agg_mode"])
    wanted = AGG_TO_VERL[cfg.loss_aggregation]
    if cfg.placement == "both" and wanted != current:
        return wanted
    return None


def to_overrides(
    config: KLConfig | str | Mapping[str, Any],
    *,
    kl_outside_std: bool = False,
    policy_loss_agg_mode: str | None = None,
) -> list[str]:
    """Hydra overrides that make verl 0.9.1 run ``config``.

    verl's own switches when verl expresses the whole config; otherwise every placement's
    estimator name is :data:`MARKER` (so both sides come from ``kl_patches.core`` with the same
    numerics) and the patch is requested for every Ray process through
    ``ray_kwargs.ray_init.runtime_env.env_vars`` (the ``verl.plugins`` entry point applies it).
    Natively, k3 keeps verl's clamps (log-ratio to 20, value to 10).

    ``loss_agg_mode`` is verl's aggregation of the policy loss *and* of its own KL loss;
    ``policy_loss_agg_mode`` is the one the user runs (None: verl's default). It is changed only
    for placement ``both`` (:func:`policy_aggregation_changed`); a loss-only config whose
    ``loss_aggregation`` differs from it runs through the patch, whose ``ppo_loss`` aggregates
    the KL itself and leaves the policy loss as the user set it.
    """
    cfg = KLConfig.coerce(dict(config) if isinstance(config, Mapping) else config)
    if offpolicy.active(cfg):  # the reward side runs in the actor's loss (offpolicy.py)
        if kl_outside_std:
            raise ValueError(
                "kl_outside_std=True has no effect with importance_weighting='sequence' (its KL "
                "is not in the advantages); drop kl_outside_std"
            )
        spec = PatchSpec(cfg)
        return [*offpolicy.overrides(cfg), f"++{RUNTIME_ENV_PREFIX}{ENV_VAR}='{spec.to_json()}'"]
    if kl_outside_std and not cfg.has_reward:
        raise ValueError("kl_outside_std=True needs a reward side (placement 'reward' or 'both')")
    if kl_outside_std and cfg.reward_shape != "sequence":
        raise ValueError("kl_outside_std=True needs reward_shape='sequence' (GRPO sums the reward)")
    out: list[str] = []
    current = policy_loss_agg_mode or str(DEFAULTS[ACTOR + "loss_agg_mode"])
    own_aggregation = (
        cfg.placement == "loss" and AGG_TO_VERL[cfg.loss_aggregation] != current
    )  # verl would aggregate the KL like the policy loss: the patch aggregates it instead
    patched = needs_patch(cfg, kl_outside_std) or own_aggregation
    if cfg.has_reward:
        name = MARKER if patched else NATIVE_NAME[cfg.estimator]
        out += [
            "algorithm.use_kl_in_reward=True",
            f"algorithm.kl_penalty={name}",
            "algorithm.kl_ctrl.type=fixed",
            f"algorithm.kl_ctrl.kl_coef={cfg.coef!r}",
        ]
    else:
        out.append("algorithm.use_kl_in_reward=False")
    if cfg.has_loss:
        name = MARKER if patched else NATIVE_NAME[cfg.estimator]
        out += [
            f"{ACTOR}use_kl_loss=True",
            f"{ACTOR}kl_loss_type={name}",
            f"{ACTOR}kl_loss_coef={cfg.loss_coef_value!r}",
        ]
        changed = policy_aggregation_changed(cfg, policy_loss_agg_mode)
        if changed is not None:
            out.append(f"{ACTOR}loss_agg_mode={changed}")
    else:
        out.append(f"{ACTOR}use_kl_loss=False")
    if patched:
        spec = PatchSpec(cfg, kl_outside_std=kl_outside_std)
        out.append(f"++{RUNTIME_ENV_PREFIX}{ENV_VAR}='{spec.to_json()}'")
    return out


# ----------------------------------------------------------------------------- reading configs
def settings_of(source: Any) -> dict[str, Any]:
    """The KL-relevant settings of a verl config, defaults filled in from :data:`DEFAULTS`.

    ``source``: an OmegaConf/dict config (nested), a path to a YAML file, YAML text, or a list of
    Hydra override strings (``key=value``, ``+key=value``, ``++key=value``, ``~key``).
    """
    flat: dict[str, Any] = {}
    if isinstance(source, (str, os.PathLike)) and _is_yaml_path(source):
        flat = _flatten(
            load_mapping_text(read_text(Path(source)), os.fspath(source), what="verl config")
        )
    elif isinstance(source, str):
        flat = _flatten(load_mapping_text(source, "verl YAML text", what="verl config"))
    elif isinstance(source, Sequence):
        flat = parse_overrides(source)
    elif isinstance(source, Mapping) or hasattr(source, "keys"):
        flat = _flatten(_to_container(source))
    else:
        raise ValueError(
            f"cannot read a verl config from {type(source).__name__}; pass an OmegaConf/dict "
            "config, a YAML path or text, or a list of Hydra override strings"
        )
    return {key: flat.get(key, default) for key, default in DEFAULTS.items()}


def _is_yaml_path(source: str | os.PathLike[str]) -> bool:
    text = os.fspath(source)
    return "\n" not in text and text.endswith((".yaml", ".yml")) and os.path.exists(text)


def _to_container(source: Any) -> Any:
    if type(source).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(source, resolve=True)
    return source


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in dict(tree).items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, path + "."))
        else:
            out[path] = value
    return out


def parse_overrides(overrides: Sequence[str]) -> dict[str, Any]:
    """Hydra override strings -> ``{dotted.key: value}`` (values parsed like YAML scalars)."""
    out: dict[str, Any] = {}
    for item in overrides:
        if not isinstance(item, str):
            raise ValueError(f"a Hydra override must be a string 'key=value', got {item!r}")
        if item.startswith("~"):
            out.pop(item[1:].split("=", 1)[0], None)
            continue
        if "=" not in item:
            raise ValueError(f"Hydra override {item!r} has no '='; write key=value")
        key, value = item.split("=", 1)
        out[key.lstrip("+").strip()] = _scalar(value.strip(), key.lstrip("+").strip())
    return out


def _scalar(text: str, key: str = "") -> Any:
    """An override value as Hydra types it (quoted text, bool, null, int, float, text);
    ValueError for an integer no float can hold (verl's ``float(...)`` would fail on it)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "~"):
        return None
    digits = text.lstrip("+-")
    if digits.isdigit() and (len(digits) > 309 or int(digits) > sys.float_info.max):
        raise ValueError(
            f"{key or 'a Hydra override'}={text[:12]}...: an integer of {len(digits)} digits, "
            "too large for any float (verl cannot use it as a number)"
        )
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


@dataclass(frozen=True)
class SideReading:
    """One placement as verl runs it."""

    on: bool
    """The switch is on and the coefficient is > 0."""
    name: str
    """verl's estimator name as configured."""
    estimator: str | None
    """KLConfig estimator giving verl's value (reward) or gradient (loss); None if unknown."""
    coef: float


def reward_side(s: Mapping[str, Any]) -> SideReading:
    name = str(s["algorithm.kl_penalty"])
    base = name.removesuffix("+")
    coef = float(s["algorithm.kl_ctrl.kl_coef"])
    # The reward is detached: a '+' (k2 gradient) changes nothing there.
    on = bool(s["algorithm.use_kl_in_reward"]) and coef > 0
    return SideReading(on, name, VERL_ESTIMATORS.get(base), coef)


def loss_side(s: Mapping[str, Any]) -> SideReading:
    name = str(s[ACTOR + "kl_loss_type"])
    coef = float(s[ACTOR + "kl_loss_coef"])
    on = bool(s[ACTOR + "use_kl_loss"]) and coef > 0
    if name.endswith("+") and name.removesuffix("+") in VERL_ESTIMATORS:
        return SideReading(on, name, "k2", coef)  # straight-through: k2's gradient
    return SideReading(on, name, VERL_ESTIMATORS.get(name), coef)


def patch_spec_of(settings: Mapping[str, Any]) -> PatchSpec | None:
    """The patch a config requests through :data:`ENV_VAR` (None when it requests none)."""
    text = settings.get(RUNTIME_ENV_PREFIX + ENV_VAR)
    if text in (None, ""):
        return None
    return PatchSpec.from_json(str(text))


def from_config(source: Any) -> KLConfig:
    """The KLConfig a verl config actually runs (see :func:`settings_of` for ``source``).

    Raises ValueError for estimator names KLConfig cannot describe (``abs``, ``full``, unknown
    names), naming verl's valid ones. When the two placements use different estimators the
    reward side's estimator is reported (the audit adds a finding); ``+`` names in the loss are
    read as k2, whose gradient verl uses for them.
    """
    s = settings_of(source)
    reward, loss = reward_side(s), loss_side(s)
    spec = patch_spec_of(s)
    if (reward.on and reward.name == MARKER) or (loss.on and loss.name == MARKER):
        if spec is None:
            raise ValueError(
                f"estimator name {MARKER!r} needs the patch configuration in "
                f"{RUNTIME_ENV_PREFIX}{ENV_VAR}; verl alone raises NotImplementedError on it"
            )
        return spec.config
    for side in (reward, loss):
        if side.on and side.estimator is None:
            raise ValueError(
                f"verl KL estimator {side.name!r} has no KLConfig equivalent; KLConfig reads "
                f"{sorted(VERL_ESTIMATORS)} (optionally with '+' in the loss)"
            )
    if not reward.on and not loss.on:
        return KLConfig(placement="none", coef=0.0)
    est = str(reward.estimator if reward.on else loss.estimator)
    log_clamp, kl_clamp = NATIVE_CLAMPS[est]  # a '+' loss is read as unclamped k2
    adv = str(s["algorithm.adv_estimator"])
    shape = "reward_to_go" if adv in REWARD_TO_GO_ESTIMATORS else "sequence"
    agg = AGG_FROM_VERL.get(str(s[ACTOR + "loss_agg_mode"]))
    if agg is None:
        raise ValueError(
            f"{ACTOR}loss_agg_mode={s[ACTOR + 'loss_agg_mode']!r} is not a verl mode; "
            f"valid: {sorted(AGG_FROM_VERL)}"
        )
    common: dict[str, Any] = {"estimator": est, "log_ratio_clamp": log_clamp, "kl_clamp": kl_clamp}
    if reward.on and loss.on:
        loss_coef = None if loss.coef == reward.coef else loss.coef
        return KLConfig(
            placement="both",
            coef=reward.coef,
            loss_coef=loss_coef,
            reward_shape=shape,
            loss_aggregation=agg,
            **common,
        )
    if reward.on:
        return KLConfig(placement="reward", coef=reward.coef, reward_shape=shape, **common)
    return KLConfig(placement="loss", coef=loss.coef, loss_aggregation=agg, **common)
