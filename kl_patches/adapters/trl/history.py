"""TRL's KL behaviour in every release from 0.14.0 to 1.16.0, as data (issue 13).

:data:`HISTORY` answers "what does this TRL release do to the KL?" for GRPOTrainer, RLOOTrainer and
PPOTrainer (``trl.trainer`` up to 0.28, ``trl.experimental.ppo`` 0.26-1.12), so a reader can
interpret a launch that pins an old release (``HISTORY.at("0.18.0")``) instead of assuming 1.16.
Keys are grouped by trainer (``grpo.``, ``rloo.``, ``ppo.``); a value of ``None`` means the
feature is gone in that release. Every row was read from the released wheel of ``since``
(``pip download --no-deps trl==V``), and the release before was read too, so ``since`` is the
first release with that value.

Source convention: ``path:LINE`` is the line in release ``since`` that shows the value; a removal
row (value ``None``) has ``path:0``, the file where the feature used to be and no longer is.

The evidence behind each row is kept as data too: :data:`EVIDENCE` (the regex the source line
matches), :data:`ANCHORS` (a regex that must occur earlier in the file, to pick the right
occurrence) and :data:`BEFORE` (what the release before shows); :func:`check_sources` re-reads all
of it from unpacked wheels, so a wrong line number or ``since`` is caught mechanically.

In brief (details in ``benchmarks/research/trl_versions.md``): GRPO always runs k3 in the loss,
gated by ``beta`` (default 0.04 until 0.18.2, 0.0 from 0.19.0), aggregated like its ``loss_type``
(no switch before 0.17, per-sequence mean in 0.14-0.15, token mean in 0.16), multiplied by
pi/pi_old when ``use_bias_correction_kl`` (0.26.0, default True from 1.10.0); RLOO always runs k1
summed per sequence in the reward (``kl_coef`` until 0.21, ``beta`` from 0.22, 0.05); PPO runs a
per-token k1 (k3 optional from 0.17) in the reward until it disappears in 1.13.0.
"""

from __future__ import annotations

import re
from pathlib import Path

from kl_patches.adapters.history import Change, History

RELEASES: tuple[str, ...] = (
    "0.14.0", "0.15.0", "0.15.1", "0.15.2", "0.16.0", "0.16.1", "0.17.0", "0.18.0", "0.18.1",
    "0.18.2", "0.19.0", "0.19.1", "0.20.0", "0.21.0", "0.22.0", "0.22.1", "0.22.2", "0.23.0",
    "0.23.1", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.26.1", "0.26.2", "0.27.0", "0.27.1",
    "0.27.2", "0.28.0", "0.29.0", "0.29.1", "1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0",
    "1.5.1", "1.6.0", "1.7.0", "1.7.1", "1.8.0", "1.9.0", "1.9.1", "1.9.2", "1.10.0", "1.11.0",
    "1.12.0", "1.13.0", "1.14.0", "1.14.1", "1.14.2", "1.15.0", "1.16.0",
)  # fmt: skip
"""Every final TRL release on PyPI from 0.14.0 to 1.16.0 (1.0.0rc1, a pre-release, is left out)."""

