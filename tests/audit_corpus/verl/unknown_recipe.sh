#!/bin/bash
# A recipe kl-patches has not recorded: read as main_ppo, with a finding naming the assumption.
python3 -m recipe.myalgo.main_myalgo algorithm.adv_estimator=rloo algorithm.use_kl_in_reward=True
