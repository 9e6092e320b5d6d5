"""kl-patches' own GRPOTrainer with k1 in the reward (the unbiased configuration)."""

from trl import GRPOConfig

from kl_patches import KLConfig
from kl_patches.trl import GRPOTrainer

GRPOTrainer(
    model="m",
    reward_funcs=[],
    args=GRPOConfig(output_dir="o", scale_rewards="none"),
    kl=KLConfig.parse("k1-in-reward", coef=0.05),
).train()
