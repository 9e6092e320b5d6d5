#!/bin/bash
# The launch runs; a later line has an unbalanced quote, where bash stops too.
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=rloo algorithm.use_kl_in_reward=True
echo "done
