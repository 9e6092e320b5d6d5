#!/bin/bash
# A grid over KL configurations through `python -m kl_patches.trl`, in the style of
# recipes/trl/paper_grid.sh: one trainer per loop value, the config file next to this script.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for name in k1-in-reward k3-in-loss; do
  accelerate launch --num_processes 8 -m kl_patches.trl grpo \
    --config "$here/grpo_beta.yaml" \
    --beta 0.0 --kl_coef 0.04 \
    --kl_estimator "${name%%-in-*}" --kl_placement "${name##*-in-}" \
    --output_dir "runs/$name" "$@"
done
