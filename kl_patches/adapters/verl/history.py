"""What each verl release does with the KL, as data (``HISTORY``), from verl 0.1 to 0.9.1.

Most verl users run an older release, often a vendored copy (``verl/version/version`` names
it). The same launch script means different gradients under different releases: before 0.4.0
there is no ``algorithm.use_kl_in_reward`` and the reward-side k1 penalty runs whenever
``actor.use_kl_loss`` is false (in 0.1, always); the ``+`` estimator names of 0.6.0 crash until
0.8.0; the loss KL moved from the legacy ``dp_actor`` to ``workers/utils/losses.py`` and its
aggregation from a micro-batch mean to a global token mean. :data:`HISTORY` records each such
change once, at the first release that has it, with the file and line of that release.

Sources: the PyPI wheels (``pip download --no-deps verl==V``; 0.1 on PyPI is the git tag
``v0.1``) and, for the recipes that are not in the wheels, the git tags of ``verl-project/verl``
(sources marked ``(git tag vX)``). Hydra defaults were read by composing each release's
``ppo_trainer.yaml``; estimator rows were checked by running each release's ``kl_penalty``
source on CPU. Keys:

* ``default.<hydra path>``: the composed default of that config key;
* ``estimator.*``: which function an estimator name selects, its clamps, the ``+`` suffix;
* ``reward.*``: when and how the KL reaches ``token_level_rewards``;
* ``loss.*``: where the KL loss is computed and how it is aggregated;
* ``placement.*``, ``offpolicy.*``: both placements at once, stale log-probs;
* ``entry.*``: trainers and recipes, and whether they apply the reward KL;
  ``entry.successor.<module>``: the module that runs a removed entry module's trainer;
* ``delivery.*``: how code gets into verl's Ray processes.
"""

from __future__ import annotations

from kl_patches.adapters.history import Change, History

RELEASES: tuple[str, ...] = (
    "0.1",
    "0.2",
    "0.2.0.post1",
    "0.2.0.post2",
    "0.3.0.post0",
    "0.3.0.post1",
    "0.4.0",
    "0.4.1",
    "0.5.0",
    "0.6.0",
    "0.6.1",
    "0.7.0",
    "0.7.1",
    "0.8.0",
    "0.9.0",
    "0.9.1",
)
"""Every verl release on PyPI, ascending (git tags v0.1rc and v0.3.0.rc0 were never uploaded)."""

_CFG = "verl/trainer/config/ppo_trainer.yaml"
_CA = "verl/trainer/ppo/core_algos.py"
_RT = "verl/trainer/ppo/ray_trainer.py"
_A = "actor_rollout_ref.actor."

