#!/bin/bash
# Through the kl-patches launcher: k1 in the reward inside the group baseline (reward_shape
# sequence), which OpenRLHF cannot do natively; the rest are OpenRLHF's own flags.
python -m kl_patches.openrlhf \
  --algo.advantage.estimator rloo \
  --rollout.n_samples_per_prompt 4 --rollout.batch_size 256 --train.batch_size 1024 \
  --kl k1-in-reward --kl.coef 0.01 --kl.reward_shape sequence
