#!/bin/bash
# Every parameter expansion form a launch script uses, each with its bash value.
COEF=${KL_COEF:-0.004}          # unset -> default 0.004
EST=${EST-k1}                   # unset -> default k1
: "${ADV:=rloo}"                # unset -> assigns rloo
SET_EMPTY=""
MODE=${SET_EMPTY:-reward}       # empty -> default (the ':' form)
KEEP=${SET_EMPTY-kept}          # empty but set -> stays empty (the no-':' form)
LOSS=${NEVER_SET:+True}         # unset -> nothing
LOSS=${LOSS:-False}
MINI=$(( 1024 / 2 ))
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=$ADV \
    algorithm.use_kl_in_reward=True \
    algorithm.kl_penalty=$EST \
    algorithm.kl_ctrl.kl_coef=$COEF \
    actor_rollout_ref.actor.use_kl_loss=$LOSS \
    data.train_batch_size=1024 \
    actor_rollout_ref.actor.ppo_mini_batch_size=$MINI \
    trainer.project_name="kl${KEEP}-${MODE}"
