"""The fields of TRL's own config dataclasses in each release, as data (TRL refuses others).

``TrlParser`` / ``HfArgumentParser`` refuse a YAML key or ``--flag`` that no dataclass of the
script defines (``Unknown arguments from config file``, ``Some specified arguments are not used
by the HfArgumentParser``), and ``GRPOConfig(**kwargs)`` raises ``TypeError`` on an unknown
keyword. TRL adds, renames and removes fields from release to release (``max_prompt_length``
and ``use_liger_loss`` are gone in 1.x, ``ModelConfig.torch_dtype`` became ``dtype``), so a
config written for one release can be refused by another. For each release of :data:`RELEASES`
this module holds the fields each of TRL's own dataclasses declares: ``GRPOConfig``,
``RLOOConfig``, ``PPOConfig`` (with ``OnPolicyConfig``'s fields where it derives from it),
``ModelConfig``, ``ScriptArguments`` (with ``GRPOScriptArguments`` of ``trl/scripts/grpo.py``),
as deltas against the release before. A class that leaves a release has all its fields removed.

``TrainingArguments`` is transformers', not TRL's: its fields depend on the installed
transformers, not on the TRL release, so they are recorded once (:data:`TRAINING_ARGUMENTS`, the
union of transformers 4.49.0, 4.52.3, 4.56.2, 4.57.6, 5.10.4, 5.15.0, 5.24.0) and only ever used
to *accept* a key.

Source: each release's wheel (``pip download --no-deps trl==V``), the annotated assignments of
each class body read with :mod:`ast` (``trl/trainer/grpo_config.py``, ``rloo_config.py``,
``ppo_config.py`` or ``trl/experimental/ppo/ppo_config.py``, ``model_config.py``,
``trl/trainer/utils.py`` for ``OnPolicyConfig``, ``trl/scripts/utils.py``, ``trl/scripts/grpo.py``);
transformers' ``training_args.py`` likewise. ``tests/adapters/trl/test_fieldsets.py`` checks the
installed release's GRPOConfig and RLOOConfig dataclass fields against these rows.

Data format: one ``(release, added, removed)`` row per release and class; lines ``: field ...``.
"""

from __future__ import annotations

from functools import cache

from ..namesets import expand, names_in
from .history import RELEASES

__all__ = ["CLASSES", "RELEASES", "TRAINING_ARGUMENTS", "fields", "known_fields"]

CLASSES = ("GRPOConfig", "RLOOConfig", "PPOConfig", "ModelConfig", "ScriptArguments")
"""TRL's own dataclasses recorded (``ScriptArguments`` includes ``GRPOScriptArguments``)."""

