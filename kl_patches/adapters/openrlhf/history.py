"""What each OpenRLHF release does with the KL, as data (``HISTORY``), from 0.5.0 to 0.11.2.

OpenRLHF forks vendor releases from 0.5 to 0.7, and its flags and internals move a lot: the
estimator switch went from ``--use_kl_estimator_k3`` to ``--kl_estimator`` (0.6.0.post1) to
``--algo.kl.estimator`` (0.10.2); the KL loss exists from 0.6.0 and was aggregated per sequence,
then per micro-batch token, then over the whole optimiser step; every estimator value is clamped
to [-10, 10] from 0.8.6; the importance-weighted ``unbiased_gradient`` arrived in 0.11.1.
:data:`HISTORY` records each change once, at the first release that has it, with the file and
line of that release (``pip download --no-deps openrlhf==V``; code under
``openrlhf-V.data/purelib/``). Flag rows were generated from each release's ``argparse`` calls
in ``cli/train_ppo_ray.py`` (read with ``ast``). Keys:

* ``flag.<name>``: the spelling of a ``train_ppo_ray`` flag (None once it is gone), under its
  0.10.2+ dotted name; ``default.<name>`` / ``choices.<name>``: its default and choices;
* ``estimator.*``: what ``compute_approx_kl`` computes (dtype, clamps, straight-through);
* ``reward.*``: when the KL reaches the reward, and how it meets the group baseline;
* ``loss.*``: where the KL loss is computed, its aggregation and coefficient;
* ``placement.*``, ``offpolicy.*``, ``entry.*``: both placements, stale samples, entry points.
"""

from __future__ import annotations

from kl_patches.adapters.history import Change, History

RELEASES: tuple[str, ...] = (
    "0.5.0",
    "0.5.1",
    "0.5.2",
    "0.5.2.post1",
    "0.5.3",
    "0.5.4",
    "0.5.5",
    "0.5.5.post1",
    "0.5.5.post2",
    "0.5.6",
    "0.5.7",
    "0.5.8",
    "0.5.9",
    "0.5.9.post1",
    "0.6.0",
    "0.6.0.post1",
    "0.6.0.post2",
    "0.6.0.post3",
    "0.6.1",
    "0.6.1.post1",
    "0.6.2",
    "0.6.3",
    "0.6.3.post1",
    "0.6.3.post2",
    "0.6.4",
    "0.7.0",
    "0.7.0.post1",
    "0.7.1",
    "0.7.1.post1",
    "0.7.1.post2",
    "0.7.2",
    "0.7.2.post1",
    "0.7.3",
    "0.7.4",
    "0.7.4.post1",
    "0.7.4.post2",
    "0.7.5",
    "0.8.0",
    "0.8.0.post1",
    "0.8.1",
    "0.8.1.post1",
    "0.8.2",
    "0.8.3",
    "0.8.4",
    "0.8.5",
    "0.8.6",
    "0.8.7",
    "0.8.8",
    "0.8.9",
    "0.8.9.post1",
    "0.8.10",
    "0.8.11",
    "0.9.0",
    "0.9.1",
    "0.9.1.post1",
    "0.9.2",
    "0.9.3",
    "0.9.4",
    "0.9.5",
    "0.9.6",
    "0.9.7",
    "0.9.8",
    "0.9.9",
    "0.9.10",
    "0.10.0",
    "0.10.1",
    "0.10.1.post1",
    "0.10.1.post2",
    "0.10.2",
    "0.10.3",
    "0.10.4",
    "0.11.0",
    "0.11.1",
    "0.11.2",
)
"""Every OpenRLHF release on PyPI from 0.5.0 on, ascending (post releases included)."""

_U = "openrlhf/models/utils.py"
_EM = "openrlhf/trainer/ppo_utils/experience_maker.py"
_CLI = "openrlhf/cli/train_ppo_ray.py"

