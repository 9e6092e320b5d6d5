"""GRPO through unsloth, which replaces the trainer's loss with its own k3 code."""

from unsloth import FastLanguageModel, PatchFastRL

PatchFastRL("GRPO", FastLanguageModel)

from trl import GRPOConfig, GRPOTrainer  # noqa: E402

model, tokenizer = FastLanguageModel.from_pretrained("unsloth/Qwen2.5-1.5B")
args = GRPOConfig(
    output_dir="runs/unsloth", beta=0.04, loss_type="dr_grpo", max_completion_length=200
)
GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[], args=args).train()
