#!/bin/bash
# Python fed on a here-document: read as Python, never run.
python3 - <<'PY'
from trl import RLOOConfig, RLOOTrainer
RLOOTrainer(model="m", reward_funcs=[], args=RLOOConfig(output_dir="o", beta=0.07)).train()
PY
