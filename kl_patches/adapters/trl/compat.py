"""What the TRL adapter relies on, in every TRL 1.x release 1.0.0-1.16.0, as data (issue 14).

The adapter (:mod:`.hooks`, :mod:`.patch`, :mod:`.advantages`, :mod:`.versions`) is written
against TRL 1.16. This module records, per release and read from each released wheel with
:mod:`ast` and text search (no TRL import), everything it touches:

* :data:`SIGNATURES`: the text of every :data:`HOOKED_METHODS` method on GRPOTrainer and
  RLOOTrainer (``inspect``-style, from :func:`ast.unparse`), as ``(since, text)`` steps,
  derived from the recorded ``data/<release>.json`` (``python -m kl_patches.dev record trl V``);
  the rows below are reviewed readings and stay here, each with its evidence;
* :data:`SURFACE`: a :class:`~kl_patches.adapters.history.History` ("trl-patch-surface") of the
  code the hooks copy or mirror: GRPO/RLOO advantages (compared with :mod:`.advantages`), where
  ``_compute_loss`` adds ``beta * k3`` and how it scales for gradient accumulation, when old
  log-probs exist, the batch keys the hooks read, ``trl.trainer.utils.nanstd``, the trainer
  attributes and the GRPOConfig/RLOOConfig defaults :mod:`.versions` writes down;
* :data:`CHANGE_POINTS`: the releases where any of that changes, with the reason: with 1.0.0
  and 1.16.0 they are the compat test matrix (every release in between has the surface of the
  change point before it);
* :data:`INSTALL_RECIPES`: how each release group installs and runs on a CPU machine (measured).

:func:`check` re-reads all of it from unpacked wheels (``root/<version>/trl/...``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from kl_patches.adapters.history import Change, History
from kl_patches.adapters.releases import recording as recording_of

from . import recording
from .history import check_sources

RELEASES_1X: tuple[str, ...] = (
    "1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0", "1.5.1", "1.6.0", "1.7.0", "1.7.1",
    "1.8.0", "1.9.0", "1.9.1", "1.9.2", "1.10.0", "1.11.0", "1.12.0", "1.13.0", "1.14.0",
    "1.14.1", "1.14.2", "1.15.0", "1.16.0",
)  # fmt: skip
"""Every final TRL 1.x release on PyPI up to 1.16.0, patch releases included."""

RELEASES_0X: tuple[str, ...] = (
    "0.14.0", "0.15.0", "0.15.1", "0.15.2", "0.16.0", "0.16.1", "0.17.0", "0.18.0", "0.18.1",
    "0.18.2", "0.19.0", "0.19.1", "0.20.0", "0.21.0", "0.22.0", "0.22.1", "0.22.2", "0.23.0",
    "0.23.1", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.26.1", "0.26.2", "0.27.0", "0.27.1",
    "0.27.2", "0.28.0", "0.29.0", "0.29.1",
)  # fmt: skip
"""Every final TRL 0.x release on PyPI with a GRPOTrainer (GRPO arrived in 0.14.0)."""

RELEASES: tuple[str, ...] = RELEASES_0X + RELEASES_1X
"""Every recorded release the patch accepts, oldest first."""

HOOKED_METHODS: tuple[str, ...] = recording.HOOKED_METHODS
"""The methods :mod:`.patch` wraps (its ``HOOKED``; a test keeps the two equal)."""

TRAINER_FILES: dict[str, str] = {
    cls: module.replace(".", "/") + ".py" for cls, module in recording.TRAINER_MODULES.items()
}
"""Where each trainer class is defined in every 1.x release."""


def _signature_steps(
    releases: tuple[str, ...],
) -> tuple[dict[str, tuple[tuple[str, str], ...]], dict[tuple[str, str], str]]:
    """:data:`SIGNATURES` and :data:`SIGNATURE_SOURCES` from the recorded ``releases``."""
    data = recording_of("kl_patches.adapters.trl")
    steps: dict[str, tuple[tuple[str, str], ...]] = {}
    sources: dict[tuple[str, str], str] = {}
    for cls in TRAINER_FILES:
        for name in HOOKED_METHODS:
            method, found = f"{cls}.{name}", list[tuple[str, str]]()
            for release in releases:
                record = data.at(release).symbols[method]
                if record is None and release in RELEASES_1X:
                    raise RuntimeError(f"TRL {release} data: {method} is not defined")
                if record is None:  # a 0.x release without this hook point
                    continue
                text = str(record["signature"])[len(name) :]
                if not found or found[-1][1] != text:
                    found.append((release, text))
                    sources[(method, release)] = str(record["at"])
            steps[method] = tuple(found)
    return steps, sources


SIGNATURES, SIGNATURE_SOURCES = _signature_steps(RELEASES_1X)
"""Method (``Class.method``) -> ``(since, signature)`` steps: each text holds from ``since``
until the next step; it is ``(args) -> returns`` as :func:`signature_text` writes the ``def``.
And (method, since) -> ``path:line`` of that ``def`` in release ``since``. Both derived from the
recorded releases (``data/<release>.json``, ``symbols``)."""

SIGNATURES_0X, SIGNATURE_SOURCES_0X = _signature_steps(RELEASES_0X)
"""The same for the 0.x releases (a method a release does not define has no step there); the
guard accepts a signature of either (:func:`.patch.signatures`)."""

SURFACE_CHANGES: tuple[Change, ...] = (
    Change(
        "1.0.0",
        "grpo.advantages",
        "mean/std, no NaN handling",
        "trl/trainer/grpo_trainer.py:1967",
        "advantages.py gives the same numbers unless a reward function returns None",
    ),
    Change(
        "1.6.0",
        "grpo.advantages",
        "nan-aware (advantages.py copies this)",
        "trl/trainer/grpo_trainer.py:2176",
        "unscorable rows NaN, nanmean/nanstd, nan_to_num",
    ),
    Change(
        "1.0.0",
        "rloo.advantages",
        "mean, (G-1) divisor, no NaN handling",
        "trl/trainer/rloo_trainer.py:1281",
        "same numbers as advantages.py unless a reward function returns None",
    ),
    Change(
        "1.6.0",
        "rloo.advantages",
        "nan-aware (advantages.py copies this)",
        "trl/trainer/rloo_trainer.py:1302",
        "leave-one-out over scorable siblings, nan_to_num",
    ),
    Change(
        "1.0.0",
        "grpo.kl_term",
        "beta*k3 (times coef_1 if use_bias_correction_kl) after policy-only masks",
        "trl/trainer/grpo_trainer.py:2385",
        "the hook sets self.beta=0 around _compute_loss and adds its own term: valid for all 1.x",
    ),
    Change(
        "1.0.0",
        "grpo.ref_logps_when",
        "beta != 0",
        "trl/trainer/grpo_trainer.py:1916",
        "the hook keeps trainer.beta non-zero during generation",
    ),
    Change(
        "1.0.0",
        "rloo.kl_in_reward",
        "rewards - beta * sum_t(old - ref) before the baseline",
        "trl/trainer/rloo_trainer.py:1269",
        "the hook recomputes this from the captured [old, ref] log-probs",
    ),
    Change(
        "1.0.0",
        "grpo.old_logps_when",
        "GA % (steps_per_generation*num_iterations) != 0 or vLLM IS",
        "trl/trainer/grpo_trainer.py:1869",
        "otherwise the hook's reward side runs one extra no-grad policy forward",
    ),
    Change(
        "1.0.0",
        "grpo.global_token_normalizer",
        "num_items_in_batch/num_processes",
        "trl/trainer/grpo_trainer.py:2401",
        "differs from the adapter's grpo_loss_scaling when steps_per_generation != GA",
    ),
    Change(
        "1.9.0",
        "grpo.global_token_normalizer",
        "clamp(num_items_in_batch,1)/num_processes",
        "trl/trainer/grpo_trainer.py:3140",
    ),
    Change(
        "1.9.1",
        "grpo.global_token_normalizer",
        "clamp(num_items_in_batch,1)/num_processes*GA/steps_per_generation",
        "trl/trainer/grpo_trainer.py:3143",
        "what hooks.grpo_loss_scaling computes",
    ),
    Change(
        "1.0.0",
        "grpo.num_items_in_batch",
        "gathered_completion_lengths",
        "trl/trainer/grpo_trainer.py:1660",
        "counted before mask_truncated_completions",
    ),
    Change(
        "1.9.0",
        "grpo.num_items_in_batch",
        "gathered_loss_mask_tokens",
        "trl/trainer/grpo_trainer.py:2427",
    ),
    Change(
        "1.0.0",
        "grpo.kl_aggregation.luspo",
        "length_weighted_mean_incl_padding",
        "trl/trainer/grpo_trainer.py:2405",
        "versions.py's 'sum' for luspo holds from 1.10.0 only",
    ),
    Change(
        "1.10.0",
        "grpo.kl_aggregation.luspo",
        "seq_sum_mean",
        "trl/trainer/grpo_trainer.py:3220",
    ),
    Change(
        "1.0.0",
        "grpo.loss_ga_scaling",
        "own (Trainer scaling off via compute_loss_func)",
        "trl/trainer/grpo_trainer.py:623",
        "grpo/bnpo/dr_grpo/luspo divide by current_gradient_accumulation_steps in _compute_loss",
    ),
    Change(
        "1.15.0",
        "grpo.loss_ga_scaling",
        "own (loss_is_scaled_for_ga = True)",
        "trl/trainer/grpo_trainer.py:285",
        "same arithmetic, new switch",
    ),
    Change(
        "1.0.0",
        "rloo.loss_ga_scaling",
        "transformers Trainer (model_accepts_loss_kwargs = False)",
        "trl/trainer/rloo_trainer.py:556",
        "the RLOO loss hook adds its term unscaled; Trainer divides the sum",
    ),
    Change(
        "1.15.0",
        "rloo.loss_ga_scaling",
        "transformers Trainer (loss_is_scaled_for_ga = False)",
        "trl/trainer/rloo_trainer.py:219",
    ),
    Change(
        "1.0.0",
        "grpo.extra_loss_terms",
        (),
        "trl/trainer/grpo_trainer.py:2391",
    ),
    Change(
        "1.7.0",
        "grpo.extra_loss_terms",
        ("router_aux_loss",),
        "trl/trainer/grpo_trainer.py:2786",
        "additive, independent of the KL term",
    ),
    Change(
        "1.8.0",
        "grpo.extra_loss_terms",
        ("entropy_bonus", "router_aux_loss"),
        "trl/trainer/grpo_trainer.py:3047",
        "additive, independent of the KL term",
    ),
    Change(
        "1.0.0",
        "rloo.extra_loss_terms",
        (),
        "trl/trainer/rloo_trainer.py:1412",
    ),
    Change(
        "1.7.0",
        "rloo.extra_loss_terms",
        ("router_aux_loss",),
        "trl/trainer/rloo_trainer.py:1562",
    ),
    Change(
        "1.0.0",
        "grpo.logps_returns",
        ("logps", "entropies"),
        "trl/trainer/grpo_trainer.py:1080",
        "annotated '-> dict' in 1.0.0 but returns a tuple; the hooks read out[0]",
    ),
    Change(
        "1.7.0",
        "grpo.logps_returns",
        ("logps", "entropies", "aux_loss"),
        "trl/trainer/grpo_trainer.py:1252",
        "out[0] is still the log-probs",
    ),
    Change(
        "1.0.0",
        "rloo.logps_returns",
        ("logps", "entropies"),
        "trl/trainer/rloo_trainer.py:744",
    ),
    Change(
        "1.7.0",
        "rloo.logps_returns",
        ("logps", "entropies", "aux_loss"),
        "trl/trainer/rloo_trainer.py:844",
    ),
    Change(
        "1.0.0",
        "grpo.liger_bypasses_compute_loss",
        True,
        "trl/trainer/grpo_trainer.py:2182",
        "use_liger_kernel=True: fused loss, no hook runs (training_step guard raises)",
    ),
    Change(
        "1.14.0",
        "grpo.liger_bypasses_compute_loss",
        False,
        "trl/trainer/grpo_trainer.py:2999",
        "use_liger_kernel only changes how log-probs are computed",
    ),
    Change(
        "1.0.0",
        "grpo.batch_keys",
        (
            "advantages",
            "completion_ids",
            "completion_mask",
            "num_items_in_batch",
            "old_per_token_logps",
            "ref_per_token_logps",
            "tool_mask",
        ),
        "trl/trainer/grpo_trainer.py:2097",
        "old/ref/tool keys only when computed (off-policy or vLLM IS / beta != 0 / tools)",
    ),
    Change(
        "1.0.0",
        "rloo.batch_keys",
        ("advantages", "completion_ids", "completion_mask", "old_logps"),
        "trl/trainer/rloo_trainer.py:1349",
        "no per-token log-probs in the batch: the hooks capture old and ref during scoring",
    ),
    Change(
        "1.0.0",
        "nanstd",
        "(tensor: torch.Tensor, dim: int | tuple[int, ...] | None=None, keepdim: bool=False) "
        "-> torch.Tensor",
        "trl/trainer/utils.py:795",
        "body identical in every 1.x release",
    ),
    Change(
        "1.0.0",
        "grpo.trainer_attrs",
        (
            "_logs",
            "_metrics",
            "beta",
            "loss_type",
            "num_generations",
            "num_generations_eval",
            "ref_model",
            "reward_weights",
            "scale_rewards",
            "temperature",
        ),
        "trl/trainer/grpo_trainer.py:627",
        "set in every 1.x __init__",
    ),
    Change(
        "1.0.0",
        "rloo.trainer_attrs",
        (
            "_logs",
            "_metrics",
            "beta",
            "normalize_advantages",
            "num_generations",
            "num_generations_eval",
            "ref_model",
            "reward_clip_range",
            "reward_weights",
            "temperature",
        ),
        "trl/trainer/rloo_trainer.py:450",
        "set in every 1.x __init__",
    ),
    Change(
        "1.0.0",
        "logps_kernel",
        "torch log_softmax over full logits",
        "trl/trainer/grpo_trainer.py:1070",
        "runs anywhere torch runs",
    ),
    Change(
        "1.15.0",
        "logps_kernel",
        "trl.kernels Triton chunked log-probs, no CPU fallback",
        "trl/trainer/grpo_trainer.py:1456",
        "GRPO and RLOO cannot score or train without a CUDA/XPU device (CPU: triton missing, "
        "or no active driver)",
    ),
    Change(
        "1.16.0",
        "logps_kernel",
        "trl.kernels chunked log-probs, torch fallback off CUDA/XPU",
        "trl/kernels/chunked_logprob.py:48",
        "CPU runs again",
    ),
    Change(
        "1.0.0",
        "grpo.config.beta",
        0.0,
        "trl/trainer/grpo_config.py:590",
    ),
    Change(
        "1.0.0",
        "grpo.config.use_bias_correction_kl",
        False,
        "trl/trainer/grpo_config.py:831",
    ),
    Change(
        "1.0.0",
        "grpo.config.loss_type",
        "dapo",
        "trl/trainer/grpo_config.py:710",
    ),
    Change(
        "1.0.0",
        "grpo.config.scale_rewards",
        "group",
        "trl/trainer/grpo_config.py:698",
    ),
    Change(
        "1.0.0",
        "grpo.config.multi_objective_aggregation",
        "sum_then_normalize",
        "trl/trainer/grpo_config.py:686",
    ),
    Change(
        "1.0.0",
        "grpo.config.importance_sampling_level",
        "token",
        "trl/trainer/grpo_config.py:669",
    ),
    Change(
        "1.0.0",
        "grpo.config.num_iterations",
        1,
        "trl/trainer/grpo_config.py:598",
    ),
    Change(
        "1.0.0",
        "grpo.config.steps_per_generation",
        None,
        "trl/trainer/grpo_config.py:429",
    ),
    Change(
        "1.0.0",
        "grpo.config.use_vllm",
        False,
        "trl/trainer/grpo_config.py:496",
    ),
    Change(
        "1.0.0",
        "grpo.config.vllm_importance_sampling_correction",
        True,
        "trl/trainer/grpo_config.py:793",
    ),
    Change(
        "1.0.0",
        "grpo.config.max_completion_length",
        256,
        "trl/trainer/grpo_config.py:399",
    ),
    Change(
        "1.0.0",
        "grpo.config.temperature",
        1.0,
        "trl/trainer/grpo_config.py:433",
    ),
    Change(
        "1.0.0",
        "grpo.config.sync_ref_model",
        False,
        "trl/trainer/grpo_config.py:753",
    ),
    Change(
        "1.10.0",
        "grpo.config.use_bias_correction_kl",
        True,
        "trl/trainer/grpo_config.py:966",
    ),
    Change(
        "1.10.0",
        "grpo.config.max_completion_length",
        512,
        "trl/trainer/grpo_config.py:492",
    ),
    Change(
        "1.0.0",
        "grpo.config.use_liger_loss",
        None,
        "trl/trainer/grpo_config.py:0",
        "absent in every 1.x release: hooks.validate's getattr check never fires; the fused "
        "path is use_liger_kernel (up to 1.13)",
    ),
    Change(
        "1.0.0",
        "rloo.config.beta",
        0.05,
        "trl/trainer/rloo_config.py:457",
    ),
    Change(
        "1.0.0",
        "rloo.config.normalize_advantages",
        False,
        "trl/trainer/rloo_config.py:486",
    ),
    Change(
        "1.0.0",
        "rloo.config.reward_clip_range",
        None,
        "trl/trainer/rloo_config.py:493",
    ),
    Change(
        "1.0.0",
        "rloo.config.num_iterations",
        1,
        "trl/trainer/rloo_config.py:464",
    ),
    Change(
        "1.0.0",
        "rloo.config.steps_per_generation",
        None,
        "trl/trainer/rloo_config.py:296",
    ),
    Change(
        "1.0.0",
        "rloo.config.use_vllm",
        False,
        "trl/trainer/rloo_config.py:363",
    ),
    Change(
        "1.0.0",
        "rloo.config.temperature",
        1.0,
        "trl/trainer/rloo_config.py:300",
    ),
    Change(
        "1.0.0",
        "rloo.config.sync_ref_model",
        False,
        "trl/trainer/rloo_config.py:505",
    ),
    Change(
        "1.0.0",
        "rloo.config.max_completion_length",
        256,
        "trl/trainer/rloo_config.py:266",
    ),
    Change(
        "1.10.0",
        "rloo.config.max_completion_length",
        512,
        "trl/trainer/rloo_config.py:312",
    ),
)
"""Rows of :data:`SURFACE`; ``source`` as in :mod:`.history` (``path:0`` = absent there)."""

SURFACE_EVIDENCE: dict[tuple[str, str], str] = {
    ("grpo.advantages", "1.0.0"): (
        r"mean_grouped_rewards = rewards\.view\(-1, num_generations\)\.mean\(dim=1\)"
    ),
    ("grpo.advantages", "1.6.0"): r"rewards\[unscorable_mask\] = torch\.nan",
    ("rloo.advantages", "1.0.0"): (
        r"baselines = \(grouped_sum - grouped_rewards\) / \(num_generations - 1\)"
    ),
    ("rloo.advantages", "1.6.0"): (
        r"baselines = \(grouped_sum - grouped_rewards\) / \(scorable_counts - 1\)"
    ),
    ("grpo.kl_term", "1.0.0"): r"per_token_loss = per_token_loss \+ self\.beta \* per_token_kl",
    ("grpo.ref_logps_when", "1.0.0"): r"if self\.beta != 0\.0:",
    ("rloo.kl_in_reward", "1.0.0"): r"rewards = rewards - self\.beta \* kl",
    ("grpo.old_logps_when", "1.0.0"): (
        r"if self\.args\.gradient_accumulation_steps % generate_every != 0 or \($"
    ),
    ("grpo.global_token_normalizer", "1.0.0"): (
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
    ("grpo.num_items_in_batch", "1.0.0"): (
        r"total_completion_tokens = agg_completion_lengths\.sum\(\)"
    ),
    ("grpo.num_items_in_batch", "1.9.0"): (
        r"num_items_in_batch = self\.accelerator\.gather\(loss_mask\.sum\(\)\)\.sum\(\)"
    ),
    ("grpo.kl_aggregation.luspo", "1.0.0"): (
        r"loss = \(per_token_loss \* mask\.sum\(1, keepdim=True\)\)\.mean\(\)"
    ),
    ("grpo.kl_aggregation.luspo", "1.10.0"): (
        r"loss = \(per_token_loss \* mask\)\.sum\(-1\)\.mean\(\)"
    ),
    ("grpo.loss_ga_scaling", "1.0.0"): 'compute_loss_func="non-None value to disable scaling"',
    ("grpo.loss_ga_scaling", "1.15.0"): "^    loss_is_scaled_for_ga = True",
    ("rloo.loss_ga_scaling", "1.0.0"): r"self\.model_accepts_loss_kwargs = False",
    ("rloo.loss_ga_scaling", "1.15.0"): "^    loss_is_scaled_for_ga = False",
    ("grpo.extra_loss_terms", "1.0.0"): "loss = loss / normalizer",
    ("grpo.extra_loss_terms", "1.7.0"): (
        r"loss = loss \+ self\.router_aux_loss_coef \* aux_loss / normalizer"
    ),
    ("grpo.extra_loss_terms", "1.8.0"): r"loss = loss - apply_coef \* entropy_loss",
    ("rloo.extra_loss_terms", "1.0.0"): r"loss = per_sequence_loss\.mean\(\)",
    ("rloo.extra_loss_terms", "1.7.0"): r"loss = loss \+ self\.router_aux_loss_coef \* aux_loss",
    ("grpo.logps_returns", "1.0.0"): "return logps, entropies$",
    ("grpo.logps_returns", "1.7.0"): "return logps, entropies, aux_loss",
    ("rloo.logps_returns", "1.0.0"): "return logps, entropies$",
    ("rloo.logps_returns", "1.7.0"): "return logps, entropies, aux_loss",
    ("grpo.liger_bypasses_compute_loss", "1.0.0"): (
        r"return self\._forward_redirection\(model, unwrapped_model, self\.compute_liger_l"
        "oss"
    ),
    ("grpo.liger_bypasses_compute_loss", "1.14.0"): (
        r"return self\._forward_redirection\(model, unwrapped_model, self\._compute_loss"
    ),
    ("grpo.batch_keys", "1.0.0"): '"num_items_in_batch": num_items_in_batch,',
    ("rloo.batch_keys", "1.0.0"): '"old_logps": old_logps,',
    ("nanstd", "1.0.0"): r"^def nanstd\(",
    ("grpo.trainer_attrs", "1.0.0"): r"self\.beta = args\.beta",
    ("rloo.trainer_attrs", "1.0.0"): r"self\.beta = args\.beta",
    ("logps_kernel", "1.0.0"): r"logps = selective_log_softmax\(",
    ("logps_kernel", "1.15.0"): (
        r"outputs = model\(\*\*model_inputs, labels=labels, fused_lm_head=True\)"
    ),
    ("logps_kernel", "1.16.0"): r"^def _use_triton\(",
    ("grpo.config.beta", "1.0.0"): r"default=0\.0[,)]",
    ("grpo.config.use_bias_correction_kl", "1.0.0"): "default=False[,)]",
    ("grpo.config.loss_type", "1.0.0"): 'default="dapo"[,)]',
    ("grpo.config.scale_rewards", "1.0.0"): 'default="group"[,)]',
    ("grpo.config.multi_objective_aggregation", "1.0.0"): 'default="sum_then_normalize"[,)]',
    ("grpo.config.importance_sampling_level", "1.0.0"): 'default="token"[,)]',
    ("grpo.config.num_iterations", "1.0.0"): "default=1[,)]",
    ("grpo.config.steps_per_generation", "1.0.0"): "default=None[,)]",
    ("grpo.config.use_vllm", "1.0.0"): "default=False[,)]",
    ("grpo.config.vllm_importance_sampling_correction", "1.0.0"): "default=True[,)]",
    ("grpo.config.max_completion_length", "1.0.0"): "default=256[,)]",
    ("grpo.config.temperature", "1.0.0"): r"default=1\.0[,)]",
    ("grpo.config.sync_ref_model", "1.0.0"): "default=False[,)]",
    ("grpo.config.use_bias_correction_kl", "1.10.0"): "default=True[,)]",
    ("grpo.config.max_completion_length", "1.10.0"): "default=512[,)]",
    ("grpo.config.use_liger_loss", "1.0.0"): "^    use_liger_loss: ",
    ("rloo.config.beta", "1.0.0"): r"default=0\.05[,)]",
    ("rloo.config.normalize_advantages", "1.0.0"): "default=False[,)]",
    ("rloo.config.reward_clip_range", "1.0.0"): "default=None[,)]",
    ("rloo.config.num_iterations", "1.0.0"): "default=1[,)]",
    ("rloo.config.steps_per_generation", "1.0.0"): "default=None[,)]",
    ("rloo.config.use_vllm", "1.0.0"): "default=False[,)]",
    ("rloo.config.temperature", "1.0.0"): r"default=1\.0[,)]",
    ("rloo.config.sync_ref_model", "1.0.0"): "default=False[,)]",
    ("rloo.config.max_completion_length", "1.0.0"): "default=256[,)]",
    ("rloo.config.max_completion_length", "1.10.0"): "default=512[,)]",
}
"""Row (key, since) -> regex its source line matches (for ``path:0``: must be absent)."""

SURFACE_ANCHORS: dict[tuple[str, str], str] = {
    ("grpo.ref_logps_when", "1.0.0"): r"def _generate_and_score_completions\(",
    ("grpo.extra_loss_terms", "1.0.0"): r"def _compute_loss\(",
    ("grpo.logps_returns", "1.0.0"): r"def _get_per_token_logps_and_entropies\(",
    ("grpo.logps_returns", "1.7.0"): r"def _get_per_token_logps_and_entropies\(",
    ("rloo.logps_returns", "1.0.0"): r"def _get_per_token_logps_and_entropies\(",
    ("rloo.logps_returns", "1.7.0"): r"def _get_per_token_logps_and_entropies\(",
    ("grpo.config.beta", "1.0.0"): "^    beta: ",
    ("grpo.config.use_bias_correction_kl", "1.0.0"): "^    use_bias_correction_kl: ",
    ("grpo.config.loss_type", "1.0.0"): "^    loss_type: ",
    ("grpo.config.scale_rewards", "1.0.0"): "^    scale_rewards: ",
    ("grpo.config.multi_objective_aggregation", "1.0.0"): "^    multi_objective_aggregation: ",
    ("grpo.config.importance_sampling_level", "1.0.0"): "^    importance_sampling_level: ",
    ("grpo.config.num_iterations", "1.0.0"): "^    num_iterations: ",
    ("grpo.config.steps_per_generation", "1.0.0"): "^    steps_per_generation: ",
    ("grpo.config.use_vllm", "1.0.0"): "^    use_vllm: ",
    (
        "grpo.config.vllm_importance_sampling_correction",
        "1.0.0",
    ): "^    vllm_importance_sampling_correction: ",
    ("grpo.config.max_completion_length", "1.0.0"): "^    max_completion_length: ",
    ("grpo.config.temperature", "1.0.0"): "^    temperature: ",
    ("grpo.config.sync_ref_model", "1.0.0"): "^    sync_ref_model: ",
    ("grpo.config.use_bias_correction_kl", "1.10.0"): "^    use_bias_correction_kl: ",
    ("grpo.config.max_completion_length", "1.10.0"): "^    max_completion_length: ",
    ("rloo.config.beta", "1.0.0"): "^    beta: ",
    ("rloo.config.normalize_advantages", "1.0.0"): "^    normalize_advantages: ",
    ("rloo.config.reward_clip_range", "1.0.0"): "^    reward_clip_range: ",
    ("rloo.config.num_iterations", "1.0.0"): "^    num_iterations: ",
    ("rloo.config.steps_per_generation", "1.0.0"): "^    steps_per_generation: ",
    ("rloo.config.use_vllm", "1.0.0"): "^    use_vllm: ",
    ("rloo.config.temperature", "1.0.0"): "^    temperature: ",
    ("rloo.config.sync_ref_model", "1.0.0"): "^    sync_ref_model: ",
    ("rloo.config.max_completion_length", "1.0.0"): "^    max_completion_length: ",
    ("rloo.config.max_completion_length", "1.10.0"): "^    max_completion_length: ",
}
"""Row (key, since) -> regex that must occur earlier in the file (picks the occurrence)."""

SURFACE_BEFORE: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("grpo.advantages", "1.6.0"): ("absent", r"rewards\[unscorable_mask\] = torch\.nan", True),
    ("rloo.advantages", "1.6.0"): (
        "absent",
        r"baselines = \(grouped_sum - grouped_rewards\) / \(scorable_counts - 1\)",
        True,
    ),
    ("grpo.global_token_normalizer", "1.9.0"): (
        "absent",
        r'normalizer = inputs\["num_items_in_batch"\]\.clamp\(min=1\.0\) / self\.accelerat'
        r"or\.num_processes",
        True,
    ),
    ("grpo.global_token_normalizer", "1.9.1"): (
        "absent",
        r"normalizer = normalizer \* self\.current_gradient_accumulation_steps / self\.arg"
        r"s\.steps_per_generation",
        True,
    ),
    ("grpo.num_items_in_batch", "1.9.0"): (
        "absent",
        r"num_items_in_batch = self\.accelerator\.gather\(loss_mask\.sum\(\)\)\.sum\(\)",
        True,
    ),
    ("grpo.kl_aggregation.luspo", "1.10.0"): (
        "absent",
        r"loss = \(per_token_loss \* mask\)\.sum\(-1\)\.mean\(\)",
        True,
    ),
    ("grpo.loss_ga_scaling", "1.15.0"): ("absent", "^    loss_is_scaled_for_ga = True", True),
    ("rloo.loss_ga_scaling", "1.15.0"): ("absent", "^    loss_is_scaled_for_ga = False", True),
    ("grpo.extra_loss_terms", "1.7.0"): (
        "absent",
        r"loss = loss \+ self\.router_aux_loss_coef \* aux_loss / normalizer",
        True,
    ),
    ("grpo.extra_loss_terms", "1.8.0"): (
        "absent",
        r"loss = loss - apply_coef \* entropy_loss",
        True,
    ),
    ("rloo.extra_loss_terms", "1.7.0"): (
        "absent",
        r"loss = loss \+ self\.router_aux_loss_coef \* aux_loss",
        True,
    ),
    ("grpo.logps_returns", "1.7.0"): ("absent", "return logps, entropies, aux_loss", True),
    ("rloo.logps_returns", "1.7.0"): ("absent", "return logps, entropies, aux_loss", True),
    ("grpo.liger_bypasses_compute_loss", "1.14.0"): (
        "absent",
        r"return self\._forward_redirection\(model, unwrapped_model, self\._compute_loss",
        True,
    ),
    ("logps_kernel", "1.15.0"): (
        "absent",
        r"outputs = model\(\*\*model_inputs, labels=labels, fused_lm_head=True\)",
        True,
    ),
    ("logps_kernel", "1.16.0"): ("absent", r"^def _use_triton\(", True),
    ("grpo.config.use_bias_correction_kl", "1.10.0"): ("present", "default=False[,)]", True),
    ("grpo.config.max_completion_length", "1.10.0"): ("present", "default=256[,)]", True),
    ("rloo.config.max_completion_length", "1.10.0"): ("present", "default=256[,)]", True),
}

"""Row (key, since) -> (mode, regex, use_anchor) the release before shows (pins ``since``)."""

SURFACE = History("trl-patch-surface", RELEASES_1X, SURFACE_CHANGES)
"""The code the adapter copies or mirrors, per TRL 1.x release (keys ``grpo.``, ``rloo.``,
``nanstd``; ``grpo.config.``/``rloo.config.`` are the defaults :mod:`.versions` relies on)."""

SURFACE_0X: dict[str, tuple[str, dict[str, object]]] = {
    "0.27.0": (
        "read from the 0.27.0 wheel: _compute_loss, _generate_and_score_completions and "
        "_get_per_token_logps_and_entropies compute what 1.0.0's do for every row above "
        "(grpo_trainer.py:2240-2381: beta*k3, normaliser num_items_in_batch/num_processes, "
        ":1030 returns (logps, entropies)); no luspo loss type yet; the canaries pass",
        {"grpo.kl_aggregation.luspo": None},
    ),
    "0.28.0": (
        "0.28.0 adds luspo (grpo_trainer.py:2083, padding included as in 1.0.0)",
        {"grpo.kl_aggregation.luspo": "length_weighted_mean_incl_padding"},
    ),
}
"""The releases the hooks patch before 1.0.0 (0.27.0-0.29.1): ``since -> (evidence, rows that
differ from 1.0.0's)`` (None: the row does not exist there); :func:`surface_at`."""


def surface_at(version: str) -> dict[str, object]:
    """:data:`SURFACE` at ``version``; for 0.27.0-0.29.1, 1.0.0's rows with :data:`SURFACE_0X`."""
    from packaging.version import Version

    if version in RELEASES_1X or Version(version) >= Version(RELEASES_1X[0]):
        return dict(SURFACE.at(version))
    out = dict(SURFACE.at(RELEASES_1X[0]))
    steps = [since for since in SURFACE_0X if Version(since) <= Version(version)]
    if not steps:
        raise KeyError(f"TRL {version} is not patched with the hooks; no surface is recorded")
    for since in steps:
        out.update(SURFACE_0X[since][1])
    return out


CHANGE_POINTS: tuple[tuple[str, str], ...] = (
    (
        "1.1.0",
        "_get_per_token_logps_and_entropies: multimodal kwarg pixel_position_ids renamed "
        "image_position_ids (the hooks pass TRL's own kwargs through)",
    ),
    (
        "1.6.0",
        "GRPO and RLOO advantages become NaN-aware for unscorable rows; advantages.py copies "
        "1.6.0+ (before, its recompute differs only when a reward function returns None)",
    ),
    (
        "1.7.0",
        "_get_per_token_logps_and_entropies gains compute_aux_loss and returns (logps, entropies, "
        "aux_loss); _compute_loss adds the MoE router aux loss",
    ),
    (
        "1.8.0",
        "__init__ gains quantization_config before peft_config (GRPO reward_funcs optional); "
        "GRPO _compute_loss adds the entropy bonus",
    ),
    (
        "1.9.0",
        "num_items_in_batch = gathered loss-mask tokens; dapo/cispo/vespo normaliser clamped at 1",
    ),
    (
        "1.9.1",
        "dapo/cispo/vespo normaliser times GA/steps_per_generation, which hooks.grpo_loss_scaling "
        "mirrors (1.0.0-1.9.0 differ from it when steps_per_generation != GA)",
    ),
    (
        "1.10.0",
        "defaults use_bias_correction_kl False -> True and max_completion_length 256 -> 512; "
        "luspo becomes a masked per-sequence sum (versions.py's 'sum')",
    ),
    (
        "1.14.0",
        "fused Liger GRPO loss removed (use_liger_kernel no longer bypasses _compute_loss); "
        "_get_per_token_logps_and_entropies becomes (self, model, *args, ...)",
    ),
    (
        "1.15.0",
        "log-probs through trl.kernels' Triton kernels with no CPU fallback (GRPO/RLOO cannot run "
        "on CPU); loss_is_scaled_for_ga replaces the compute_loss_func / model_accepts_loss_kwargs "
        "switches; explicit _get_per_token_logps_and_entropies signature again",
    ),
)
"""Releases strictly between 1.0.0 and 1.16.0 where something the adapter touches changes, with
the reason. A compat matrix needs 1.0.0, these, and 1.16.0 (which itself changes the log-prob
kernel back to a CPU-capable one); every other release repeats the surface before it."""


@dataclass(frozen=True)
class InstallRecipe:
    """How one group of TRL releases installs and runs on a CPU-only machine (measured)."""

    releases: str
    """The release range, e.g. ``"1.0.0-1.14.1"``."""
    commands: tuple[str, ...]
    """pip commands in order, in a fresh Python 3.11 venv."""
    resolved: str
    """What pip resolved for the libraries TRL needs at runtime."""
    measured: str
    """Wall times and checks observed here (2 shared cores; times vary with load)."""


INSTALL_RECIPES: tuple[InstallRecipe, ...] = (
    InstallRecipe(
        "1.0.0-1.14.1",
        (
            "pip install torch==2.13.0",
            "pip install trl==V tokenizers requests",
        ),
        "transformers 5.24.0, accelerate 1.15.0, datasets 5.2.0, huggingface_hub 2.4.0, "
        "tokenizers 0.23.3 (the same for 1.0.0 and 1.10.0)",
        "fresh install trl 1.0.0 55 s, 1.10.0 84 s (torch 34-70 s before it), venv 1.5 GB; "
        "without requests importing GRPOTrainer fails: trl/generation/vllm_client.py imports "
        "requests.adapters at module level and neither trl nor huggingface_hub 2.x depends on it",
    ),
    InstallRecipe(
        "1.14.2-1.16.0",
        (
            "pip install torch==2.13.0",
            "pip install trl==V tokenizers",
        ),
        "transformers 5.24.0, accelerate 1.15.0, datasets 5.2.0, huggingface_hub 2.4.0, "
        "tokenizers 0.23.3",
        "fresh install trl 1.16.0 73 s, venv 1.5 GB; requests is imported only if present "
        "(measured for 1.16.0, read from the source for 1.14.2 and 1.15.0). "
        "1.15.0 installs and imports but cannot score on CPU: AttributeError from "
        "_ChunkedLogProbFunction (None without triton), and with triton 3.9.0 installed "
        "RuntimeError: 0 active drivers; it needs a CUDA/XPU machine",
    ),
    InstallRecipe(
        "0.19.0-0.29.1",
        (
            "pip install torch==2.13.0",
            "pip install transformers==4.56.2 trl==V datasets==5.0.1 tokenizers requests",
        ),
        "transformers 4.56.2, huggingface_hub 0.36.2, tokenizers 0.22.2, datasets 5.0.1, "
        "accelerate 1.16.0 (checked for 0.19.0, 0.23.0, 0.26.0, 0.27.0, 0.29.0, 0.29.1)",
        "fresh install with trl 0.29.0 about 10 min here (2 shared cores, torch included); "
        "transformers 5.x is not tried: 0.x releases predate it. 0.27 on 4.56 passes the "
        "tokenizer's token_type_ids to generate(), which Qwen2 refuses: the tiny tokenizer "
        "returns none",
    ),
    InstallRecipe(
        "0.14.0-0.18.2",
        (
            "pip install torch==2.13.0",
            "pip install transformers==4.51.3 'tokenizers<0.22' trl==V rich datasets requests",
        ),
        "transformers 4.51.3, tokenizers 0.21.4 (checked for 0.14.0, 0.16.0)",
        "TRL 0.16.0 under transformers 4.56.2 fails in train() (TypeError: "
        "_get_train_sampler() takes 1 positional argument but 2 were given; 0.16 defines it "
        "without the dataset argument, 0.17 with it); 0.14-0.17 import rich without depending on "
        "it (ModuleNotFoundError otherwise). Switching from the 0.19+ recipe: pip install "
        "transformers==4.51.3 'tokenizers<0.22' 61 s",
    ),
    InstallRecipe(
        "any 1.x, switching in one venv",
        (
            "pip install torch==2.13.0",
            "pip install trl==1.0.0 tokenizers requests",
            "pip install --no-deps trl==V",
        ),
        "the first install's transformers 5.24.0 / accelerate 1.15.0 / datasets 5.2.0 serve every "
        "release (trl 1.16.0's own extra requirements are already satisfied); pip check clean",
        "a switch takes 2.8-6.0 s; after each switch GRPOTrainer and RLOOTrainer import and train "
        "2 steps with beta=0.04 on a tiny random Qwen2 (checked for 1.0.0, 1.6.0, 1.7.0, 1.9.1, "
        "1.10.0, 1.14.0, 1.16.0; import 5-28 s under load)",
    ),
)
"""Install recipes per release group; ``V`` is the TRL release."""


SWEEP: dict[str, str] = {
    "1.0.0": "57 passed, 1 deselected (luspo, a known difference)",
    "1.1.0": "57 passed, 1 deselected (luspo, a known difference)",
    "1.2.0": "57 passed, 1 deselected (luspo, a known difference)",
    "1.3.0": "57 passed, 1 deselected (luspo, a known difference)",
    "1.4.0": "57 passed, 1 deselected (luspo, a known difference)",
    "1.5.0": "57 passed, 1 deselected (luspo, a known difference)",
    "1.5.1": "57 passed, 1 deselected (luspo, a known difference)",
    "1.6.0": "57 passed, 1 deselected (luspo, a known difference)",
    "1.7.0": "57 passed, 1 deselected (luspo, a known difference)",
    "1.7.1": "57 passed, 1 deselected (luspo, a known difference)",
    "1.8.0": "57 passed, 1 deselected (luspo, a known difference)",
    "1.9.0": "57 passed, 1 deselected (luspo, a known difference)",
    "1.9.1": "57 passed, 1 deselected (luspo, a known difference)",
    "1.9.2": "57 passed, 1 deselected (luspo, a known difference)",
    "1.10.0": "58 passed",
    "1.11.0": "58 passed",
    "1.12.0": "58 passed",
    "1.13.0": "58 passed",
    "1.14.0": "58 passed",
    "1.14.1": "58 passed",
    "1.14.2": "58 passed",
    "1.15.0": (
        "31 passed, 27 failed: every test that computes log-probs (AttributeError from "
        "trl.kernels without Triton); the canaries pass"
    ),
    "1.16.0": "58 passed",
}
"""Release -> result of the compat tests (``versions.COMPAT_PLAN.tests``: 58 tests, the known
differences deselected) run once against every 1.x release in one venv switched with ``pip
install --no-deps trl==V`` (torch 2.13.0, transformers 5.24.0, accelerate 1.15.0), recorded by
hand from that run; the releases outside the compat matrix are "tested once" in the support
table."""

SWEEP_WHEN = "sweep of 2026-12-01"
"""When :data:`SWEEP` was measured."""


@dataclass(frozen=True)
class KnownDifference:
    """A test written against TRL 1.16 whose assertion does not hold on some older releases,
    because TRL itself computed something else there (a change point); ``nox -s compat``
    deselects it for those releases and ``tests/adapters/trl/test_compat.py`` asserts that the
    difference is real."""

    test: str
    """pytest node id (relative to the repository root)."""
    releases: str
    """PEP 440 specifier of the releases where TRL differs."""
    reason: str
    """What TRL computes there, and the change point."""


KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    KnownDifference(
        "tests/adapters/trl/test_hooks.py::test_k3_in_loss_equals_native_grpo[luspo-False-False]",
        "<1.10.0",
        "luspo's k3 term includes the padded positions, weighted by completion length, until "
        "1.10.0 (SURFACE grpo.kl_aggregation.luspo); no KLConfig aggregation computes that, and "
        "the reader gives 1.10.0's per-sequence sum",
    ),
)
"""Tests the compat session deselects on the releases where TRL's own result differs."""


