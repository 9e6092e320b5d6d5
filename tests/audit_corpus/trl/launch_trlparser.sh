#!/bin/bash
# Runs the TrlParser script beside it: its flags are GRPOConfig's (the file overrides nothing
# KL-related except num_iterations, which it sets back to 1 after parsing).
accelerate launch --num_processes 2 trlparser_script.py \
    --config grpo_beta.yaml --beta 0.03 --num_iterations 4 --loss_type dr_grpo