CHANGES: tuple[Change, ...] = (
    Change(
        "0.14.0",
        "grpo.kl_estimator",
        "k3",
        "trl/trainer/grpo_trainer.py:454",
        "exp(ref - logp) - (ref - logp) - 1 per completion token, from the first release on",
    ),
    Change(
        "0.14.0",
        "grpo.kl_placement",
        "loss",
        "trl/trainer/grpo_trainer.py:511",
        "k3 is added to the per-token loss (path-wise gradient); the reward never sees the KL",
    ),
    Change(
        "0.14.0",
        "grpo.beta_default",
        0.04,
        "trl/trainer/grpo_config.py:174",
        "KL on by default at 0.04",
    ),
    Change(
        "0.19.0",
        "grpo.beta_default",
        0.0,
        "trl/trainer/grpo_config.py:413",
        "KL off by default: a config that never sets beta trains without any KL from here on",
    ),
    Change(
        "0.14.0",
        "grpo.beta_zero_skips_ref_model",
        False,
        "trl/trainer/grpo_trainer.py:205",
        "the reference model is built and its log-probs computed even with beta=0",
    ),
    Change(
        "0.16.0",
        "grpo.beta_zero_skips_ref_model",
        True,
        "trl/trainer/grpo_trainer.py:316",
        "beta=0 builds no reference model and computes no reference log-probs",
    ),
    Change(
        "0.14.0",
        "grpo.ref_model_source",
        "copy_of_policy",
        "trl/trainer/grpo_trainer.py:205",
        "reference = deep copy of the policy object passed in (reloaded by name only under ZeRO-3)",
    ),
    Change(
        "0.19.0",
        "grpo.ref_model_source",
        "reloaded_by_name",
        "trl/trainer/grpo_trainer.py:574",
        "reference = from_pretrained(model.config._name_or_path): an in-memory edit of the "
        "policy is not the reference",
    ),
    Change(
        "0.14.0",
        "grpo.peft_reference",
        "adapter_disabled",
        "trl/trainer/grpo_trainer.py:450",
        "with PEFT the reference is the base model (adapter disabled)",
    ),
    Change(
        "0.27.0",
        "grpo.peft_reference",
        "ref_adapter_copy",
        "trl/trainer/grpo_trainer.py:335",
        "a PEFT model with a pretrained adapter gets a frozen 'ref' copy of that adapter as "
        "the reference (else adapter disabled)",
    ),
    Change(
        "0.14.0",
        "grpo.logps_tempered",
        False,
        "trl/trainer/grpo_trainer.py:430",
        "policy and reference log-probs from raw logits although sampling used temperature",
    ),
    Change(
        "0.16.0",
        "grpo.logps_tempered",
        True,
        "trl/trainer/grpo_trainer.py:598",
        "log-probs of logits/temperature: the KL is between the tempered policy and reference",
    ),
    Change(
        "0.14.0",
        "grpo.temperature_default",
        0.9,
        "trl/trainer/grpo_config.py:113",
        "sampling temperature",
    ),
    Change(
        "0.18.0",
        "grpo.temperature_default",
        1.0,
        "trl/trainer/grpo_config.py:280",
        "tempered = untempered log-probs by default from here",
    ),
    Change(
        "0.14.0",
        "grpo.kl_aggregation.default",
        "seq_mean_token_mean",
        "trl/trainer/grpo_trainer.py:512",
        "k3 averaged over each completion's tokens, then over completions",
    ),
    Change(
        "0.16.0",
        "grpo.kl_aggregation.default",
        "token_mean_local",
        "trl/trainer/grpo_trainer.py:932",
        "k3 averaged over all tokens of the micro-batch (long completions weigh more), no option",
    ),
    Change(
        "0.22.0",
        "grpo.kl_aggregation.default",
        "token_mean_global",
        "trl/trainer/grpo_trainer.py:1621",
        "default loss_type dapo: token sum over the generation batch's token count",
    ),
    Change(
        "0.17.0",
        "grpo.loss_type_default",
        "bnpo",
        "trl/trainer/grpo_config.py:346",
        "token mean over the micro-batch (what 0.16 did without a switch)",
    ),
    Change(
        "0.22.0",
        "grpo.loss_type_default",
        "dapo",
        "trl/trainer/grpo_config.py:520",
        "token mean over the whole accumulation window",
    ),
    Change(
        "0.17.0",
        "grpo.loss_types",
        ("bnpo", "dr_grpo", "grpo"),
        "trl/trainer/grpo_trainer.py:1223",
        "loss_type selects the normaliser of policy loss and k3 alike",
    ),
    Change(
        "0.22.0",
        "grpo.loss_types",
        ("bnpo", "dapo", "dr_grpo", "grpo"),
        "trl/trainer/grpo_trainer.py:1620",
        "dapo added",
    ),
    Change(
        "0.26.0",
        "grpo.loss_types",
        ("bnpo", "cispo", "dapo", "dr_grpo", "grpo", "sapo"),
        "trl/trainer/grpo_trainer.py:2220",
        "cispo and sapo added",
    ),
    Change(
        "0.28.0",
        "grpo.loss_types",
        ("bnpo", "cispo", "dapo", "dr_grpo", "grpo", "luspo", "sapo"),
        "trl/trainer/grpo_trainer.py:2083",
        "luspo added",
    ),
    Change(
        "1.0.0",
        "grpo.loss_types",
        ("bnpo", "cispo", "dapo", "dr_grpo", "grpo", "luspo", "sapo", "vespo"),
        "trl/trainer/grpo_trainer.py:2400",
        "vespo added",
    ),
    Change(
        "0.17.0",
        "grpo.kl_aggregation.grpo",
        "seq_mean_token_mean",
        "trl/trainer/grpo_trainer.py:1220",
        "k3 length-normalised per completion, then averaged",
    ),
    Change(
        "0.17.0",
        "grpo.kl_aggregation.bnpo",
        "token_mean_local",
        "trl/trainer/grpo_trainer.py:1222",
        "k3 averaged over the micro-batch's tokens",
    ),
    Change(
        "0.17.0",
        "grpo.kl_aggregation.dr_grpo",
        "sum_over_B_max_completion_length",
        "trl/trainer/grpo_trainer.py:1224",
        "a per-sequence k3 sum with coefficient beta/max_completion_length",
    ),
    Change(
        "0.22.0",
        "grpo.kl_aggregation.dapo",
        "token_mean_global",
        "trl/trainer/grpo_trainer.py:1621",
        "k3 summed, divided by the generation batch's token count per process",
    ),
    Change(
        "0.26.0",
        "grpo.kl_aggregation.cispo",
        "token_mean_global",
        "trl/trainer/grpo_trainer.py:2229",
        "as dapo",
    ),
    Change(
        "0.26.0",
        "grpo.kl_aggregation.sapo",
        "seq_mean_token_mean",
        "trl/trainer/grpo_trainer.py:2220",
        "as grpo",
    ),
    Change(
        "0.28.0",
        "grpo.kl_aggregation.luspo",
        "length_weighted_mean_incl_padding",
        "trl/trainer/grpo_trainer.py:2085",
        "k3 (B,T) times each completion's length, averaged over B*T with padding positions "
        "included",
    ),
    Change(
        "1.10.0",
        "grpo.kl_aggregation.luspo",
        "seq_sum_mean",
        "trl/trainer/grpo_trainer.py:3220",
        "masked per-completion k3 sum, averaged over completions",
    ),
    Change(
        "1.0.0",
        "grpo.kl_aggregation.vespo",
        "token_mean_global",
        "trl/trainer/grpo_trainer.py:2400",
        "as dapo",
    ),
    Change(
        "0.14.0",
        "grpo.loss_ga_scaling",
        "transformers_trainer",
        "trl/trainer/grpo_trainer.py:512",
        "the loss (and its k3) is divided by gradient_accumulation_steps in Trainer",
    ),
    Change(
        "0.22.0",
        "grpo.loss_ga_scaling",
        "grpo_trainer",
        "trl/trainer/grpo_trainer.py:416",
        "GRPOTrainer scales its own loss for accumulation (dapo-like types via num_items_in_batch)",
    ),
    Change(
        "0.22.0",
        "grpo.global_token_normalizer",
        "num_items_in_batch/num_processes",
        "trl/trainer/grpo_trainer.py:1621",
        "right only when steps_per_generation equals gradient_accumulation_steps (the default)",
    ),
    Change(
        "1.9.0",
        "grpo.global_token_normalizer",
        "clamp(num_items_in_batch,1)/num_processes",
        "trl/trainer/grpo_trainer.py:3140",
        "guards an all-masked batch",
    ),
    Change(
        "1.9.1",
        "grpo.global_token_normalizer",
        "clamp(num_items_in_batch,1)/num_processes*GA/steps_per_generation",
        "trl/trainer/grpo_trainer.py:3143",
        "k3 weight no longer off by steps_per_generation/GA when they differ",
    ),
    Change(
        "0.22.0",
        "grpo.num_items_in_batch",
        "gathered_completion_lengths",
        "trl/trainer/grpo_trainer.py:1311",
        "token count before mask_truncated_completions",
    ),
    Change(
        "1.9.0",
        "grpo.num_items_in_batch",
        "gathered_loss_mask_tokens",
        "trl/trainer/grpo_trainer.py:2427",
        "counts only tokens that carry loss (after truncation masking, tool tokens excluded)",
    ),
    Change(
        "0.14.0",
        "grpo.max_completion_length_default",
        256,
        "trl/trainer/grpo_config.py:117",
        "dr_grpo's k3 weight is beta/max_completion_length",
    ),
    Change(
        "1.10.0",
        "grpo.max_completion_length_default",
        512,
        "trl/trainer/grpo_config.py:492",
        "halves beta's per-token weight under dr_grpo",
    ),
    Change(
        "0.14.0",
        "grpo.kl_token_mask",
        "completion_mask",
        "trl/trainer/grpo_trainer.py:512",
        "k3 over every completion token up to EOS",
    ),
    Change(
        "0.26.0",
        "grpo.kl_token_mask",
        "completion_mask*tool_mask",
        "trl/trainer/grpo_trainer.py:2219",
        "tool-result tokens carry no k3",
    ),
    Change(
        "0.17.0",
        "grpo.mask_truncated_completions_default",
        False,
        "trl/trainer/grpo_config.py:362",
        "True drops truncated completions from the loss, their k3 included",
    ),
    Change(
        "0.14.0",
        "grpo.old_logps_when",
        "never",
        "trl/trainer/grpo_trainer.py:510",
        "one update per generation: pi_old = pi, the k3 term is on-policy",
    ),
    Change(
        "0.16.0",
        "grpo.num_iterations_default",
        1,
        "trl/trainer/grpo_config.py:268",
        "num_iterations > 1 reuses a batch: k3 is then evaluated on samples of an older policy",
    ),
    Change(
        "0.16.0",
        "grpo.old_logps_when",
        "num_iterations>1",
        "trl/trainer/grpo_trainer.py:743",
        "old log-probs only feed the policy ratio; the k3 term gets no importance weight",
    ),
    Change(
        "0.18.0",
        "grpo.steps_per_generation_default",
        None,
        "trl/trainer/grpo_config.py:274",
        "None = gradient_accumulation_steps; larger values reuse one generation over several steps",
    ),
    Change(
        "0.18.0",
        "grpo.old_logps_when",
        "num_iterations>1 or steps_per_generation>GA",
        "trl/trainer/grpo_trainer.py:1132",
        "stale generations count as off-policy too",
    ),
    Change(
        "0.20.0",
        "grpo.old_logps_when",
        "GA % (steps_per_generation*num_iterations) != 0",
        "trl/trainer/grpo_trainer.py:1619",
        "computed only when an optimizer step can see a batch generated before the last update",
    ),
    Change(
        "0.23.0",
        "grpo.old_logps_when",
        "GA % (steps_per_generation*num_iterations) != 0 or vLLM IS",
        "trl/trainer/grpo_trainer.py:1371",
        "also always with vLLM importance-sampling correction",
    ),
    Change(
        "0.14.0",
        "grpo.kl_ratio_weight",
        "none",
        "trl/trainer/grpo_trainer.py:511",
        "k3 is never importance-weighted (off-policy batches bias it)",
    ),
    Change(
        "0.26.0",
        "grpo.kl_ratio_weight",
        "pi/pi_old if use_bias_correction_kl",
        "trl/trainer/grpo_trainer.py:2181",
        "DeepSeek-V3.2 correction: k3 times the differentiable ratio; on-policy this turns the "
        "gradient into per-token k2's",
    ),
    Change(
        "0.26.0",
        "grpo.use_bias_correction_kl_default",
        False,
        "trl/trainer/grpo_config.py:763",
        "off: plain k3",
    ),
    Change(
        "1.10.0",
        "grpo.use_bias_correction_kl_default",
        True,
        "trl/trainer/grpo_config.py:966",
        "on by default: 'k3 in the loss' now means k3*pi/pi_old unless set False",
    ),
    Change(
        "0.20.0",
        "grpo.importance_sampling_level_default",
        "token",
        "trl/trainer/grpo_config.py:468",
        "'sequence' (GSPO) uses one sequence-mean ratio per completion",
    ),
    Change(
        "0.26.0",
        "grpo.bias_correction_under_sequence_level",
        "sequence_mean_ratio_on_token_kl",
        "trl/trainer/grpo_trainer.py:2181",
        "with importance_sampling_level='sequence' the (B,1) ratio multiplies every token's k3 "
        "(TRL issue #6586)",
    ),
    Change(
        "0.23.0",
        "grpo.vllm_importance_sampling_correction_default",
        True,
        "trl/trainer/grpo_config.py:602",
        "active only with use_vllm",
    ),
    Change(
        "0.20.0",
        "grpo.policy_only_masks",
        ("top_entropy_quantile",),
        "trl/trainer/grpo_trainer.py:1884",
        "the entropy mask multiplies the policy loss before k3 is added: k3 stays on every token",
    ),
    Change(
        "0.23.0",
        "grpo.policy_only_masks",
        ("top_entropy_quantile", "vllm_importance_sampling_correction"),
        "trl/trainer/grpo_trainer.py:1695",
        "the vLLM sampler/trainer IS ratio corrects the policy loss, not k3",
    ),
    Change(
        "0.27.0",
        "grpo.policy_only_masks",
        (
            "off_policy_mask_threshold",
            "top_entropy_quantile",
            "vllm_importance_sampling_correction",
        ),
        "trl/trainer/grpo_trainer.py:2344",
        "off-policy sequence masking drops the policy loss of stale completions, not their k3",
    ),
    Change(
        "0.16.0",
        "grpo.scale_rewards_default",
        True,
        "trl/trainer/grpo_config.py:290",
        "advantages divided by the group std (sets the policy term's scale against k3)",
    ),
    Change(
        "0.22.0",
        "grpo.scale_rewards_default",
        "group",
        "trl/trainer/grpo_config.py:508",
        "now a string: group, batch or none",
    ),
    Change(
        "0.16.0",
        "grpo.scale_rewards_semantics",
        "True: group std; False: none",
        "trl/trainer/grpo_trainer.py:831",
        "scale_rewards=False is Dr. GRPO's unscaled advantage",
    ),
    Change(
        "0.22.0",
        "grpo.scale_rewards_semantics",
        "BUG group: none; batch: group std; none: group std",
        "trl/trainer/grpo_trainer.py:1401",
        "0.22.0/0.22.1 swap the branches: the default 'group' does not scale, 'none' does",
    ),
    Change(
        "0.22.2",
        "grpo.scale_rewards_semantics",
        "group: group std; batch: batch std; none: none; True/False: group/none",
        "trl/trainer/grpo_trainer.py:1401",
        "fixed; booleans accepted again",
    ),
    Change(
        "0.27.0",
        "grpo.multi_objective_aggregation_default",
        "sum_then_normalize",
        "trl/trainer/grpo_config.py:679",
        "normalize_then_sum normalises each reward function on its own",
    ),
    Change(
        "0.15.0",
        "grpo.sync_ref_model_default",
        False,
        "trl/trainer/grpo_config.py:225",
        "True mixes the policy into the reference every ref_model_sync_steps (TR-DPO): pi_ref "
        "moves",
    ),
    Change(
        "0.15.0",
        "grpo.ref_model_mixup_alpha_default",
        0.9,
        "trl/trainer/grpo_config.py:232",
        "weight of the policy in each reference update",
    ),
    Change(
        "0.16.0",
        "grpo.ref_model_mixup_alpha_default",
        0.6,
        "trl/trainer/grpo_config.py:306",
        "weight of the policy in each reference update",
    ),
    Change(
        "0.15.0",
        "grpo.ref_model_sync_steps_default",
        64,
        "trl/trainer/grpo_config.py:240",
        "steps between reference updates",
    ),
    Change(
        "0.16.0",
        "grpo.ref_model_sync_steps_default",
        512,
        "trl/trainer/grpo_config.py:314",
        "steps between reference updates",
    ),
    Change(
        "0.17.0",
        "grpo.fused_loss_flag",
        "use_liger_loss",
        "trl/trainer/grpo_trainer.py:1185",
        "Liger's fused GRPO loss with its own hard-coded k3 replaces _compute_loss (0.17: bnpo "
        "only)",
    ),
    Change(
        "0.25.0",
        "grpo.fused_loss_flag",
        "use_liger_kernel (use_liger_loss deprecated alias)",
        "trl/trainer/grpo_trainer.py:1756",
        "the generic TrainingArguments flag now switches the fused loss on",
    ),
    Change(
        "0.28.0",
        "grpo.fused_loss_flag",
        "use_liger_kernel",
        "trl/trainer/grpo_trainer.py:1923",
        "use_liger_loss removed",
    ),
    Change(
        "1.14.0",
        "grpo.fused_loss_flag",
        None,
        "trl/trainer/grpo_trainer.py:3001",
        "fused GRPO loss gone: use_liger_kernel only chunks the log-probs, _compute_loss "
        "always runs",
    ),
    Change(
        "0.17.0",
        "grpo.fused_loss_kl",
        "k3",
        "trl/trainer/grpo_trainer.py:557",
        "the fused kernel computes its own k3",
    ),
    Change(
        "0.26.0",
        "grpo.fused_loss_kl",
        "k3, ignores use_bias_correction_kl",
        "trl/trainer/grpo_trainer.py:579",
        "the fused kernel is not told about use_bias_correction_kl: plain k3 under Liger",
    ),
    Change(
        "1.4.0",
        "grpo.fused_loss_kl",
        "k3, times pi/pi_old if use_bias_correction_kl",
        "trl/trainer/grpo_trainer.py:730",
        "0.26-1.3 ran plain k3 under Liger even with use_bias_correction_kl=True",
    ),
    Change(
        "1.14.0",
        "grpo.fused_loss_kl",
        None,
        "trl/trainer/grpo_trainer.py:3001",
        "no fused loss",
    ),
    Change(
        "0.14.0",
        "grpo.hook_methods",
        (),
        "trl/trainer/grpo_trainer.py:370",
        "generation, scoring and loss all inside compute_loss",
    ),
    Change(
        "0.15.0",
        "grpo.hook_methods",
        ("_get_per_token_logps",),
        "trl/trainer/grpo_trainer.py:478",
    ),
    Change(
        "0.16.0",
        "grpo.hook_methods",
        ("_generate_and_score_completions", "_get_per_token_logps"),
        "trl/trainer/grpo_trainer.py:657",
        "ref log-probs and advantages computed here",
    ),
    Change(
        "0.17.0",
        "grpo.hook_methods",
        ("_compute_loss", "_generate_and_score_completions", "_get_per_token_logps"),
        "trl/trainer/grpo_trainer.py:1189",
        "the k3 term lives in _compute_loss",
    ),
    Change(
        "0.19.0",
        "grpo.hook_methods",
        (
            "_calculate_rewards",
            "_compute_loss",
            "_generate_and_score_completions",
            "_get_per_token_logps",
        ),
        "trl/trainer/grpo_trainer.py:1001",
    ),
    Change(
        "0.20.0",
        "grpo.hook_methods",
        (
            "_calculate_rewards",
            "_compute_loss",
            "_generate_and_score_completions",
            "_get_per_token_logps_and_entropies",
        ),
        "trl/trainer/grpo_trainer.py:1071",
        "_get_per_token_logps renamed",
    ),
    Change(
        "0.26.0",
        "grpo.hook_methods",
        (
            "_calculate_rewards",
            "_compute_loss",
            "_generate_and_score_completions",
            "_get_per_token_logps_and_entropies",
            "training_step",
        ),
        "trl/trainer/grpo_trainer.py:1122",
        "all hook points of the 1.x adapter exist (training_step was inherited before)",
    ),
    Change(
        "0.14.0",
        "rloo.implementation",
        "onpolicy_ppo_style",
        "trl/trainer/rloo_trainer.py:81",
        "policy, ref_policy and a reward model; k1 reward, num_ppo_epochs clipped updates",
    ),
    Change(
        "0.22.0",
        "rloo.implementation",
        "grpo_style",
        "trl/trainer/rloo_trainer.py:986",
        "rewritten on GRPO's skeleton: reward functions, num_generations, _compute_loss",
    ),
    Change(
        "0.14.0",
        "rloo.kl_estimator",
        "k1",
        "trl/trainer/rloo_trainer.py:404",
        "log pi - log pi_ref of the sampled tokens",
    ),
    Change(
        "0.14.0",
        "rloo.kl_placement",
        "reward",
        "trl/trainer/rloo_trainer.py:430",
        "subtracted from the score before the leave-one-out baseline",
    ),
    Change(
        "0.14.0",
        "rloo.kl_shape",
        "sequence_sum",
        "trl/trainer/rloo_trainer.py:429",
        "token_level_kl=True sums the same per-token penalties into the return: same advantages",
    ),
    Change(
        "0.14.0",
        "rloo.kl_coef_default",
        0.05,
        "trl/trainer/rloo_config.py:76",
        "0.05 ever since (as beta from 0.22)",
    ),
    Change(
        "0.14.0",
        "rloo.kl_coef_name",
        "kl_coef",
        "trl/trainer/rloo_config.py:75",
    ),
    Change(
        "0.22.0",
        "rloo.kl_coef_name",
        "beta",
        "trl/trainer/rloo_config.py:422",
        "kl_coef still accepted for a while, copied into beta with a warning",
    ),
    Change(
        "0.22.0",
        "rloo.kl_coef_alias",
        "kl_coef -> beta (deprecated)",
        "trl/trainer/rloo_config.py:591",
    ),
    Change(
        "0.25.0",
        "rloo.kl_coef_alias",
        None,
        "trl/trainer/rloo_config.py:0",
        "passing kl_coef is now an error; only beta sets the RLOO KL",
    ),
    Change(
        "0.14.0",
        "rloo.token_level_kl_default",
        False,
        "trl/trainer/rloo_config.py:100",
        "no effect on RLOO's advantage: per-token penalties are summed into the sequence return",
    ),
    Change(
        "0.22.0",
        "rloo.token_level_kl_default",
        "ignored_with_warning",
        "trl/trainer/rloo_config.py:601",
        "only a deprecation warning; the KL is always summed per sequence",
    ),
    Change(
        "0.25.0",
        "rloo.token_level_kl_default",
        None,
        "trl/trainer/rloo_config.py:0",
        "field removed",
    ),
    Change(
        "0.14.0",
        "rloo.beta_zero_skips_ref_model",
        False,
        "trl/trainer/rloo_trainer.py:81",
        "the reference policy is a required argument",
    ),
    Change(
        "0.22.0",
        "rloo.beta_zero_skips_ref_model",
        True,
        "trl/trainer/rloo_trainer.py:469",
        "beta=0: no reference model, no KL",
    ),
    Change(
        "0.14.0",
        "rloo.update_epochs_default",
        4,
        "trl/trainer/rloo_config.py:68",
        "4 clipped epochs per rollout: the k1 penalty, computed once at rollout, is stale "
        "after the first",
    ),
    Change(
        "0.22.0",
        "rloo.update_epochs_default",
        1,
        "trl/trainer/rloo_config.py:430",
        "one update per generation by default (num_ppo_epochs maps to num_iterations)",
    ),
    Change(
        "0.14.0",
        "rloo.temperature_default",
        0.7,
        "trl/trainer/utils.py:1076",
        "OnPolicyConfig.temperature; policy and reference log-probs use it",
    ),
    Change(
        "0.22.0",
        "rloo.temperature_default",
        1.0,
        "trl/trainer/rloo_config.py:294",
    ),
    Change(
        "0.22.0",
        "rloo.max_completion_length_default",
        256,
        "trl/trainer/rloo_config.py:264",
        "the KL is a sum over up to this many tokens",
    ),
    Change(
        "1.10.0",
        "rloo.max_completion_length_default",
        512,
        "trl/trainer/rloo_config.py:312",
        "longer completions: larger sequence KL at the same beta",
    ),
    Change(
        "0.22.0",
        "rloo.sync_ref_model_default",
        False,
        "trl/trainer/rloo_config.py:471",
        "True moves the reference towards the policy (TR-DPO)",
    ),
    Change(
        "0.14.0",
        "rloo.hook_methods",
        (),
        "trl/trainer/rloo_trainer.py:242",
        "one monolithic train loop",
    ),
    Change(
        "0.22.0",
        "rloo.hook_methods",
        (
            "_calculate_rewards",
            "_compute_loss",
            "_generate_and_score_completions",
            "_get_per_token_logps_and_entropies",
        ),
        "trl/trainer/rloo_trainer.py:986",
    ),
    Change(
        "0.26.0",
        "rloo.hook_methods",
        (
            "_calculate_rewards",
            "_compute_loss",
            "_generate_and_score_completions",
            "_get_per_token_logps_and_entropies",
            "training_step",
        ),
        "trl/trainer/rloo_trainer.py:900",
    ),
    Change(
        "0.14.0",
        "ppo.module",
        "trl.trainer.ppo_trainer",
        "trl/trainer/ppo_trainer.py:98",
    ),
    Change(
        "0.26.0",
        "ppo.module",
        "trl.experimental.ppo",
        "trl/experimental/ppo/ppo_trainer.py:130",
        "trl.PPOTrainer stays as a deprecated subclass until 0.28",
    ),
    Change(
        "1.13.0",
        "ppo.module",
        None,
        "trl/experimental/ppo/ppo_trainer.py:0",
        "PPOTrainer no longer shipped",
    ),
    Change(
        "0.14.0",
        "ppo.top_level_import",
        True,
        "trl/__init__.py:89",
    ),
    Change(
        "0.26.0",
        "ppo.top_level_import",
        "deprecated",
        "trl/trainer/ppo_trainer.py:29",
        "FutureWarning, same trainer",
    ),
    Change(
        "0.29.0",
        "ppo.top_level_import",
        None,
        "trl/__init__.py:0",
    ),
    Change(
        "0.14.0",
        "ppo.kl_placement",
        "reward_per_token",
        "trl/trainer/ppo_trainer.py:511",
        "-kl_coef*KL on every token, score added at EOS, then GAE (gamma 1, lam 0.95)",
    ),
    Change(
        "1.13.0",
        "ppo.kl_placement",
        None,
        "trl/experimental/ppo/ppo_trainer.py:0",
    ),
    Change(
        "0.14.0",
        "ppo.kl_coef_default",
        0.05,
        "trl/trainer/ppo_config.py:87",
    ),
    Change(
        "1.13.0",
        "ppo.kl_coef_default",
        None,
        "trl/experimental/ppo/ppo_config.py:0",
    ),
    Change(
        "0.14.0",
        "ppo.kl_estimator_choices",
        ("k1",),
        "trl/trainer/ppo_trainer.py:510",
        "k1 hard-coded",
    ),
    Change(
        "0.17.0",
        "ppo.kl_estimator_choices",
        ("k1", "k3"),
        "trl/trainer/ppo_config.py:95",
        "k3 in the reward is biased (the paper's warning); the default stays k1",
    ),
    Change(
        "1.13.0",
        "ppo.kl_estimator_choices",
        None,
        "trl/experimental/ppo/ppo_config.py:0",
    ),
    Change(
        "0.14.0",
        "ppo.kl_estimator_default",
        "k1",
        "trl/trainer/ppo_trainer.py:510",
    ),
    Change(
        "1.13.0",
        "ppo.kl_estimator_default",
        None,
        "trl/experimental/ppo/ppo_config.py:0",
    ),
)
"""The rows, grouped by trainer; see the module docstring for the source convention."""

