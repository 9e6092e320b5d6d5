#!/bin/bash
# Through `kl-patches verl`: k3 in both placements, one coefficient, per-sequence token sums
# (written as verl overrides by the launcher; the patch takes over where verl cannot express it).
kl-patches verl --kl k3-in-both --coef 0.001 -- \
    algorithm.adv_estimator=rloo algorithm.norm_adv_by_std_in_grpo=False \
    data.train_batch_size=128 actor_rollout_ref.actor.ppo_mini_batch_size=128
