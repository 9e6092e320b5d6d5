"""What a library does with the KL settings it was given: our own table, from the libraries' code.

Written for the real-file benchmark from the libraries' sources (verl, OpenRLHF and TRL git
tags and released wheels, and the vendored copies inside the projects), NOT from kl-patches'
adapters. Each rule cites the file and line it was read from. Input: the settings a launch ends
up with (composed by Hydra, parsed by argparse, or built by TrlParser / dataclass defaults);
output: one *reading* per trainer launch, the benchmark's unit of comparison:

    {"library": str, "entry": str, "reward": {"estimator": str, "coef": float} | None,
     "loss": {"estimator": str, "coef": float} | None, "off_policy": bool,
     "off_policy_reason": str, "rejected": str | None, "notes": [str]}

Conventions (the brief's, shared with the audit so that the two can be compared):
a coefficient of 0 turns a side off; estimator names map kl/k1 -> k1, mse/k2 -> k2,
low_var_kl/k3 -> k3 (``abs`` stays ``abs``); a verl name with a trailing ``+`` in the loss is
k2 (the straight-through gradient), in the reward its base estimator (the reward is detached).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

MISSING = "<missing>"

VERL_NAMES = {"kl": "k1", "k1": "k1", "mse": "k2", "k2": "k2", "low_var_kl": "k3", "k3": "k3",
              "abs": "abs"}  # fmt: skip
"""verl estimator names -> reading estimator (core_algos.kl_penalty[_forward], all versions)."""


def version_tuple(text: str) -> tuple[int, ...]:
    """``"0.4.1"`` / ``"v0.7.3a"`` / ``"0.1"`` -> (0, 4, 1); non-numeric tails are dropped."""
    core = re.search(r"(\d+(?:\.\d+)*)", text)
    return tuple(int(x) for x in core.group(1).split(".")) if core else ()


@dataclass
class Reading:
    """One trainer launch as the library runs it (see the module docstring for the JSON form)."""

    library: str
    """``verl``, ``openrlhf`` or ``trl``."""
    entry: str
    """The trainer entry: module, script, or trainer class."""
    reward: dict[str, Any] | None = None
    """Reward side: ``{"estimator", "coef"}``, or None when no KL reaches the reward."""
    loss: dict[str, Any] | None = None
    """Loss side: ``{"estimator", "coef"}``, or None when no KL term is in the loss."""
    off_policy: bool = False
    """True when updates use samples from an older policy (several updates per batch, async)."""
    off_policy_reason: str = ""
    """Why (the settings that make it off-policy), or why not."""
    rejected: str | None = None
    """The library refuses this launch (with the reason); the sides are then empty."""
    notes: list[str] = field(default_factory=list)
    """What the derivation could not decide exactly."""

    def as_dict(self) -> dict[str, Any]:
        """The reading as the JSON form stored in files.yaml."""
        return {
            "library": self.library,
            "entry": self.entry,
            "reward": self.reward,
            "loss": self.loss,
            "off_policy": self.off_policy,
            "off_policy_reason": self.off_policy_reason,
            "rejected": self.rejected,
            "notes": list(self.notes),
        }


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value) and value != MISSING


# ----------------------------------------------------------------------------- verl
@dataclass(frozen=True)
class VerlEstimators:
    """The names a verl version's ``kl_penalty`` accepts, read from its core_algos.py."""

    names: frozenset[str]
    """Names dispatched by ``kl_penalty`` / ``kl_penalty_forward`` (``full`` excluded)."""
    plus_works: bool
    """True when a trailing ``+`` is stripped before dispatch (verl >= 0.8.0, PR #6058)."""
    plus_exists: bool
    """True when the straight-through ``+`` branch exists at all (verl >= 0.6.0, PR #2953)."""


def verl_estimators(core_algos_src: str) -> VerlEstimators:
    """Parse ``def kl_penalty`` (and ``kl_penalty_forward``) of a verl core_algos.py.

    v0.1 core_algos.py: ``kl``, ``abs``, ``mse``; v0.2 adds ``low_var_kl``; v0.4.0 adds the
    aliases ``k1/k2/k3`` (``in ("kl", "k1")``); v0.6.0 adds the ``+`` branch
    (``kl_penalty.endswith("+")``) but dispatches the unstripped name, which raises; v0.8.0
    strips it first (``base_kl_penalty = kl_penalty[:-1]``; 0.9.1 wheel core_algos.py:2201).
    """
    tree = ast.parse(core_algos_src)
    names: set[str] = set()
    src_parts: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ("kl_penalty", "kl_penalty_forward"):
            src_parts.append(ast.get_source_segment(core_algos_src, node) or "")
            for sub in ast.walk(node):
                if isinstance(sub, ast.Compare) and isinstance(sub.left, ast.Name):
                    if sub.left.id != "kl_penalty":
                        continue
                    for comp in sub.comparators:
                        for c in ast.walk(comp):
                            if isinstance(c, ast.Constant) and isinstance(c.value, str):
                                names.add(c.value)
    names.discard("full")
    src = "\n".join(src_parts)
    plus_exists = 'endswith("+")' in src or "endswith('+')" in src
    plus_works = "kl_penalty[:-1]" in src or "removesuffix" in src
    return VerlEstimators(frozenset(names), plus_works, plus_exists)


