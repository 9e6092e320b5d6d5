#!/bin/bash
# PRIME (verl's recipe): its trainer's fit() never calls apply_kl_penalty, so the reward KL
# asked for here is dropped, while the reference model still runs.
python3 -m recipe.prime.main_prime \
    algorithm.adv_estimator=rloo \
    algorithm.use_kl_in_reward=True algorithm.kl_penalty=k1 \
    actor_rollout_ref.actor.use_kl_loss=False
