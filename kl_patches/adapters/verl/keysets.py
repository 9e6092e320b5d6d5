"""Every key of verl's trainer configs in each release, as data (Hydra refuses the others).

verl composes its trainer config with Hydra in struct mode: an override ``a.b=v`` whose key the
composed config does not have fails (``Could not override 'a.b'``), ``+a.b=v`` on a key that it
has fails too (``Could not append to config. An item is already at 'a.b'``), ``++a.b=v`` always
works. So a launch written for one release can be refused by another, and which keys exist is
part of what a release means. For each release of :data:`RELEASES` this module holds every key
path (mappings and leaves) of the composed ``verl/trainer/config/ppo_trainer.yaml`` and
``ppo_megatron_trainer.yaml`` (with their ``defaults`` lists), as deltas against the release
before.

Source: each release's wheel (``pip download --no-deps verl==V``; 0.1 is the git tag ``v0.1``),
unpacked, composed with hydra-core 1.3.8 (``initialize_config_dir(<wheel>/verl/trainer/config)``,
``compose(config_name=NAME)``), every node walked. ``tests/adapters/verl/test_keysets.py``
composes the installed release's ``ppo_trainer`` config and checks that its key paths are
exactly this module's for that release.

Data format: one ``(release, added, removed)`` row per release; ``added``/``removed`` are lines
``parent: child child ...`` (``: child`` at the top level).
"""

from __future__ import annotations

from functools import cache

from ..namesets import names_in
from .history import RELEASES

__all__ = ["CONFIGS", "RELEASES", "keys"]

CONFIGS = ("ppo_trainer", "ppo_megatron_trainer")
"""The trainer configs recorded (``--config-name``; ``ppo_trainer`` is main_ppo's default)."""

