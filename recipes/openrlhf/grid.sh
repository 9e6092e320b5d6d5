#!/usr/bin/env bash
# The paper's estimator x placement grid on OpenRLHF 0.11.2, one run per line of grid.txt.
#
# Launch (one node, 8 GPUs, remote verifier):
#   MODEL=Qwen/Qwen2.5-7B DATA=/data/math.jsonl RM_URL=http://verifier:5000/get_reward \
#     bash recipes/openrlhf/grid.sh [NAME ...]     # default: every run in grid.txt
#
# RLOO with 4 samples, strictly on-policy (one optimiser step per rollout batch), the KL inside
# the leave-one-out baseline (reward_shape sequence), loss-side KL summed over tokens: the
# setting in which the paper compares k1/k3 x reward/loss. Only the --kl flags differ per run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

grep -v '^#' "$here/grid.txt" | while read -r NAME KL_FLAGS; do
  [ -z "$NAME" ] && continue
  if [ "$#" -gt 0 ] && [[ ! " $* " =~ " $NAME " ]]; then continue; fi
  # shellcheck disable=SC2086  # KL_FLAGS is a list of words on purpose
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
    --vllm.gpu_memory_utilization 0.6 \
    --vllm.enable_sleep \
    --ds.enable_sleep \
    --ds.zero_stage 3 \
    --ds.param_dtype bf16 \
    --actor.gradient_checkpointing_enable \
    --algo.advantage.estimator rloo \
    --rollout.n_samples_per_prompt 4 \
    --rollout.batch_size 128 \
    --rollout.micro_batch_size 8 \
    --train.batch_size 512 \
    --train.micro_batch_size 4 \
    --train.max_epochs 1 \
    --rollout.max_new_tokens 2048 \
    --data.max_len 3072 \
    --actor.adam.lr 1e-6 \
    --train.num_episodes 1 \
    --ckpt.output_dir "${SAVE:-./ckpt/grid}/$NAME" \
    $KL_FLAGS </dev/null  # keep grid.txt on stdin for `read`
done
