#!/bin/bash
# Tests decided by literals the script sets: only the taken branches run.
ALGO=grpo
if [ "$ALGO" = "grpo" ]; then
    ADV=grpo
    KL_ARGS="actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=k1"
elif [[ $ALGO == ppo* ]]; then
    ADV=gae
    KL_ARGS="algorithm.use_kl_in_reward=True"
else
    echo "unknown algorithm" && exit 1
fi
case "$ADV" in
    grpo|rloo) STD=False ;;
    *) STD=True ;;
esac
N=8
(( N > 4 )) && BATCH=1024 || BATCH=256
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=$ADV $KL_ARGS \
    algorithm.norm_adv_by_std_in_grpo=$STD data.train_batch_size=$BATCH \
    actor_rollout_ref.actor.ppo_mini_batch_size=$BATCH