_PPO_TRAINER: tuple[tuple[str, str, str], ...] = (
    (
        "0.1",
        """
: actor_rollout_ref algorithm critic data reward_model trainer
actor_rollout_ref: actor hybrid_engine model ref rollout
actor_rollout_ref.actor: clip_ratio entropy_coeff fsdp_config grad_clip optim ppo_epochs
actor_rollout_ref.actor: ppo_micro_batch_size ppo_mini_batch_size shuffle strategy
actor_rollout_ref.actor.fsdp_config: grad_offload optimizer_offload param_offload
actor_rollout_ref.actor.fsdp_config: wrap_policy
actor_rollout_ref.actor.fsdp_config.wrap_policy: min_num_params
actor_rollout_ref.actor.optim: lr lr_warmup_steps_ratio min_lr_ratio total_training_steps
actor_rollout_ref.actor.optim: warmup_style
actor_rollout_ref.model: enable_gradient_checkpointing external_lib override_config path
actor_rollout_ref.ref: fsdp_config log_prob_micro_batch_size
actor_rollout_ref.ref.fsdp_config: param_offload wrap_policy
actor_rollout_ref.ref.fsdp_config.wrap_policy: min_num_params
actor_rollout_ref.rollout: do_sample dtype enforce_eager free_cache_engine
actor_rollout_ref.rollout: gpu_memory_utilization ignore_eos load_format
actor_rollout_ref.rollout: log_prob_micro_batch_size max_num_batched_tokens max_num_seqs
actor_rollout_ref.rollout: name prompt_length response_length temperature
actor_rollout_ref.rollout: tensor_model_parallel_size top_k top_p
algorithm: adv_estimator gamma kl_ctrl kl_penalty lam
algorithm.kl_ctrl: kl_coef type
critic: cliprange_value grad_clip model optim ppo_epochs ppo_micro_batch_size
critic: ppo_mini_batch_size shuffle strategy
critic.model: enable_gradient_checkpointing external_lib fsdp_config override_config path
critic.model: tokenizer_path
critic.model.fsdp_config: grad_offload optimizer_offload param_offload wrap_policy
critic.model.fsdp_config.wrap_policy: min_num_params
critic.optim: lr lr_warmup_steps_ratio min_lr_ratio total_training_steps warmup_style
data: max_prompt_length max_response_length prompt_key return_raw_chat return_raw_input_ids
data: tokenizer train_batch_size train_files val_batch_size val_files
reward_model: enable max_length micro_batch_size model strategy
reward_model.model: external_lib fsdp_config input_tokenizer path
reward_model.model.fsdp_config: min_num_params param_offload
trainer: critic_warmup default_hdfs_dir default_local_dir experiment_name logger
trainer: n_gpus_per_node nnodes project_name save_freq test_freq total_epochs
""",
        "",
    ),
    (
        "0.2",
        """
actor_rollout_ref.actor: kl_loss_coef kl_loss_type ppo_max_token_len_per_gpu
actor_rollout_ref.actor: ppo_micro_batch_size_per_gpu ulysses_sequence_parallel_size
actor_rollout_ref.actor: use_dynamic_bsz use_kl_loss
actor_rollout_ref.actor.fsdp_config: fsdp_size
actor_rollout_ref.model: use_remove_padding
actor_rollout_ref.ref: log_prob_max_token_len_per_gpu log_prob_micro_batch_size_per_gpu
actor_rollout_ref.ref: log_prob_use_dynamic_bsz ulysses_sequence_parallel_size
actor_rollout_ref.rollout: disable_log_stats enable_chunked_prefill
actor_rollout_ref.rollout: log_prob_max_token_len_per_gpu log_prob_micro_batch_size_per_gpu
actor_rollout_ref.rollout: log_prob_use_dynamic_bsz n
critic: forward_max_token_len_per_gpu forward_micro_batch_size
critic: forward_micro_batch_size_per_gpu ppo_max_token_len_per_gpu
critic: ppo_micro_batch_size_per_gpu ulysses_sequence_parallel_size use_dynamic_bsz
critic.model: use_remove_padding
critic.model.fsdp_config: fsdp_size
data: shuffle
reward_model: forward_max_token_len_per_gpu micro_batch_size_per_gpu reward_manager
reward_model: ulysses_sequence_parallel_size use_dynamic_bsz
reward_model.model: use_remove_padding
reward_model.model.fsdp_config: fsdp_size
trainer: del_local_ckpt_after_load remove_previous_ckpt_in_save resume_from_path resume_mode
trainer: total_training_steps val_generations_to_log_to_wandb
""",
        "",
    ),
    ("0.2.0.post1", "", ""),
    ("0.2.0.post2", "", ""),
    (
        "0.3.0.post0",
        """
: custom_reward_function
actor_rollout_ref.actor: checkpoint use_torch_compile
actor_rollout_ref.actor.checkpoint: contents
actor_rollout_ref.actor.optim: lr_warmup_steps
actor_rollout_ref.rollout: max_model_len use_fire_sampling val_kwargs
actor_rollout_ref.rollout.val_kwargs: do_sample n temperature top_k top_p
critic: checkpoint
critic.checkpoint: contents
custom_reward_function: name path
data: filter_overlong_prompts image_key truncation
reward_model.model.fsdp_config: wrap_policy
reward_model.model.fsdp_config.wrap_policy: min_num_params
trainer: balance_batch max_actor_ckpt_to_keep max_critic_ckpt_to_keep
""",
        """
actor_rollout_ref.actor.fsdp_config: grad_offload
critic.model.fsdp_config: grad_offload
reward_model.model.fsdp_config: min_num_params
trainer: remove_previous_ckpt_in_save
""",
    ),
    ("0.3.0.post1", "", ""),
    (
        "0.4.0",
        """
: ray_init
actor_rollout_ref.actor: clip_ratio_c clip_ratio_high clip_ratio_low loss_agg_mode
actor_rollout_ref.actor.fsdp_config: offload_policy reshard_after_forward
actor_rollout_ref.actor.optim: num_cycles weight_decay
actor_rollout_ref.model: enable_activation_offload lora_alpha lora_rank target_modules
actor_rollout_ref.model: trust_remote_code use_fused_kernels use_liger use_shm
actor_rollout_ref.ref: strategy use_torch_compile
actor_rollout_ref.ref.fsdp_config: reshard_after_forward
actor_rollout_ref.rollout: chat_scheduler engine_kwargs layered_summon mode multi_turn
actor_rollout_ref.rollout.engine_kwargs: sglang vllm
actor_rollout_ref.rollout.engine_kwargs.sglang: attention_backend
actor_rollout_ref.rollout.engine_kwargs.vllm: swap_space
actor_rollout_ref.rollout.multi_turn: enable format max_turns tool_config_path
algorithm: norm_adv_by_std_in_grpo pf_ppo use_kl_in_reward use_pf_ppo
algorithm.kl_ctrl: horizon target_kl
algorithm.pf_ppo: reweight_method weight_pow
critic: loss_agg_mode rollout_n
critic.model: enable_activation_offload lora_alpha lora_rank target_modules
critic.model: trust_remote_code use_shm
critic.model.fsdp_config: offload_policy reshard_after_forward
critic.optim: weight_decay
data: custom_cls filter_overlong_prompts_workers return_full_prompt reward_fn_key
data: trust_remote_code use_shm video_key
data.custom_cls: name path
ray_init: num_cpus timeline_json_file
reward_model: launch_reward_fn_async sandbox_fusion
reward_model.model: trust_remote_code use_fused_kernels use_shm
reward_model.model.fsdp_config: reshard_after_forward
reward_model.sandbox_fusion: max_concurrent url
trainer: device log_val_generations ray_wait_register_center_timeout rollout_data_dir
trainer: val_before_train validation_data_dir
""",
        """
trainer: val_generations_to_log_to_wandb
""",
    ),
    (
        "0.4.1",
        """
actor_rollout_ref.actor: entropy_checkpointing entropy_from_logits_with_chunking policy_loss
actor_rollout_ref.actor: profiler
actor_rollout_ref.actor.checkpoint: load_contents save_contents
actor_rollout_ref.actor.fsdp_config: forward_prefetch
actor_rollout_ref.actor.policy_loss: clip_cov_lb clip_cov_ratio clip_cov_ub kl_cov_ratio
actor_rollout_ref.actor.policy_loss: loss_mode ppo_kl_coef
actor_rollout_ref.actor.profiler: all_ranks discrete ranks
actor_rollout_ref.model: custom_chat_template fused_kernel_options
actor_rollout_ref.model.fused_kernel_options: impl_backend
actor_rollout_ref.ref: entropy_checkpointing entropy_from_logits_with_chunking profiler
actor_rollout_ref.ref.fsdp_config: forward_prefetch
actor_rollout_ref.ref.profiler: all_ranks discrete ranks
actor_rollout_ref.rollout: calculate_log_probs multi_stage_wake_up profiler
actor_rollout_ref.rollout.engine_kwargs.vllm: disable_mm_preprocessor_cache
actor_rollout_ref.rollout.multi_turn: completion_callback interaction_config_path
actor_rollout_ref.rollout.multi_turn: max_assistant_turns max_user_turns
actor_rollout_ref.rollout.multi_turn: tokenization_sanity_check_mode
actor_rollout_ref.rollout.multi_turn: use_inference_chat_template
actor_rollout_ref.rollout.profiler: all_ranks discrete ranks
critic: profiler
critic.checkpoint: load_contents save_contents
critic.model.fsdp_config: forward_prefetch
critic.profiler: all_ranks discrete ranks
data: validation_shuffle
reward_model: profiler
reward_model.model.fsdp_config: forward_prefetch
reward_model.profiler: all_ranks discrete ranks
reward_model.sandbox_fusion: memory_limit_mb
trainer: controller_nsight_options profile_steps val_only worker_nsight_options
trainer.controller_nsight_options: cuda-graph-trace cuda-memory-usage trace
trainer.worker_nsight_options: capture-range capture-range-end cuda-graph-trace
trainer.worker_nsight_options: cuda-memory-usage kill trace
""",
        """
actor_rollout_ref.actor.checkpoint: contents
actor_rollout_ref.rollout: chat_scheduler
actor_rollout_ref.rollout.multi_turn: max_turns
critic.checkpoint: contents
""",
    ),
    (
        "0.5.0",
        """
actor_rollout_ref: profiler
actor_rollout_ref.model: exclude_modules
actor_rollout_ref.profiler: _target_ all_ranks discrete ranks
actor_rollout_ref.rollout: agent trace update_weights_bucket_megabytes
actor_rollout_ref.rollout.agent: agent_loop_config_path custom_async_server num_workers
actor_rollout_ref.rollout.agent.custom_async_server: name path
actor_rollout_ref.rollout.multi_turn: max_parallel_calls max_tool_response_length
actor_rollout_ref.rollout.multi_turn: tool_response_truncate_side
actor_rollout_ref.rollout.trace: backend token2text
algorithm: _target_
algorithm.kl_ctrl: _target_
algorithm.pf_ppo: _target_
critic: _target_
critic.profiler: _target_
data: datagen dataloader_num_workers return_multi_modal_inputs sampler
data.datagen: name path
data.sampler: class_name class_path
reward_model.profiler: _target_
trainer: esi_redundant_time npu_profile use_legacy_worker_impl
trainer.npu_profile: options
trainer.npu_profile.options: analysis level record_shapes save_path with_cpu with_memory
trainer.npu_profile.options: with_module with_npu with_stack
""",
        """
actor_rollout_ref.actor: profiler
actor_rollout_ref.actor.profiler: all_ranks discrete ranks
actor_rollout_ref.ref: profiler
actor_rollout_ref.ref.profiler: all_ranks discrete ranks
actor_rollout_ref.rollout: profiler use_fire_sampling
actor_rollout_ref.rollout.profiler: all_ranks discrete ranks
""",
    ),
    (
        "0.6.0",
        """
: global_profiler ray_kwargs
actor_rollout_ref: nccl_timeout
actor_rollout_ref.actor: _target_ freeze_vision_tower profiler use_fused_kernels
actor_rollout_ref.actor: use_remove_padding
actor_rollout_ref.actor.checkpoint: _target_ async_save
actor_rollout_ref.actor.fsdp_config: _target_ entropy_checkpointing
actor_rollout_ref.actor.fsdp_config: entropy_from_logits_with_chunking forward_only
actor_rollout_ref.actor.fsdp_config: model_dtype strategy ulysses_sequence_parallel_size
actor_rollout_ref.actor.fsdp_config: use_orig_params use_torch_compile
actor_rollout_ref.actor.optim: _target_ betas clip_grad lr_scheduler_type
actor_rollout_ref.actor.policy_loss: _target_
actor_rollout_ref.actor.profiler: _target_ all_ranks enable ranks save_path tool tool_config
actor_rollout_ref.actor.profiler.tool_config: npu nsys torch torch_memory
actor_rollout_ref.actor.profiler.tool_config.npu: _target_ analysis contents discrete level
actor_rollout_ref.actor.profiler.tool_config.nsys: _target_ discrete
actor_rollout_ref.actor.profiler.tool_config.torch: _target_ step_end step_start
actor_rollout_ref.actor.profiler.tool_config.torch_memory: _target_ stack_depth
actor_rollout_ref.actor.profiler.tool_config.torch_memory: trace_alloc_max_entries
actor_rollout_ref.model: _target_ hf_config_path tokenizer_path
actor_rollout_ref.ref: model profiler
actor_rollout_ref.ref.fsdp_config: _target_ entropy_checkpointing
actor_rollout_ref.ref.fsdp_config: entropy_from_logits_with_chunking forward_only fsdp_size
actor_rollout_ref.ref.fsdp_config: model_dtype offload_policy optimizer_offload strategy
actor_rollout_ref.ref.fsdp_config: ulysses_sequence_parallel_size use_orig_params
actor_rollout_ref.ref.fsdp_config: use_torch_compile
actor_rollout_ref.ref.profiler: _target_ all_ranks enable ranks save_path tool tool_config
actor_rollout_ref.ref.profiler.tool_config: npu nsys torch torch_memory
actor_rollout_ref.ref.profiler.tool_config.npu: _target_ analysis contents discrete level
actor_rollout_ref.ref.profiler.tool_config.nsys: _target_ discrete
actor_rollout_ref.ref.profiler.tool_config.torch: _target_ step_end step_start
actor_rollout_ref.ref.profiler.tool_config.torch_memory: _target_ stack_depth
actor_rollout_ref.ref.profiler.tool_config.torch_memory: trace_alloc_max_entries
actor_rollout_ref.rollout: _target_ cudagraph_capture_sizes data_parallel_size
actor_rollout_ref.rollout: enable_prefix_caching expert_parallel_size over_sample_rate
actor_rollout_ref.rollout: pipeline_model_parallel_size profiler skip_dump_dir skip_rollout
actor_rollout_ref.rollout: skip_tokenizer_init
actor_rollout_ref.rollout.agent: _target_ default_agent_loop
actor_rollout_ref.rollout.agent.custom_async_server: _target_
actor_rollout_ref.rollout.multi_turn: _target_ num_repeat_rollouts
actor_rollout_ref.rollout.profiler: _target_ all_ranks enable ranks save_path tool
actor_rollout_ref.rollout.profiler: tool_config
actor_rollout_ref.rollout.trace: _target_
actor_rollout_ref.rollout.val_kwargs: _target_
algorithm: rollout_is rollout_is_level rollout_is_mode rollout_is_threshold
algorithm: rollout_is_threshold_lower rollout_is_veto_threshold
critic: enable
critic.checkpoint: _target_ async_save
critic.model: _target_
critic.model.fsdp_config: _target_ entropy_checkpointing entropy_from_logits_with_chunking
critic.model.fsdp_config: forward_only model_dtype strategy ulysses_sequence_parallel_size
critic.model.fsdp_config: use_orig_params use_torch_compile
critic.optim: _target_ betas clip_grad lr_scheduler_type lr_warmup_steps num_cycles
critic.profiler: enable save_path tool tool_config
critic.profiler.tool_config: npu nsys torch torch_memory
critic.profiler.tool_config.npu: _target_ analysis contents discrete level
critic.profiler.tool_config.nsys: _target_ discrete
critic.profiler.tool_config.torch: _target_ step_end step_start
critic.profiler.tool_config.torch_memory: _target_ stack_depth trace_alloc_max_entries
data: apply_chat_template_kwargs
global_profiler: _target_ global_tool_config profile_continuous_steps save_path steps tool
global_profiler.global_tool_config: nsys torch_memory
global_profiler.global_tool_config.nsys: _target_ controller_nsight_options discrete
global_profiler.global_tool_config.nsys: worker_nsight_options
global_profiler.global_tool_config.nsys.controller_nsight_options: cuda-graph-trace
global_profiler.global_tool_config.nsys.controller_nsight_options: cuda-memory-usage trace
global_profiler.global_tool_config.nsys.worker_nsight_options: capture-range
global_profiler.global_tool_config.nsys.worker_nsight_options: capture-range-end
global_profiler.global_tool_config.nsys.worker_nsight_options: cuda-graph-trace
global_profiler.global_tool_config.nsys.worker_nsight_options: cuda-memory-usage kill trace
global_profiler.global_tool_config.torch_memory: context kw_args stack_depth stacks
global_profiler.global_tool_config.torch_memory: trace_alloc_max_entries
ray_kwargs: ray_init timeline_json_file
ray_kwargs.ray_init: num_cpus
reward_model: enable_resource_pool n_gpus_per_node nnodes
reward_model.model.fsdp_config: _target_
reward_model.profiler: enable save_path tool tool_config
""",
        """
: ray_init
actor_rollout_ref: profiler
actor_rollout_ref.profiler: _target_ all_ranks discrete ranks
actor_rollout_ref.rollout.engine_kwargs.sglang: attention_backend
actor_rollout_ref.rollout.engine_kwargs.vllm: disable_mm_preprocessor_cache swap_space
actor_rollout_ref.rollout.multi_turn: completion_callback
algorithm.pf_ppo: _target_
critic.profiler: discrete
ray_init: num_cpus timeline_json_file
reward_model.profiler: discrete
trainer: controller_nsight_options npu_profile profile_steps worker_nsight_options
trainer.controller_nsight_options: cuda-graph-trace cuda-memory-usage trace
trainer.npu_profile: options
trainer.npu_profile.options: analysis level record_shapes save_path with_cpu with_memory
trainer.npu_profile.options: with_module with_npu with_stack
trainer.worker_nsight_options: capture-range capture-range-end cuda-graph-trace
trainer.worker_nsight_options: cuda-memory-usage kill trace
""",
    ),
    (
        "0.6.1",
        """
: transfer_queue
actor_rollout_ref.actor.fsdp_config: dtype
actor_rollout_ref.actor.optim: optimizer optimizer_impl override_optimizer_config
actor_rollout_ref.model: lora_adapter_path
actor_rollout_ref.ref.fsdp_config: dtype
actor_rollout_ref.rollout: prometheus
actor_rollout_ref.rollout.prometheus: _target_ enable file port served_model_name
algorithm: rollout_correction
algorithm.rollout_correction: bypass_mode rollout_is rollout_is_batch_normalize
algorithm.rollout_correction: rollout_is_threshold rollout_rs rollout_rs_threshold
algorithm.rollout_correction: rollout_rs_threshold_lower rollout_token_veto_threshold
algorithm.rollout_correction: use_policy_gradient
critic.model.fsdp_config: dtype
critic.optim: optimizer optimizer_impl override_optimizer_config
data: image_patch_size seed tool_config_path train_max_samples val_max_samples
transfer_queue: enable
""",
        """
algorithm: rollout_is rollout_is_level rollout_is_mode rollout_is_threshold
algorithm: rollout_is_threshold_lower rollout_is_veto_threshold
""",
    ),
    (
        "0.7.0",
        """
: reward_manager
actor_rollout_ref.actor: calculate_entropy data_loader_seed loss_scale_factor rollout_n
actor_rollout_ref.actor: router_replay tau_neg tau_pos
actor_rollout_ref.actor.fsdp_config: full_determinism seed
actor_rollout_ref.actor.router_replay: _target_ mode record_file replay_file
actor_rollout_ref.model: tiled_mlp
actor_rollout_ref.model.tiled_mlp: enabled num_shards
actor_rollout_ref.ref: _target_ rollout_n router_replay
actor_rollout_ref.ref.fsdp_config: full_determinism seed
actor_rollout_ref.ref.router_replay: _target_ mode record_file replay_file
actor_rollout_ref.rollout: enable_rollout_routing_replay logprobs_mode quantization
actor_rollout_ref.rollout: quantization_config_file
actor_rollout_ref.rollout.trace: max_samples_per_step_per_worker
algorithm.rollout_correction: loss_type
critic: data_loader_seed
critic.model: tiled_mlp
critic.model.fsdp_config: full_determinism seed
critic.model.tiled_mlp: enabled num_shards
reward_manager: _target_ module name source
reward_manager.module: _target_ name path
reward_model: num_workers reward_loop_class_name reward_loop_module_path reward_loop_source
reward_model: rollout use_reward_loop
reward_model.model: override_config
reward_model.rollout: _target_ cudagraph_capture_sizes data_parallel_size disable_log_stats
reward_model.rollout: dtype enable_chunked_prefill enable_prefix_caching enforce_eager
reward_model.rollout: engine_kwargs expert_parallel_size free_cache_engine
reward_model.rollout: gpu_memory_utilization limit_images load_format max_model_len
reward_model.rollout: max_num_batched_tokens max_num_seqs name prompt_length response_length
reward_model.rollout: skip_tokenizer_init tensor_model_parallel_size
""",
        """
actor_rollout_ref.ref: model
algorithm.rollout_correction: use_policy_gradient
""",
    ),
    (
        "0.7.1",
        """
: model_engine reward sandbox_fusion
actor_rollout_ref.actor: calculate_sum_pi_squared qat sum_pi_squared_checkpointing
actor_rollout_ref.actor: use_prefix_grouper
actor_rollout_ref.actor.checkpoint: mbridge_config
actor_rollout_ref.actor.fsdp_config: qat
actor_rollout_ref.actor.fsdp_config.qat: _target_ activation_observer enable group_size
actor_rollout_ref.actor.fsdp_config.qat: ignore_patterns mode quantization_config_path
actor_rollout_ref.actor.optim: zero_indexed_step
actor_rollout_ref.actor.profiler.tool_config.torch: contents discrete
actor_rollout_ref.actor.qat: activation_observer enable group_size ignore_patterns mode
actor_rollout_ref.actor.qat: quantization_config_path
actor_rollout_ref.model: mtp
actor_rollout_ref.model.mtp: _target_ detach_encoder enable enable_rollout enable_train
actor_rollout_ref.model.mtp: method mtp_loss_scaling_factor num_speculative_tokens
actor_rollout_ref.model.mtp: speculative_algorithm speculative_eagle_topk
actor_rollout_ref.model.mtp: speculative_num_draft_tokens speculative_num_steps
actor_rollout_ref.ref.fsdp_config: qat
actor_rollout_ref.ref.fsdp_config.qat: _target_ activation_observer enable group_size
actor_rollout_ref.ref.fsdp_config.qat: ignore_patterns mode quantization_config_path
actor_rollout_ref.ref.profiler.tool_config.torch: contents discrete
actor_rollout_ref.rollout: checkpoint_engine mtp n_gpus_per_node nnodes qat
actor_rollout_ref.rollout: scheduling_policy
actor_rollout_ref.rollout.checkpoint_engine: _target_ backend engine_kwargs
actor_rollout_ref.rollout.checkpoint_engine: update_weights_bucket_megabytes
actor_rollout_ref.rollout.engine_kwargs: trtllm
actor_rollout_ref.rollout.profiler.tool_config: npu torch
actor_rollout_ref.rollout.profiler.tool_config.npu: _target_ analysis contents discrete
actor_rollout_ref.rollout.profiler.tool_config.npu: level
actor_rollout_ref.rollout.profiler.tool_config.torch: _target_ contents discrete
actor_rollout_ref.rollout.trace: experiment_name project_name
critic.checkpoint: mbridge_config
critic.model.fsdp_config: qat
critic.model.fsdp_config.qat: _target_ activation_observer enable group_size ignore_patterns
critic.model.fsdp_config.qat: mode quantization_config_path
critic.optim: zero_indexed_step
critic.profiler.tool_config.torch: contents discrete
reward: custom_reward_function num_workers reward_manager reward_model sandbox_fusion
reward.custom_reward_function: name path
reward.reward_manager: _target_ module name source
reward.reward_manager.module: _target_ name path
reward.reward_model: enable enable_resource_pool model_path n_gpus_per_node nnodes rollout
reward.reward_model.rollout: _target_ cudagraph_capture_sizes data_parallel_size
reward.reward_model.rollout: disable_log_stats dtype enable_chunked_prefill
reward.reward_model.rollout: enable_prefix_caching enforce_eager engine_kwargs
reward.reward_model.rollout: expert_parallel_size free_cache_engine gpu_memory_utilization
reward.reward_model.rollout: limit_images load_format max_model_len max_num_batched_tokens
reward.reward_model.rollout: max_num_seqs name prompt_length response_length
reward.reward_model.rollout: skip_tokenizer_init tensor_model_parallel_size
reward.sandbox_fusion: max_concurrent memory_limit_mb url
sandbox_fusion: max_concurrent memory_limit_mb url
""",
        """
: reward_manager
actor_rollout_ref.actor.profiler.tool_config.torch: step_end step_start
actor_rollout_ref.ref.profiler.tool_config.torch: step_end step_start
actor_rollout_ref.rollout: update_weights_bucket_megabytes
algorithm.rollout_correction: rollout_rs_threshold_lower rollout_token_veto_threshold
critic.profiler.tool_config.torch: step_end step_start
reward_manager: _target_ module name source
reward_manager.module: _target_ name path
reward_model: forward_max_token_len_per_gpu launch_reward_fn_async max_length
reward_model: micro_batch_size micro_batch_size_per_gpu profiler sandbox_fusion strategy
reward_model: ulysses_sequence_parallel_size use_dynamic_bsz use_reward_loop
reward_model.model: fsdp_config input_tokenizer override_config use_fused_kernels
reward_model.model: use_remove_padding use_shm
reward_model.model.fsdp_config: _target_ forward_prefetch fsdp_size param_offload
reward_model.model.fsdp_config: reshard_after_forward wrap_policy
reward_model.model.fsdp_config.wrap_policy: min_num_params
reward_model.profiler: _target_ all_ranks enable ranks save_path tool tool_config
reward_model.rollout: _target_
reward_model.sandbox_fusion: max_concurrent memory_limit_mb url
""",
    ),
    (
        "0.8.0",
        """
: distillation
actor_rollout_ref.actor.checkpoint: strict
actor_rollout_ref.actor.profiler.tool_config: precision_debugger
actor_rollout_ref.actor.profiler.tool_config.precision_debugger: _target_ config_path stages
actor_rollout_ref.actor.profiler.tool_config.precision_debugger: steps strict
actor_rollout_ref.model: lora
actor_rollout_ref.model.lora: a2a_experimental adapter_path alpha dropout dropout_position
actor_rollout_ref.model.lora: dtype exclude_modules freeze_language_model
actor_rollout_ref.model.lora: freeze_vision_model freeze_vision_projection
actor_rollout_ref.model.lora: lora_A_init_method lora_B_init_method merge rank
actor_rollout_ref.model.lora: target_modules type
actor_rollout_ref.ref.profiler.tool_config: precision_debugger
actor_rollout_ref.ref.profiler.tool_config.precision_debugger: _target_ config_path stages
actor_rollout_ref.ref.profiler.tool_config.precision_debugger: steps strict
actor_rollout_ref.rollout: disaggregation skip
actor_rollout_ref.rollout.checkpoint_engine: custom_backend_module
actor_rollout_ref.rollout.disaggregation: bootstrap_port decode_replicas
actor_rollout_ref.rollout.disaggregation: decode_tensor_model_parallel_size enabled
actor_rollout_ref.rollout.disaggregation: ib_device prefill_replicas transfer_backend
actor_rollout_ref.rollout.multi_turn: function_tool_path
actor_rollout_ref.rollout.profiler.tool_config: precision_debugger
actor_rollout_ref.rollout.profiler.tool_config.precision_debugger: _target_ config_path
actor_rollout_ref.rollout.profiler.tool_config.precision_debugger: stages steps strict
actor_rollout_ref.rollout.skip: _target_ action dump_dir enable max_dump_step
critic: fsdp
critic.fsdp: _target_ dtype entropy_checkpointing entropy_from_logits_with_chunking
critic.fsdp: forward_only forward_prefetch fsdp_size full_determinism model_dtype
critic.fsdp: offload_policy optimizer_offload param_offload qat reshard_after_forward seed
critic.fsdp: strategy ulysses_sequence_parallel_size use_orig_params use_torch_compile
critic.fsdp: wrap_policy
critic.fsdp.qat: _target_ activation_observer enable group_size ignore_patterns mode
critic.fsdp.qat: quantization_config_path
critic.fsdp.wrap_policy: min_num_params
critic.model: custom_chat_template exclude_modules fused_kernel_options hf_config_path lora
critic.model: lora_adapter_path mtp use_fused_kernels use_liger
critic.model.fused_kernel_options: impl_backend
critic.model.lora: a2a_experimental adapter_path alpha dropout dropout_position dtype
critic.model.lora: exclude_modules freeze_language_model freeze_vision_model
critic.model.lora: freeze_vision_projection lora_A_init_method lora_B_init_method merge rank
critic.model.lora: target_modules type
critic.model.mtp: _target_ detach_encoder enable enable_rollout enable_train method
critic.model.mtp: mtp_loss_scaling_factor num_speculative_tokens speculative_algorithm
critic.model.mtp: speculative_eagle_topk speculative_num_draft_tokens speculative_num_steps
critic.profiler.tool_config: precision_debugger
critic.profiler.tool_config.precision_debugger: _target_ config_path stages steps strict
data: audio_key function_tool_path mm_processor_kwargs
distillation: _target_ distillation_loss enabled n_gpus_per_node nnodes teacher_key
distillation: teacher_models
distillation.distillation_loss: _target_ clip_ratio clip_ratio_high clip_ratio_low
distillation.distillation_loss: distillation_loss_coef log_prob_min_clamp loss_max_clamp
distillation.distillation_loss: loss_mode policy_loss_mode topk use_policy_gradient
distillation.distillation_loss: use_task_rewards
distillation.teacher_models: teacher_model
distillation.teacher_models.teacher_model: _target_ inference key model_path num_replicas
distillation.teacher_models.teacher_model.inference: _target_ cudagraph_capture_sizes
distillation.teacher_models.teacher_model.inference: data_parallel_size disable_log_stats
distillation.teacher_models.teacher_model.inference: dtype enable_chunked_prefill
distillation.teacher_models.teacher_model.inference: enable_prefix_caching enforce_eager
distillation.teacher_models.teacher_model.inference: engine_kwargs expert_parallel_size
distillation.teacher_models.teacher_model.inference: free_cache_engine
distillation.teacher_models.teacher_model.inference: gpu_memory_utilization limit_images
distillation.teacher_models.teacher_model.inference: load_format max_model_len
distillation.teacher_models.teacher_model.inference: max_num_batched_tokens max_num_seqs
distillation.teacher_models.teacher_model.inference: name prompt_length response_length
distillation.teacher_models.teacher_model.inference: skip_tokenizer_init temperature
distillation.teacher_models.teacher_model.inference: tensor_model_parallel_size
global_profiler.global_tool_config: precision_debugger
global_profiler.global_tool_config.precision_debugger: _target_ config_path stages steps
global_profiler.global_tool_config.precision_debugger: strict
reward: _target_
reward.reward_model: _target_
reward.reward_model.rollout: disaggregation do_sample ignore_eos layered_summon mtp
reward.reward_model.rollout: multi_stage_wake_up n pipeline_model_parallel_size quantization
reward.reward_model.rollout: quantization_config_file scheduling_policy temperature top_k
reward.reward_model.rollout: top_p
reward.reward_model.rollout.disaggregation: bootstrap_port decode_replicas
reward.reward_model.rollout.disaggregation: decode_tensor_model_parallel_size enabled
reward.reward_model.rollout.disaggregation: ib_device prefill_replicas transfer_backend
reward.sandbox_fusion: _target_
transfer_queue: backend metrics
transfer_queue.backend: MooncakeStore SimpleStorage storage_backend
transfer_queue.backend.MooncakeStore: auto_init device_name global_segment_size
transfer_queue.backend.MooncakeStore: local_buffer_size local_hostname master_server_address
transfer_queue.backend.MooncakeStore: metadata_server protocol
transfer_queue.backend.SimpleStorage: num_data_storage_units total_storage_size
transfer_queue.metrics: enabled port
""",
        """
actor_rollout_ref.actor: sum_pi_squared_checkpointing
actor_rollout_ref.rollout: skip_dump_dir skip_rollout
actor_rollout_ref.rollout.multi_turn: interaction_config_path
critic.model: fsdp_config
critic.model.fsdp_config: _target_ dtype entropy_checkpointing
critic.model.fsdp_config: entropy_from_logits_with_chunking forward_only forward_prefetch
critic.model.fsdp_config: fsdp_size full_determinism model_dtype offload_policy
critic.model.fsdp_config: optimizer_offload param_offload qat reshard_after_forward seed
critic.model.fsdp_config: strategy ulysses_sequence_parallel_size use_orig_params
critic.model.fsdp_config: use_torch_compile wrap_policy
critic.model.fsdp_config.qat: _target_ activation_observer enable group_size ignore_patterns
critic.model.fsdp_config.qat: mode quantization_config_path
critic.model.fsdp_config.wrap_policy: min_num_params
data: datagen sampler
data.datagen: name path
data.sampler: class_name class_path
trainer: use_legacy_worker_impl
""",
    ),
    (
        "0.9.0",
        """
: skip
actor_rollout_ref.actor: entropy_from_logits_chunk_size pad_to_length
actor_rollout_ref.actor.fsdp_config: entropy_from_logits_chunk_size pad_to_length
actor_rollout_ref.actor.fsdp_config: pad_to_length_bucket
actor_rollout_ref.actor.policy_loss: dro_beta
actor_rollout_ref.actor.profiler.tool_config.torch: schedule
actor_rollout_ref.actor.profiler.tool_config.torch.schedule: _target_ active repeat
actor_rollout_ref.actor.profiler.tool_config.torch.schedule: skip_first wait warmup
actor_rollout_ref.ref: entropy_from_logits_chunk_size pad_to_length
actor_rollout_ref.ref.fsdp_config: entropy_from_logits_chunk_size pad_to_length
actor_rollout_ref.ref.fsdp_config: pad_to_length_bucket
actor_rollout_ref.ref.profiler.tool_config.torch: schedule
actor_rollout_ref.ref.profiler.tool_config.torch.schedule: _target_ active repeat skip_first
actor_rollout_ref.ref.profiler.tool_config.torch.schedule: wait warmup
actor_rollout_ref.rollout: full_determinism moe_load_balance_metrics_interval seed
actor_rollout_ref.rollout.profiler.tool_config.npu: profile_token_end profile_token_start
actor_rollout_ref.rollout.profiler.tool_config.torch: profile_token_end profile_token_start
algorithm: filter_groups
algorithm.filter_groups: _target_ enable max_inflight_gen_batches max_num_gen_batches metric
critic: loss_scale_factor
critic.fsdp: entropy_from_logits_chunk_size pad_to_length pad_to_length_bucket
critic.profiler.tool_config.torch: schedule
critic.profiler.tool_config.torch.schedule: _target_ active repeat skip_first wait warmup
data: continuous_token gen_batch_size
data.continuous_token: enable model_family
reward.reward_model.rollout: full_determinism seed
skip: _target_ async_rollout rollout rollout_tq
skip.async_rollout: action dump_dir enable steps
skip.rollout: action dump_dir enable steps
skip.rollout_tq: action dump_dir enable steps
trainer: use_v1 v1
trainer.v1: colocate_async sampler separate_async sync trainer_mode
trainer.v1.colocate_async: num_warmup_batches
trainer.v1.sampler: custom_sampler max_off_policy_strategy max_off_policy_threshold
trainer.v1.sampler: sampler_kwargs sync_refill_failed_groups
trainer.v1.sampler.custom_sampler: name path
trainer.v1.separate_async: num_warmup_batches parameter_sync_step
""",
        """
actor_rollout_ref.actor.checkpoint: mbridge_config
actor_rollout_ref.rollout: skip
actor_rollout_ref.rollout.skip: _target_ action dump_dir enable max_dump_step
critic.checkpoint: mbridge_config
""",
    ),
    (
        "0.9.1",
        """
actor_rollout_ref.actor.fsdp_config: turbo_config use_no_sync_for_gradient_accumulation
actor_rollout_ref.actor.fsdp_config.turbo_config: distributed
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed:
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed: expert_fully_shard_parallel_size
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed: expert_parallel_size fsdp_plan
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed: fully_shard_parallel_size
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed: tensor_parallel_size
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed: ulysses_parallel_size
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fsdp_plan: fsdp_implementation
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fsdp_plan: num_to_backward_prefetch
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fsdp_plan: num_to_forward_prefetch
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fsdp_plan: output_dtype
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fsdp_plan: param_dtype
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fsdp_plan: reduce_dtype
actor_rollout_ref.actor.profiler: finish_hook_all_ranks finish_hook_cmd finish_hook_ranks
actor_rollout_ref.actor.profiler: relocate_results
actor_rollout_ref.actor.profiler.tool_config.torch_memory: memory_snapshot_num_steps
actor_rollout_ref.ref.fsdp_config: turbo_config use_no_sync_for_gradient_accumulation
actor_rollout_ref.ref.fsdp_config.turbo_config: distributed
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed: expert_fully_shard_parallel_size
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed: expert_parallel_size fsdp_plan
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed: fully_shard_parallel_size
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed: tensor_parallel_size
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed: ulysses_parallel_size
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed.fsdp_plan: fsdp_implementation
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed.fsdp_plan: num_to_backward_prefetch
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed.fsdp_plan: num_to_forward_prefetch
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed.fsdp_plan: output_dtype
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed.fsdp_plan: param_dtype
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed.fsdp_plan: reduce_dtype
actor_rollout_ref.ref.profiler: finish_hook_all_ranks finish_hook_cmd finish_hook_ranks
actor_rollout_ref.ref.profiler: relocate_results
actor_rollout_ref.ref.profiler.tool_config.torch_memory: memory_snapshot_num_steps
actor_rollout_ref.rollout: router_config_path
actor_rollout_ref.rollout.profiler: finish_hook_all_ranks finish_hook_cmd finish_hook_ranks
actor_rollout_ref.rollout.profiler: relocate_results
critic.fsdp: turbo_config use_no_sync_for_gradient_accumulation
critic.fsdp.turbo_config: distributed
critic.fsdp.turbo_config.distributed: expert_fully_shard_parallel_size expert_parallel_size
critic.fsdp.turbo_config.distributed: fsdp_plan fully_shard_parallel_size
critic.fsdp.turbo_config.distributed: tensor_parallel_size ulysses_parallel_size
critic.fsdp.turbo_config.distributed.fsdp_plan: fsdp_implementation num_to_backward_prefetch
critic.fsdp.turbo_config.distributed.fsdp_plan: num_to_forward_prefetch output_dtype
critic.fsdp.turbo_config.distributed.fsdp_plan: param_dtype reduce_dtype
critic.profiler: finish_hook_all_ranks finish_hook_cmd finish_hook_ranks relocate_results
critic.profiler.tool_config.torch_memory: memory_snapshot_num_steps
global_profiler: finish_hook_all_ranks finish_hook_cmd finish_hook_ranks relocate_results
global_profiler.global_tool_config.torch_memory: memory_snapshot_num_steps
ray_kwargs.ray_init: runtime_env
ray_kwargs.ray_init.runtime_env: py_executable
trainer: checkpoint_callback_class
trainer.v1.separate_async: hybrid_rollout
trainer.v1.separate_async.hybrid_rollout: _target_ adaptive_switch_threshold enable_switch
trainer.v1.separate_async.hybrid_rollout: switch_cost_window_size switch_threshold_ratio
trainer.v1.separate_async.hybrid_rollout: switch_threshold_release_steps
trainer.v1.separate_async.hybrid_rollout: switch_threshold_step_down
trainer.v1.separate_async.hybrid_rollout: switch_threshold_step_up
""",
        """
actor_rollout_ref.actor: router_replay
actor_rollout_ref.actor.router_replay: _target_ mode record_file replay_file
actor_rollout_ref.ref: router_replay
actor_rollout_ref.ref.router_replay: _target_ mode record_file replay_file
data: continuous_token
data.continuous_token: enable model_family
""",
    ),
)

