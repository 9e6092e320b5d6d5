#!/bin/bash
# REINFORCE++-baseline as in OpenRLHF's RLVR examples: k2 in the loss with a tiny coefficient.
# 128 prompts x 8 samples = 1024 samples = one optimiser step (on-policy).
N_SAMPLES=8
ROLLOUT_BS=128
TRAIN_BS=$((ROLLOUT_BS * N_SAMPLES))
ray job submit --address="http://127.0.0.1:8265" -- python3 -m openrlhf.cli.train_ppo_ray \
   --actor.model_name_or_path Qwen/Qwen3-4B \
   --algo.advantage.estimator reinforce_baseline \
   --rollout.n_samples_per_prompt ${N_SAMPLES} \
   --rollout.batch_size ${ROLLOUT_BS} \
   --train.batch_size ${TRAIN_BS} \
   --algo.kl.init_coef 1e-5 \
   --algo.kl.use_loss \
   --algo.kl.estimator k2 \
   --reward.remote_url http://localhost:5000/get_reward
