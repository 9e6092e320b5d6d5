#!/bin/bash
# OpenRLHF 0.5-0.6's non-Ray trainer with the old k3 flag (replaced by --kl_estimator k3).
deepspeed --module openrlhf.cli.train_ppo \
    --pretrain meta-llama/Llama-3-8b --reward_pretrain rm \
    --init_kl_coef 0.01 --use_kl_estimator_k3 \
    --rollout_batch_size 1024 --train_batch_size 128 --max_epochs 1