_GRPOCONFIG: tuple[tuple[str, str, str], ...] = (
    (
        "0.14.0",
        """
: beta gradient_accumulation_steps learning_rate max_completion_length max_prompt_length
: model_init_kwargs num_generations per_device_train_batch_size remove_unused_columns
: temperature use_vllm vllm_device vllm_gpu_memory_utilization
""",
        "",
    ),
    (
        "0.15.0",
        """
: ds3_gather_for_generation log_completions ref_model_mixup_alpha ref_model_sync_steps
: reward_weights sync_ref_model vllm_dtype vllm_max_model_len
""",
        """
: gradient_accumulation_steps per_device_train_batch_size
""",
    ),
    ("0.15.1", "", ""),
    ("0.15.2", "", ""),
    (
        "0.16.0",
        """
: cache_implementation epsilon epsilon_high min_p num_iterations repetition_penalty
: scale_rewards top_k top_p vllm_enable_prefix_caching vllm_guided_decoding_regex
: vllm_server_host vllm_server_port vllm_server_timeout
""",
        "",
    ),
    ("0.16.1", "", ""),
    (
        "0.17.0",
        """
: disable_dropout loss_type mask_truncated_completions num_completions_to_print
: shuffle_dataset use_liger_loss wandb_log_unique_prompts
""",
        "",
    ),
    (
        "0.18.0",
        """
: delta generation_batch_size steps_per_generation vllm_mode vllm_server_base_url
: vllm_tensor_parallel_size
""",
        """
: vllm_device vllm_dtype vllm_enable_prefix_caching vllm_max_model_len
""",
    ),
    ("0.18.1", "", ""),
    ("0.18.2", "", ""),
    (
        "0.19.0",
        """
: bf16 generation_kwargs logging_steps
""",
        "",
    ),
    ("0.19.1", "", ""),
    (
        "0.20.0",
        """
: importance_sampling_level top_entropy_quantile use_transformers_paged
""",
        "",
    ),
    (
        "0.21.0",
        """
: vllm_model_impl
""",
        "",
    ),
    (
        "0.22.0",
        """
: gradient_checkpointing
""",
        "",
    ),
    ("0.22.1", "", ""),
    ("0.22.2", "", ""),
    (
        "0.23.0",
        """
: vllm_enable_sleep_mode vllm_importance_sampling_cap vllm_importance_sampling_correction
""",
        "",
    ),
    ("0.23.1", "", ""),
    ("0.24.0", "", ""),
    (
        "0.25.0",
        """
: cast_lm_head_to_fp32 chat_template_kwargs
""",
        "",
    ),
    (
        "0.25.1",
        """
: lr_scheduler_kwargs
""",
        "",
    ),
    (
        "0.26.0",
        """
: log_unique_prompts num_generations_eval sapo_temperature_neg sapo_temperature_pos
: use_bias_correction_kl vllm_importance_sampling_mode vllm_max_model_length
""",
        "",
    ),
    ("0.26.1", "", ""),
    ("0.26.2", "", ""),
    (
        "0.27.0",
        """
: max_tool_calling_iterations multi_objective_aggregation off_policy_mask_threshold
: vllm_group_port vllm_structured_outputs_regex
""",
        """
: wandb_log_unique_prompts
""",
    ),
    ("0.27.1", "", ""),
    ("0.27.2", "", ""),
    (
        "0.28.0",
        """
: log_completions_hub_repo
""",
        """
: max_prompt_length use_liger_loss vllm_guided_decoding_regex
""",
    ),
    (
        "0.29.0",
        "",
        """
: bf16 gradient_checkpointing logging_steps lr_scheduler_kwargs
""",
    ),
    ("0.29.1", "", ""),
    (
        "1.0.0",
        """
: pad_to_multiple_of vespo_k_neg vespo_k_pos vespo_lambda_neg vespo_lambda_pos
""",
        "",
    ),
    ("1.1.0", "", ""),
    ("1.2.0", "", ""),
    ("1.3.0", "", ""),
    ("1.4.0", "", ""),
    ("1.5.0", "", ""),
    ("1.5.1", "", ""),
    (
        "1.6.0",
        """
: vllm_importance_sampling_clip_max vllm_importance_sampling_clip_min
""",
        "",
    ),
    (
        "1.7.0",
        """
: router_aux_loss_coef transformers_continuous_batching_config trust_remote_code
: use_transformers_continuous_batching
""",
        "",
    ),
    ("1.7.1", "", ""),
    (
        "1.8.0",
        """
: entropy_coef entropy_coef_delta entropy_coef_max entropy_coef_min entropy_target
: use_adaptive_entropy
""",
        "",
    ),
    (
        "1.9.0",
        """
: log_multimodal
""",
        "",
    ),
    ("1.9.1", "", ""),
    ("1.9.2", "", ""),
    ("1.10.0", "", ""),
    ("1.11.0", "", ""),
    ("1.12.0", "", ""),
    ("1.13.0", "", ""),
    ("1.14.0", "", ""),
    ("1.14.1", "", ""),
    ("1.14.2", "", ""),
    ("1.15.0", "", ""),
    ("1.16.0", "", ""),
)

