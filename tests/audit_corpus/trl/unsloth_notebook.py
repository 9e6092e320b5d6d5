"""GRPO as unsloth's notebooks write it: loss_type set, beta left to the default.

TRL alone trains no KL here (beta defaults to 0.0); unsloth sets beta to 0.001 for bnpo.
"""

from unsloth import FastLanguageModel  # noqa: I001  (unsloth first, as it asks)

from trl import GRPOConfig, GRPOTrainer

model, tokenizer = FastLanguageModel.from_pretrained("unsloth/Qwen3-4B-Base", max_seq_length=2048)
args = GRPOConfig(output_dir="runs/notebook", loss_type="bnpo", max_completion_length=512)
trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[], args=args)
trainer.train()