def _verl_estimator(name: Any, side: str, est: VerlEstimators) -> tuple[str | None, str | None]:
    """(reading estimator, rejection reason) of a verl estimator name on one side."""
    text = str(name)
    plus = text.endswith("+")
    base = text[:-1] if plus else text
    if plus and not est.plus_works:
        why = (
            "the '+' branch exists but dispatches the unstripped name"
            if est.plus_exists
            else "no '+' names in this version"
        )
        return None, f"{side} estimator {text!r}: kl_penalty raises NotImplementedError ({why})"
    if base not in est.names:
        return None, f"{side} estimator {text!r}: kl_penalty raises NotImplementedError"
    if plus and side == "loss":
        return "k2", None  # value of base, gradient of k2 (core_algos.kl_penalty straight-through)
    return VERL_NAMES.get(base, base), None


@dataclass(frozen=True)
class VerlTrainer:
    """How one verl trainer (entry point + version) applies the two KL switches."""

    reward_rule: str
    """``use_kl_in_reward`` (verl >= 0.4: ray_trainer applies apply_kl_penalty iff
    algorithm.use_kl_in_reward), ``not_use_kl_loss`` (verl < 0.4: iff not actor.use_kl_loss),
    ``always`` (v0.1: unconditional) or ``never`` (the call is absent or commented out)."""
    cite: str
    """Where the rule was read."""
    async_trainer: bool = False
    """One-step-off-policy / fully-async trainers: rollouts come from an older policy."""
    drops_reward_for: tuple[str, ...] = ()
    """Advantage estimators that ignore the KL-shaped reward (verl 0.9.1: gdpo)."""
    v1_multi_turn_drops: bool = False
    """verl 0.9.x v1 trainer: multi-turn GRPO computes the advantage from the final output only
    (trainer/ppo/v1/utils.py:148 compute_advantage_for_multi_trajectories)."""


def verl_reading(
    values: dict[str, Any], entry: str, trainer: VerlTrainer, est: VerlEstimators
) -> Reading:
    """The reading of a composed verl config under one trainer's rules.

    Keys (verl 0.9.1 names, unchanged since 0.4 per verl.md §1.5; before 0.4
    ``algorithm.use_kl_in_reward`` and, in v0.1, ``actor.use_kl_loss`` do not exist):
    algorithm.{use_kl_in_reward, kl_penalty, kl_ctrl.kl_coef, adv_estimator},
    actor_rollout_ref.actor.{use_kl_loss, kl_loss_coef, kl_loss_type, ppo_epochs,
    ppo_mini_batch_size}, data.train_batch_size.
    """
    r = Reading("verl", entry)
    adv = str(values.get("algorithm.adv_estimator", "gae"))
    use_loss = _truthy(values.get("actor_rollout_ref.actor.use_kl_loss", False))
    if trainer.reward_rule == "use_kl_in_reward":
        reward_on = _truthy(values.get("algorithm.use_kl_in_reward", False))
    elif trainer.reward_rule == "not_use_kl_loss":
        reward_on = not use_loss
    elif trainer.reward_rule == "always":
        reward_on = True
    else:
        reward_on = False
    rejections: list[str] = []
    if reward_on:
        coef = _num(values.get("algorithm.kl_ctrl.kl_coef"))
        name = values.get("algorithm.kl_penalty", "kl")
        if coef is None:
            rejections.append(
                f"algorithm.kl_ctrl.kl_coef={values.get('algorithm.kl_ctrl.kl_coef')!r}"
            )
        elif coef != 0:
            e, why = _verl_estimator(name, "reward", est)
            if why:
                rejections.append(why)
            else:
                r.reward = {"estimator": e, "coef": coef}
        if str(values.get("algorithm.kl_ctrl.type", "fixed")) == "adaptive":
            r.notes.append("adaptive KL controller: the reward coefficient is the initial value")
    if r.reward is not None and adv in trainer.drops_reward_for:
        r.notes.append(f"adv_estimator={adv} ignores the KL-shaped reward: no reward side")
        r.reward = None
    multi_turn = _truthy(values.get("actor_rollout_ref.rollout.multi_turn.enable", False))
    use_v1 = _truthy(values.get("trainer.use_v1", False))
    if (
        r.reward is not None
        and trainer.v1_multi_turn_drops
        and multi_turn
        and use_v1
        and adv == "grpo"
    ):
        r.notes.append("multi-turn GRPO in the v1 trainer drops the reward KL")
        r.reward = None
    if use_loss:
        coef = _num(values.get("actor_rollout_ref.actor.kl_loss_coef"))
        name = values.get("actor_rollout_ref.actor.kl_loss_type", "low_var_kl")
        if coef is None:
            rejections.append(
                f"actor.kl_loss_coef={values.get('actor_rollout_ref.actor.kl_loss_coef')!r}"
            )
        elif coef != 0:
            e, why = _verl_estimator(name, "loss", est)
            if why:
                rejections.append(why)
            else:
                r.loss = {"estimator": e, "coef": coef}
    if rejections:
        r.rejected = "; ".join(rejections)
        r.reward = r.loss = None
    epochs = _num(values.get("actor_rollout_ref.actor.ppo_epochs", 1)) or 1
    mini = _num(values.get("actor_rollout_ref.actor.ppo_mini_batch_size"))
    batch = _num(values.get("data.train_batch_size"))
    reasons = []
    if trainer.async_trainer:
        reasons.append(f"{entry} is an asynchronous trainer")
    if epochs > 1:
        reasons.append(f"ppo_epochs={epochs:g}")
    if mini is not None and batch is not None and mini < batch:
        reasons.append(f"ppo_mini_batch_size={mini:g} < train_batch_size={batch:g}")
    r.off_policy = bool(reasons)
    r.off_policy_reason = (
        "; ".join(reasons)
        if reasons
        else f"one update per batch (ppo_epochs={epochs:g}, mini={mini}, batch={batch})"
    )
    return r