EVIDENCE: dict[tuple[str, str], str] = {
    ("grpo.kl_estimator", "0.14.0"): (
        r"per_token_kl = torch\.exp\(ref_per_token_logps - per_token_logps\)"
    ),
    ("grpo.kl_placement", "0.14.0"): (
        r"per_token_loss = -\(per_token_loss - self\.beta \* per_token_kl\)"
    ),
    ("grpo.beta_default", "0.14.0"): r"default=0\.04[,)]",
    ("grpo.beta_default", "0.19.0"): r"default=0\.0[,)]",
    ("grpo.beta_zero_skips_ref_model", "0.14.0"): (
        r"self\.ref_model = create_reference_model\(model\)"
    ),
    ("grpo.beta_zero_skips_ref_model", "0.16.0"): r"if self\.beta == 0\.0:",
    ("grpo.ref_model_source", "0.14.0"): r"self\.ref_model = create_reference_model\(model\)",
    ("grpo.ref_model_source", "0.19.0"): (
        r"self\.ref_model = AutoModelForCausalLM\.from_pretrained\(model_id"
    ),
    ("grpo.peft_reference", "0.14.0"): r"\.disable_adapter\(\)",
    ("grpo.peft_reference", "0.27.0"): r'model\.add_adapter\("ref"',
    ("grpo.logps_tempered", "0.14.0"): r"def get_per_token_logps\(model, input_ids",
    ("grpo.logps_tempered", "0.16.0"): r"logits = logits / self\.temperature",
    ("grpo.temperature_default", "0.14.0"): r"default=0\.9[,)]",
    ("grpo.temperature_default", "0.18.0"): r"default=1\.0[,)]",
    ("grpo.kl_aggregation.default", "0.14.0"): (
        r"loss = \(\(per_token_loss \* completion_mask\)\.sum\(dim=1\) / completion_mask\."
        r"sum\(dim=1\)\)\.mean\(\)"
    ),
    ("grpo.kl_aggregation.default", "0.16.0"): (
        r"loss = \(per_token_loss \* completion_mask\)\.sum\(\) / completion_mask\.sum\(\)"
        "$"
    ),
    ("grpo.kl_aggregation.default", "0.22.0"): (
        r'normalizer = inputs\["num_items_in_batch"\] / self\.accelerator\.num_processes'
    ),
    ("grpo.loss_type_default", "0.17.0"): 'default="bnpo"[,)]',
    ("grpo.loss_type_default", "0.22.0"): 'default="dapo"[,)]',
    ("grpo.loss_types", "0.17.0"): r'elif self\.loss_type == "dr_grpo":',
    ("grpo.loss_types", "0.22.0"): r'elif self\.loss_type == "dapo":',
    ("grpo.loss_types", "0.26.0"): r'if self\.loss_type in \["grpo", "sapo"\]:',
    ("grpo.loss_types", "0.28.0"): r'elif self\.loss_type == "luspo":',
    ("grpo.loss_types", "1.0.0"): r'elif self\.loss_type in \["cispo", "dapo", "vespo"\]:',
    ("grpo.kl_aggregation.grpo", "0.17.0"): (
        r"loss = \(\(per_token_loss \* completion_mask\)\.sum\(-1\) / completion_mask\.sum"
        r"\(-1\)\.clamp\(min=1\.0\)\)\.mean\(\)"
    ),
    ("grpo.kl_aggregation.bnpo", "0.17.0"): (
        r"loss = \(per_token_loss \* completion_mask\)\.sum\(\) / completion_mask\.sum\(\)"
        r"\.clamp\(min=1\.0\)"
    ),
    ("grpo.kl_aggregation.dr_grpo", "0.17.0"): (
        r"loss = \(per_token_loss \* completion_mask\)\.sum\(\) / \(per_token_loss\.size\("
        r"0\) \* self\.max_completion_length\)"
    ),
    ("grpo.kl_aggregation.dapo", "0.22.0"): (
        r'normalizer = inputs\["num_items_in_batch"\] / self\.accelerator\.num_processes'
    ),
    ("grpo.kl_aggregation.cispo", "0.26.0"): r'elif self\.loss_type in \["cispo", "dapo"\]:',
    ("grpo.kl_aggregation.sapo", "0.26.0"): r'if self\.loss_type in \["grpo", "sapo"\]:',
    ("grpo.kl_aggregation.luspo", "0.28.0"): (
        r"loss = \(per_token_loss \* mask\.sum\(1, keepdim=True\)\)\.mean\(\)"
    ),
    ("grpo.kl_aggregation.luspo", "1.10.0"): (
        r"loss = \(per_token_loss \* mask\)\.sum\(-1\)\.mean\(\)"
    ),
    ("grpo.kl_aggregation.vespo", "1.0.0"): (
        r'elif self\.loss_type in \["cispo", "dapo", "vespo"\]:'
    ),
    ("grpo.loss_ga_scaling", "0.14.0"): (
        r"loss = \(\(per_token_loss \* completion_mask\)\.sum\(dim=1\) / completion_mask\."
        r"sum\(dim=1\)\)\.mean\(\)"
    ),
    ("grpo.loss_ga_scaling", "0.22.0"): 'compute_loss_func="non-None value to disable scaling"',
    ("grpo.global_token_normalizer", "0.22.0"): (
        r'normalizer = inputs\["num_items_in_batch"\] / self\.accelerator\.num_processes'
    ),
    ("grpo.global_token_normalizer", "1.9.0"): (
        r'normalizer = inputs\["num_items_in_batch"\]\.clamp\(min=1\.0\) / self\.accelerat'
        r"or\.num_processes"
    ),
    ("grpo.global_token_normalizer", "1.9.1"): (
        r"normalizer = normalizer \* self\.current_gradient_accumulation_steps / self\.arg"
        r"s\.steps_per_generation"
    ),
    ("grpo.num_items_in_batch", "0.22.0"): r"num_items_in_batch = agg_completion_lengths\.sum\(\)",
    ("grpo.num_items_in_batch", "1.9.0"): (
        r"num_items_in_batch = self\.accelerator\.gather\(loss_mask\.sum\(\)\)\.sum\(\)"
    ),
    ("grpo.max_completion_length_default", "0.14.0"): "default=256[,)]",
    ("grpo.max_completion_length_default", "1.10.0"): "default=512[,)]",
    ("grpo.kl_token_mask", "0.14.0"): (
        r"loss = \(\(per_token_loss \* completion_mask\)\.sum\(dim=1\)"
    ),
    ("grpo.kl_token_mask", "0.26.0"): (
        r'mask = completion_mask if not self\.tools else completion_mask \* inputs\["tool_'
        r'mask"\]'
    ),
    ("grpo.mask_truncated_completions_default", "0.17.0"): "default=False[,)]",
    ("grpo.old_logps_when", "0.14.0"): (
        r"per_token_loss = torch\.exp\(per_token_logps - per_token_logps\.detach\(\)\) \* "
        "advantages"
    ),
    ("grpo.num_iterations_default", "0.16.0"): "default=1[,)]",
    ("grpo.old_logps_when", "0.16.0"): r"if self\.num_iterations > 1:",
    ("grpo.steps_per_generation_default", "0.18.0"): "default=None[,)]",
    ("grpo.old_logps_when", "0.18.0"): (
        r"if self\.num_iterations > 1 or self\.args\.steps_per_generation > self\.args\.gr"
        "adient_accumulation_steps:"
    ),
    ("grpo.old_logps_when", "0.20.0"): (
        r"if self\.args\.gradient_accumulation_steps % generate_every != 0:"
    ),
    ("grpo.old_logps_when", "0.23.0"): (
        r"if self\.args\.gradient_accumulation_steps % generate_every != 0 or \($"
    ),
    ("grpo.kl_ratio_weight", "0.14.0"): (
        r"per_token_loss = -\(per_token_loss - self\.beta \* per_token_kl\)"
    ),
    ("grpo.kl_ratio_weight", "0.26.0"): r"per_token_kl = per_token_kl \* coef_1",
    ("grpo.use_bias_correction_kl_default", "0.26.0"): "default=False[,)]",
    ("grpo.use_bias_correction_kl_default", "1.10.0"): "default=True[,)]",
    ("grpo.importance_sampling_level_default", "0.20.0"): 'default="token"[,)]',
    ("grpo.bias_correction_under_sequence_level", "0.26.0"): (
        r"per_token_kl = per_token_kl \* coef_1"
    ),
    ("grpo.vllm_importance_sampling_correction_default", "0.23.0"): "default=True[,)]",
    ("grpo.policy_only_masks", "0.20.0"): r"per_token_loss = per_token_loss \* entropy_mask",
    ("grpo.policy_only_masks", "0.23.0"): (
        r'per_token_loss = per_token_loss \* inputs\["importance_sampling_ratio"\]'
    ),
    ("grpo.policy_only_masks", "0.27.0"): r"per_token_loss = per_token_loss \* off_policy_mask",
    ("grpo.scale_rewards_default", "0.16.0"): "default=True[,)]",
    ("grpo.scale_rewards_default", "0.22.0"): 'default="group"[,)]',
    ("grpo.scale_rewards_semantics", "0.16.0"): r"if self\.args\.scale_rewards:",
    ("grpo.scale_rewards_semantics", "0.22.0"): r'if self\.scale_rewards in \["batch", "none"\]:',
    ("grpo.scale_rewards_semantics", "0.22.2"): r'if self\.scale_rewards in \["group", "none"\]:',
    ("grpo.multi_objective_aggregation_default", "0.27.0"): 'default="sum_then_normalize"[,)]',
    ("grpo.sync_ref_model_default", "0.15.0"): "default=False[,)]",
    ("grpo.ref_model_mixup_alpha_default", "0.15.0"): r"default=0\.9[,)]",
    ("grpo.ref_model_mixup_alpha_default", "0.16.0"): r"default=0\.6[,)]",
    ("grpo.ref_model_sync_steps_default", "0.15.0"): "default=64[,)]",
    ("grpo.ref_model_sync_steps_default", "0.16.0"): "default=512[,)]",
    ("grpo.fused_loss_flag", "0.17.0"): r"return self\.compute_liger_loss\(model, inputs\)",
    ("grpo.fused_loss_flag", "0.25.0"): r"if self\.use_liger_kernel:",
    ("grpo.fused_loss_flag", "0.28.0"): r"if self\.use_liger_kernel:",
    ("grpo.fused_loss_flag", "1.14.0"): r"return self\._compute_loss\(model, inputs\)",
    ("grpo.fused_loss_kl", "0.17.0"): r"self\.liger_grpo_loss = LigerFusedLinearGRPOLoss\(",
    ("grpo.fused_loss_kl", "0.26.0"): r"self\.liger_grpo_loss = LigerFusedLinearGRPOLoss\(",
    ("grpo.fused_loss_kl", "1.4.0"): r"use_bias_correction_kl=args\.use_bias_correction_kl,",
    ("grpo.fused_loss_kl", "1.14.0"): r"return self\._compute_loss\(model, inputs\)",
    ("grpo.hook_methods", "0.14.0"): r"def compute_loss\(self, model, inputs",
    ("grpo.hook_methods", "0.15.0"): r"def _get_per_token_logps\(",
    ("grpo.hook_methods", "0.16.0"): r"def _generate_and_score_completions\(",
    ("grpo.hook_methods", "0.17.0"): r"def _compute_loss\(self, model, inputs\):",
    ("grpo.hook_methods", "0.19.0"): (
        r"def _calculate_rewards\(self, inputs, prompts, completions, completion_ids_list\)"
        ":"
    ),
    ("grpo.hook_methods", "0.20.0"): r"def _get_per_token_logps_and_entropies\(",
    ("grpo.hook_methods", "0.26.0"): (
        r"def training_step\(self, model, inputs, num_items_in_batch\):"
    ),
    ("rloo.implementation", "0.14.0"): r"ref_policy: nn\.Module,",
    ("rloo.implementation", "0.22.0"): r"def _generate_and_score_completions\(",
    ("rloo.kl_estimator", "0.14.0"): "kl = logprobs - ref_logprobs",
    ("rloo.kl_placement", "0.14.0"): r"non_score_reward = -args\.kl_coef \* sequence_kl",
    ("rloo.kl_shape", "0.14.0"): r"sequence_kl = kl\.sum\(1\)",
    ("rloo.kl_coef_default", "0.14.0"): r"default=0\.05[,)]",
    ("rloo.kl_coef_name", "0.14.0"): r"^    kl_coef: float = field\(",
    ("rloo.kl_coef_name", "0.22.0"): r"^    beta: float = field\(",
    ("rloo.kl_coef_alias", "0.22.0"): '"kl_coef": "beta",',
    ("rloo.kl_coef_alias", "0.25.0"): "^    kl_coef: ",
    ("rloo.token_level_kl_default", "0.14.0"): "default=False[,)]",
    ("rloo.token_level_kl_default", "0.22.0"): '"token_level_kl",',
    ("rloo.token_level_kl_default", "0.25.0"): "^    token_level_kl: ",
    ("rloo.beta_zero_skips_ref_model", "0.14.0"): r"ref_policy: nn\.Module,",
    ("rloo.beta_zero_skips_ref_model", "0.22.0"): r"if self\.beta == 0\.0:",
    ("rloo.update_epochs_default", "0.14.0"): "default=4[,)]",
    ("rloo.update_epochs_default", "0.22.0"): "default=1[,)]",
    ("rloo.temperature_default", "0.14.0"): r"default=0\.7,",
    ("rloo.temperature_default", "0.22.0"): r"default=1\.0[,)]",
    ("rloo.max_completion_length_default", "0.22.0"): "default=256[,)]",
    ("rloo.max_completion_length_default", "1.10.0"): "default=512[,)]",
    ("rloo.sync_ref_model_default", "0.22.0"): "default=False[,)]",
    ("rloo.hook_methods", "0.14.0"): r"def train\(self\):",
    ("rloo.hook_methods", "0.22.0"): r"def _generate_and_score_completions\(",
    ("rloo.hook_methods", "0.26.0"): (
        r"def training_step\(self, model, inputs, num_items_in_batch\):"
    ),
    ("ppo.module", "0.14.0"): r"^class PPOTrainer\(",
    ("ppo.module", "0.26.0"): r"^class PPOTrainer\(",
    ("ppo.module", "1.13.0"): r"^class PPOTrainer\(",
    ("ppo.top_level_import", "0.14.0"): '"PPOTrainer",',
    ("ppo.top_level_import", "0.26.0"): "The `PPOTrainer` is now located in",
    ("ppo.top_level_import", "0.29.0"): '"PPOTrainer"',
    ("ppo.kl_placement", "0.14.0"): r"non_score_reward = -args\.kl_coef \* kl",
    ("ppo.kl_placement", "1.13.0"): r"non_score_reward = -args\.kl_coef \* kl",
    ("ppo.kl_coef_default", "0.14.0"): r"default=0\.05[,)]",
    ("ppo.kl_coef_default", "1.13.0"): "^    kl_coef: ",
    ("ppo.kl_estimator_choices", "0.14.0"): "kl = logprobs - ref_logprobs",
    ("ppo.kl_estimator_choices", "0.17.0"): r'^    kl_estimator: Literal\["k1", "k3"\]',
    ("ppo.kl_estimator_choices", "1.13.0"): "^    kl_estimator: ",
    ("ppo.kl_estimator_default", "0.14.0"): "kl = logprobs - ref_logprobs",
    ("ppo.kl_estimator_default", "1.13.0"): "^    kl_estimator: ",
}
"""Row (key, since) -> regex its source line matches (for a removal row: must be absent)."""

