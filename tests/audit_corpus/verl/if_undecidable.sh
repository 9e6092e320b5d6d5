#!/bin/bash
# The branch depends on the machine (the output of nvidia-smi), which the audit cannot know:
# both branches are read, each launch labelled with its branch.
if [ "$(nvidia-smi -L | wc -l)" -ge 8 ]; then
    KL="algorithm.use_kl_in_reward=True algorithm.kl_penalty=k1"
else
    KL="actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=k3"
fi
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=rloo $KL \
    data.train_batch_size=256 actor_rollout_ref.actor.ppo_mini_batch_size=256