_RLOOCONFIG: tuple[tuple[str, str, str], ...] = (
    (
        "0.14.0",
        """
: batch_size cliprange dataset_num_proc ds3_gather_for_generation exp_name kl_coef
: local_batch_size local_mini_batch_size local_rollout_forward_batch_size micro_batch_size
: mini_batch_size missing_eos_penalty normalize_advantage normalize_reward num_mini_batches
: num_ppo_epochs num_sample_generations num_total_batches push_to_hub response_length
: reward_clip_range reward_model_path rloo_k run_name sft_model_path stop_token
: stop_token_id temperature token_level_kl total_episodes whiten_rewards world_size
""",
        "",
    ),
    ("0.15.0", "", ""),
    ("0.15.1", "", ""),
    ("0.15.2", "", ""),
    ("0.16.0", "", ""),
    ("0.16.1", "", ""),
    ("0.17.0", "", ""),
    ("0.18.0", "", ""),
    ("0.18.1", "", ""),
    ("0.18.2", "", ""),
    (
        "0.19.0",
        """
: bf16 logging_steps
""",
        "",
    ),
    ("0.19.1", "", ""),
    ("0.20.0", "", ""),
    ("0.21.0", "", ""),
    (
        "0.22.0",
        """
: beta cache_implementation disable_dropout epsilon epsilon_high generation_batch_size
: generation_kwargs gradient_checkpointing learning_rate log_completions
: mask_truncated_completions max_completion_length max_prompt_length min_p model_init_kwargs
: normalize_advantages num_completions_to_print num_generations num_iterations
: ref_model_mixup_alpha ref_model_sync_steps remove_unused_columns repetition_penalty
: reward_weights shuffle_dataset steps_per_generation sync_ref_model top_k top_p
: use_transformers_paged use_vllm vllm_gpu_memory_utilization vllm_guided_decoding_regex
: vllm_mode vllm_model_impl vllm_server_base_url vllm_server_host vllm_server_port
: vllm_server_timeout vllm_tensor_parallel_size wandb_log_unique_prompts
""",
        """
: batch_size local_batch_size local_mini_batch_size micro_batch_size mini_batch_size
: normalize_advantage num_total_batches push_to_hub reward_model_path run_name
: sft_model_path whiten_rewards world_size
""",
    ),
    ("0.22.1", "", ""),
    ("0.22.2", "", ""),
    ("0.23.0", "", ""),
    ("0.23.1", "", ""),
    (
        "0.24.0",
        """
: vllm_enable_sleep_mode
""",
        "",
    ),
    (
        "0.25.0",
        """
: chat_template_kwargs
""",
        """
: cliprange dataset_num_proc exp_name kl_coef local_rollout_forward_batch_size
: missing_eos_penalty normalize_reward num_mini_batches num_ppo_epochs
: num_sample_generations response_length rloo_k stop_token stop_token_id token_level_kl
: total_episodes
""",
    ),
    (
        "0.25.1",
        """
: lr_scheduler_kwargs
""",
        "",
    ),
    (
        "0.26.0",
        """
: log_unique_prompts num_generations_eval
""",
        "",
    ),
    ("0.26.1", "", ""),
    ("0.26.2", "", ""),
    (
        "0.27.0",
        """
: vllm_group_port vllm_max_model_length vllm_structured_outputs_regex
""",
        """
: wandb_log_unique_prompts
""",
    ),
    ("0.27.1", "", ""),
    ("0.27.2", "", ""),
    (
        "0.28.0",
        "",
        """
: vllm_guided_decoding_regex
""",
    ),
    (
        "0.29.0",
        "",
        """
: bf16 gradient_checkpointing logging_steps lr_scheduler_kwargs max_prompt_length
""",
    ),
    ("0.29.1", "", ""),
    (
        "1.0.0",
        """
: pad_to_multiple_of
""",
        "",
    ),
    ("1.1.0", "", ""),
    ("1.2.0", "", ""),
    ("1.3.0", "", ""),
    ("1.4.0", "", ""),
    ("1.5.0", "", ""),
    ("1.5.1", "", ""),
    ("1.6.0", "", ""),
    (
        "1.7.0",
        """
: router_aux_loss_coef transformers_continuous_batching_config trust_remote_code
: use_transformers_continuous_batching
""",
        "",
    ),
    ("1.7.1", "", ""),
    ("1.8.0", "", ""),
    (
        "1.9.0",
        """
: log_multimodal
""",
        "",
    ),
    ("1.9.1", "", ""),
    ("1.9.2", "", ""),
    ("1.10.0", "", ""),
    ("1.11.0", "", ""),
    ("1.12.0", "", ""),
    ("1.13.0", "", ""),
    ("1.14.0", "", ""),
    ("1.14.1", "", ""),
    ("1.14.2", "", ""),
    ("1.15.0", "", ""),
    ("1.16.0", "", ""),
)