ANCHORS: dict[tuple[str, str], str] = {
    ("grpo.beta_default", "0.14.0"): "^    beta: ",
    ("grpo.beta_default", "0.19.0"): "^    beta: ",
    ("grpo.beta_zero_skips_ref_model", "0.16.0"): r"self\.beta = args\.beta",
    ("grpo.ref_model_source", "0.19.0"): "# Reference model",
    ("grpo.temperature_default", "0.14.0"): "^    temperature: ",
    ("grpo.temperature_default", "0.18.0"): "^    temperature: ",
    ("grpo.loss_type_default", "0.17.0"): "^    loss_type: ",
    ("grpo.loss_type_default", "0.22.0"): "^    loss_type: ",
    ("grpo.max_completion_length_default", "0.14.0"): "^    max_completion_length: ",
    ("grpo.max_completion_length_default", "1.10.0"): "^    max_completion_length: ",
    (
        "grpo.kl_token_mask",
        "0.26.0",
    ): r"per_token_loss = per_token_loss \+ self\.beta \* per_token_kl",
    ("grpo.mask_truncated_completions_default", "0.17.0"): "^    mask_truncated_completions: ",
    ("grpo.num_iterations_default", "0.16.0"): "^    num_iterations: ",
    ("grpo.steps_per_generation_default", "0.18.0"): "^    steps_per_generation: ",
    ("grpo.use_bias_correction_kl_default", "0.26.0"): "^    use_bias_correction_kl: ",
    ("grpo.use_bias_correction_kl_default", "1.10.0"): "^    use_bias_correction_kl: ",
    ("grpo.importance_sampling_level_default", "0.20.0"): "^    importance_sampling_level: ",
    (
        "grpo.vllm_importance_sampling_correction_default",
        "0.23.0",
    ): "^    vllm_importance_sampling_correction: ",
    ("grpo.scale_rewards_default", "0.16.0"): "^    scale_rewards: ",
    ("grpo.scale_rewards_default", "0.22.0"): "^    scale_rewards: ",
    ("grpo.multi_objective_aggregation_default", "0.27.0"): "^    multi_objective_aggregation: ",
    ("grpo.sync_ref_model_default", "0.15.0"): "^    sync_ref_model: ",
    ("grpo.ref_model_mixup_alpha_default", "0.15.0"): "^    ref_model_mixup_alpha: ",
    ("grpo.ref_model_mixup_alpha_default", "0.16.0"): "^    ref_model_mixup_alpha: ",
    ("grpo.ref_model_sync_steps_default", "0.15.0"): "^    ref_model_sync_steps: ",
    ("grpo.ref_model_sync_steps_default", "0.16.0"): "^    ref_model_sync_steps: ",
    ("grpo.fused_loss_flag", "0.25.0"): r"def compute_loss\(",
    ("grpo.fused_loss_flag", "0.28.0"): r"def compute_loss\(",
    ("grpo.fused_loss_flag", "1.14.0"): r"def compute_loss\(",
    ("grpo.fused_loss_kl", "1.14.0"): r"def compute_loss\(",
    ("rloo.kl_coef_default", "0.14.0"): "^    kl_coef: ",
    ("rloo.token_level_kl_default", "0.14.0"): "^    token_level_kl: ",
    ("rloo.beta_zero_skips_ref_model", "0.22.0"): r"self\.beta = args\.beta",
    ("rloo.update_epochs_default", "0.14.0"): "^    num_ppo_epochs: ",
    ("rloo.update_epochs_default", "0.22.0"): "^    num_iterations: ",
    ("rloo.temperature_default", "0.14.0"): "^    temperature: float",
    ("rloo.temperature_default", "0.22.0"): "^    temperature: ",
    ("rloo.max_completion_length_default", "0.22.0"): "^    max_completion_length: ",
    ("rloo.max_completion_length_default", "1.10.0"): "^    max_completion_length: ",
    ("rloo.sync_ref_model_default", "0.22.0"): "^    sync_ref_model: ",
    ("ppo.kl_coef_default", "0.14.0"): "^    kl_coef: ",
}
"""Row (key, since) -> regex that must occur earlier in the file (picks the occurrence)."""

