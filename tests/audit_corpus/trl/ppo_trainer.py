"""TRL's PPOTrainer (trl.experimental.ppo until 1.12): per-token k3 in the reward, then GAE."""

from trl.experimental.ppo import PPOConfig, PPOTrainer

config = PPOConfig(output_dir="runs/ppo", kl_coef=0.05, kl_estimator="k3", num_ppo_epochs=4)
trainer = PPOTrainer(
    args=config,
    processing_class=None,
    model="policy",
    ref_model="reference",
    reward_model="reward",
    value_model="value",
    train_dataset=None,
)
