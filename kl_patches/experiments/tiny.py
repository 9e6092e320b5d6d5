"""A tiny random Qwen2 policy, a character tokenizer and a toy task, all built locally.

No hub access: the tokenizer comes from the ``tokenizers`` library, the model from a config
with random weights saved to a directory (TRL reloads the reference model from that path).
Prompts all have the same length, so no prompt padding shifts positions (the independent
log-prob computations in the tests rely on it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

ALPHABET = "abcdefgh "
PROMPTS = ["abca", "bcdb", "cdec", "defd", "efge", "fgaf", "gabg", "habh"]
TARGET = "a"


def build_tokenizer() -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    for ch in ALPHABET:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", padding_side="left"
    )


def build_model_dir(path: Path, seed: int = 0) -> Path:
    """Save a random 2-layer Qwen2 (~25k parameters) and its tokenizer to ``path``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tokenizer()
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def dataset(repeat: int = 4) -> Any:
    from datasets import Dataset

    return Dataset.from_dict({"prompt": PROMPTS * repeat})


def target_reward(completions: list[str], **_: Any) -> list[float]:
    """Toy task reward: the fraction of completion characters equal to ``TARGET``."""
    return [c.count(TARGET) / max(len(c), 1) for c in completions]


def common_args(output_dir: Path, **overrides: Any) -> dict[str, Any]:
    """Trainer arguments for a fast deterministic fp32 CPU run."""
    args: dict[str, Any] = {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 8,
        "learning_rate": 1e-2,
        "max_steps": 2,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "use_cpu": True,
        "bf16": False,
        "fp16": False,
        "gradient_checkpointing": False,
        "dataloader_num_workers": 0,
        "seed": 0,
        "disable_tqdm": True,
    }
    args.update(overrides)
    return args