_PPOCONFIG: tuple[tuple[str, str, str], ...] = (
    (
        "0.14.0",
        """
: batch_size cliprange cliprange_value dataset_num_proc ds3_gather_for_generation exp_name
: gamma kl_coef lam local_batch_size local_mini_batch_size local_rollout_forward_batch_size
: micro_batch_size mini_batch_size missing_eos_penalty model_adapter_name num_mini_batches
: num_ppo_epochs num_sample_generations num_total_batches push_to_hub ref_adapter_name
: response_length reward_model_path run_name sft_model_path stop_token stop_token_id
: temperature total_episodes vf_coef whiten_rewards world_size
""",
        "",
    ),
    ("0.15.0", "", ""),
    ("0.15.1", "", ""),
    ("0.15.2", "", ""),
    ("0.16.0", "", ""),
    ("0.16.1", "", ""),
    (
        "0.17.0",
        """
: kl_estimator
""",
        "",
    ),
    ("0.18.0", "", ""),
    ("0.18.1", "", ""),
    ("0.18.2", "", ""),
    (
        "0.19.0",
        """
: bf16 logging_steps
""",
        "",
    ),
    ("0.19.1", "", ""),
    ("0.20.0", "", ""),
    ("0.21.0", "", ""),
    (
        "0.22.0",
        """
: gradient_checkpointing
""",
        "",
    ),
    ("0.22.1", "", ""),
    ("0.22.2", "", ""),
    ("0.23.0", "", ""),
    ("0.23.1", "", ""),
    ("0.24.0", "", ""),
    ("0.25.0", "", ""),
    (
        "0.25.1",
        """
: lr_scheduler_kwargs
""",
        "",
    ),
    (
        "0.26.0",
        "",
        """
: batch_size bf16 cliprange cliprange_value dataset_num_proc ds3_gather_for_generation
: exp_name gamma gradient_checkpointing kl_coef kl_estimator lam local_batch_size
: local_mini_batch_size local_rollout_forward_batch_size logging_steps lr_scheduler_kwargs
: micro_batch_size mini_batch_size missing_eos_penalty model_adapter_name num_mini_batches
: num_ppo_epochs num_sample_generations num_total_batches push_to_hub ref_adapter_name
: response_length reward_model_path run_name sft_model_path stop_token stop_token_id
: temperature total_episodes vf_coef whiten_rewards world_size
""",
    ),
    (
        "0.29.0",
        """
: batch_size cliprange cliprange_value dataset_num_proc ds3_gather_for_generation gamma
: kl_coef kl_estimator lam learning_rate local_batch_size local_mini_batch_size
: local_rollout_forward_batch_size micro_batch_size mini_batch_size missing_eos_penalty
: model_adapter_name num_mini_batches num_ppo_epochs num_sample_generations
: num_total_batches push_to_hub ref_adapter_name response_length reward_model_path
: sft_model_path stop_token stop_token_id temperature total_episodes vf_coef whiten_rewards
: world_size
""",
        "",
    ),
    ("0.29.1", "", ""),
    ("1.0.0", "", ""),
    ("1.1.0", "", ""),
    ("1.2.0", "", ""),
    ("1.3.0", "", ""),
    ("1.4.0", "", ""),
    ("1.5.0", "", ""),
    ("1.5.1", "", ""),
    ("1.6.0", "", ""),
    ("1.7.0", "", ""),
    ("1.7.1", "", ""),
    ("1.8.0", "", ""),
    ("1.9.0", "", ""),
    ("1.9.1", "", ""),
    ("1.9.2", "", ""),
    ("1.10.0", "", ""),
    ("1.11.0", "", ""),
    ("1.12.0", "", ""),
    (
        "1.13.0",
        "",
        """
: batch_size cliprange cliprange_value dataset_num_proc ds3_gather_for_generation gamma
: kl_coef kl_estimator lam learning_rate local_batch_size local_mini_batch_size
: local_rollout_forward_batch_size micro_batch_size mini_batch_size missing_eos_penalty
: model_adapter_name num_mini_batches num_ppo_epochs num_sample_generations
: num_total_batches push_to_hub ref_adapter_name response_length reward_model_path
: sft_model_path stop_token stop_token_id temperature total_episodes vf_coef whiten_rewards
: world_size
""",
    ),
)