CHANGES: tuple[Change, ...] = (
    # --- Hydra defaults (composed ppo_trainer.yaml of each release) ------------------------------
    Change("0.1", "default.algorithm.kl_penalty", "kl", f"{_CFG}:115", "reward estimator: k1"),
    Change("0.1", "default.algorithm.kl_ctrl.type", "fixed", f"{_CFG}:117", "fixed beta"),
    Change("0.1", "default.algorithm.kl_ctrl.kl_coef", 0.001, f"{_CFG}:118", "reward-side beta"),
    Change(
        "0.4.0",
        "default.algorithm.kl_ctrl.horizon",
        10000,
        f"{_CFG}:239",
        "adaptive controller only; absent from the yaml before (adaptive needed '+')",
    ),
    Change("0.4.0", "default.algorithm.kl_ctrl.target_kl", 0.1, f"{_CFG}:240", "adaptive only"),
    Change(
        "0.4.0",
        "default.algorithm.use_kl_in_reward",
        False,
        f"{_CFG}:234",
        "new switch (PR #644): reward KL off by default from here on",
    ),
    Change("0.1", "default.algorithm.adv_estimator", "gae", f"{_CFG}:114"),
    Change(
        "0.4.0",
        "default.algorithm.norm_adv_by_std_in_grpo",
        True,
        f"{_CFG}:233",
        "GRPO divides the KL-shaped score by the group std",
    ),
    Change(
        "0.2", f"default.{_A}use_kl_loss", False, f"{_CFG}:32", "KL loss added with GRPO (#124)"
    ),
    Change("0.2", f"default.{_A}kl_loss_coef", 0.001, f"{_CFG}:33"),
    Change("0.2", f"default.{_A}kl_loss_type", "low_var_kl", f"{_CFG}:34", "loss estimator: k3"),
    Change(
        "0.4.0",
        f"default.{_A}loss_agg_mode",
        "token-mean",
        f"{_CFG}:55",
        "also aggregates the KL loss",
    ),
    Change("0.1", f"default.{_A}ppo_epochs", 1, f"{_CFG}:27"),
    Change(
        "0.1",
        f"default.{_A}ppo_mini_batch_size",
        256,
        f"{_CFG}:22",
        "with data.train_batch_size 1024: 4 optimiser steps per rollout batch",
    ),
    Change("0.1", "default.data.train_batch_size", 1024, f"{_CFG}:8"),
    Change("0.2", "default.actor_rollout_ref.rollout.n", 1, f"{_CFG}:89"),
    Change(
        "0.5.0",
        "default.trainer.use_legacy_worker_impl",
        "auto",
        f"{_CFG}:327",
        "auto = legacy fsdp/megatron workers (KL loss in dp_actor/megatron_actor)",
    ),
    Change(
        "0.8.0",
        "default.trainer.use_legacy_worker_impl",
        None,
        "verl/trainer/main_ppo.py:130",
        "removed: engine workers only (KL loss in workers/utils/losses.py)",
    ),
    Change(
        "0.9.0",
        "default.trainer.use_v1",
        True,
        f"{_CFG}:222",
        "v1 trainer (TransferQueue) is the default; use_v1=False runs main_ppo_v0",
    ),
    Change(
        "0.9.0",
        "default.algorithm.filter_groups.metric",
        None,
        f"{_CFG}:89",
        "DAPO group filter in the main trainer (enable: False); metric must be named",
    ),
    Change(
        "0.9.1",
        "default.algorithm.filter_groups.metric",
        "reward",
        f"{_CFG}:93",
        "filters groups on the pre-KL rm_scores",
    ),
    Change(
        "0.6.1",
        "default.algorithm.rollout_correction.bypass_mode",
        False,
        "verl/trainer/config/algorithm/rollout_correction.yaml:24",
        "True makes old_log_probs the rollout engine's, so the reward KL mixes engines",
    ),
    # --- estimator names (kl_penalty / kl_penalty_forward; run on CPU per release) ---------------
    Change("0.1", "estimator.select.kl", "k1", f"{_CA}:203", "logprob - ref_logprob"),
    Change("0.1", "estimator.select.abs", "abs", f"{_CA}:206", "|logprob - ref_logprob|"),
    Change("0.1", "estimator.select.mse", "k2", f"{_CA}:209", "0.5 * (logprob - ref)^2"),
    Change("0.1", "estimator.select.full", "NotImplementedError", f"{_CA}:212"),
    Change(
        "0.2",
        "estimator.select.low_var_kl",
        "k3",
        f"{_CA}:328",
        "exp(ref - logprob) - (ref - logprob) - 1",
    ),
    Change("0.4.0", "estimator.select.k1", "k1", f"{_CA}:583", "alias of kl"),
    Change("0.4.0", "estimator.select.k2", "k2", f"{_CA}:589", "alias of mse"),
    Change("0.4.0", "estimator.select.k3", "k3", f"{_CA}:594", "alias of low_var_kl"),
    Change(
        "0.2",
        "estimator.k3.value_clamp",
        10.0,
        f"{_CA}:332",
        "k3 value clamped to [-10, 10]: zero gradient beyond",
    ),
    Change("0.2", "estimator.k3.log_ratio_clamp", None, f"{_CA}:329", "no pre-clamp"),
    Change(
        "0.4.1",
        "estimator.k3.log_ratio_clamp",
        20.0,
        f"{_CA}:857",
        "log-ratio clamped to [-20, 20] first; 0.4.0 gives a NaN gradient at log-ratio -100",
    ),
    Change(
        "0.1",
        "estimator.plus_suffix",
        "unknown_name_raises",
        f"{_CA}:216",
        "no '+' handling: e.g. 'k3+' raises NotImplementedError like any unknown name",
    ),
    Change(
        "0.6.0",
        "estimator.plus_suffix",
        "advertised_but_raises",
        f"{_CA}:1404",
        "'+' names (PR #2953) reach kl_penalty_forward unstripped and raise at L1452",
    ),
    Change(
        "0.8.0",
        "estimator.plus_suffix",
        "base_value_k2_gradient",
        f"{_CA}:2139",
        "'+' stripped (PR #6058): value of the base estimator, gradient of k2",
    ),
    Change(
        "0.1",
        "estimator.dispatch",
        "kl_penalty",
        f"{_CA}:192",
        "one function holds every estimator",
    ),
    Change(
        "0.6.0",
        "estimator.dispatch",
        "kl_penalty->kl_penalty_forward",
        f"{_CA}:1403",
        "kl_penalty_forward is looked up in core_algos globals at call time (a patch point)",
    ),
    # --- reward side (RayPPOTrainer.fit / apply_kl_penalty) --------------------------------------
    Change(
        "0.1",
        "reward.gate",
        "always",
        f"{_RT}:468",
        "apply_kl_penalty runs every step; the ref worker always exists, so beta=kl_coef",
    ),
    Change(
        "0.2",
        "reward.gate",
        "not actor_rollout_ref.actor.use_kl_loss",
        f"{_RT}:917",
        "reward k1 at kl_coef 0.001 whenever the KL loss is off",
    ),
    Change(
        "0.4.0",
        "reward.gate",
        "algorithm.use_kl_in_reward",
        f"{_RT}:1124",
        "independent of use_kl_loss",
    ),
    Change(
        "0.1",
        "reward.ref_worker",
        "always",
        "verl/trainer/main_ppo.py:140",
        "Role.RefPolicy always in the role mapping",
    ),
    Change(
        "0.4.0",
        "reward.ref_worker",
        "use_kl_in_reward or use_kl_loss",
        "verl/trainer/main_ppo.py:130",
        "no reference model when both placements are off",
    ),
    Change(
        "0.1",
        "reward.logprobs",
        "old_log_probs",
        f"{_RT}:91",
        "behaviour policy recomputed by the actor: detached, constant over the update",
    ),
    Change(
        "0.1",
        "reward.target",
        "token_level_rewards = token_level_scores - beta * kld (every response token)",
        f"{_RT}:99",
        "per-token penalty; GRPO/RLOO sum it per sequence, GAE/REINFORCE++ as reward-to-go",
    ),
    Change("0.1", "reward.metric", "critic/kl", f"{_RT}:108", "batch mean of per-sequence means"),
    Change("0.4.0", "reward.metric", "actor/reward_kl_penalty", f"{_RT}:193"),
    Change(
        "0.7.1",
        "reward.dropped.gdpo",
        True,
        f"{_CA}:414",
        "adv_estimator=gdpo rebuilds scores from reward_extra_info: the reward KL is ignored",
    ),
    Change(
        "0.8.0",
        "reward.dropped.multi_turn_grpo",
        True,
        "verl/trainer/main_ppo_sync.py:122",
        "GRPO on each session's final output only: KL of earlier turns is dropped",
    ),
    # --- both placements -------------------------------------------------------------------------
    Change("0.1", "placement.options", ("reward",), f"{_RT}:468", "0.1 has no KL loss"),
    Change(
        "0.2",
        "placement.options",
        ("reward", "loss"),
        f"{_RT}:917",
        "exclusive: use_kl_loss turns the reward KL off",
    ),
    Change(
        "0.4.0",
        "placement.options",
        ("reward", "loss", "both"),
        f"{_RT}:505",
        "two independent switches (both prints a NOTICE); one coefficient each",
    ),
    # --- loss side -------------------------------------------------------------------------------
    Change(
        "0.2",
        "loss.default_site",
        "verl.workers.actor.dp_actor.DataParallelPPOActor.update_policy",
        "verl/workers/actor/dp_actor.py:258",
        "FSDP only: the Megatron actor has no KL loss in 0.2.x",
    ),
    Change(
        "0.8.0",
        "loss.default_site",
        "verl.workers.utils.losses.ppo_loss",
        "verl/workers/utils/losses.py:132",
        "legacy workers removed; one loss function for every engine",
    ),
    Change("0.2", "loss.megatron", False, "verl/workers/actor/dp_actor.py:258", "dp_actor only"),
    Change(
        "0.3.0.post0",
        "loss.megatron",
        True,
        "verl/workers/actor/megatron_actor.py:296",
        "Megatron actor adds the KL loss too",
    ),
    Change(
        "0.6.0",
        "loss.engine_ppo_loss",
        "verl.workers.roles.utils.losses.ppo_loss",
        "verl/workers/roles/utils/losses.py:98",
        "new-engine loss exists but main_ppo never selects it for the actor",
    ),
    Change(
        "0.7.0",
        "loss.engine_ppo_loss",
        "verl.workers.utils.losses.ppo_loss",
        "verl/workers/utils/losses.py:143",
        "selected by trainer.use_legacy_worker_impl=disable (default auto keeps dp_actor)",
    ),
    Change(
        "0.2",
        "loss.sign",
        "+",
        "verl/workers/actor/dp_actor.py:266",
        "minimised; the '-' of #124 (KL maximised) lived on main 2025-01-23..02-01 only",
    ),
    Change(
        "0.2",
        "loss.aggregation",
        "masked_mean over the micro-batch tokens",
        "verl/workers/actor/dp_actor.py:264",
        "token mean per micro-batch, then gradient accumulation",
    ),
    Change(
        "0.4.0",
        "loss.aggregation",
        "agg_loss(loss_agg_mode) per micro-batch",
        "verl/workers/actor/dp_actor.py:415",
        "same mode as the policy loss (default token-mean)",
    ),
    Change(
        "0.8.0",
        "loss.aggregation",
        "agg_loss(loss_agg_mode) with global batch counts",
        "verl/workers/utils/losses.py:136",
        "token mean over the whole mini-batch across micro-batches and DP ranks",
    ),
    Change(
        "0.4.0",
        "loss.agg_modes",
        ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"),
        f"{_CA}:434",
    ),
    Change(
        "0.9.0",
        "loss.agg_modes",
        (
            "token-mean",
            "token-sum",
            "seq-mean-token-sum",
            "seq-mean-token-sum-norm",
            "seq-mean-token-mean",
        ),
        f"{_CA}:1176",
        "token-sum added",
    ),
    Change(
        "0.2",
        "loss.importance_weight",
        None,
        "verl/workers/actor/dp_actor.py:261",
        "kl_penalty(log_prob, ref_log_prob) with no pi/pi_old: biased after the first step",
    ),
    # --- off-policy ------------------------------------------------------------------------------
    Change(
        "0.1",
        "offpolicy.updates_per_rollout_default",
        4,
        f"{_CFG}:22",
        "train_batch_size 1024 / ppo_mini_batch_size 256 x ppo_epochs 1",
    ),
    # --- entry points and trainers ---------------------------------------------------------------
    Change(
        "0.1",
        "entry.main_ppo",
        "RayPPOTrainer.fit",
        f"{_RT}:468",
        "applies the reward KL per reward.gate",
    ),
    Change(
        "0.8.0",
        "entry.main_ppo_sync",
        "applies reward KL iff use_kl_in_reward",
        "verl/trainer/main_ppo_sync.py:1418",
        "separate sync entry point (TransferQueue), replaced by the v1 trainer in 0.9.0",
    ),
    Change(
        "0.9.0",
        "entry.main_ppo_sync",
        None,
        "verl/trainer/main_ppo.py:184",
        "removed; main_ppo picks TaskRunnerV1 (use_v1) or main_ppo_v0",
    ),
    Change(
        "0.9.0",
        "entry.successor.main_ppo_sync",
        "verl.trainer.main_ppo",
        "verl/trainer/main_ppo.py:184",
        "PR #6710 moved main_ppo_sync.py to ppo/v1/trainer_base.py; main_ppo runs it by default "
        "(trainer.use_v1=True, trainer.v1.trainer_mode=sync)",
    ),
    Change(
        "0.9.0",
        "entry.main_ppo",
        "v1 PPOTrainer._compute_advantage (trainer_mode sync|colocate_async|separate_async)",
        "verl/trainer/ppo/v1/trainer_base.py:1599",
        "every v1 mode applies the reward KL iff use_kl_in_reward",
    ),
    Change(
        "0.7.1",
        "entry.separation",
        "applies reward KL iff use_kl_in_reward",
        "verl/experimental/separation/ray_trainer.py:566",
        "SeparateRayPPOTrainer, base of the one-step-off and fully-async trainers",
    ),
    Change(
        "0.5.0",
        "entry.one_step_off_policy",
        "recipe (git only), applies reward KL iff use_kl_in_reward",
        "recipe/one_step_off_policy/ray_trainer.py:517 (git tag v0.5.0)",
        "old_log_probs recomputed on weights one step newer than the rollout",
    ),
    Change(
        "0.7.1",
        "entry.one_step_off_policy",
        "verl.experimental (git only: the 0.7.1 wheel ships its config, no .py)",
        "verl/experimental/one_step_off_policy/ray_trainer.py:114 (git tag v0.7.1)",
        "subclass of SeparateRayPPOTrainer",
    ),
    Change(
        "0.8.0",
        "entry.one_step_off_policy",
        "verl.experimental, applies reward KL iff use_kl_in_reward",
        "verl/experimental/one_step_off_policy/ray_trainer.py:116",
        "in the wheel from here on",
    ),
    Change(
        "0.6.1",
        "entry.fully_async",
        "recipe (git only), applies reward KL iff use_kl_in_reward",
        "recipe/fully_async_policy/ray_trainer.py:418 (git tag v0.6.1)",
        "rollouts are stale by up to staleness_threshold versions",
    ),
    Change(
        "0.7.1",
        "entry.fully_async",
        "verl.experimental (git only: the 0.7.1 wheel ships its config, no .py)",
        "verl/experimental/fully_async_policy/fully_async_trainer.py:98 (git tag v0.7.1)",
        "FullyAsyncTrainer subclasses SeparateRayPPOTrainer",
    ),
    Change(
        "0.8.0",
        "entry.fully_async",
        "verl.experimental, applies reward KL iff use_kl_in_reward",
        "verl/experimental/fully_async_policy/fully_async_trainer.py:103",
    ),
    Change(
        "0.3.0.post0",
        "entry.recipe.prime",
        "never applies the reward KL",
        "recipe/prime/prime_ray_trainer.py:321 (git tag v0.3.0.post0)",
        "its fit() has no apply_kl_penalty: only use_kl_loss regularises",
    ),
    Change(
        "0.4.0",
        "entry.recipe.dapo",
        "applies reward KL iff use_kl_in_reward",
        "recipe/dapo/dapo_ray_trainer.py:161 (git tag v0.4.0)",
    ),
    Change(
        "0.3.0.post0",
        "entry.recipe_location",
        "recipe/ in the repository (not in the wheel)",
        "recipe/prime/prime_ray_trainer.py:1 (git tag v0.3.0.post0)",
    ),
    Change(
        "0.7.1",
        "entry.recipe_location",
        "git submodule verl-project/verl-recipe",
        ".gitmodules:1 (git tag v0.7.1)",
        "recipe trainers are versioned outside verl from here on",
    ),
    # --- delivery into Ray processes -------------------------------------------------------------
    Change(
        "0.6.0",
        "delivery.external_modules_env",
        "VERL_USE_EXTERNAL_MODULES",
        "verl/__init__.py:40",
        "modules imported by every 'import verl'; errors propagate",
    ),
    Change(
        "0.9.0",
        "delivery.plugins_entry_point",
        "verl.plugins",
        "verl/__init__.py:53",
        "entry points loaded by every 'import verl'; load errors are swallowed",
    ),
)
"""Every KL-relevant change, at the first release that has it."""

HISTORY = History(library="verl", releases=RELEASES, changes=CHANGES)
"""verl 0.1 -> 0.9.1: ``HISTORY.at("0.3.0.post1")["reward.gate"]`` and so on."""