_FLAGS: tuple[Change, ...] = (
    Change("0.5.0", "flag.algo.kl.init_coef", "init_kl_coef", "openrlhf/cli/train_ppo_ray.py:281"),
    Change(
        "0.5.0",
        "default.algo.kl.init_coef",
        0.01,
        "openrlhf/cli/train_ppo_ray.py:281",
        "beta, for whichever placement is active",
    ),
    Change("0.5.0", "flag.algo.kl.target", "kl_target", "openrlhf/cli/train_ppo_ray.py:280"),
    Change(
        "0.5.0",
        "default.algo.kl.target",
        None,
        "openrlhf/cli/train_ppo_ray.py:280",
        "None = fixed controller",
    ),
    Change(
        "0.5.0",
        "flag.algo.kl.estimator",
        "use_kl_estimator_k3",
        "openrlhf/cli/train_ppo_ray.py:283",
        "store_true switch: k3 if given, else k1",
    ),
    Change("0.5.0", "default.algo.kl.estimator", "k1", "openrlhf/cli/train_ppo_ray.py:283"),
    Change("0.5.0", "choices.algo.kl.estimator", ("k1", "k3"), "openrlhf/cli/train_ppo_ray.py:283"),
    Change("0.5.0", "flag.algo.advantage.gamma", "gamma", "openrlhf/cli/train_ppo_ray.py:266"),
    Change("0.5.0", "default.algo.advantage.gamma", 1, "openrlhf/cli/train_ppo_ray.py:266"),
    Change("0.5.0", "flag.algo.advantage.lambd", "lambd", "openrlhf/cli/train_ppo_ray.py:265"),
    Change(
        "0.5.0",
        "default.algo.advantage.lambd",
        0.95,
        "openrlhf/cli/train_ppo_ray.py:265",
        "GAE only: discounts the per-token KL penalty",
    ),
    Change(
        "0.5.0",
        "flag.rollout.n_samples_per_prompt",
        "n_samples_per_prompt",
        "openrlhf/cli/train_ppo_ray.py:275",
    ),
    Change("0.5.0", "default.rollout.n_samples_per_prompt", 1, "openrlhf/cli/train_ppo_ray.py:275"),
    Change(
        "0.5.0",
        "flag.rollout.batch_size",
        "rollout_batch_size",
        "openrlhf/cli/train_ppo_ray.py:253",
    ),
    Change("0.5.0", "default.rollout.batch_size", 1024, "openrlhf/cli/train_ppo_ray.py:253"),
    Change(
        "0.5.0", "flag.train.batch_size", "train_batch_size", "openrlhf/cli/train_ppo_ray.py:268"
    ),
    Change(
        "0.5.0",
        "default.train.batch_size",
        128,
        "openrlhf/cli/train_ppo_ray.py:268",
        "rollout 1024 x n 1 / 128: 8 optimiser steps per rollout",
    ),
    Change("0.5.0", "flag.train.max_epochs", "max_epochs", "openrlhf/cli/train_ppo_ray.py:255"),
    Change("0.5.0", "default.train.max_epochs", 1, "openrlhf/cli/train_ppo_ray.py:255"),
    Change(
        "0.5.1",
        "flag.algo.advantage.estimator",
        "advantage_estimator",
        "openrlhf/cli/train_ppo_ray.py:299",
    ),
    Change("0.5.1", "default.algo.advantage.estimator", "gae", "openrlhf/cli/train_ppo_ray.py:299"),
    Change(
        "0.5.1",
        "choices.algo.advantage.estimator",
        ("gae", "reinforce"),
        "openrlhf/cli/train_ppo_ray.py:299",
    ),
    Change(
        "0.5.3",
        "choices.algo.advantage.estimator",
        ("gae", "reinforce", "rloo"),
        "openrlhf/cli/train_ppo_ray.py:300",
    ),
    Change("0.5.7", "default.algo.advantage.lambd", 1.0, "openrlhf/cli/train_ppo_ray.py:272"),
    Change(
        "0.6.0",
        "flag.algo.kl.use_loss",
        "use_kl_loss",
        "openrlhf/cli/train_ppo_ray.py:339",
        "moves the KL from the reward to the actor loss",
    ),
    Change("0.6.0", "default.algo.kl.use_loss", False, "openrlhf/cli/train_ppo_ray.py:339"),
    Change(
        "0.6.0",
        "choices.algo.advantage.estimator",
        ("gae", "reinforce", "rloo", "reinforce_baseline", "group_norm"),
        "openrlhf/cli/train_ppo_ray.py:333",
    ),
    Change("0.6.0", "default.algo.advantage.lambd", 0.95, "openrlhf/cli/train_ppo_ray.py:300"),
    Change(
        "0.6.0.post1",
        "flag.algo.kl.estimator",
        "kl_estimator",
        "openrlhf/cli/train_ppo_ray.py:327",
        "replaces --use_kl_estimator_k3 (which is gone)",
    ),
    Change(
        "0.6.0.post1",
        "choices.algo.kl.estimator",
        ("k1", "k2", "k3"),
        "openrlhf/cli/train_ppo_ray.py:327",
    ),
    Change(
        "0.6.3.post2",
        "choices.algo.advantage.estimator",
        ("gae", "reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo"),
        "openrlhf/cli/train_ppo_ray.py:353",
    ),
    Change("0.6.4", "default.algo.advantage.lambd", 1, "openrlhf/cli/train_ppo_ray.py:317"),
    Change(
        "0.6.4",
        "flag.algo.advantage.no_std_norm",
        "no_advantage_std_norm",
        "openrlhf/cli/train_ppo_ray.py:364",
    ),
    Change(
        "0.6.4", "default.algo.advantage.no_std_norm", False, "openrlhf/cli/train_ppo_ray.py:364"
    ),
    Change("0.7.1", "flag.algo.kl.horizon", "kl_horizon", "openrlhf/cli/train_ppo_ray.py:319"),
    Change("0.7.1", "default.algo.kl.horizon", 10000, "openrlhf/cli/train_ppo_ray.py:319"),
    Change(
        "0.8.0",
        "flag.train.async_enable",
        "async_train",
        "openrlhf/cli/train_ppo_ray.py:250",
        "asynchronous rollouts: the KL is computed on stale samples",
    ),
    Change("0.8.0", "default.train.async_enable", False, "openrlhf/cli/train_ppo_ray.py:250"),
    Change(
        "0.10.2",
        "flag.algo.kl.init_coef",
        "algo.kl.init_coef",
        "openrlhf/cli/train_ppo_ray.py:419",
        "dotted names from here on; flat names are rejected",
    ),
    Change("0.10.2", "flag.algo.kl.target", "algo.kl.target", "openrlhf/cli/train_ppo_ray.py:417"),
    Change(
        "0.10.2", "flag.algo.kl.horizon", "algo.kl.horizon", "openrlhf/cli/train_ppo_ray.py:418"
    ),
    Change(
        "0.10.2", "flag.algo.kl.estimator", "algo.kl.estimator", "openrlhf/cli/train_ppo_ray.py:422"
    ),
    Change(
        "0.10.2", "flag.algo.kl.use_loss", "algo.kl.use_loss", "openrlhf/cli/train_ppo_ray.py:485"
    ),
    Change(
        "0.10.2",
        "flag.algo.advantage.estimator",
        "algo.advantage.estimator",
        "openrlhf/cli/train_ppo_ray.py:478",
    ),
    Change(
        "0.10.2",
        "flag.algo.advantage.gamma",
        "algo.advantage.gamma",
        "openrlhf/cli/train_ppo_ray.py:392",
    ),
    Change(
        "0.10.2",
        "flag.algo.advantage.lambd",
        "algo.advantage.lambd",
        "openrlhf/cli/train_ppo_ray.py:391",
    ),
    Change(
        "0.10.2",
        "flag.algo.advantage.no_std_norm",
        "algo.advantage.no_std_norm",
        "openrlhf/cli/train_ppo_ray.py:488",
    ),
    Change(
        "0.10.2",
        "flag.rollout.n_samples_per_prompt",
        "rollout.n_samples_per_prompt",
        "openrlhf/cli/train_ppo_ray.py:414",
    ),
    Change(
        "0.10.2",
        "flag.rollout.batch_size",
        "rollout.batch_size",
        "openrlhf/cli/train_ppo_ray.py:373",
    ),
    Change(
        "0.10.2", "flag.train.batch_size", "train.batch_size", "openrlhf/cli/train_ppo_ray.py:394"
    ),
    Change(
        "0.10.2", "flag.train.max_epochs", "train.max_epochs", "openrlhf/cli/train_ppo_ray.py:378"
    ),
    Change(
        "0.10.2",
        "flag.train.async_enable",
        "train.async_enable",
        "openrlhf/cli/train_ppo_ray.py:274",
    ),
    Change(
        "0.11.1",
        "flag.algo.kl.unbiased_gradient",
        "algo.kl.unbiased_gradient",
        "openrlhf/cli/train_ppo_ray.py:431",
        "loss path only",
    ),
    Change(
        "0.11.1", "default.algo.kl.unbiased_gradient", False, "openrlhf/cli/train_ppo_ray.py:431"
    ),
    Change(
        "0.11.2",
        "choices.algo.advantage.estimator",
        (
            "gae",
            "reinforce",
            "rloo",
            "reinforce_baseline",
            "group_norm",
            "dr_grpo",
            "flash_reinforce",
        ),
        "openrlhf/cli/train_ppo_ray.py:515",
    ),
    Change(
        "0.11.2",
        "flag.actor.loss_agg_mode",
        "actor.loss_agg_mode",
        "openrlhf/cli/train_ppo_ray.py:441",
        "policy loss only: the KL loss stays a token mean",
    ),
    Change(
        "0.11.2", "default.actor.loss_agg_mode", "token-mean", "openrlhf/cli/train_ppo_ray.py:441"
    ),
    Change(
        "0.11.2",
        "choices.actor.loss_agg_mode",
        ("token-mean", "seq-mean-token-mean"),
        "openrlhf/cli/train_ppo_ray.py:441",
    ),
)
"""``train_ppo_ray`` flags: spelling, default, choices (generated from each release's argparse)."""