_MODELCONFIG: tuple[tuple[str, str, str], ...] = (
    (
        "0.14.0",
        """
: attn_implementation bnb_4bit_quant_type load_in_4bit load_in_8bit lora_alpha lora_dropout
: lora_modules_to_save lora_r lora_target_modules lora_task_type model_name_or_path
: model_revision torch_dtype trust_remote_code use_bnb_nested_quant use_peft use_rslora
""",
        "",
    ),
    ("0.15.0", "", ""),
    ("0.15.1", "", ""),
    ("0.15.2", "", ""),
    (
        "0.16.0",
        """
: use_dora
""",
        "",
    ),
    ("0.16.1", "", ""),
    ("0.17.0", "", ""),
    ("0.18.0", "", ""),
    ("0.18.1", "", ""),
    ("0.18.2", "", ""),
    ("0.19.0", "", ""),
    ("0.19.1", "", ""),
    ("0.20.0", "", ""),
    (
        "0.21.0",
        """
: lora_target_parameters
""",
        "",
    ),
    ("0.22.0", "", ""),
    ("0.22.1", "", ""),
    ("0.22.2", "", ""),
    (
        "0.23.0",
        """
: dtype
""",
        "",
    ),
    ("0.23.1", "", ""),
    ("0.24.0", "", ""),
    ("0.25.0", "", ""),
    ("0.25.1", "", ""),
    (
        "0.26.0",
        """
: bnb_4bit_quant_storage
""",
        "",
    ),
    ("0.26.1", "", ""),
    ("0.26.2", "", ""),
    (
        "0.27.0",
        "",
        """
: torch_dtype
""",
    ),
    ("0.27.1", "", ""),
    ("0.27.2", "", ""),
    ("0.28.0", "", ""),
    ("0.29.0", "", ""),
    ("0.29.1", "", ""),
    ("1.0.0", "", ""),
    ("1.1.0", "", ""),
    ("1.2.0", "", ""),
    ("1.3.0", "", ""),
    ("1.4.0", "", ""),
    ("1.5.0", "", ""),
    ("1.5.1", "", ""),
    ("1.6.0", "", ""),
    (
        "1.7.0",
        "",
        """
: trust_remote_code
""",
    ),
    ("1.7.1", "", ""),
    ("1.8.0", "", ""),
    ("1.9.0", "", ""),
    ("1.9.1", "", ""),
    ("1.9.2", "", ""),
    ("1.10.0", "", ""),
    ("1.11.0", "", ""),
    ("1.12.0", "", ""),
    ("1.13.0", "", ""),
    ("1.14.0", "", ""),
    ("1.14.1", "", ""),
    ("1.14.2", "", ""),
    ("1.15.0", "", ""),
    ("1.16.0", "", ""),
)

_SCRIPTARGUMENTS: tuple[tuple[str, str, str], ...] = (
    (
        "0.14.0",
        """
: dataset_config dataset_name dataset_test_split dataset_train_split
: gradient_checkpointing_use_reentrant ignore_bias_buffers reward_model_name_or_path
""",
        "",
    ),
    ("0.15.0", "", ""),
    ("0.15.1", "", ""),
    ("0.15.2", "", ""),
    ("0.16.0", "", ""),
    ("0.16.1", "", ""),
    ("0.17.0", "", ""),
    (
        "0.18.0",
        """
: reward_funcs
""",
        "",
    ),
    ("0.18.1", "", ""),
    ("0.18.2", "", ""),
    (
        "0.19.0",
        """
: dataset_streaming
""",
        "",
    ),
    ("0.19.1", "", ""),
    ("0.20.0", "", ""),
    ("0.21.0", "", ""),
    ("0.22.0", "", ""),
    ("0.22.1", "", ""),
    ("0.22.2", "", ""),
    ("0.23.0", "", ""),
    ("0.23.1", "", ""),
    ("0.24.0", "", ""),
    ("0.25.0", "", ""),
    ("0.25.1", "", ""),
    ("0.26.0", "", ""),
    ("0.26.1", "", ""),
    ("0.26.2", "", ""),
    (
        "0.27.0",
        "",
        """
: gradient_checkpointing_use_reentrant
""",
    ),
    ("0.27.1", "", ""),
    ("0.27.2", "", ""),
    ("0.28.0", "", ""),
    ("0.29.0", "", ""),
    ("0.29.1", "", ""),
    ("1.0.0", "", ""),
    ("1.1.0", "", ""),
    ("1.2.0", "", ""),
    ("1.3.0", "", ""),
    ("1.4.0", "", ""),
    ("1.5.0", "", ""),
    ("1.5.1", "", ""),
    ("1.6.0", "", ""),
    ("1.7.0", "", ""),
    ("1.7.1", "", ""),
    ("1.8.0", "", ""),
    ("1.9.0", "", ""),
    ("1.9.1", "", ""),
    ("1.9.2", "", ""),
    ("1.10.0", "", ""),
    ("1.11.0", "", ""),
    ("1.12.0", "", ""),
    ("1.13.0", "", ""),
    ("1.14.0", "", ""),
    ("1.14.1", "", ""),
    ("1.14.2", "", ""),
    ("1.15.0", "", ""),
    ("1.16.0", "", ""),
)

