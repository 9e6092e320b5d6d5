"""OpenRLHF command-line flags <-> :class:`~kl_patches.config.KLConfig`, without OpenRLHF.

``to_args`` writes the ``train_ppo_ray`` flags that make OpenRLHF run a configuration natively
as far as it can; ``from_args`` reads a ``train_ppo_ray`` command line back into the KLConfig
OpenRLHF actually runs. Both work from the defaults of OpenRLHF 0.11.2 written down here, so
neither needs OpenRLHF installed.

What OpenRLHF 0.11.2 runs natively (``openrlhf/models/utils.py``, ``experience_maker.py``,
``ppo_actor.py``):

* one placement at a time: ``--algo.kl.use_loss`` moves the KL from the reward to the loss;
  one coefficient ``--algo.kl.init_coef``, and ``init_coef <= 0`` removes the reference model
  and with it every KL term;
* every estimator value clamped to [-10, 10] (``kl_clamp=10``) from 0.8.6; 0.8.0-0.8.5 clamp
  nothing (``kl_clamp=None``): :func:`config_from_settings`, :func:`from_args` and
  :func:`native_gaps` take the release (:func:`~.versions.native_kl_clamp`);
* reward side: the per-token estimator times beta is charged as a reward-to-go, added *after*
  the group baseline of the scalar reward (``reward_shape="reward_to_go"``);
* loss side: a token mean over the optimiser step's global token count
  (``loss_aggregation="token_mean"``), whatever ``--actor.loss_agg_mode`` says;
* ``--algo.kl.unbiased_gradient`` (since 0.11.1): the value of the chosen estimator with the
  gradient of ``k3 * pi/pi_old`` per token (IS weight clipped at 10), read as ``k3`` with
  ``importance_weighting="token"``.

Flags were renamed to dotted names in 0.10.2 (``--init_kl_coef`` -> ``--algo.kl.init_coef``);
both spellings are read, and ``to_args`` writes the one of the version asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from kl_patches.adapters.flags import long_options
from kl_patches.config import KLConfig

from . import offpolicy
from .versions import (
    ADVANTAGE_ESTIMATORS,
    DOTTED_SINCE,
    TESTED_VERSION,
    UNBIASED_GRADIENT_SINCE,
    native_kl_clamp,
)


@dataclass(frozen=True)
class Flag:
    """One ``train_ppo_ray`` flag this adapter reads."""

    dotted: str
    """Name from 0.10.2 on, without the leading ``--``."""
    flat: str | None
    """Name before 0.10.2 (None: the flag did not exist)."""
    kind: str
    """``float``, ``optional_float``, ``int``, ``str``, ``bool`` (store_true) or ``pair``."""
    default: object
    """Default in OpenRLHF 0.11.2."""
    choices: tuple[str, ...] = ()
    """Valid values for ``str`` flags (empty: any)."""


FLAGS: tuple[Flag, ...] = (
    Flag("algo.kl.init_coef", "init_kl_coef", "float", 0.01),
    Flag("algo.kl.estimator", "kl_estimator", "str", "k1", ("k1", "k2", "k3")),
    Flag("algo.kl.use_loss", "use_kl_loss", "bool", False),
    Flag("algo.kl.unbiased_gradient", None, "bool", False),
    Flag("algo.kl.target", "kl_target", "optional_float", None),
    Flag("algo.kl.horizon", "kl_horizon", "int", 10000),
    Flag("algo.advantage.estimator", "advantage_estimator", "str", "gae", ADVANTAGE_ESTIMATORS),
    Flag("algo.advantage.gamma", "gamma", "float", 1.0),
    Flag("algo.advantage.lambd", "lambd", "float", 1.0),
    Flag("algo.advantage.no_std_norm", "no_advantage_std_norm", "bool", False),
    Flag("rollout.n_samples_per_prompt", "n_samples_per_prompt", "int", 1),
    Flag("rollout.batch_size", "rollout_batch_size", "int", 1024),
    Flag("train.batch_size", "train_batch_size", "int", 128),
    Flag("train.max_epochs", "max_epochs", "int", 1),
    Flag("train.async_enable", "async_train", "bool", False),
    Flag("reward.clip_range", "reward_clip_range", "pair", (-10.0, 10.0)),
    Flag("actor.loss_agg_mode", None, "str", "token-mean", ("token-mean", "seq-mean-token-mean")),
)
_BY_NAME: dict[str, Flag] = {}
for _f in FLAGS:
    _BY_NAME[_f.dotted] = _f
    if _f.flat:
        _BY_NAME[_f.flat] = _f

KL_FLAGS = (
    "algo.kl.init_coef",
    "algo.kl.estimator",
    "algo.kl.use_loss",
    "algo.kl.unbiased_gradient",
)
"""The flags ``to_args`` writes (the launcher refuses conflicting user values for them)."""


def renames(payload: object, release: str) -> tuple[str, ...]:
    """``--init_kl_coef -> --algo.kl.init_coef`` for each flat flag of ``payload`` (an argv)
    that ``release`` knows only under its dotted name (0.10.2 on), and the reverse for a
    dotted flag on an older release; ``--use_kl_estimator_k3`` (before 0.6.2) becomes
    ``--algo.kl.estimator k3``. Only the flags this adapter reads are known (:data:`FLAGS`)."""
    if not isinstance(payload, (list, tuple)):
        return ()
    try:
        dotted = Version(release) >= Version(DOTTED_SINCE)
    except InvalidVersion:
        return ()
    out: list[str] = []
    for word in payload:
        name = str(word).partition("=")[0]
        if not name.startswith("--"):
            continue
        name = name[2:]
        if name == "use_kl_estimator_k3":
            new = "--algo.kl.estimator k3" if dotted else "--kl_estimator k3"
            out.append(f"--{name} -> {new}")
            continue
        flag = _BY_NAME.get(name)
        if flag is None or flag.flat is None:
            continue
        if dotted and name == flag.flat:
            out.append(f"--{name} -> --{flag.dotted}")
        elif not dotted and name == flag.dotted:
            out.append(f"--{name} -> --{flag.flat}")
    return tuple(dict.fromkeys(out))


def convert_value(flag: Flag, name: str, values: list[str]) -> object:
    """``values`` read as ``flag.kind`` (float, optional float, int, pair); the first value as
    given for a string flag. ValueError naming the flag when they do not read as that kind."""
    try:
        if flag.kind == "float":
            return float(values[0])
        if flag.kind == "optional_float":
            return None if values[0].lower() == "none" else float(values[0])
        if flag.kind == "int":
            return int(values[0])
        if flag.kind == "pair":
            return (float(values[0]), float(values[1]))
    except (ValueError, IndexError) as exc:
        raise ValueError(f"--{name}: cannot read value(s) {values!r} as {flag.kind}") from exc
    return values[0]


def _convert(flag: Flag, name: str, values: list[str]) -> object:
    value = convert_value(flag, name, values)
    if flag.kind == "str" and flag.choices and value not in flag.choices:
        raise ValueError(f"--{name}={value!r} is not valid; choose one of {list(flag.choices)}")
    return value


def parse_settings(argv: Sequence[str]) -> tuple[dict[str, object], frozenset[str]]:
    """Read the KL-relevant flags of a ``train_ppo_ray`` command line.

    Returns every flag of :data:`FLAGS` under its dotted name (defaults of 0.11.2 filled in) and
    the set of those given explicitly. Flat (pre-0.10.2) names are accepted; ``--name=value``
    and ``--name value`` both work; flags this adapter does not read are skipped.
    """
    settings: dict[str, object] = {f.dotted: f.default for f in FLAGS}
    given: set[str] = set()
    for name, inline, following in long_options(argv):
        flag = _BY_NAME.get(name)
        if flag is None:
            continue
        if flag.kind == "bool":
            if inline is not None:
                raise ValueError(
                    f"--{name} is a switch and takes no value (got '--{name}={inline}')"
                )
            settings[flag.dotted] = True
            given.add(flag.dotted)
            continue
        need = 2 if flag.kind == "pair" else 1
        values = ([] if inline is None else [inline]) + following
        values = values[:need]
        if len(values) != need:
            raise ValueError(f"--{name} expects {need} value(s)")
        settings[flag.dotted] = _convert(flag, name, values)
        given.add(flag.dotted)
    return settings, frozenset(given)


def updates_per_rollout(settings: dict[str, object]) -> int:
    """Optimiser steps taken on one rollout batch (1 = on-policy)."""
    samples = int(settings["rollout.batch_size"]) * int(settings["rollout.n_samples_per_prompt"])  # type: ignore[call-overload]
    per_epoch = max(1, -(-samples // max(1, int(settings["train.batch_size"]))))  # type: ignore[call-overload]
    return per_epoch * max(1, int(settings["train.max_epochs"]))  # type: ignore[call-overload]


def is_off_policy(settings: dict[str, object]) -> bool:
    """Several updates per rollout batch, or asynchronous (stale) rollouts."""
    return bool(settings["train.async_enable"]) or updates_per_rollout(settings) > 1


def config_from_settings(settings: dict[str, object], version: str = TESTED_VERSION) -> KLConfig:
    """The KLConfig OpenRLHF ``version`` runs for already-parsed settings (see
    :func:`from_args`)."""
    clamp = native_kl_clamp(version)
    coef = float(settings["algo.kl.init_coef"])  # type: ignore[arg-type]
    estimator = str(settings["algo.kl.estimator"])
    if coef <= 0:
        return KLConfig(estimator=estimator, placement="none", coef=0.0, kl_clamp=clamp)
    if settings["algo.kl.use_loss"]:
        if settings["algo.kl.unbiased_gradient"]:
            # Straight-through: gradient of pi/pi_old * k3 per token, whatever the estimator.
            return KLConfig(
                estimator="k3",
                placement="loss",
                coef=coef,
                loss_aggregation="token_mean",
                importance_weighting="token",
                kl_clamp=clamp,
            )
        return KLConfig(
            estimator=estimator,
            placement="loss",
            coef=coef,
            loss_aggregation="token_mean",
            kl_clamp=clamp,
        )
    return KLConfig(
        estimator=estimator,
        placement="reward",
        coef=coef,
        reward_shape="reward_to_go",
        kl_clamp=clamp,
    )


def from_args(argv: Sequence[str], version: str = TESTED_VERSION) -> KLConfig:
    """The KLConfig an OpenRLHF ``train_ppo_ray`` command line actually runs.

    Works without OpenRLHF (defaults of 0.11.2). ``init_coef <= 0`` gives ``placement="none"``
    (OpenRLHF then builds no reference model). Clamps are reported as OpenRLHF ``version``
    applies them (``kl_clamp=10`` from 0.8.6, None before).
    """
    settings, _ = parse_settings(argv)
    return config_from_settings(settings, version)


def native_gaps(config: KLConfig, version: str = TESTED_VERSION) -> dict[str, tuple[str, ...]]:
    """What OpenRLHF ``version`` cannot run natively, per side: ``{"reward": (...), "loss":
    (...)}``.

    Empty tuples mean the side is native (or absent). The reasons are short phrases used in
    error messages and docs. Only the clamp depends on the release (none before 0.8.6).
    """
    numerics: list[str] = []
    clamp = native_kl_clamp(version)
    if config.kl_clamp != clamp:
        native = "clamps every value to +-10" if clamp else "clamps nothing before 0.8.6"
        numerics.append(f"kl_clamp={config.kl_clamp} (OpenRLHF {version} {native})")
    if config.log_ratio_clamp is not None:
        numerics.append(f"log_ratio_clamp={config.log_ratio_clamp} (OpenRLHF has none)")
    reward: list[str] = []
    if config.has_reward and not offpolicy.active(config):
        if config.placement == "both":
            reward.append("placement='both' (OpenRLHF drops the reward KL under use_loss)")
        if config.granularity == "sequence":
            reward.append("granularity='sequence'")
        if config.reward_shape == "sequence":
            reward.append("reward_shape='sequence' (KL inside the group baseline)")
        reward.extend(numerics)
    loss: list[str] = []
    if config.has_loss:
        if config.granularity == "sequence":
            loss.append("granularity='sequence'")
        if config.loss_aggregation != "token_mean":
            loss.append(f"loss_aggregation={config.loss_aggregation!r} (OpenRLHF: token_mean)")
        if config.importance_weighting == "token":
            loss.append("importance_weighting='token' (unbiased_gradient differs in value/clip)")
        elif config.importance_weighting == "sequence" and not offpolicy.active(config):
            loss.append("importance_weighting='sequence' (prefix-weighted loss side)")
        if config.loss_coef is not None and config.loss_coef != config.coef:
            loss.append("loss_coef != coef (OpenRLHF has one coefficient)")
        loss.extend(numerics)
    if offpolicy.active(config):
        loss.insert(0, offpolicy.GAP)
    return {"reward": tuple(reward), "loss": tuple(loss)}


def is_native(config: KLConfig, version: str = TESTED_VERSION) -> bool:
    """True when ``to_args(config)`` alone makes OpenRLHF ``version`` run exactly ``config``."""
    gaps = native_gaps(config, version)
    return not gaps["reward"] and not gaps["loss"]


def to_args(
    config: KLConfig | str, version: str = TESTED_VERSION, strict: bool = False
) -> list[str]:
    """``train_ppo_ray`` flags that run ``config`` natively as far as OpenRLHF can.

    Dotted names for ``version >= 0.10.2``, flat names before. What the flags cannot express
    (see :func:`native_gaps`) is left to :func:`kl_patches.adapters.openrlhf.apply`; the flags
    then set up what the patch builds on (``use_loss`` keeps the reference log-probs for
    ``placement="both"``; ``init_coef > 0`` keeps the reference model). ``strict=True`` raises
    instead when the configuration needs a patch.
    """
    config = KLConfig.coerce(config)
    if strict and not is_native(config, version):
        gaps = native_gaps(config, version)
        raise ValueError(
            f"OpenRLHF {version} cannot run {config} natively: "
            + "; ".join(gaps["reward"] + gaps["loss"])
            + ". Use kl_patches.adapters.openrlhf.apply(config) or `python -m kl_patches.openrlhf`."
        )
    try:
        v = Version(version)
    except InvalidVersion:
        raise ValueError(
            f"cannot read an OpenRLHF version from {version!r} (expected e.g. 0.11.2)"
        ) from None
    dotted = v >= Version(DOTTED_SINCE)

    def name(key: str) -> str:
        flag = _BY_NAME[key]
        if dotted:
            return "--" + flag.dotted
        if flag.flat is None:
            raise ValueError(f"--{flag.dotted} does not exist in OpenRLHF {version}")
        return "--" + flag.flat

    if not (config.has_reward or config.has_loss):
        return [name("algo.kl.init_coef"), "0"]
    # init_coef > 0 keeps the reference model; it is the coefficient of the active side.
    coef = config.coef if config.has_reward else config.loss_coef_value
    args = [name("algo.kl.init_coef"), repr(coef)]
    args += [name("algo.kl.estimator"), config.estimator]
    if config.has_loss or offpolicy.active(config):  # use_loss keeps the reference log-probs
        args.append(name("algo.kl.use_loss"))
        if (
            config.importance_weighting == "token"
            and config.estimator == "k3"
            and v >= Version(UNBIASED_GRADIENT_SINCE)
        ):
            args.append(name("algo.kl.unbiased_gradient"))
    return args
