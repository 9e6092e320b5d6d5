#!/usr/bin/env bash
# GRPO-style RLVR on OpenRLHF 0.11.2 with k1 in the reward instead of k3 in the loss.
#
# Launch (one node, 8 GPUs, remote verifier):
#   MODEL=Qwen/Qwen2.5-7B DATA=/data/math.jsonl RM_URL=http://verifier:5000/get_reward \
#     bash recipes/openrlhf/grpo_k1_in_reward.sh
#
# Same advantage as OpenRLHF's GRPO example (group_norm, 8 samples per prompt) but the KL is
# k1 in the reward, charged per token as a reward-to-go after the group normalisation (OpenRLHF's
# native shaping); kl_patches only removes OpenRLHF's +-10 clamp (core maths). On-policy: one
# optimiser step per rollout batch (rollout.batch_size x n_samples == train.batch_size).
set -euo pipefail

python -m kl_patches.openrlhf \
  --actor.model_name_or_path "$MODEL" \
  --reward.remote_url "$RM_URL" \
  --data.prompt_dataset "$DATA" \
  --data.input_key prompt \
  --data.label_key answer \
  --data.apply_chat_template \
  --actor.num_nodes 1 \
  --actor.num_gpus_per_node 8 \
  --ref.num_nodes 1 \
  --ref.num_gpus_per_node 8 \
  --train.colocate_all \
  --vllm.num_engines 8 \
  --vllm.tensor_parallel_size 1 \
  --vllm.gpu_memory_utilization 0.6 \
  --vllm.enable_sleep \
  --ds.enable_sleep \
  --ds.zero_stage 3 \
  --ds.param_dtype bf16 \
  --actor.gradient_checkpointing_enable \
  --algo.advantage.estimator group_norm \
  --rollout.n_samples_per_prompt 8 \
  --rollout.batch_size 128 \
  --rollout.micro_batch_size 8 \
  --train.batch_size 1024 \
  --train.micro_batch_size 4 \
  --train.max_epochs 1 \
  --rollout.max_new_tokens 2048 \
  --data.max_len 3072 \
  --actor.adam.lr 1e-6 \
  --train.num_episodes 1 \
  --ckpt.output_dir "${SAVE:-./ckpt/grpo_k1_in_reward}" \
  --kl k1-in-reward \
  --kl.coef 0.001 \
  --kl.reward_shape reward_to_go
