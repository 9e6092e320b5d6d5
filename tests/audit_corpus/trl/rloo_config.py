"""RLOO built in Python: k1 summed per sequence in the reward, before the leave-one-out baseline."""

from trl import RLOOConfig, RLOOTrainer

BETA = 0.02
config = RLOOConfig(
    output_dir="runs/rloo",
    beta=BETA,
    num_generations=4,
    learning_rate=1e-6,
)
trainer = RLOOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", reward_funcs=[], args=config)
trainer.train()
