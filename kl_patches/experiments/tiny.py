"""A tiny random Qwen2 policy, a character tokenizer and a toy task, all built on this machine.

What ``kl-patches smoke`` trains and what the library tests run on. Nothing comes from the
model hub: the tokenizer is a word-level ``tokenizers`` model over nine characters, the model a
2-layer Qwen2 with random weights saved to a folder (TRL loads the policy and the reference
model from that path). Every prompt has the same length, so no prompt padding shifts positions
(the tests that recompute log-probs independently rely on it). The task reward is the fraction
of completion characters equal to :data:`TARGET`.

Needs ``transformers``, ``tokenizers`` and (for :func:`dataset`) ``datasets``: the TRL extra.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TRL_EXPERIMENTAL_SILENCE": "1",
}
"""Set (unless already set) before transformers or TRL is imported: no hub access, no
telemetry, no notice about TRL's experimental modules."""

ALPHABET = "abcdefgh "
"""The characters of the vocabulary (plus ``<pad>`` and ``<eos>``)."""
PROMPTS = ["abca", "bcdb", "cdec", "defd", "efge", "fgaf", "gabg", "habh"]
"""The prompts, all four characters long."""
TARGET = "a"
"""The character the toy task rewards."""


def offline() -> None:
    """Put :data:`OFFLINE_ENV` into the environment (values already set are kept)."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


offline()


def build_tokenizer() -> Any:
    """A character-level ``PreTrainedTokenizerFast`` (left padding, ``<pad>`` and ``<eos>``, no
    ``token_type_ids``)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    for ch in ALPHABET:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(  # model_input_names as Qwen2's own tokenizer: transformers
        tokenizer_object=tok,  # 4.x would add token_type_ids, which generate() refuses
        pad_token="<pad>",
        eos_token="<eos>",
        padding_side="left",
        model_input_names=["input_ids", "attention_mask"],
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
    """A ``datasets.Dataset`` with a ``prompt`` column: :data:`PROMPTS` ``repeat`` times."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": PROMPTS * repeat})


def target_reward(completions: list[str], **_: Any) -> list[float]:
    """Toy task reward: the fraction of completion characters equal to :data:`TARGET`."""
    return [c.count(TARGET) / max(len(c), 1) for c in completions]


def common_args(output_dir: Path, **overrides: Any) -> dict[str, Any]:
    """Trainer arguments (``GRPOConfig``/``RLOOConfig`` keywords) for a fast, deterministic fp32
    run on the CPU: batches of 8, groups of 4, 8-token completions, 2 steps, no saving."""
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
