"""The config's settings come from a function the audit cannot evaluate: a finding, no guess."""

import json

from trl import GRPOConfig, GRPOTrainer


def load(path):
    with open(path) as handle:
        return json.load(handle)


settings = load("settings.json")
GRPOTrainer(model="m", reward_funcs=[], args=GRPOConfig(output_dir="o", beta=0.04, **settings))