BEFORE: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("grpo.beta_default", "0.19.0"): ("present", r"default=0\.04[,)]", True),
    ("grpo.beta_zero_skips_ref_model", "0.16.0"): ("absent", r"if self\.beta == 0\.0:", True),
    ("grpo.ref_model_source", "0.19.0"): (
        "present",
        r"self\.ref_model = create_reference_model\(model\)",
        True,
    ),
    ("grpo.peft_reference", "0.27.0"): ("absent", r'model\.add_adapter\("ref"', True),
    ("grpo.logps_tempered", "0.16.0"): ("absent", r"logits = logits / self\.temperature", True),
    ("grpo.temperature_default", "0.18.0"): ("present", r"default=0\.9[,)]", True),
    ("grpo.kl_aggregation.default", "0.16.0"): (
        "absent",
        r"loss = \(per_token_loss \* completion_mask\)\.sum\(\) / completion_mask\.sum\(\)"
        "$",
        True,
    ),
    ("grpo.kl_aggregation.default", "0.22.0"): (
        "absent",
        r'normalizer = inputs\["num_items_in_batch"\] / self\.accelerator\.num_processes',
        True,
    ),
    ("grpo.loss_type_default", "0.17.0"): ("absent", "^    loss_type: ", False),
    ("grpo.loss_type_default", "0.22.0"): ("present", 'default="bnpo"[,)]', True),
    ("grpo.loss_types", "0.17.0"): ("absent", r'elif self\.loss_type == "dr_grpo":', True),
    ("grpo.loss_types", "0.22.0"): ("absent", r'elif self\.loss_type == "dapo":', True),
    ("grpo.loss_types", "0.26.0"): ("absent", r'if self\.loss_type in \["grpo", "sapo"\]:', True),
    ("grpo.loss_types", "0.28.0"): ("absent", r'elif self\.loss_type == "luspo":', True),
    ("grpo.loss_types", "1.0.0"): (
        "absent",
        r'elif self\.loss_type in \["cispo", "dapo", "vespo"\]:',
        True,
    ),
    ("grpo.kl_aggregation.grpo", "0.17.0"): (
        "absent",
        r"loss = \(\(per_token_loss \* completion_mask\)\.sum\(-1\) / completion_mask\.sum"
        r"\(-1\)\.clamp\(min=1\.0\)\)\.mean\(\)",
        True,
    ),
    ("grpo.kl_aggregation.bnpo", "0.17.0"): (
        "absent",
        r"loss = \(per_token_loss \* completion_mask\)\.sum\(\) / completion_mask\.sum\(\)"
        r"\.clamp\(min=1\.0\)",
        True,
    ),
    ("grpo.kl_aggregation.dr_grpo", "0.17.0"): (
        "absent",
        r"loss = \(per_token_loss \* completion_mask\)\.sum\(\) / \(per_token_loss\.size\("
        r"0\) \* self\.max_completion_length\)",
        True,
    ),
    ("grpo.kl_aggregation.dapo", "0.22.0"): (
        "absent",
        r'normalizer = inputs\["num_items_in_batch"\] / self\.accelerator\.num_processes',
        True,
    ),
    ("grpo.kl_aggregation.cispo", "0.26.0"): (
        "absent",
        r'elif self\.loss_type in \["cispo", "dapo"\]:',
        True,
    ),
    ("grpo.kl_aggregation.sapo", "0.26.0"): (
        "absent",
        r'if self\.loss_type in \["grpo", "sapo"\]:',
        True,
    ),
    ("grpo.kl_aggregation.luspo", "0.28.0"): (
        "absent",
        r"loss = \(per_token_loss \* mask\.sum\(1, keepdim=True\)\)\.mean\(\)",
        True,
    ),
    ("grpo.kl_aggregation.luspo", "1.10.0"): (
        "present",
        r"loss = \(per_token_loss \* mask\.sum\(1, keepdim=True\)\)\.mean\(\)",
        True,
    ),
    ("grpo.kl_aggregation.vespo", "1.0.0"): (
        "absent",
        r'elif self\.loss_type in \["cispo", "dapo", "vespo"\]:',
        True,
    ),
    ("grpo.loss_ga_scaling", "0.22.0"): (
        "absent",
        'compute_loss_func="non-None value to disable scaling"',
        True,
    ),
    ("grpo.global_token_normalizer", "0.22.0"): (
        "absent",
        r'normalizer = inputs\["num_items_in_batch"\] / self\.accelerator\.num_processes',
        True,
    ),
    ("grpo.global_token_normalizer", "1.9.0"): (
        "present",
        r'normalizer = inputs\["num_items_in_batch"\] / self\.accelerator\.num_processes',
        True,
    ),
    ("grpo.global_token_normalizer", "1.9.1"): (
        "absent",
        r"normalizer = normalizer \* self\.current_gradient_accumulation_steps / self\.arg"
        r"s\.steps_per_generation",
        True,
    ),
    ("grpo.num_items_in_batch", "0.22.0"): (
        "absent",
        r"num_items_in_batch = agg_completion_lengths\.sum\(\)",
        True,
    ),
    ("grpo.num_items_in_batch", "1.9.0"): (
        "absent",
        r"num_items_in_batch = self\.accelerator\.gather\(loss_mask\.sum\(\)\)\.sum\(\)",
        True,
    ),
    ("grpo.max_completion_length_default", "1.10.0"): ("present", "default=256[,)]", True),
    ("grpo.kl_token_mask", "0.26.0"): (
        "absent",
        r'mask = completion_mask if not self\.tools else completion_mask \* inputs\["tool_'
        r'mask"\]',
        True,
    ),
    ("grpo.mask_truncated_completions_default", "0.17.0"): (
        "absent",
        "^    mask_truncated_completions: ",
        False,
    ),
    ("grpo.num_iterations_default", "0.16.0"): ("absent", "^    num_iterations: ", False),
    ("grpo.old_logps_when", "0.16.0"): ("absent", r"if self\.num_iterations > 1:", True),
    ("grpo.steps_per_generation_default", "0.18.0"): (
        "absent",
        "^    steps_per_generation: ",
        False,
    ),
    ("grpo.old_logps_when", "0.18.0"): (
        "absent",
        r"if self\.num_iterations > 1 or self\.args\.steps_per_generation > self\.args\.gr"
        "adient_accumulation_steps:",
        True,
    ),
    ("grpo.old_logps_when", "0.20.0"): (
        "absent",
        r"if self\.args\.gradient_accumulation_steps % generate_every != 0:",
        True,
    ),
    ("grpo.old_logps_when", "0.23.0"): (
        "absent",
        r"if self\.args\.gradient_accumulation_steps % generate_every != 0 or \($",
        True,
    ),
    ("grpo.kl_ratio_weight", "0.26.0"): ("absent", r"per_token_kl = per_token_kl \* coef_1", True),
    ("grpo.use_bias_correction_kl_default", "0.26.0"): (
        "absent",
        "^    use_bias_correction_kl: ",
        False,
    ),
    ("grpo.use_bias_correction_kl_default", "1.10.0"): ("present", "default=False[,)]", True),
    ("grpo.importance_sampling_level_default", "0.20.0"): (
        "absent",
        "^    importance_sampling_level: ",
        False,
    ),
    ("grpo.bias_correction_under_sequence_level", "0.26.0"): (
        "absent",
        r"per_token_kl = per_token_kl \* coef_1",
        True,
    ),
    ("grpo.vllm_importance_sampling_correction_default", "0.23.0"): (
        "absent",
        "^    vllm_importance_sampling_correction: ",
        False,
    ),
    ("grpo.policy_only_masks", "0.20.0"): (
        "absent",
        r"per_token_loss = per_token_loss \* entropy_mask",
        True,
    ),
    ("grpo.policy_only_masks", "0.23.0"): (
        "absent",
        r'per_token_loss = per_token_loss \* inputs\["importance_sampling_ratio"\]',
        True,
    ),
    ("grpo.policy_only_masks", "0.27.0"): (
        "absent",
        r"per_token_loss = per_token_loss \* off_policy_mask",
        True,
    ),
    ("grpo.scale_rewards_default", "0.16.0"): ("absent", "^    scale_rewards: ", False),
    ("grpo.scale_rewards_default", "0.22.0"): ("present", "default=True[,)]", True),
    ("grpo.scale_rewards_semantics", "0.16.0"): ("absent", r"if self\.args\.scale_rewards:", True),
    ("grpo.scale_rewards_semantics", "0.22.2"): (
        "absent",
        r'if self\.scale_rewards in \["group", "none"\]:',
        True,
    ),
    ("grpo.multi_objective_aggregation_default", "0.27.0"): (
        "absent",
        "^    multi_objective_aggregation: ",
        False,
    ),
    ("grpo.sync_ref_model_default", "0.15.0"): ("absent", "^    sync_ref_model: ", False),
    ("grpo.ref_model_mixup_alpha_default", "0.15.0"): (
        "absent",
        "^    ref_model_mixup_alpha: ",
        False,
    ),
    ("grpo.ref_model_mixup_alpha_default", "0.16.0"): ("present", r"default=0\.9[,)]", True),
    ("grpo.ref_model_sync_steps_default", "0.15.0"): (
        "absent",
        "^    ref_model_sync_steps: ",
        False,
    ),
    ("grpo.ref_model_sync_steps_default", "0.16.0"): ("present", "default=64[,)]", True),
    ("grpo.fused_loss_flag", "0.17.0"): (
        "absent",
        r"return self\.compute_liger_loss\(model, inputs\)",
        True,
    ),
    ("grpo.fused_loss_flag", "0.25.0"): ("present", r"if self\.use_liger_loss:", True),
    ("grpo.fused_loss_kl", "0.17.0"): (
        "absent",
        r"self\.liger_grpo_loss = LigerFusedLinearGRPOLoss\(",
        True,
    ),
    ("grpo.fused_loss_kl", "1.4.0"): (
        "absent",
        r"use_bias_correction_kl=args\.use_bias_correction_kl,",
        True,
    ),
    ("grpo.hook_methods", "0.15.0"): ("absent", r"def _get_per_token_logps\(", True),
    ("grpo.hook_methods", "0.16.0"): ("absent", r"def _generate_and_score_completions\(", True),
    ("grpo.hook_methods", "0.17.0"): (
        "absent",
        r"def _compute_loss\(self, model, inputs\):",
        True,
    ),
    ("grpo.hook_methods", "0.19.0"): (
        "absent",
        r"def _calculate_rewards\(self, inputs, prompts, completions, completion_ids_list\)"
        ":",
        True,
    ),
    ("grpo.hook_methods", "0.20.0"): ("absent", r"def _get_per_token_logps_and_entropies\(", True),
    ("grpo.hook_methods", "0.26.0"): (
        "absent",
        r"def training_step\(self, model, inputs, num_items_in_batch\):",
        True,
    ),
    ("rloo.implementation", "0.22.0"): ("absent", r"def _generate_and_score_completions\(", True),
    ("rloo.kl_coef_name", "0.22.0"): ("absent", r"^    beta: float = field\(", True),
    ("rloo.kl_coef_alias", "0.22.0"): ("absent", '"kl_coef": "beta",', True),
    ("rloo.kl_coef_alias", "0.25.0"): ("present", "^    kl_coef: ", True),
    ("rloo.token_level_kl_default", "0.22.0"): ("absent", '"token_level_kl",', True),
    ("rloo.token_level_kl_default", "0.25.0"): ("present", "^    token_level_kl: ", True),
    ("rloo.beta_zero_skips_ref_model", "0.22.0"): ("absent", r"if self\.beta == 0\.0:", True),
    ("rloo.max_completion_length_default", "0.22.0"): (
        "absent",
        "^    max_completion_length: ",
        False,
    ),
    ("rloo.max_completion_length_default", "1.10.0"): ("present", "default=256[,)]", True),
    ("rloo.sync_ref_model_default", "0.22.0"): ("absent", "^    sync_ref_model: ", False),
    ("rloo.hook_methods", "0.22.0"): ("absent", r"def _generate_and_score_completions\(", True),
    ("rloo.hook_methods", "0.26.0"): (
        "absent",
        r"def training_step\(self, model, inputs, num_items_in_batch\):",
        True,
    ),
    ("ppo.module", "0.26.0"): ("absent", r"^class PPOTrainer\(", True),
    ("ppo.module", "1.13.0"): ("present", r"^class PPOTrainer\(", True),
    ("ppo.top_level_import", "0.26.0"): ("absent", "The `PPOTrainer` is now located in", True),
    ("ppo.top_level_import", "0.29.0"): ("present", '"PPOTrainer"', True),
    ("ppo.kl_placement", "1.13.0"): ("present", r"non_score_reward = -args\.kl_coef \* kl", True),
    ("ppo.kl_coef_default", "1.13.0"): ("present", "^    kl_coef: ", True),
    ("ppo.kl_estimator_choices", "0.17.0"): (
        "absent",
        r'^    kl_estimator: Literal\["k1", "k3"\]',
        True,
    ),
    ("ppo.kl_estimator_choices", "1.13.0"): ("present", "^    kl_estimator: ", True),
    ("ppo.kl_estimator_default", "1.13.0"): ("present", "^    kl_estimator: ", True),
}

