#!/bin/bash
# export/readonly/local and a VAR=x prefix that applies to one command only.
export KL_COEF=0.02
readonly ESTIMATOR=k2
run() {
    local mode=$1
    local extra=""
    if [ "$mode" = "loss" ]; then
        extra="--algo.kl.use_loss"
    fi
    CUDA_VISIBLE_DEVICES=0,1 python3 -m openrlhf.cli.train_ppo_ray \
        --algo.kl.init_coef "$KL_COEF" --algo.kl.estimator "$ESTIMATOR" $extra \
        --rollout.batch_size 128 --rollout.n_samples_per_prompt 8 --train.batch_size 1024
}
run loss
echo "mode was ${mode:-unset outside the function}"