# ----------------------------------------------------------------------------- OpenRLHF
def openrlhf_reading(args: dict[str, Any], version: str, entry: str) -> Reading:
    """The reading of an argparse namespace of OpenRLHF ``train_ppo_ray`` (or ``train_ppo``).

    Rules read from the OpenRLHF tags:
    * coefficient ``init_kl_coef`` (``algo.kl.init_coef`` from v0.10.2); <= 0 means no
      reference model and no KL (v0.7.5 cli/train_ppo_ray.py:79 ``if args.init_kl_coef <= 0``;
      0.11.2 cli/train_ppo_ray.py:93-103).
    * placement: reward unless ``use_kl_loss`` (>= v0.6.0; v0.6.0 experience_maker.py:355
      ``if ... not use_kl_loss``, ppo_trainer.py:403 ``if self.args.use_kl_loss``); dotted
      ``algo.kl.use_loss`` from v0.10.2 (0.11.2 experience_maker.py:205-219, ppo_actor.py:318).
    * estimator: ``kl_estimator`` (>= v0.6.0.post1, experience_maker.py:364); before that
      k3 iff ``use_kl_estimator_k3`` (v0.5.x/v0.6.0 experience_maker.py:329/360), and k1 before
      the flag existed.
    * off-policy: optimizer steps per rollout = max_epochs * rollout_batch_size *
      n_samples_per_prompt / train_batch_size (ppo_actor.py ppo_train loops max_epochs over
      the replay buffer in train_batch_size steps); > 1, or async training
      (``async_train`` from v0.8.0, ``train.async_enable`` from v0.10.2), is off-policy.
    """
    dotted = "algo.kl.init_coef" in args

    def get(flat: str, dot: str, default: Any = None) -> Any:
        return args.get(dot if dotted else flat, default)

    r = Reading("openrlhf", entry)
    coef = _num(get("init_kl_coef", "algo.kl.init_coef", 0.0)) or 0.0
    use_loss = _truthy(get("use_kl_loss", "algo.kl.use_loss", False))
    if "kl_estimator" in args or "algo.kl.estimator" in args:
        est = str(get("kl_estimator", "algo.kl.estimator", "k1"))
    elif "use_kl_estimator_k3" in args:
        est = "k3" if _truthy(args["use_kl_estimator_k3"]) else "k1"
    else:
        est = "k1"
    if coef > 0:
        side = {"estimator": est, "coef": coef}
        if use_loss:
            r.loss = side
        else:
            r.reward = side
    if get("kl_target", "algo.kl.target") is not None:
        r.notes.append("adaptive KL controller (kl_target set): coef is the initial value")
    if _truthy(args.get("algo.kl.unbiased_gradient", False)) and use_loss:
        r.notes.append("algo.kl.unbiased_gradient: the loss gradient is w*k1*grad log pi")
    epochs = _num(get("max_epochs", "train.max_epochs", 1)) or 1
    rollout = _num(get("rollout_batch_size", "rollout.batch_size", 1)) or 1
    n = _num(get("n_samples_per_prompt", "rollout.n_samples_per_prompt", 1)) or 1
    train = _num(get("train_batch_size", "train.batch_size", 1)) or 1
    steps = epochs * rollout * n / train
    is_async = _truthy(get("async_train", "train.async_enable", False))
    reasons = []
    if is_async:
        reasons.append("asynchronous training")
    if steps > 1:
        reasons.append(
            f"{steps:g} updates per rollout (max_epochs={epochs:g}, rollout_batch_size={rollout:g}"
            f" x n_samples={n:g} / train_batch_size={train:g})"
        )
    r.off_policy = bool(reasons)
    r.off_policy_reason = "; ".join(reasons) if reasons else f"{steps:g} update per rollout"
    return r


