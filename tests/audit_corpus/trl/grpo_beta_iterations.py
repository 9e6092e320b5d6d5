"""GRPO with a small beta and two iterations per generation batch: k3 times pi/pi_old in the
loss (TRL 1.16's use_bias_correction_kl default), reused for two passes: off-policy."""

import os

from trl import GRPOConfig, GRPOTrainer

common = {"learning_rate": 1e-6, "logging_steps": 1}


def main() -> None:
    args = GRPOConfig(
        output_dir=os.path.join("runs", "grpo"),
        beta=0.002,
        num_iterations=2,
        loss_type="grpo",
        **common,
    )
    GRPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", reward_funcs=[], args=args).train()


if __name__ == "__main__":
    main()
