"""Every long option of OpenRLHF's trainers in each release, as data (argparse refuses others).

``train_ppo_ray`` (and ``train_ppo``, shipped up to 0.6.1) parse their command line with a plain
``argparse.ArgumentParser()`` and ``parse_args()``: an option the release does not define stops
the launch with ``unrecognized arguments``, and, since ``allow_abbrev`` is left on, a unique
prefix of a defined option is accepted as that option. Flags were renamed wholesale in 0.10.2
(``--init_kl_coef`` -> ``--algo.kl.init_coef``, ``--pretrain`` -> ``--actor.model_name_or_path``
...), so a launch written for one release is often refused by another. For each release of
:data:`RELEASES` this module holds every ``--option`` of ``openrlhf/cli/train_ppo_ray.py`` and
``openrlhf/cli/train_ppo.py``, as deltas against the release before.

Source: each release's wheel (``pip download --no-deps openrlhf==V``), every
``parser.add_argument("--name", ...)`` call of the file read with :mod:`ast`
(``openrlhf-V.data/purelib/openrlhf/cli/<module>.py``), plus the f-string options of the
per-prefix loop (:data:`_LOOP_OPTIONS`). ``tests/adapters/openrlhf/test_flagsets.py`` reads the
installed release's ``train_ppo_ray.py`` the same way and checks that its options are exactly
this module's for that release.

Data format: one ``(release, added, removed)`` row per release; ``added``/``removed`` are lines
``prefix: rest rest ...`` (the option is ``prefix.rest``; ``: rest`` for undotted options).
"""

from __future__ import annotations

from functools import cache

from ..namesets import names_in
from .history import RELEASES

__all__ = ["MODULES", "RELEASES", "options"]

MODULES = ("train_ppo_ray", "train_ppo")
"""The trainer modules recorded (``openrlhf.cli.<module>``)."""

