"""A TrlParser script: its GRPOConfig comes from the command line (--config FILE, --flags)."""

from dataclasses import dataclass

from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser


@dataclass
class ScriptArguments:
    dataset_name: str = "trl-lib/tldr"


if __name__ == "__main__":
    parser = TrlParser((ScriptArguments, GRPOConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config()
    training_args.num_iterations = 1
    trainer = GRPOTrainer(model=model_args.model_name_or_path, reward_funcs=[], args=training_args)
    trainer.train()