# ----------------------------------------------------------------------------- TRL
def trl_grpo_reading(cfg: dict[str, Any], version: str, entry: str) -> Reading:
    """The reading of a GRPOConfig (field values after defaults and __post_init__).

    * KL: k3 in the loss with coefficient ``beta`` when beta != 0 (1.16.0
      grpo_trainer.py:3098-3105, :3149-3150; 0.14.0 grpo_trainer.py ``per_token_kl =
      torch.exp(ref - logp) - (ref - logp) - 1``); ``loss_type="dr_grpo"`` divides the summed
      per-token loss by max_completion_length (1.16.0 :3153-3184), so the per-token weight is
      beta / max_completion_length (the brief's convention).
    * default beta: 0.04 up to 0.18.x, 0.0 from 0.19.0 (grpo_config.py at those tags).
    * off-policy: num_iterations > 1 (from 0.16.0) or steps_per_generation >
      gradient_accumulation_steps (from 0.18.0; None means = GA in __post_init__).
    """
    r = Reading("trl", entry)
    beta = _num(cfg.get("beta", 0.0)) or 0.0
    if beta != 0:
        coef = beta
        if str(cfg.get("loss_type", "")) == "dr_grpo":
            mcl = _num(cfg.get("max_completion_length")) or 1.0
            coef = beta / mcl
            r.notes.append(f"dr_grpo: coef = beta {beta:g} / max_completion_length {mcl:g}")
        r.loss = {"estimator": "k3", "coef": coef}
    _trl_off_policy(r, cfg)
    return r


def trl_rloo_reading(cfg: dict[str, Any], version: str, entry: str) -> Reading:
    """The reading of an RLOOConfig.

    * >= 0.22.0 (rewritten trainer): k1 summed over the sequence, subtracted from the reward
      before the leave-one-out baseline, coefficient ``beta`` (default 0.05; 1.16.0
      rloo_trainer.py:1664-1673); off-policy as GRPO (num_iterations, steps_per_generation).
    * < 0.22.0 (PPO-style RLOO, rloo_trainer.py of 0.14.0): per-token k1 (``kl = logprobs -
      ref_logprobs``) in the reward with ``kl_coef`` (default 0.05), summed per sequence unless
      ``token_level_kl``; it trains ``num_ppo_epochs`` (default 4) x ``num_mini_batches`` passes
      per batch, off-policy when that product is > 1.
    """
    r = Reading("trl", entry)
    if version_tuple(version) >= (0, 22):
        beta = _num(cfg.get("beta", 0.05)) or 0.0
        if beta != 0:
            r.reward = {"estimator": "k1", "coef": beta}
        _trl_off_policy(r, cfg)
        return r
    coef = _num(cfg.get("kl_coef", 0.05)) or 0.0
    if coef != 0:
        r.reward = {"estimator": "k1", "coef": coef}
    epochs = _num(cfg.get("num_ppo_epochs", 4)) or 1
    minis = _num(cfg.get("num_mini_batches", 1)) or 1
    r.off_policy = epochs * minis > 1
    r.off_policy_reason = f"num_ppo_epochs={epochs:g} x num_mini_batches={minis:g}"
    return r


def _trl_off_policy(r: Reading, cfg: dict[str, Any]) -> None:
    iters = _num(cfg.get("num_iterations", 1)) or 1
    ga = _num(cfg.get("gradient_accumulation_steps", 1)) or 1
    spg = _num(cfg.get("steps_per_generation"))
    if spg is None:
        spg = ga
    reasons = []
    if iters > 1:
        reasons.append(f"num_iterations={iters:g}")
    if spg > ga:
        reasons.append(f"steps_per_generation={spg:g} > gradient_accumulation_steps={ga:g}")
    r.off_policy = bool(reasons)
    r.off_policy_reason = (
        "; ".join(reasons) if reasons else f"num_iterations={iters:g}, spg={spg:g} = GA"
    )
