#!/bin/bash
# Launch wrappers around TRL's own entry points: uv run, accelerate launch, torchrun with a path.
uv run accelerate launch --config_file zero2.yaml -m trl.scripts.rloo --beta 0.03
torchrun --nproc_per_node 2 trl/scripts/grpo.py --beta 0.01 --loss_type luspo