_TRAIN_PPO_RAY: tuple[tuple[str, str, str], ...] = (
    (
        "0.5.0",
        """
: actor_init_on_gpu actor_learning_rate actor_num_gpus_per_node actor_num_nodes adam_betas
: adam_offload apply_chat_template aux_loss_coef bf16 ckpt_path colocate_actor_ref
: colocate_critic_reward critic_learning_rate critic_num_gpus_per_node critic_num_nodes
: critic_pretrain disable_fast_tokenizer disable_trace_cache enable_ema
: enable_prefix_caching enforce_eager eps_clip eval_steps flash_attn freezing_actor_steps
: gamma generate_max_len grad_accum_dtype gradient_checkpointing
: gradient_checkpointing_use_reentrant init_kl_coef input_key input_template kl_target l2
: lambd load_checkpoint load_in_4bit local_rank logging_steps lora_alpha lora_dropout
: lora_rank max_ckpt_mem max_ckpt_num max_epochs max_len max_norm max_samples
: micro_rollout_batch_size micro_train_batch_size n_samples_per_prompt normalize_reward
: num_episodes packing_samples perf pretrain pretrain_data pretrain_data_probs
: pretrain_split prompt_data prompt_data_probs prompt_max_len prompt_split ptx_coef
: ref_num_gpus_per_node ref_num_nodes ref_reward_offload remote_rm_url reward_clip_range
: reward_num_gpus_per_node reward_num_nodes reward_pretrain rollout_batch_size save_path
: save_steps save_value_network seed target_modules temperature top_p train_batch_size
: use_kl_estimator_k3 use_tensorboard use_wandb value_clip value_head_prefix
: vllm_num_engines vllm_sync_backend vllm_tensor_parallel_size wandb_group wandb_org
: wandb_project wandb_run_name zero_stage zpg
""",
        "",
    ),
    (
        "0.5.1",
        """
: advantage_estimator
""",
        "",
    ),
    ("0.5.2", "", ""),
    ("0.5.2.post1", "", ""),
    (
        "0.5.3",
        """
: lr_warmup_ratio
""",
        "",
    ),
    ("0.5.4", "", ""),
    (
        "0.5.5",
        """
: overlap_comm
""",
        """
: disable_trace_cache
""",
    ),
    ("0.5.5.post1", "", ""),
    ("0.5.5.post2", "", ""),
    ("0.5.6", "", ""),
    (
        "0.5.7",
        """
: disable_ds_ckpt save_hf_ckpt vllm_sync_with_ray
""",
        "",
    ),
    (
        "0.5.8",
        """
: colocate_all_models vllm_enable_sleep vllm_gpu_memory_utilization
""",
        "",
    ),
    ("0.5.9", "", ""),
    (
        "0.5.9.post1",
        """
: use_ms
""",
        "",
    ),
    (
        "0.6.0",
        """
: label_key ring_attn_size ring_head_stride use_kl_loss
""",
        "",
    ),
    (
        "0.6.0.post1",
        """
: deepspeed_enable_sleep kl_estimator
""",
        """
: use_kl_estimator_k3
""",
    ),
    ("0.6.0.post2", "", ""),
    ("0.6.0.post3", "", ""),
    ("0.6.1", "", ""),
    ("0.6.1.post1", "", ""),
    (
        "0.6.2",
        """
: full_determinism torch_compile use_liger_kernel
""",
        "",
    ),
    (
        "0.6.3",
        """
: universal_ckpt
""",
        "",
    ),
    ("0.6.3.post1", "", ""),
    ("0.6.3.post2", "", ""),
    (
        "0.6.4",
        """
: no_advantage_std_norm use_ds_universal_ckpt
""",
        """
: universal_ckpt
""",
    ),
    (
        "0.7.0",
        """
: eval_dataset eval_n_samples_per_prompt eval_temperature
""",
        """
: prompt_split
""",
    ),
    ("0.7.0.post1", "", ""),
    (
        "0.7.1",
        """
: deepcompile ema_beta kl_horizon
""",
        """
: pretrain_data pretrain_data_probs pretrain_split torch_compile
""",
    ),
    ("0.7.1.post1", "", ""),
    ("0.7.1.post2", "", ""),
    (
        "0.7.2",
        """
: entropy_loss_coef
""",
        "",
    ),
    ("0.7.2.post1", "", ""),
    ("0.7.3", "", ""),
    (
        "0.7.4",
        """
: ds_tensor_parallel_size eval_split prompt_split
""",
        "",
    ),
    ("0.7.4.post1", "", ""),
    ("0.7.4.post2", "", ""),
    ("0.7.5", "", ""),
    (
        "0.8.0",
        """
: agent_func_path async_train
""",
        "",
    ),
    ("0.8.0.post1", "", ""),
    (
        "0.8.1",
        """
: dynamic_filtering dynamic_filtering_reward_range vllm_generate_batch_size
""",
        "",
    ),
    ("0.8.1.post1", "", ""),
    (
        "0.8.2",
        """
: eps_clip_low_high
""",
        "",
    ),
    ("0.8.3", "", ""),
    ("0.8.4", "", ""),
    (
        "0.8.5",
        """
: lr_scheduler
""",
        "",
    ),
    (
        "0.8.6",
        """
: dual_clip rollout_max_tokens_per_gpu train_max_tokens_per_gpu use_dynamic_batch
""",
        "",
    ),
    (
        "0.8.7",
        """
: overlong_buffer_len overlong_penalty_factor
""",
        "",
    ),
    (
        "0.8.8",
        """
: policy_loss_type
""",
        "",
    ),
    (
        "0.8.9",
        """
: enable_vllm_is_correction vllm_is_truncated_threshold
""",
        "",
    ),
    ("0.8.9.post1", "", ""),
    (
        "0.8.10",
        """
: attn_implementation
""",
        """
: flash_attn
""",
    ),
    ("0.8.11", "", ""),
    ("0.9.0", "", ""),
    (
        "0.9.1",
        """
: async_queue_size use_icepop
""",
        "",
    ),
    ("0.9.1.post1", "", ""),
    (
        "0.9.2",
        """
: param_dtype stop_properly_penalty_coef
""",
        """
: bf16
""",
    ),
    (
        "0.9.3",
        """
: vllm_is_correction_type
""",
        """
: use_icepop
""",
    ),
    ("0.9.4", "", ""),
    ("0.9.5", "", ""),
    ("0.9.6", "", ""),
    (
        "0.9.7",
        """
: partial_rollout
""",
        "",
    ),
    (
        "0.9.8",
        """
: max_new_tokens
""",
        """
: generate_max_len prompt_max_len
""",
    ),
    (
        "0.9.9",
        """
: best_metric_key
""",
        "",
    ),
    (
        "0.9.10",
        """
: dataloader_num_workers
""",
        "",
    ),
    (
        "0.10.0",
        """
: freeze_visual_encoder image_key max_images_per_prompt
""",
        "",
    ),
    ("0.10.1", "", ""),
    ("0.10.1.post1", "", ""),
    ("0.10.1.post2", "", ""),
    (
        "0.10.2",
        """
actor: aux_loss_coef dual_clip entropy_coef eps_clip eps_clip_low_high freeze_visual_encoder
actor: gradient_checkpointing_enable gradient_checkpointing_reentrant model_name_or_path
actor: num_gpus_per_node num_nodes policy_loss_type
algo: dynamic_filtering_enable dynamic_filtering_range
algo.advantage: estimator gamma is_correction_enable is_correction_threshold
algo.advantage: is_correction_type lambd no_std_norm
algo.kl: estimator horizon init_coef target use_loss
ckpt: best_metric_key disable_ds load_enable max_mem max_num output_dir path save_hf
ckpt: save_steps
critic: freezing_steps model_name_or_path num_gpus_per_node num_nodes save_value_network
critic: value_clip
data: apply_chat_template dataloader_num_workers disable_fast_tokenizer image_key input_key
data: input_template label_key max_images_per_prompt max_len max_samples prompt_dataset
data: prompt_probs prompt_split
ds: adam_offload attn_implementation deepcompile enable_sleep experts_implementation
ds: grad_accum_dtype load_in_4bit overlap_comm packing_samples param_dtype
ds: ring_attn_head_stride ring_attn_size tensor_parallel_size use_liger_kernel
ds: use_universal_ckpt value_head_prefix zero_stage zpg
ds.lora: alpha dropout rank target_modules
eval: dataset n_samples_per_prompt split steps temperature
logger: logging_steps tensorboard_dir
logger.wandb: group key org project run_name
ref: num_gpus_per_node num_nodes offload
reward: clip_range model_name_or_path normalize_enable num_gpus_per_node num_nodes offload
reward: overlong_buffer_len overlong_penalty_factor remote_url stop_properly_penalty_coef
rollout: batch_size max_new_tokens max_tokens_per_gpu micro_batch_size n_samples_per_prompt
rollout: temperature top_p vllm_generate_batch_size
train: agent_func_path async_enable async_queue_size batch_size colocate_actor_ref
train: colocate_all colocate_critic_reward dynamic_batch_enable ema_beta enable_ema
train: full_determinism_enable max_epochs max_tokens_per_gpu micro_batch_size num_episodes
train: partial_rollout_enable seed
vllm: enable_prefix_caching enable_sleep enforce_eager gpu_memory_utilization num_engines
vllm: sync_backend sync_with_ray tensor_parallel_size
""",
        """
: actor_init_on_gpu actor_learning_rate actor_num_gpus_per_node actor_num_nodes adam_betas
: adam_offload advantage_estimator agent_func_path apply_chat_template async_queue_size
: async_train attn_implementation aux_loss_coef best_metric_key ckpt_path colocate_actor_ref
: colocate_all_models colocate_critic_reward critic_learning_rate critic_num_gpus_per_node
: critic_num_nodes critic_pretrain dataloader_num_workers deepcompile deepspeed_enable_sleep
: disable_ds_ckpt disable_fast_tokenizer ds_tensor_parallel_size dual_clip dynamic_filtering
: dynamic_filtering_reward_range ema_beta enable_ema enable_prefix_caching
: enable_vllm_is_correction enforce_eager entropy_loss_coef eps_clip eps_clip_low_high
: eval_dataset eval_n_samples_per_prompt eval_split eval_steps eval_temperature
: freeze_visual_encoder freezing_actor_steps full_determinism gamma grad_accum_dtype
: gradient_checkpointing gradient_checkpointing_use_reentrant image_key init_kl_coef
: input_key input_template kl_estimator kl_horizon kl_target l2 label_key lambd
: load_checkpoint load_in_4bit logging_steps lora_alpha lora_dropout lora_rank lr_scheduler
: lr_warmup_ratio max_ckpt_mem max_ckpt_num max_epochs max_images_per_prompt max_len
: max_new_tokens max_norm max_samples micro_rollout_batch_size micro_train_batch_size
: n_samples_per_prompt no_advantage_std_norm normalize_reward num_episodes overlap_comm
: overlong_buffer_len overlong_penalty_factor packing_samples param_dtype partial_rollout
: perf policy_loss_type pretrain prompt_data prompt_data_probs prompt_split ptx_coef
: ref_num_gpus_per_node ref_num_nodes ref_reward_offload remote_rm_url reward_clip_range
: reward_num_gpus_per_node reward_num_nodes reward_pretrain ring_attn_size ring_head_stride
: rollout_batch_size rollout_max_tokens_per_gpu save_hf_ckpt save_path save_steps
: save_value_network seed stop_properly_penalty_coef target_modules temperature top_p
: train_batch_size train_max_tokens_per_gpu use_ds_universal_ckpt use_dynamic_batch
: use_kl_loss use_liger_kernel use_tensorboard use_wandb value_clip value_head_prefix
: vllm_enable_sleep vllm_generate_batch_size vllm_gpu_memory_utilization
: vllm_is_correction_type vllm_is_truncated_threshold vllm_num_engines vllm_sync_backend
: vllm_sync_with_ray vllm_tensor_parallel_size wandb_group wandb_org wandb_project
: wandb_run_name zero_stage zpg
""",
    ),
    ("0.10.3", "", ""),
    ("0.10.4", "", ""),
    ("0.11.0", "", ""),
    (
        "0.11.1",
        """
algo.kl: unbiased_gradient
""",
        "",
    ),
    (
        "0.11.2",
        """
actor: loss_agg_mode
algo.advantage: is_correction_gating is_correction_level is_correction_mode
""",
        """
algo.advantage: is_correction_enable is_correction_type
""",
    ),
)