def known_differences(version: str) -> tuple[KnownDifference, ...]:
    """The :data:`KNOWN_DIFFERENCES` that apply to TRL ``version``."""
    from packaging.specifiers import SpecifierSet

    return tuple(
        d for d in KNOWN_DIFFERENCES if SpecifierSet(d.releases).contains(version, prereleases=True)
    )


def signature_at(method: str, version: str) -> str:
    """The signature text of ``method`` (``"GRPOTrainer._compute_loss"``) in TRL ``version``."""
    from packaging.version import Version

    target = Version(version)
    text: str | None = None
    for since, signature in SIGNATURES[method]:
        if Version(since) <= target:
            text = signature
    if text is None:
        raise KeyError(f"{method} has no recorded signature at or before {version}")
    return text


def signature_text(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """``(args) -> returns`` of a ``def`` as :func:`ast.unparse` writes it (the stored form)."""
    text = f"({ast.unparse(function.args)})"
    if function.returns is not None:
        text += f" -> {ast.unparse(function.returns)}"
    return text


def read_signatures(source: str, class_name: str) -> dict[str, tuple[str, int]]:
    """``method -> (signature text, line)`` for the methods defined in ``class_name``'s body."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {
                item.name: (signature_text(item), item.lineno)
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            }
    raise LookupError(f"class {class_name} not found")


def check_signatures(root: str | Path) -> list[str]:
    """Compare :data:`SIGNATURES` with each 1.x release unpacked under ``root``; return problems."""
    base = Path(root)
    problems: list[str] = []
    for version in RELEASES_1X:
        for class_name, path in TRAINER_FILES.items():
            file = base / version / path
            if not file.is_file():
                problems.append(f"{version}: {path} missing")
                continue
            found = read_signatures(file.read_text(encoding="utf-8"), class_name)
            for name in HOOKED_METHODS:
                method = f"{class_name}.{name}"
                if name not in found:
                    problems.append(f"{version}: {method} not defined in the class")
                    continue
                text, line = found[name]
                if text != signature_at(method, version):
                    problems.append(f"{version}: {method} is {text}")
                source = SIGNATURE_SOURCES.get((method, version))
                if source is not None and source != f"{path}:{line}":
                    problems.append(f"{version}: {method} defined at {path}:{line}, not {source}")
    return problems


def check(root: str | Path) -> list[str]:
    """All problems of this module's data against unpacked 1.x wheels under ``root``."""
    return check_sources(
        root, SURFACE, SURFACE_EVIDENCE, SURFACE_ANCHORS, SURFACE_BEFORE
    ) + check_signatures(root)
