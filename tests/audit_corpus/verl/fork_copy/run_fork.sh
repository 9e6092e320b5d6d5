#!/bin/bash
# The fork runs its own copy of the trainer script by path, with verl's overrides.
cd "$(dirname "$0")"
python3 main_ppo.py algorithm.adv_estimator=rloo algorithm.use_kl_in_reward=True \
    algorithm.kl_penalty=k3