"""Row (key, since) -> (mode, regex, use_anchor): in the release before, the regex (searched
after the row's anchor when use_anchor) is ``present`` or ``absent``; this pins ``since``."""

HISTORY = History("trl", RELEASES, CHANGES)
"""TRL's KL-relevant changes 0.14.0-1.16.0 (GRPOTrainer, RLOOTrainer, PPOTrainer)."""


def _lines(root: Path, version: str, path: str) -> list[str] | None:
    file = root / version / path
    return file.read_text(encoding="utf-8").splitlines() if file.is_file() else None


def _first(lines: list[str], pattern: str, anchor: str | None) -> int | None:
    """1-based line of the first ``pattern`` match after the first ``anchor`` match."""
    start = 0
    if anchor is not None:
        hits = [i for i, line in enumerate(lines) if re.search(anchor, line)]
        if not hits:
            return None
        start = hits[0]
    for i in range(start, len(lines)):
        if re.search(pattern, lines[i]):
            return i + 1
    return None


def check_sources(
    root: str | Path,
    history: History = HISTORY,
    evidence: dict[tuple[str, str], str] | None = None,
    anchors: dict[tuple[str, str], str] | None = None,
    before: dict[tuple[str, str], tuple[str, str, bool]] | None = None,
) -> list[str]:
    """Re-read every row's evidence from unpacked wheels; return the problems (empty when right).

    ``root/<version>/trl/...`` must hold each release's package, e.g. from
    ``pip download --no-deps trl==V`` and ``unzip -d root/V``. For each row: the ``source`` line
    of release ``since`` matches its evidence regex (after its anchor), or for a removal row the
    evidence is absent; and the release before (in ``history.releases``) shows what ``before``
    says. The three tables default to this module's :data:`EVIDENCE`, :data:`ANCHORS` and
    :data:`BEFORE`; :mod:`.compat` passes its own.
    """
    evidence = EVIDENCE if evidence is None else evidence
    anchors = ANCHORS if anchors is None else anchors
    before = BEFORE if before is None else before
    base = Path(root)
    problems: list[str] = []
    order = list(history.releases)
    for change in history.changes:
        ident = (change.key, change.since)
        path, _, number = change.source.rpartition(":")
        if ident not in evidence:
            problems.append(f"{ident}: no evidence recorded")
            continue
        pattern, anchor = evidence[ident], anchors.get(ident)
        lines = _lines(base, change.since, path)
        if number == "0":
            if lines is not None and _first(lines, pattern, anchor) is not None:
                problems.append(f"{ident}: {path} of {change.since} still shows {pattern!r}")
        elif lines is None:
            problems.append(f"{ident}: {path} missing in {change.since}")
        else:
            line = int(number)
            if not (0 < line <= len(lines) and re.search(pattern, lines[line - 1])):
                problems.append(f"{ident}: {change.source} does not match {pattern!r}")
            elif anchor is not None and _first(lines[:line], anchor, None) is None:
                problems.append(f"{ident}: anchor {anchor!r} not before {change.source}")
        spec = before.get(ident)
        index = order.index(change.since)
        if spec is None or index == 0:
            continue
        mode, regex, use_anchor = spec
        previous = order[index - 1]
        old = _lines(base, previous, path)
        found = old is not None and _first(old, regex, anchor if use_anchor else None) is not None
        if found != (mode == "present"):
            problems.append(f"{ident}: {path} of {previous} should be {mode}: {regex!r}")
    return problems
