#!/usr/bin/env bash
# REINFORCE++ (baseline) RLVR on OpenRLHF 0.11.2 with k1 in the reward.
#
# Launch (one node, 8 GPUs, remote verifier):
#   MODEL=Qwen/Qwen2.5-7B DATA=/data/math.jsonl RM_URL=http://verifier:5000/get_reward \
#     bash recipes/openrlhf/reinforce_pp_k1_in_reward.sh
#
# OpenRLHF's README recommends reinforce_baseline for RLVR, and its example scripts pair it with
# k2 in the loss (--algo.kl.use_loss --algo.kl.estimator k2): a token-level k2 loss follows only
# part of the reverse-KL gradient. Here the KL is k1 in the reward as a reward-to-go, whitened
# with the advantages as OpenRLHF does for reinforce_baseline; kl_patches removes the +-10 clamp.
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
  --algo.advantage.estimator reinforce_baseline \
  --rollout.n_samples_per_prompt 4 \
  --rollout.batch_size 128 \
  --rollout.micro_batch_size 8 \
  --train.batch_size 512 \
  --train.micro_batch_size 4 \
  --train.max_epochs 1 \
  --rollout.max_new_tokens 2048 \
  --data.max_len 3072 \
  --actor.adam.lr 5e-7 \
  --train.num_episodes 1 \
  --ckpt.output_dir "${SAVE:-./ckpt/reinforce_pp_k1_in_reward}" \
  --kl k1-in-reward \
  --kl.coef 0.001 \
  --kl.reward_shape reward_to_go
