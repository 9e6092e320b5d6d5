#!/bin/bash
# source of a file beside the script (read, never run); cd changes where paths are looked up;
# a source of a file that is not here (~/.bashrc) is noted, not followed.
cd "$(dirname "$0")"
source ./common.env
source ~/.bashrc
python3 -m openrlhf.cli.train_ppo_ray --algo.advantage.estimator rloo $KL_FLAGS $ROLLOUT