_PPO_MEGATRON_TRAINER: tuple[tuple[str, str, str], ...] = (
    (
        "0.1",
        """
: actor_rollout_ref algorithm critic data reward_model trainer
actor_rollout_ref: actor hybrid_engine model ref rollout
actor_rollout_ref.actor: clip_ratio entropy_coeff load_weight megatron optim ppo_epochs
actor_rollout_ref.actor: ppo_micro_batch_size ppo_mini_batch_size shuffle strategy
actor_rollout_ref.actor.megatron: num_layers_per_virtual_pipeline_stage
actor_rollout_ref.actor.megatron: pipeline_model_parallel_size seed sequence_parallel
actor_rollout_ref.actor.megatron: tensor_model_parallel_size
actor_rollout_ref.actor.optim: clip_grad lr lr_warmup_steps_ratio min_lr_ratio
actor_rollout_ref.actor.optim: total_training_steps warmup_style
actor_rollout_ref.model: enable_gradient_checkpointing external_lib override_config path
actor_rollout_ref.ref: load_weight log_prob_micro_batch_size megatron param_offload
actor_rollout_ref.ref.megatron: num_layers_per_virtual_pipeline_stage
actor_rollout_ref.ref.megatron: pipeline_model_parallel_size seed sequence_parallel
actor_rollout_ref.ref.megatron: tensor_model_parallel_size
actor_rollout_ref.rollout: do_sample dtype enforce_eager free_cache_engine
actor_rollout_ref.rollout: gpu_memory_utilization ignore_eos layer_name_map load_format
actor_rollout_ref.rollout: log_prob_micro_batch_size max_num_batched_tokens max_num_seqs
actor_rollout_ref.rollout: name prompt_length response_length temperature
actor_rollout_ref.rollout: tensor_model_parallel_size top_k top_p
actor_rollout_ref.rollout.layer_name_map: gate_proj_layer_name qkv_layer_name
algorithm: adv_estimator gamma kl_ctrl kl_penalty lam
algorithm.kl_ctrl: kl_coef type
critic: cliprange_value kl_ctrl load_weight megatron model optim ppo_epochs
critic: ppo_micro_batch_size ppo_mini_batch_size shuffle strategy
critic.kl_ctrl: kl_coef type
critic.megatron: num_layers_per_virtual_pipeline_stage pipeline_model_parallel_size seed
critic.megatron: sequence_parallel tensor_model_parallel_size
critic.model: enable_gradient_checkpointing external_lib override_config path tokenizer_path
critic.optim: clip_grad lr lr_warmup_steps_ratio min_lr_ratio total_training_steps
critic.optim: warmup_style
data: max_prompt_length max_response_length prompt_key return_raw_chat return_raw_input_ids
data: tokenizer train_batch_size train_files val_batch_size val_files
reward_model: enable load_weight max_length megatron micro_batch_size model param_offload
reward_model: strategy
reward_model.megatron: num_layers_per_virtual_pipeline_stage pipeline_model_parallel_size
reward_model.megatron: seed sequence_parallel tensor_model_parallel_size
reward_model.model: external_lib input_tokenizer path
trainer: critic_warmup default_hdfs_dir default_local_dir experiment_name logger
trainer: n_gpus_per_node nnodes project_name save_freq test_freq total_epochs
""",
        "",
    ),
    (
        "0.2",
        """
actor_rollout_ref.actor: ppo_micro_batch_size_per_gpu use_dynamic_bsz
actor_rollout_ref.ref: log_prob_micro_batch_size_per_gpu
actor_rollout_ref.rollout: disable_log_stats enable_chunked_prefill
actor_rollout_ref.rollout: log_prob_micro_batch_size_per_gpu n
critic: ppo_micro_batch_size_per_gpu use_dynamic_bsz
data: shuffle
reward_model: micro_batch_size_per_gpu use_dynamic_bsz
trainer: resume_from_path resume_mode total_training_steps val_generations_to_log_to_wandb
""",
        "",
    ),
    ("0.2.0.post1", "", ""),
    ("0.2.0.post2", "", ""),
    (
        "0.3.0.post0",
        """
: custom_reward_function
actor_rollout_ref.actor: checkpoint kl_loss_coef kl_loss_type use_kl_loss use_torch_compile
actor_rollout_ref.actor.checkpoint: contents
actor_rollout_ref.actor.megatron: use_distributed_optimizer
actor_rollout_ref.actor.megatron: virtual_pipeline_model_parallel_size
actor_rollout_ref.actor.optim: lr_warmup_steps
actor_rollout_ref.ref.megatron: use_distributed_optimizer
actor_rollout_ref.ref.megatron: virtual_pipeline_model_parallel_size
actor_rollout_ref.rollout: max_model_len val_kwargs
actor_rollout_ref.rollout.val_kwargs: do_sample n temperature top_k top_p
critic: checkpoint
critic.checkpoint: contents
critic.megatron: use_distributed_optimizer virtual_pipeline_model_parallel_size
custom_reward_function: name path
data: filter_overlong_prompts truncation
reward_model.megatron: use_distributed_optimizer virtual_pipeline_model_parallel_size
trainer: balance_batch del_local_ckpt_after_load max_actor_ckpt_to_keep
trainer: max_critic_ckpt_to_keep
""",
        """
actor_rollout_ref.actor.megatron: num_layers_per_virtual_pipeline_stage
actor_rollout_ref.ref.megatron: num_layers_per_virtual_pipeline_stage
critic.megatron: num_layers_per_virtual_pipeline_stage
reward_model.megatron: num_layers_per_virtual_pipeline_stage
""",
    ),
    ("0.3.0.post1", "", ""),
    (
        "0.4.0",
        """
: ray_init
actor_rollout_ref.actor: clip_ratio_c clip_ratio_high clip_ratio_low data_loader_seed
actor_rollout_ref.actor: loss_agg_mode ppo_max_token_len_per_gpu profile
actor_rollout_ref.actor.megatron: context_parallel_size dist_checkpointing_path
actor_rollout_ref.actor.megatron: expert_model_parallel_size expert_tensor_parallel_size
actor_rollout_ref.actor.megatron: grad_offload optimizer_offload override_transformer_config
actor_rollout_ref.actor.megatron: param_offload use_dist_checkpointing
actor_rollout_ref.actor.optim: weight_decay
actor_rollout_ref.actor.profile: profile_ranks save_path step_end step_start use_profile
actor_rollout_ref.model: gradient_checkpointing_kwargs trust_remote_code
actor_rollout_ref.model.gradient_checkpointing_kwargs: activations_checkpoint_granularity
actor_rollout_ref.model.gradient_checkpointing_kwargs: activations_checkpoint_method
actor_rollout_ref.model.gradient_checkpointing_kwargs: activations_checkpoint_num_layers
actor_rollout_ref.model.override_config: model_config moe_config
actor_rollout_ref.model.override_config.moe_config: freeze_moe_router
actor_rollout_ref.ref: log_prob_max_token_len_per_gpu log_prob_use_dynamic_bsz profile
actor_rollout_ref.ref: strategy use_torch_compile
actor_rollout_ref.ref.megatron: context_parallel_size dist_checkpointing_path
actor_rollout_ref.ref.megatron: expert_model_parallel_size expert_tensor_parallel_size
actor_rollout_ref.ref.megatron: override_transformer_config param_offload
actor_rollout_ref.ref.megatron: use_dist_checkpointing
actor_rollout_ref.ref.profile: profile_ranks save_path step_end step_start use_profile
actor_rollout_ref.rollout: engine_kwargs log_prob_max_token_len_per_gpu
actor_rollout_ref.rollout: log_prob_use_dynamic_bsz mode multi_turn
actor_rollout_ref.rollout.engine_kwargs: sglang vllm
actor_rollout_ref.rollout.engine_kwargs.sglang: attention_backend
actor_rollout_ref.rollout.engine_kwargs.vllm: swap_space
actor_rollout_ref.rollout.multi_turn: enable format max_turns tool_config_path
algorithm: norm_adv_by_std_in_grpo pf_ppo use_kl_in_reward use_pf_ppo
algorithm.kl_ctrl: horizon target_kl
algorithm.pf_ppo: reweight_method weight_pow
critic: data_loader_seed forward_max_token_len_per_gpu loss_agg_mode
critic: ppo_max_token_len_per_gpu rollout_n
critic.megatron: context_parallel_size dist_checkpointing_path expert_model_parallel_size
critic.megatron: expert_tensor_parallel_size grad_offload optimizer_offload
critic.megatron: override_transformer_config param_offload use_dist_checkpointing
critic.model: gradient_checkpointing_kwargs trust_remote_code
critic.model.gradient_checkpointing_kwargs: activations_checkpoint_granularity
critic.model.gradient_checkpointing_kwargs: activations_checkpoint_method
critic.model.gradient_checkpointing_kwargs: activations_checkpoint_num_layers
critic.model.override_config: model_config moe_config
critic.model.override_config.moe_config: freeze_moe_router
critic.optim: weight_decay
data: custom_cls filter_overlong_prompts_workers return_full_prompt reward_fn_key
data: trust_remote_code
data.custom_cls: name path
ray_init: num_cpus timeline_json_file
reward_model: forward_max_token_len_per_gpu launch_reward_fn_async reward_manager
reward_model: sandbox_fusion
reward_model.megatron: context_parallel_size dist_checkpointing_path
reward_model.megatron: expert_model_parallel_size expert_tensor_parallel_size
reward_model.megatron: override_transformer_config param_offload use_dist_checkpointing
reward_model.model: trust_remote_code
reward_model.sandbox_fusion: max_concurrent url
trainer: device log_val_generations ray_wait_register_center_timeout val_before_train
""",
        """
actor_rollout_ref.ref: param_offload
reward_model: param_offload
trainer: val_generations_to_log_to_wandb
""",
    ),
    (
        "0.4.1",
        """
actor_rollout_ref: nccl_timeout
actor_rollout_ref.actor: policy_loss profiler
actor_rollout_ref.actor.checkpoint: async_save load_contents save_contents
actor_rollout_ref.actor.optim: lr_decay_steps lr_decay_style lr_warmup_init
actor_rollout_ref.actor.optim: lr_wsd_decay_steps lr_wsd_decay_style min_lr optimizer
actor_rollout_ref.actor.optim: use_checkpoint_opt_param_scheduler weight_decay_incr_style
actor_rollout_ref.actor.policy_loss: clip_cov_lb clip_cov_ratio clip_cov_ub kl_cov_ratio
actor_rollout_ref.actor.policy_loss: loss_mode ppo_kl_coef
actor_rollout_ref.actor.profiler: all_ranks discrete ranks
actor_rollout_ref.model: custom_chat_template
actor_rollout_ref.ref: profiler
actor_rollout_ref.ref.profiler: all_ranks discrete ranks
actor_rollout_ref.rollout: calculate_log_probs profiler
actor_rollout_ref.rollout.engine_kwargs.vllm: disable_mm_preprocessor_cache
actor_rollout_ref.rollout.multi_turn: completion_callback interaction_config_path
actor_rollout_ref.rollout.multi_turn: max_assistant_turns max_user_turns
actor_rollout_ref.rollout.multi_turn: tokenization_sanity_check_mode
actor_rollout_ref.rollout.multi_turn: use_inference_chat_template
actor_rollout_ref.rollout.profiler: all_ranks discrete ranks
critic: nccl_timeout profiler
critic.checkpoint: async_save load_contents save_contents
critic.optim: lr_decay_steps lr_decay_style lr_warmup_init lr_warmup_steps
critic.optim: lr_wsd_decay_steps lr_wsd_decay_style min_lr optimizer
critic.optim: use_checkpoint_opt_param_scheduler weight_decay_incr_style
critic.profiler: all_ranks discrete ranks
reward_model: nccl_timeout profiler
reward_model.profiler: all_ranks discrete ranks
reward_model.sandbox_fusion: memory_limit_mb
trainer: controller_nsight_options profile_steps worker_nsight_options
trainer.controller_nsight_options: cuda-graph-trace cuda-memory-usage trace
trainer.worker_nsight_options: capture-range capture-range-end cuda-graph-trace
trainer.worker_nsight_options: cuda-memory-usage kill trace
""",
        """
actor_rollout_ref.actor.checkpoint: contents
actor_rollout_ref.actor.optim: min_lr_ratio warmup_style
actor_rollout_ref.rollout.multi_turn: max_turns
critic.checkpoint: contents
critic.optim: min_lr_ratio warmup_style
""",
    ),
    (
        "0.5.0",
        """
actor_rollout_ref: profiler
actor_rollout_ref.actor.megatron: override_ddp_config use_mbridge
actor_rollout_ref.actor.megatron.override_transformer_config: recompute_granularity
actor_rollout_ref.actor.megatron.override_transformer_config: recompute_method
actor_rollout_ref.actor.megatron.override_transformer_config: recompute_modules
actor_rollout_ref.actor.megatron.override_transformer_config: recompute_num_layers
actor_rollout_ref.model: use_fused_kernels
actor_rollout_ref.profiler: _target_ all_ranks discrete ranks
actor_rollout_ref.ref.megatron: use_mbridge
actor_rollout_ref.rollout: agent multi_stage_wake_up trace update_weights_bucket_megabytes
actor_rollout_ref.rollout.agent: agent_loop_config_path custom_async_server num_workers
actor_rollout_ref.rollout.agent.custom_async_server: name path
actor_rollout_ref.rollout.multi_turn: max_parallel_calls max_tool_response_length
actor_rollout_ref.rollout.multi_turn: tool_response_truncate_side
actor_rollout_ref.rollout.trace: backend token2text
algorithm: _target_
algorithm.kl_ctrl: _target_
algorithm.pf_ppo: _target_
critic: _target_
critic.megatron: override_ddp_config use_mbridge
critic.profiler: _target_
data: datagen dataloader_num_workers image_key return_multi_modal_inputs sampler use_shm
data: validation_shuffle video_key
data.datagen: name path
data.sampler: class_name class_path
reward_model.megatron: use_mbridge
reward_model.profiler: _target_
trainer: esi_redundant_time npu_profile
trainer.npu_profile: options
trainer.npu_profile.options: analysis level record_shapes save_path with_cpu with_memory
trainer.npu_profile.options: with_module with_npu with_stack
""",
        """
actor_rollout_ref.actor: profiler
actor_rollout_ref.actor.profiler: all_ranks discrete ranks
actor_rollout_ref.model: enable_gradient_checkpointing gradient_checkpointing_kwargs
actor_rollout_ref.model.gradient_checkpointing_kwargs: activations_checkpoint_granularity
actor_rollout_ref.model.gradient_checkpointing_kwargs: activations_checkpoint_method
actor_rollout_ref.model.gradient_checkpointing_kwargs: activations_checkpoint_num_layers
actor_rollout_ref.ref: profiler
actor_rollout_ref.ref.profiler: all_ranks discrete ranks
actor_rollout_ref.rollout: profiler
actor_rollout_ref.rollout.profiler: all_ranks discrete ranks
critic: kl_ctrl
critic.kl_ctrl: kl_coef type
critic.model: enable_gradient_checkpointing gradient_checkpointing_kwargs
critic.model.gradient_checkpointing_kwargs: activations_checkpoint_granularity
critic.model.gradient_checkpointing_kwargs: activations_checkpoint_method
critic.model.gradient_checkpointing_kwargs: activations_checkpoint_num_layers
""",
    ),
    (
        "0.6.0",
        """
: global_profiler ray_kwargs
actor_rollout_ref.actor: _target_ freeze_vision_tower profiler use_fused_kernels
actor_rollout_ref.actor.checkpoint: _target_
actor_rollout_ref.actor.megatron: _target_ forward_only override_mcore_model_config
actor_rollout_ref.actor.megatron.override_transformer_config: attention_backend
actor_rollout_ref.actor.optim: _target_ betas override_optimizer_config
actor_rollout_ref.actor.policy_loss: _target_
actor_rollout_ref.actor.profiler: _target_ all_ranks enable ranks save_path tool tool_config
actor_rollout_ref.actor.profiler.tool_config: npu nsys torch torch_memory
actor_rollout_ref.actor.profiler.tool_config.npu: _target_ analysis contents discrete level
actor_rollout_ref.actor.profiler.tool_config.nsys: _target_ discrete
actor_rollout_ref.actor.profiler.tool_config.torch: _target_ step_end step_start
actor_rollout_ref.actor.profiler.tool_config.torch_memory: _target_ stack_depth
actor_rollout_ref.actor.profiler.tool_config.torch_memory: trace_alloc_max_entries
actor_rollout_ref.model: use_remove_padding
actor_rollout_ref.ref: profiler
actor_rollout_ref.ref.megatron: _target_ forward_only grad_offload optimizer_offload
actor_rollout_ref.ref.megatron: override_ddp_config override_mcore_model_config
actor_rollout_ref.ref.profiler: _target_ all_ranks enable ranks save_path tool tool_config
actor_rollout_ref.ref.profiler.tool_config: npu nsys torch torch_memory
actor_rollout_ref.ref.profiler.tool_config.npu: _target_ analysis contents discrete level
actor_rollout_ref.ref.profiler.tool_config.nsys: _target_ discrete
actor_rollout_ref.ref.profiler.tool_config.torch: _target_ step_end step_start
actor_rollout_ref.ref.profiler.tool_config.torch_memory: _target_ stack_depth
actor_rollout_ref.ref.profiler.tool_config.torch_memory: trace_alloc_max_entries
actor_rollout_ref.rollout: _target_ cudagraph_capture_sizes data_parallel_size
actor_rollout_ref.rollout: enable_prefix_caching expert_parallel_size over_sample_rate
actor_rollout_ref.rollout: pipeline_model_parallel_size profiler skip_dump_dir skip_rollout
actor_rollout_ref.rollout: skip_tokenizer_init
actor_rollout_ref.rollout.agent: _target_ default_agent_loop
actor_rollout_ref.rollout.agent.custom_async_server: _target_
actor_rollout_ref.rollout.multi_turn: _target_ num_repeat_rollouts
actor_rollout_ref.rollout.profiler: _target_ all_ranks enable ranks save_path tool
actor_rollout_ref.rollout.profiler: tool_config
actor_rollout_ref.rollout.trace: _target_
actor_rollout_ref.rollout.val_kwargs: _target_
algorithm: rollout_is rollout_is_level rollout_is_mode rollout_is_threshold
algorithm: rollout_is_threshold_lower rollout_is_veto_threshold
critic: enable
critic.checkpoint: _target_
critic.megatron: _target_ forward_only override_mcore_model_config
critic.megatron.override_transformer_config: attention_backend recompute_granularity
critic.megatron.override_transformer_config: recompute_method recompute_modules
critic.megatron.override_transformer_config: recompute_num_layers
critic.model: _target_
critic.optim: _target_ betas override_optimizer_config
critic.profiler: enable save_path tool tool_config
critic.profiler.tool_config: npu nsys torch torch_memory
critic.profiler.tool_config.npu: _target_ analysis contents discrete level
critic.profiler.tool_config.nsys: _target_ discrete
critic.profiler.tool_config.torch: _target_ step_end step_start
critic.profiler.tool_config.torch_memory: _target_ stack_depth trace_alloc_max_entries
data: apply_chat_template_kwargs
global_profiler: _target_ global_tool_config profile_continuous_steps save_path steps tool
global_profiler.global_tool_config: nsys torch_memory
global_profiler.global_tool_config.nsys: controller_nsight_options discrete
global_profiler.global_tool_config.nsys: worker_nsight_options
global_profiler.global_tool_config.nsys.controller_nsight_options: cuda-graph-trace
global_profiler.global_tool_config.nsys.controller_nsight_options: cuda-memory-usage trace
global_profiler.global_tool_config.nsys.worker_nsight_options: capture-range
global_profiler.global_tool_config.nsys.worker_nsight_options: capture-range-end
global_profiler.global_tool_config.nsys.worker_nsight_options: cuda-graph-trace
global_profiler.global_tool_config.nsys.worker_nsight_options: cuda-memory-usage kill trace
global_profiler.global_tool_config.torch_memory: context kw_args stack_depth stacks
global_profiler.global_tool_config.torch_memory: trace_alloc_max_entries
ray_kwargs: ray_init timeline_json_file
ray_kwargs.ray_init: num_cpus
reward_model: enable_resource_pool n_gpus_per_node nnodes
reward_model.megatron: _target_
reward_model.profiler: enable save_path tool tool_config
trainer: rollout_data_dir
""",
        """
: ray_init
actor_rollout_ref: profiler
actor_rollout_ref.actor: profile
actor_rollout_ref.actor.profile: profile_ranks save_path step_end step_start use_profile
actor_rollout_ref.profiler: _target_ all_ranks discrete ranks
actor_rollout_ref.ref: profile
actor_rollout_ref.ref.profile: profile_ranks save_path step_end step_start use_profile
actor_rollout_ref.rollout.engine_kwargs.sglang: attention_backend
actor_rollout_ref.rollout.engine_kwargs.vllm: disable_mm_preprocessor_cache swap_space
actor_rollout_ref.rollout.multi_turn: completion_callback
algorithm.pf_ppo: _target_
critic.profiler: discrete
ray_init: num_cpus timeline_json_file
reward_model.profiler: discrete
trainer: controller_nsight_options npu_profile profile_steps worker_nsight_options
trainer.controller_nsight_options: cuda-graph-trace cuda-memory-usage trace
trainer.npu_profile: options
trainer.npu_profile.options: analysis level record_shapes save_path with_cpu with_memory
trainer.npu_profile.options: with_module with_npu with_stack
trainer.worker_nsight_options: capture-range capture-range-end cuda-graph-trace
trainer.worker_nsight_options: cuda-memory-usage kill trace
""",
    ),
    (
        "0.6.1",
        """
: transfer_queue
actor_rollout_ref.actor.megatron: dtype
actor_rollout_ref.ref.megatron: dtype
actor_rollout_ref.rollout: prometheus
actor_rollout_ref.rollout.prometheus: _target_ enable file port served_model_name
algorithm: rollout_correction
algorithm.rollout_correction: bypass_mode rollout_is rollout_is_batch_normalize
algorithm.rollout_correction: rollout_is_threshold rollout_rs rollout_rs_threshold
algorithm.rollout_correction: rollout_rs_threshold_lower rollout_token_veto_threshold
algorithm.rollout_correction: use_policy_gradient
critic.megatron: dtype
data: image_patch_size seed tool_config_path train_max_samples val_max_samples
reward_model.megatron: dtype
transfer_queue: enable
""",
        """
algorithm: rollout_is rollout_is_level rollout_is_mode rollout_is_threshold
algorithm: rollout_is_threshold_lower rollout_is_veto_threshold
""",
    ),
    (
        "0.7.0",
        """
: reward_manager
actor_rollout_ref.actor: calculate_entropy loss_scale_factor rollout_n router_replay tau_neg
actor_rollout_ref.actor: tau_pos
actor_rollout_ref.actor.megatron: dist_checkpointing_prefix use_remove_padding
actor_rollout_ref.actor.megatron: vanilla_mbridge
actor_rollout_ref.actor.router_replay: _target_ mode record_file replay_file
actor_rollout_ref.model: _target_ enable_activation_offload enable_gradient_checkpointing
actor_rollout_ref.model: exclude_modules fused_kernel_options hf_config_path lora
actor_rollout_ref.model: lora_adapter_path lora_alpha lora_rank target_modules tiled_mlp
actor_rollout_ref.model: tokenizer_path use_liger use_shm
actor_rollout_ref.model.fused_kernel_options: impl_backend
actor_rollout_ref.model.lora: a2a_experimental adapter_path alpha dropout dropout_position
actor_rollout_ref.model.lora: dtype exclude_modules freeze_language_model
actor_rollout_ref.model.lora: freeze_vision_model freeze_vision_projection
actor_rollout_ref.model.lora: lora_A_init_method lora_B_init_method rank target_modules type
actor_rollout_ref.model.tiled_mlp: enabled num_shards
actor_rollout_ref.ref: _target_ rollout_n router_replay
actor_rollout_ref.ref.megatron: dist_checkpointing_prefix use_remove_padding vanilla_mbridge
actor_rollout_ref.ref.router_replay: _target_ mode record_file replay_file
actor_rollout_ref.rollout: enable_rollout_routing_replay logprobs_mode quantization
actor_rollout_ref.rollout: quantization_config_file
actor_rollout_ref.rollout.trace: max_samples_per_step_per_worker
algorithm.rollout_correction: loss_type
critic.megatron: dist_checkpointing_prefix use_remove_padding vanilla_mbridge
critic.model: lora
critic.model.lora: a2a_experimental adapter_path alpha dropout dropout_position dtype
critic.model.lora: exclude_modules freeze_language_model freeze_vision_model
critic.model.lora: freeze_vision_projection lora_A_init_method lora_B_init_method rank
critic.model.lora: target_modules type
reward_manager: _target_ module name source
reward_manager.module: _target_ name path
reward_model: num_workers reward_loop_class_name reward_loop_module_path reward_loop_source
reward_model: rollout use_reward_loop
reward_model.megatron: dist_checkpointing_prefix use_remove_padding vanilla_mbridge
reward_model.model: override_config
reward_model.rollout: _target_ cudagraph_capture_sizes data_parallel_size disable_log_stats
reward_model.rollout: dtype enable_chunked_prefill enable_prefix_caching enforce_eager
reward_model.rollout: engine_kwargs expert_parallel_size free_cache_engine
reward_model.rollout: gpu_memory_utilization limit_images load_format max_model_len
reward_model.rollout: max_num_batched_tokens max_num_seqs name prompt_length response_length
reward_model.rollout: skip_tokenizer_init tensor_model_parallel_size
trainer: use_legacy_worker_impl
""",
        """
algorithm.rollout_correction: use_policy_gradient
""",
    ),
    (
        "0.7.1",
        """
: reward sandbox_fusion
actor_rollout_ref.actor: use_prefix_grouper
actor_rollout_ref.actor.checkpoint: mbridge_config
actor_rollout_ref.actor.megatron: dist_ckpt_optim_fully_reshardable
actor_rollout_ref.actor.megatron: distrib_optim_fully_reshardable_mem_efficient
actor_rollout_ref.actor.megatron: router_replay
actor_rollout_ref.actor.megatron.router_replay: _target_ mode record_file replay_file
actor_rollout_ref.actor.profiler.tool_config.torch: contents discrete
actor_rollout_ref.model: mtp
actor_rollout_ref.model.lora: merge
actor_rollout_ref.model.mtp: _target_ detach_encoder enable enable_rollout enable_train
actor_rollout_ref.model.mtp: method mtp_loss_scaling_factor num_speculative_tokens
actor_rollout_ref.model.mtp: speculative_algorithm speculative_eagle_topk
actor_rollout_ref.model.mtp: speculative_num_draft_tokens speculative_num_steps
actor_rollout_ref.ref.megatron: dist_ckpt_optim_fully_reshardable
actor_rollout_ref.ref.megatron: distrib_optim_fully_reshardable_mem_efficient router_replay
actor_rollout_ref.ref.megatron.router_replay: _target_ mode record_file replay_file
actor_rollout_ref.ref.profiler.tool_config.torch: contents discrete
actor_rollout_ref.rollout: checkpoint_engine mtp n_gpus_per_node nnodes qat
actor_rollout_ref.rollout: scheduling_policy
actor_rollout_ref.rollout.checkpoint_engine: _target_ backend engine_kwargs
actor_rollout_ref.rollout.checkpoint_engine: update_weights_bucket_megabytes
actor_rollout_ref.rollout.engine_kwargs: trtllm
actor_rollout_ref.rollout.profiler.tool_config: npu torch
actor_rollout_ref.rollout.profiler.tool_config.npu: _target_ analysis contents discrete
actor_rollout_ref.rollout.profiler.tool_config.npu: level
actor_rollout_ref.rollout.profiler.tool_config.torch: _target_ contents discrete
actor_rollout_ref.rollout.trace: experiment_name project_name
critic.checkpoint: mbridge_config
critic.megatron: dist_ckpt_optim_fully_reshardable
critic.megatron: distrib_optim_fully_reshardable_mem_efficient router_replay
critic.megatron.router_replay: _target_ mode record_file replay_file
critic.profiler.tool_config.torch: contents discrete
reward: custom_reward_function num_workers reward_manager reward_model sandbox_fusion
reward.custom_reward_function: name path
reward.reward_manager: _target_ module name source
reward.reward_manager.module: _target_ name path
reward.reward_model: enable enable_resource_pool model_path n_gpus_per_node nnodes rollout
reward.reward_model.rollout: _target_ cudagraph_capture_sizes data_parallel_size
reward.reward_model.rollout: disable_log_stats dtype enable_chunked_prefill
reward.reward_model.rollout: enable_prefix_caching enforce_eager engine_kwargs
reward.reward_model.rollout: expert_parallel_size free_cache_engine gpu_memory_utilization
reward.reward_model.rollout: limit_images load_format max_model_len max_num_batched_tokens
reward.reward_model.rollout: max_num_seqs name prompt_length response_length
reward.reward_model.rollout: skip_tokenizer_init tensor_model_parallel_size
reward.sandbox_fusion: max_concurrent memory_limit_mb url
sandbox_fusion: max_concurrent memory_limit_mb url
""",
        """
: reward_manager
actor_rollout_ref.actor.profiler.tool_config.torch: step_end step_start
actor_rollout_ref.ref.profiler.tool_config.torch: step_end step_start
actor_rollout_ref.rollout: update_weights_bucket_megabytes
algorithm.rollout_correction: rollout_rs_threshold_lower rollout_token_veto_threshold
critic.profiler.tool_config.torch: step_end step_start
reward_manager: _target_ module name source
reward_manager.module: _target_ name path
reward_model: forward_max_token_len_per_gpu launch_reward_fn_async load_weight max_length
reward_model: megatron micro_batch_size micro_batch_size_per_gpu nccl_timeout profiler
reward_model: sandbox_fusion strategy use_dynamic_bsz use_reward_loop
reward_model.megatron: _target_ context_parallel_size dist_checkpointing_path
reward_model.megatron: dist_checkpointing_prefix dtype expert_model_parallel_size
reward_model.megatron: expert_tensor_parallel_size override_transformer_config param_offload
reward_model.megatron: pipeline_model_parallel_size seed sequence_parallel
reward_model.megatron: tensor_model_parallel_size use_dist_checkpointing
reward_model.megatron: use_distributed_optimizer use_mbridge use_remove_padding
reward_model.megatron: vanilla_mbridge virtual_pipeline_model_parallel_size
reward_model.model: input_tokenizer override_config
reward_model.profiler: _target_ all_ranks enable ranks save_path tool tool_config
reward_model.rollout: _target_
reward_model.sandbox_fusion: max_concurrent memory_limit_mb url
""",
    ),
    (
        "0.8.0",
        """
: distillation model_engine
actor_rollout_ref.actor: calculate_sum_pi_squared qat
actor_rollout_ref.actor.checkpoint: strict
actor_rollout_ref.actor.megatron: dynamic_context_parallel max_seqlen_per_dp_cp_rank qat
actor_rollout_ref.actor.megatron: use_megatron_fsdp
actor_rollout_ref.actor.megatron.qat: _target_ activation_observer enable group_size
actor_rollout_ref.actor.megatron.qat: ignore_patterns mode quantization_config_path
actor_rollout_ref.actor.profiler.tool_config: precision_debugger
actor_rollout_ref.actor.profiler.tool_config.precision_debugger: _target_ config_path stages
actor_rollout_ref.actor.profiler.tool_config.precision_debugger: steps strict
actor_rollout_ref.actor.qat: activation_observer enable group_size ignore_patterns mode
actor_rollout_ref.actor.qat: quantization_config_path
actor_rollout_ref.ref.megatron: dynamic_context_parallel max_seqlen_per_dp_cp_rank qat
actor_rollout_ref.ref.megatron: use_megatron_fsdp
actor_rollout_ref.ref.megatron.qat: _target_ activation_observer enable group_size
actor_rollout_ref.ref.megatron.qat: ignore_patterns mode quantization_config_path
actor_rollout_ref.ref.profiler.tool_config: precision_debugger
actor_rollout_ref.ref.profiler.tool_config.precision_debugger: _target_ config_path stages
actor_rollout_ref.ref.profiler.tool_config.precision_debugger: steps strict
actor_rollout_ref.rollout: disaggregation layered_summon skip
actor_rollout_ref.rollout.checkpoint_engine: custom_backend_module
actor_rollout_ref.rollout.disaggregation: bootstrap_port decode_replicas
actor_rollout_ref.rollout.disaggregation: decode_tensor_model_parallel_size enabled
actor_rollout_ref.rollout.disaggregation: ib_device prefill_replicas transfer_backend
actor_rollout_ref.rollout.multi_turn: function_tool_path
actor_rollout_ref.rollout.profiler.tool_config: precision_debugger
actor_rollout_ref.rollout.profiler.tool_config.precision_debugger: _target_ config_path
actor_rollout_ref.rollout.profiler.tool_config.precision_debugger: stages steps strict
actor_rollout_ref.rollout.skip: _target_ action dump_dir enable max_dump_step
critic.megatron: dynamic_context_parallel max_seqlen_per_dp_cp_rank qat use_megatron_fsdp
critic.megatron.qat: _target_ activation_observer enable group_size ignore_patterns mode
critic.megatron.qat: quantization_config_path
critic.model: custom_chat_template enable_activation_offload enable_gradient_checkpointing
critic.model: exclude_modules fused_kernel_options hf_config_path lora_adapter_path
critic.model: lora_alpha lora_rank mtp target_modules tiled_mlp use_fused_kernels use_liger
critic.model: use_remove_padding use_shm
critic.model.fused_kernel_options: impl_backend
critic.model.lora: merge
critic.model.mtp: _target_ detach_encoder enable enable_rollout enable_train method
critic.model.mtp: mtp_loss_scaling_factor num_speculative_tokens speculative_algorithm
critic.model.mtp: speculative_eagle_topk speculative_num_draft_tokens speculative_num_steps
critic.model.tiled_mlp: enabled num_shards
critic.profiler.tool_config: precision_debugger
critic.profiler.tool_config.precision_debugger: _target_ config_path stages steps strict
data: audio_key function_tool_path mm_processor_kwargs
distillation: _target_ distillation_loss enabled n_gpus_per_node nnodes teacher_key
distillation: teacher_models
distillation.distillation_loss: _target_ clip_ratio clip_ratio_high clip_ratio_low
distillation.distillation_loss: distillation_loss_coef log_prob_min_clamp loss_max_clamp
distillation.distillation_loss: loss_mode policy_loss_mode topk use_policy_gradient
distillation.distillation_loss: use_task_rewards
distillation.teacher_models: teacher_model
distillation.teacher_models.teacher_model: _target_ inference key model_path num_replicas
distillation.teacher_models.teacher_model.inference: _target_ cudagraph_capture_sizes
distillation.teacher_models.teacher_model.inference: data_parallel_size disable_log_stats
distillation.teacher_models.teacher_model.inference: dtype enable_chunked_prefill
distillation.teacher_models.teacher_model.inference: enable_prefix_caching enforce_eager
distillation.teacher_models.teacher_model.inference: engine_kwargs expert_parallel_size
distillation.teacher_models.teacher_model.inference: free_cache_engine
distillation.teacher_models.teacher_model.inference: gpu_memory_utilization limit_images
distillation.teacher_models.teacher_model.inference: load_format max_model_len
distillation.teacher_models.teacher_model.inference: max_num_batched_tokens max_num_seqs
distillation.teacher_models.teacher_model.inference: name prompt_length response_length
distillation.teacher_models.teacher_model.inference: skip_tokenizer_init temperature
distillation.teacher_models.teacher_model.inference: tensor_model_parallel_size
global_profiler.global_tool_config: precision_debugger
global_profiler.global_tool_config.nsys: _target_
global_profiler.global_tool_config.precision_debugger: _target_ config_path stages steps
global_profiler.global_tool_config.precision_debugger: strict
reward: _target_
reward.reward_model: _target_
reward.reward_model.rollout: disaggregation do_sample ignore_eos layered_summon mtp
reward.reward_model.rollout: multi_stage_wake_up n pipeline_model_parallel_size quantization
reward.reward_model.rollout: quantization_config_file scheduling_policy temperature top_k
reward.reward_model.rollout: top_p
reward.reward_model.rollout.disaggregation: bootstrap_port decode_replicas
reward.reward_model.rollout.disaggregation: decode_tensor_model_parallel_size enabled
reward.reward_model.rollout.disaggregation: ib_device prefill_replicas transfer_backend
reward.sandbox_fusion: _target_
trainer: val_only validation_data_dir
transfer_queue: backend metrics
transfer_queue.backend: MooncakeStore SimpleStorage storage_backend
transfer_queue.backend.MooncakeStore: auto_init device_name global_segment_size
transfer_queue.backend.MooncakeStore: local_buffer_size local_hostname master_server_address
transfer_queue.backend.MooncakeStore: metadata_server protocol
transfer_queue.backend.SimpleStorage: num_data_storage_units total_storage_size
transfer_queue.metrics: enabled port
""",
        """
actor_rollout_ref.model.override_config: model_config moe_config
actor_rollout_ref.model.override_config.moe_config: freeze_moe_router
actor_rollout_ref.rollout: layer_name_map skip_dump_dir skip_rollout
actor_rollout_ref.rollout.layer_name_map: gate_proj_layer_name qkv_layer_name
actor_rollout_ref.rollout.multi_turn: interaction_config_path
critic.model.override_config: model_config moe_config
critic.model.override_config.moe_config: freeze_moe_router
data: datagen sampler
data.datagen: name path
data.sampler: class_name class_path
trainer: use_legacy_worker_impl
""",
    ),
    (
        "0.9.0",
        """
: skip
actor_rollout_ref.actor: entropy_from_logits_chunk_size entropy_from_logits_with_chunking
actor_rollout_ref.actor.megatron: entropy_from_logits_chunk_size
actor_rollout_ref.actor.megatron: entropy_from_logits_with_chunking
actor_rollout_ref.actor.megatron: pad_bshd_to_minibatch_max pad_to_length
actor_rollout_ref.actor.megatron: pad_to_length_bucket
actor_rollout_ref.actor.optim: exp_avg_dtype exp_avg_sq_dtype main_grads_dtype
actor_rollout_ref.actor.optim: muon_coefficient_type muon_extra_scale_factor
actor_rollout_ref.actor.optim: muon_fp32_matmul_prec muon_match_adamw_update_rms
actor_rollout_ref.actor.optim: muon_momentum muon_nesterov muon_num_ns_steps
actor_rollout_ref.actor.optim: muon_scalar_optimizer muon_scale_mode muon_split_qkv
actor_rollout_ref.actor.optim: muon_tp_mode use_layer_wise_distributed_optimizer
actor_rollout_ref.actor.optim: use_precision_aware_optimizer
actor_rollout_ref.actor.policy_loss: dro_beta
actor_rollout_ref.actor.profiler.tool_config.torch: schedule
actor_rollout_ref.actor.profiler.tool_config.torch.schedule: _target_ active repeat
actor_rollout_ref.actor.profiler.tool_config.torch.schedule: skip_first wait warmup
actor_rollout_ref.ref: entropy_from_logits_chunk_size entropy_from_logits_with_chunking
actor_rollout_ref.ref.megatron: entropy_from_logits_chunk_size
actor_rollout_ref.ref.megatron: entropy_from_logits_with_chunking pad_bshd_to_minibatch_max
actor_rollout_ref.ref.megatron: pad_to_length pad_to_length_bucket
actor_rollout_ref.ref.profiler.tool_config.torch: schedule
actor_rollout_ref.ref.profiler.tool_config.torch.schedule: _target_ active repeat skip_first
actor_rollout_ref.ref.profiler.tool_config.torch.schedule: wait warmup
actor_rollout_ref.rollout: full_determinism moe_load_balance_metrics_interval seed
actor_rollout_ref.rollout.profiler.tool_config.npu: profile_token_end profile_token_start
actor_rollout_ref.rollout.profiler.tool_config.torch: profile_token_end profile_token_start
algorithm: filter_groups
algorithm.filter_groups: _target_ enable max_inflight_gen_batches max_num_gen_batches metric
critic: loss_scale_factor
critic.megatron: entropy_from_logits_chunk_size entropy_from_logits_with_chunking
critic.megatron: pad_bshd_to_minibatch_max pad_to_length pad_to_length_bucket
critic.optim: exp_avg_dtype exp_avg_sq_dtype main_grads_dtype muon_coefficient_type
critic.optim: muon_extra_scale_factor muon_fp32_matmul_prec muon_match_adamw_update_rms
critic.optim: muon_momentum muon_nesterov muon_num_ns_steps muon_scalar_optimizer
critic.optim: muon_scale_mode muon_split_qkv muon_tp_mode
critic.optim: use_layer_wise_distributed_optimizer use_precision_aware_optimizer
critic.profiler.tool_config.torch: schedule
critic.profiler.tool_config.torch.schedule: _target_ active repeat skip_first wait warmup
data: continuous_token gen_batch_size
data.continuous_token: enable model_family
reward.reward_model.rollout: full_determinism seed
skip: _target_ async_rollout rollout rollout_tq
skip.async_rollout: action dump_dir enable steps
skip.rollout: action dump_dir enable steps
skip.rollout_tq: action dump_dir enable steps
trainer: use_v1 v1
trainer.v1: colocate_async sampler separate_async sync trainer_mode
trainer.v1.colocate_async: num_warmup_batches
trainer.v1.sampler: custom_sampler max_off_policy_strategy max_off_policy_threshold
trainer.v1.sampler: sampler_kwargs sync_refill_failed_groups
trainer.v1.sampler.custom_sampler: name path
trainer.v1.separate_async: num_warmup_batches parameter_sync_step
""",
        """
actor_rollout_ref.actor: load_weight
actor_rollout_ref.ref: load_weight
actor_rollout_ref.rollout: skip
actor_rollout_ref.rollout.skip: _target_ action dump_dir enable max_dump_step
critic: load_weight
""",
    ),
    (
        "0.9.1",
        """
actor_rollout_ref.actor.profiler: finish_hook_all_ranks finish_hook_cmd finish_hook_ranks
actor_rollout_ref.actor.profiler: relocate_results
actor_rollout_ref.actor.profiler.tool_config.torch_memory: memory_snapshot_num_steps
actor_rollout_ref.ref.profiler: finish_hook_all_ranks finish_hook_cmd finish_hook_ranks
actor_rollout_ref.ref.profiler: relocate_results
actor_rollout_ref.ref.profiler.tool_config.torch_memory: memory_snapshot_num_steps
actor_rollout_ref.rollout: router_config_path
actor_rollout_ref.rollout.profiler: finish_hook_all_ranks finish_hook_cmd finish_hook_ranks
actor_rollout_ref.rollout.profiler: relocate_results
critic.profiler: finish_hook_all_ranks finish_hook_cmd finish_hook_ranks relocate_results
critic.profiler.tool_config.torch_memory: memory_snapshot_num_steps
global_profiler: finish_hook_all_ranks finish_hook_cmd finish_hook_ranks relocate_results
global_profiler.global_tool_config.torch_memory: memory_snapshot_num_steps
ray_kwargs.ray_init: runtime_env
ray_kwargs.ray_init.runtime_env: py_executable
trainer: checkpoint_callback_class
trainer.v1.separate_async: hybrid_rollout
trainer.v1.separate_async.hybrid_rollout: _target_ adaptive_switch_threshold enable_switch
trainer.v1.separate_async.hybrid_rollout: switch_cost_window_size switch_threshold_ratio
trainer.v1.separate_async.hybrid_rollout: switch_threshold_release_steps
trainer.v1.separate_async.hybrid_rollout: switch_threshold_step_down
trainer.v1.separate_async.hybrid_rollout: switch_threshold_step_up
""",
        """
actor_rollout_ref.actor: router_replay
actor_rollout_ref.actor.megatron: grad_offload
actor_rollout_ref.actor.router_replay: _target_ mode record_file replay_file
actor_rollout_ref.ref: router_replay
actor_rollout_ref.ref.megatron: grad_offload
actor_rollout_ref.ref.router_replay: _target_ mode record_file replay_file
critic.megatron: grad_offload
data: continuous_token
data.continuous_token: enable model_family
""",
    ),
)

_ROWS = {"ppo_trainer": _PPO_TRAINER, "ppo_megatron_trainer": _PPO_MEGATRON_TRAINER}


@cache
def keys(release: str, config: str = "ppo_trainer") -> frozenset[str]:
    """Every key path of ``config`` composed in ``release`` (one of :data:`RELEASES`).

    ValueError for a release or config that is not recorded."""
    if config not in _ROWS:
        raise ValueError(f"config={config!r} is not recorded; choose one of {list(CONFIGS)}")
    if release not in RELEASES:
        raise ValueError(
            f"verl release {release!r} is not recorded; choose one of {list(RELEASES)}"
        )
    return frozenset(names_in(_ROWS[config], release) or ())
