#!/usr/bin/env bash
# The paper's comparison grid on GRPO: the same run for each estimator x placement, one output
# directory per configuration. Only the KL flags change; everything else comes from
# grpo_k1_in_reward.yaml (kl: coef 0.05, scale_rewards none, loss_type dr_grpo).
#
# Launch (one node, 8 GPUs; runs the configurations one after another):
#   bash recipes/trl/paper_grid.sh
# Extra arguments go to every run, e.g.  bash recipes/trl/paper_grid.sh --kl.coef 0.1
#
# Expected (theory): k1-in-reward and the *-in-both rows follow the reverse-KL gradient;
# k1-in-loss has zero expected KL gradient; k3-in-reward is biased towards collapse;
# k3-in-loss follows a token-level forward KL.
set -euo pipefail
CONFIGS="k1-in-reward k1-in-loss k3-in-reward k3-in-loss k1-in-both k3-in-both"
NPROC="${NPROC:-8}"
here="$(cd "$(dirname "$0")" && pwd)"
for name in $CONFIGS; do
  accelerate launch --num_processes "$NPROC" -m kl_patches.trl grpo \
    --config "$here/grpo_k1_in_reward.yaml" --kl "$name" \
    --output_dir "runs/grpo-$name" "$@"
done