_TRAIN_PPO: tuple[tuple[str, str, str], ...] = (
    (
        "0.5.0",
        """
: actor_init_on_gpu actor_learning_rate adam_betas adam_offload apply_chat_template
: aux_loss_coef bf16 ckpt_path critic_learning_rate critic_pretrain disable_fast_tokenizer
: disable_trace_cache enable_ema eps_clip eval_steps flash_attn freezing_actor_steps gamma
: generate_max_len grad_accum_dtype gradient_checkpointing
: gradient_checkpointing_use_reentrant init_kl_coef input_key input_template kl_target l2
: lambd load_checkpoint load_in_4bit local_rank logging_steps lora_alpha lora_dropout
: lora_rank max_ckpt_mem max_ckpt_num max_epochs max_len max_norm max_samples
: micro_rollout_batch_size micro_train_batch_size n_samples_per_prompt normalize_reward
: num_episodes pretrain pretrain_data pretrain_data_probs pretrain_split prompt_data
: prompt_data_probs prompt_max_len prompt_split ptx_coef remote_rm_url reward_clip_range
: reward_pretrain rollout_batch_size save_path save_steps save_value_network seed
: target_modules temperature top_p train_batch_size use_kl_estimator_k3 use_tensorboard
: use_wandb value_clip value_head_prefix wandb_group wandb_org wandb_project wandb_run_name
: zero_stage zpg
""",
        "",
    ),
    (
        "0.5.1",
        """
: advantage_estimator
""",
        "",
    ),
    ("0.5.2", "", ""),
    ("0.5.2.post1", "", ""),
    (
        "0.5.3",
        """
: lr_warmup_ratio
""",
        "",
    ),
    ("0.5.4", "", ""),
    (
        "0.5.5",
        """
: overlap_comm
""",
        """
: disable_trace_cache
""",
    ),
    ("0.5.5.post1", "", ""),
    ("0.5.5.post2", "", ""),
    ("0.5.6", "", ""),
    (
        "0.5.7",
        """
: disable_ds_ckpt save_hf_ckpt
""",
        "",
    ),
    ("0.5.8", "", ""),
    ("0.5.9", "", ""),
    (
        "0.5.9.post1",
        """
: use_ms
""",
        "",
    ),
    (
        "0.6.0",
        """
: label_key use_kl_loss
""",
        "",
    ),
    (
        "0.6.0.post1",
        """
: kl_estimator
""",
        """
: use_kl_estimator_k3
""",
    ),
    ("0.6.0.post2", "", ""),
    ("0.6.0.post3", "", ""),
    ("0.6.1", "", ""),
    ("0.6.1.post1", "", ""),
    (
        "0.6.2",
        "",
        """
: actor_init_on_gpu actor_learning_rate adam_betas adam_offload advantage_estimator
: apply_chat_template aux_loss_coef bf16 ckpt_path critic_learning_rate critic_pretrain
: disable_ds_ckpt disable_fast_tokenizer enable_ema eps_clip eval_steps flash_attn
: freezing_actor_steps gamma generate_max_len grad_accum_dtype gradient_checkpointing
: gradient_checkpointing_use_reentrant init_kl_coef input_key input_template kl_estimator
: kl_target l2 label_key lambd load_checkpoint load_in_4bit local_rank logging_steps
: lora_alpha lora_dropout lora_rank lr_warmup_ratio max_ckpt_mem max_ckpt_num max_epochs
: max_len max_norm max_samples micro_rollout_batch_size micro_train_batch_size
: n_samples_per_prompt normalize_reward num_episodes overlap_comm pretrain pretrain_data
: pretrain_data_probs pretrain_split prompt_data prompt_data_probs prompt_max_len
: prompt_split ptx_coef remote_rm_url reward_clip_range reward_pretrain rollout_batch_size
: save_hf_ckpt save_path save_steps save_value_network seed target_modules temperature top_p
: train_batch_size use_kl_loss use_ms use_tensorboard use_wandb value_clip value_head_prefix
: wandb_group wandb_org wandb_project wandb_run_name zero_stage zpg
""",
    ),
)

