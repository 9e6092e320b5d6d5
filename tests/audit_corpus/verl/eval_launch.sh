#!/bin/bash
# The launch built as a string and run with eval: read as bash would parse it, never run.
CMD="python3 -m verl.trainer.main_ppo algorithm.adv_estimator=rloo"
CMD="$CMD algorithm.use_kl_in_reward=True algorithm.kl_penalty=k1"
eval "$CMD algorithm.kl_ctrl.kl_coef=0.002"
