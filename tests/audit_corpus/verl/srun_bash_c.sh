#!/bin/bash
#SBATCH --nodes=2
# A SLURM job: srun runs bash -c with the launch inside; $COEF is expanded by the outer shell
# (double quotes), before bash -c sees the command.
COEF=0.003
srun --nodes=2 --ntasks-per-node=1 bash -c "python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=rloo algorithm.use_kl_in_reward=True \
    algorithm.kl_penalty=k1 algorithm.kl_ctrl.kl_coef=$COEF"