_LOOP_OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "0.10.2",
        """
actor: adam.betas adam.eps adam.lr adam.weight_decay lr_scheduler lr_warmup_ratio max_norm
actor: min_lr_ratio muon.lr muon.momentum muon.nesterov muon.no_nesterov muon.ns_steps optim
critic: adam.betas adam.eps adam.lr adam.weight_decay lr_scheduler lr_warmup_ratio max_norm
critic: min_lr_ratio muon.lr muon.momentum muon.nesterov muon.no_nesterov muon.ns_steps optim
""",
        "",
    ),
)
"""Options ``train_ppo_ray`` defines with f-strings inside ``for prefix in ("actor",
"critic"):`` (``parser.add_argument(f"--{prefix}.adam.lr", ...)``), which a reading of the
literal ``"--name"`` arguments misses: the same 28 in every release from 0.10.2 to 0.11.2 (read
from each wheel's ``openrlhf/cli/train_ppo_ray.py``: the loop is at 0.10.2:447 and 0.11.2:484,
``--{prefix}.adam.lr`` at 0.10.2:465 and 0.11.2:502); none before 0.10.2 (0.10.1.post2 and
0.9.10 have no such loop)."""

_ROWS = {"train_ppo_ray": _TRAIN_PPO_RAY + _LOOP_OPTIONS, "train_ppo": _TRAIN_PPO}


@cache
def options(release: str, module: str = "train_ppo_ray") -> frozenset[str] | None:
    """Every ``--option`` (without the dashes) of ``openrlhf.cli.<module>`` in ``release``;
    None when the module is not in that release. ValueError for an unrecorded release."""
    if module not in _ROWS:
        raise ValueError(f"module={module!r} is not recorded; choose one of {list(MODULES)}")
    if release not in RELEASES:
        raise ValueError(
            f"OpenRLHF release {release!r} is not recorded; choose one of {list(RELEASES)}"
        )
    current = names_in(_ROWS[module], release)
    return frozenset(current) if current is not None else None
