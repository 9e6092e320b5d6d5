#!/bin/bash
# Before OpenRLHF 0.10.2 (flat flag names): REINFORCE with the adaptive KL controller.
deepspeed --module openrlhf.cli.train_ppo_ray \
   --advantage_estimator reinforce \
   --init_kl_coef 0.02 \
   --kl_target 0.1 \
   --rollout_batch_size 256 \
   --train_batch_size 256 \
   --n_samples_per_prompt 1
