#!/bin/bash
# A KL coefficient computed by a command substitution: never run, so its value is unknown and a
# finding says so; the reading keeps verl's default for it.
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=rloo algorithm.use_kl_in_reward=True \
    algorithm.kl_ctrl.kl_coef=$(python3 -c 'print(0.01)') \
    trainer.experiment_name=run_`date +%s`
