#!/bin/bash
# --config-path/--config-name held in an array, as current verl examples do; the config file is
# composed (defaults and all) and the overrides go on top of it.
HERE="$(cd "$(dirname "$0")" && pwd)"
CONFIG=(
    --config-path="$HERE"
    --config-name=my_grpo
)
python3 -m verl.trainer.main_ppo "${CONFIG[@]}" algorithm.kl_ctrl.kl_coef=0.006
