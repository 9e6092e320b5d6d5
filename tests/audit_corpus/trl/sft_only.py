"""Supervised fine-tuning only: no KL-regularised RL trainer here."""

from trl import SFTConfig, SFTTrainer

SFTTrainer(model="m", args=SFTConfig(output_dir="o")).train()
