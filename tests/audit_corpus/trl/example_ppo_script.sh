#!/bin/bash
# TRL's example PPO script run from a checkout (not shipped in the wheel, not beside this file).
python examples/scripts/ppo/ppo.py --kl_coef 0.1 --num_ppo_epochs 1 --output_dir runs/ppo