_SEMANTICS: tuple[Change, ...] = (
    # --- compute_approx_kl -----------------------------------------------------------------------
    Change("0.5.0", "estimator.k1", "log_probs - log_probs_base", f"{_U}:25"),
    Change(
        "0.5.0",
        "estimator.k3",
        "exp(-log_ratio) - 1 + log_ratio",
        f"{_U}:34",
        "k3 = r - 1 - log r with r = pi_ref/pi",
    ),
    Change("0.6.0.post1", "estimator.k2", "log_ratio**2 / 2", f"{_U}:37", "PR #797"),
    Change("0.5.0", "estimator.log_ratio_dtype", "model dtype", f"{_U}:25"),
    Change("0.5.5", "estimator.log_ratio_dtype", "float32", f"{_U}:23", "PR #620 precision fix"),
    Change(
        "0.5.0",
        "estimator.action_mask_argument",
        True,
        f"{_U}:12",
        "log-ratio multiplied by the action mask inside the function",
    ),
    Change(
        "0.7.0",
        "estimator.action_mask_argument",
        False,
        f"{_U}:7",
        "signature (log_probs, log_probs_base, kl_estimator): masking left to the callers",
    ),
    Change("0.5.0", "estimator.value_clamp", None, f"{_U}:36", "no clamp"),
    Change(
        "0.8.6",
        "estimator.value_clamp",
        10.0,
        f"{_U}:40",
        "every estimator, k1 included, clamped to [-10, 10] (reward and loss)",
    ),
    Change("0.5.0", "estimator.k3.log_ratio_clamp", None, f"{_U}:33"),
    Change(
        "0.11.2",
        "estimator.k3.log_ratio_clamp",
        -10.0,
        f"{_U}:108",
        "lower bound only, against inf*0 gradients",
    ),
    Change(
        "0.11.1",
        "estimator.unbiased_gradient",
        "value of the estimator, gradient of clamp(pi/pi_old, max=10) * k1 score",
        f"{_U}:125",
        "straight-through (PR #1309); the same gradient for k1, k2 and k3",
    ),
    # --- reward side -----------------------------------------------------------------------------
    Change(
        "0.5.0",
        "reward.gate",
        "always",
        f"{_EM}:492",
        "reward KL computed every step (ref model always built)",
    ),
    Change(
        "0.6.0",
        "reward.gate",
        "ref model and not use_kl_loss",
        f"{_EM}:691",
        "the KL moves to the loss under --use_kl_loss (zeros in the reward)",
    ),
    Change(
        "0.5.0",
        "reward.ref_model",
        "always",
        f"{_CLI}:83",
        "a reference model even with --init_kl_coef 0",
    ),
    Change(
        "0.6.0",
        "reward.ref_model",
        "init_kl_coef != 0",
        f"{_CLI}:104",
        "no reference model (and no KL anywhere) at coefficient 0",
    ),
    Change(
        "0.7.1.post1",
        "reward.ref_model",
        "init_kl_coef > 0",
        f"{_CLI}:75",
        "a negative coefficient no longer builds a reference model",
    ),
    Change(
        "0.5.0",
        "reward.logprobs",
        "actor log-probs recomputed at experience time",
        f"{_EM}:492",
        "pi_old from the training engine, not the rollout engine; detached",
    ),
    Change(
        "0.5.0",
        "reward.target",
        "scalar reward on the last action token, -beta*kl_t on every token",
        f"{_U}:54",
        "compute_reward; beta = kl_ctl.value",
    ),
    Change(
        "0.5.0",
        "reward.site",
        "NaiveExperienceMaker.make_experience_list",
        f"{_EM}:188",
        "compute_reward after process_experiences",
    ),
    Change(
        "0.6.3",
        "reward.site",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        f"{_EM}:533",
    ),
    Change(
        "0.5.3",
        "reward.kl_vs_group_baseline",
        "after",
        f"{_EM}:342",
        "baselines act on the scalar reward only; the KL is added afterwards, never / std",
    ),
    Change("0.5.0", "reward.advantage", "gae", f"{_EM}:196", "per-token KL rewards into GAE"),
    Change(
        "0.5.1",
        "reward.advantage",
        "gae or reward-to-go",
        "openrlhf/trainer/ppo_utils/experience_maker.py:213",
        "critic-free estimators: sum of -beta*kl from t on, plus the shaped reward",
    ),
    Change(
        "0.5.0",
        "reward.whitened_with_advantages",
        "all estimators",
        "openrlhf/trainer/ppo_trainer.py:230",
        "advantages (KL part included) whitened over the replay buffer",
    ),
    Change(
        "0.6.0",
        "reward.whitened_with_advantages",
        "all but group_norm",
        "openrlhf/trainer/ppo_trainer.py:243",
    ),
    Change(
        "0.6.3.post2",
        "reward.whitened_with_advantages",
        "all but group_norm, dr_grpo",
        "openrlhf/trainer/ray/ppo_actor.py:212",
    ),
    Change(
        "0.8.5",
        "reward.whitened_with_advantages",
        ("gae", "reinforce", "reinforce_baseline"),
        f"{_EM}:695",
        "rloo no longer whitened",
    ),
    # --- loss side -------------------------------------------------------------------------------
    Change(
        "0.6.0",
        "loss.site",
        "openrlhf.trainer.ppo_trainer.PPOTrainer.training_step_actor",
        "openrlhf/trainer/ppo_trainer.py:403",
        "Ray ActorPPOTrainer inherits it",
    ),
    Change(
        "0.6.3",
        "loss.site",
        "openrlhf.trainer.ray.ppo_actor.ActorPPOTrainer.training_step",
        "openrlhf/trainer/ray/ppo_actor.py:415",
    ),
    Change(
        "0.6.0",
        "loss.aggregation",
        "per-sequence token mean, then mean over the micro-batch",
        "openrlhf/trainer/ppo_trainer.py:423",
        "seq-mean-token-mean",
    ),
    Change(
        "0.7.2",
        "loss.aggregation",
        "token mean over the micro-batch",
        "openrlhf/trainer/ray/ppo_actor.py:234",
    ),
    Change(
        "0.10.3",
        "loss.aggregation",
        "aggregate_loss: token sum / DP-global token count of the micro-batch",
        "openrlhf/trainer/ray/ppo_actor.py:316",
    ),
    Change(
        "0.10.4",
        "loss.aggregation",
        "aggregate_loss: token mean over the whole optimiser step (all micro-batches, DP ranks)",
        "openrlhf/utils/loss_utils.py:54",
        "_optimizer_step_loss_norm",
    ),
    Change(
        "0.6.0",
        "loss.coef",
        "kl_ctl.value",
        "openrlhf/trainer/ppo_trainer.py:433",
        "the same beta (init_kl_coef) as the reward side",
    ),
    Change(
        "0.6.0",
        "loss.importance_weight",
        None,
        "openrlhf/trainer/ppo_trainer.py:405",
        "no pi/pi_old: biased after the first optimiser step",
    ),
    Change(
        "0.11.1",
        "loss.importance_weight",
        "clamp(pi/pi_old, max=10) under --algo.kl.unbiased_gradient",
        "openrlhf/trainer/ray/ppo_actor.py:326",
        "default off",
    ),
    # --- placements, off-policy, entry points ----------------------------------------------------
    Change("0.5.0", "placement.options", ("reward",), f"{_EM}:492", "no KL loss yet"),
    Change(
        "0.6.0",
        "placement.options",
        ("reward", "loss"),
        f"{_EM}:691",
        "exclusive: use_kl_loss zeroes the reward KL; both at once needs a patch",
    ),
    Change(
        "0.5.0",
        "offpolicy.updates_per_rollout_default",
        8,
        f"{_CLI}:268",
        "rollout_batch_size 1024 x n_samples 1 / train_batch_size 128 x max_epochs 1",
    ),
    Change(
        "0.5.0",
        "entry.train_ppo",
        "non-Ray PPOTrainer with NaiveExperienceMaker",
        "openrlhf/cli/train_ppo.py:317",
        "same KL code as the Ray path",
    ),
    Change(
        "0.6.2",
        "entry.train_ppo",
        None,
        f"{_CLI}:1",
        "cli/train_ppo.py removed: Ray only",
    ),
    Change(
        "0.5.0",
        "entry.train_ppo_ray",
        "PPOTrainer + RemoteExperienceMaker",
        f"{_CLI}:83",
    ),
    Change(
        "0.8.0",
        "entry.train_ppo_ray_async",
        "trainer/ppo_trainer_async.py PPOTrainerAsync (--async_train)",
        f"{_CLI}:138",
        "same experience maker and actor: same KL code on stale samples",
    ),
)
"""Behaviour rows (read from the code of each release)."""

CHANGES: tuple[Change, ...] = _FLAGS + _SEMANTICS
"""Every KL-relevant change, at the first release that has it."""

HISTORY = History(library="openrlhf", releases=RELEASES, changes=CHANGES)
"""OpenRLHF 0.5.0 -> 0.11.2: ``HISTORY.at("0.6.3")["reward.gate"]`` and so on."""
