#!/bin/bash
# A function that builds the flags from its arguments, called twice: two trainers.
launch() {
    local beta=$1
    shift
    accelerate launch --num_processes 4 -m trl.scripts.grpo \
        --model_name_or_path Qwen/Qwen2.5-0.5B --beta "$beta" --loss_type dr_grpo \
        --max_completion_length 256 "$@"
}
launch 0.04
launch 0.0 --scale_rewards none