_TRAINING_ARGUMENTS = """
: _n_gpu accelerator_config activation_checkpointing activation_checkpointing_kwargs
: adafactor adam_beta1 adam_beta2 adam_epsilon auto_find_batch_size
: average_tokens_across_devices batch_eval_metrics bf16 bf16_full_eval data_seed
: dataloader_drop_last dataloader_in_order dataloader_multiprocessing_context
: dataloader_num_workers dataloader_persistent_workers dataloader_pin_memory
: dataloader_prefetch_factor ddp_backend ddp_broadcast_buffers ddp_bucket_cap_mb
: ddp_find_unused_parameters ddp_static_graph ddp_timeout debug deepspeed disable_tqdm
: dispatch_batches do_eval do_predict do_train enable_jit_checkpoint eval_accumulation_steps
: eval_delay eval_do_concat_batches eval_on_start eval_steps eval_strategy
: eval_use_gather_object evaluation_strategy fp16 fp16_backend fp16_full_eval fp16_opt_level
: fsdp fsdp_config fsdp_min_num_params fsdp_transformer_layer_cls_to_wrap full_determinism
: gradient_accumulation_steps gradient_checkpointing gradient_checkpointing_kwargs
: greater_is_better group_by_length half_precision_backend hub_always_push hub_model_id
: hub_private_repo hub_revision hub_strategy hub_token ignore_data_skip include_for_metrics
: include_inputs_for_metrics include_num_input_tokens_seen include_tokens_per_second
: jit_mode_eval label_names label_smoothing_factor learning_rate length_column_name
: liger_kernel_config load_best_model_at_end local_rank log_level log_level_replica
: log_on_each_node logging_dir logging_first_step logging_nan_inf_filter logging_steps
: logging_strategy lr_scheduler_kwargs lr_scheduler_type max_grad_norm max_steps
: metric_for_best_model mp_parameters neftune_noise_alpha no_cuda num_train_epochs optim
: optim_args optim_target_modules output_dir overwrite_output_dir parallelism_config
: past_index per_device_eval_batch_size per_device_train_batch_size per_gpu_eval_batch_size
: per_gpu_train_batch_size prediction_loss_only project push_to_hub push_to_hub_model_id
: push_to_hub_organization push_to_hub_token ray_scope remove_unused_columns report_to
: restore_callback_states_from_checkpoint resume_from_checkpoint run_name save_on_each_node
: save_only_model save_safetensors save_steps save_strategy save_total_limit seed
: skip_memory_metrics split_batches tf32 torch_compile torch_compile_backend
: torch_compile_mode torch_empty_cache_steps torchdynamo tpu_metrics_debug tpu_num_cores
: trackio_bucket_id trackio_space_id trackio_static_space_id train_sampling_strategy
: use_cache use_cpu use_ipex use_legacy_prediction_loop use_liger_kernel use_mps_device
: warmup_ratio warmup_steps weight_decay
"""

_ROWS = {
    "GRPOConfig": _GRPOCONFIG,
    "RLOOConfig": _RLOOCONFIG,
    "PPOConfig": _PPOCONFIG,
    "ModelConfig": _MODELCONFIG,
    "ScriptArguments": _SCRIPTARGUMENTS,
}


TRAINING_ARGUMENTS: frozenset[str] = frozenset(expand(_TRAINING_ARGUMENTS))
"""transformers ``TrainingArguments`` fields (union over the releases named above)."""


@cache
def fields(release: str, cls: str) -> frozenset[str] | None:
    """The fields ``cls`` declares in TRL ``release`` (None when the class is not in it).
    ValueError for an unrecorded release or class."""
    if cls not in _ROWS:
        raise ValueError(f"cls={cls!r} is not recorded; choose one of {list(CLASSES)}")
    if release not in RELEASES:
        raise ValueError(f"TRL release {release!r} is not recorded; choose one of {list(RELEASES)}")
    current = names_in(_ROWS[cls], release)
    return frozenset(current) if current is not None else None


@cache
def known_fields() -> frozenset[str]:
    """Every field any recorded TRL class declared in any recorded release."""
    out: set[str] = set()
    for rows in _ROWS.values():
        for _, added, _ in rows:
            out |= expand(added)
    return frozenset(out)
