"""A subclass of GRPOTrainer that overrides the loss: what runs may differ from the config."""

from trl import GRPOConfig, GRPOTrainer


class MyGRPO(GRPOTrainer):
    def _compute_loss(self, model, inputs):
        return super()._compute_loss(model, inputs) * 2.0


MyGRPO(model="m", reward_funcs=[], args=GRPOConfig(output_dir="o", beta=0.01)).train()
