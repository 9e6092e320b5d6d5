#!/bin/bash
# Teacher distillation on top of RLOO: its k3 distillation loss is a KL to a teacher model, not
# to the reference; the reference KL is k1 in the reward.
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=rloo \
    algorithm.use_kl_in_reward=True algorithm.kl_penalty=k1 \
    distillation.enabled=True distillation.distillation_loss.loss_mode=k3
