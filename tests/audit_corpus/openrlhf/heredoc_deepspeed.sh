#!/bin/bash
# OpenRLHF's own style: the command in a here-document read into a variable, fed to deepspeed.
set -x
read -r -d '' training_commands <<EOF
openrlhf.cli.train_ppo_ray \
   --algo.advantage.estimator reinforce_baseline \
   --algo.kl.init_coef 1e-3 \
   --algo.kl.estimator k2 \
   --algo.kl.use_loss \
   --rollout.batch_size 128 --rollout.n_samples_per_prompt 8 --train.batch_size 1024
EOF

if [[ ${1} != "slurm" ]]; then
    deepspeed --module $training_commands
fi
