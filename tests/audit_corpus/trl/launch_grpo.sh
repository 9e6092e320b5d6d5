#!/bin/bash
# `trl grpo` with a config file and flags on top: beta 0.1, two updates per generation batch.
CONFIG=grpo_beta.yaml
trl grpo --config "$CONFIG" \
    --beta 0.1 \
    --num_iterations 2 \
    --use_vllm
