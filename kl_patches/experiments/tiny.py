"""A tiny random Qwen2 policy, a character tokenizer and a toy task, all built on this machine.

What ``kl-patches smoke`` trains and what the library tests run on. Nothing comes from the
model hub: the tokenizer is a word-level ``tokenizers`` model over nine characters, the model a
2-layer Qwen2 with random weights saved to a folder (TRL loads the policy and the reference
model from that path). Every prompt has the same length, so no prompt padding shifts positions
(the tests that recompute log-probs independently rely on it). The task reward is the fraction
of completion characters equal to :data:`TARGET`.

The library runs launched as users launch them (``kl-patches smoke verl|openrlhf`` and the
end-to-end tests of ``tests/e2e``) need a chat model instead: :func:`build` writes, once, into
one directory a byte-level BPE tokenizer trained here on the task's text with Qwen's chat markers
(``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``), a ChatML template and ``"\\n"`` as one
token (verl's Qwen token builder requires it), the same 2-layer Qwen2 over that vocabulary,
the prompts as verl's parquet and as OpenRLHF's/TRL's JSONL, and the reward (the share of the
letter ``a`` in the response) as a file each library imports by path (:class:`TinyTask`).

Needs ``transformers``, ``tokenizers`` and (for :func:`dataset`) ``datasets``: the TRL extra;
:func:`build` writes the parquet only where ``pandas`` is installed (verl's environment).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
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
    """Save a random 2-layer Qwen2 (~25k parameters) and the character tokenizer to ``path``."""
    return save_model(path, build_tokenizer(), seed=seed, max_positions=64)


def save_model(path: Path, tokenizer: Any, seed: int = 0, max_positions: int = 64) -> Path:
    """A random 2-layer Qwen2 (hidden 32) over ``tokenizer``'s vocabulary, saved with the
    tokenizer and a generation config (its eos and pad tokens) to ``path``, float32."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        torch_dtype="float32",
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    Path(path).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    ).save_pretrained(path)
    return Path(path)


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


# ----------------------------------------------------------------------------- chat task
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
"""Qwen's special tokens (the chat tokenizer's first three ids)."""
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""ChatML, as Qwen's tokenizers write it."""
LETTERS = "abcdefgh"
"""The letters the chat task's prompts ask for."""
N_PROMPTS = 16
"""Prompts in the chat task's datasets."""

REWARD_SOURCE = '''"""Rule-based reward of the tiny task: the share of 'a' in the response."""


def share(text):
    text = text.replace("<|im_end|>", "").replace("<|endoftext|>", "")
    return text.count("a") / max(len(text), 1)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """verl's custom_reward_function signature."""
    return float(share(solution_str))


def reward_func(queries, prompts, labels, **kwargs):
    """OpenRLHF's --reward.remote_url file signature: a reward per query."""
    import torch

    rewards = torch.tensor([share(q[len(p):]) for q, p in zip(queries, prompts)])
    return {"rewards": rewards, "scores": rewards, "extra_logs": {}}
'''
"""The reward file :func:`build` writes (verl's and OpenRLHF's signatures)."""


@dataclass(frozen=True)
class TinyTask:
    """Paths of one built chat task."""

    root: Path
    """The directory everything was written to."""
    model: Path
    """The model and tokenizer directory (``from_pretrained`` loads both)."""
    parquet: Path
    """verl's dataset: ``prompt`` (chat messages), ``data_source``, ``reward_model``."""
    jsonl: Path
    """OpenRLHF's and TRL's dataset: ``prompt`` (chat messages) and ``label``."""
    reward: Path
    """The reward file (``compute_score`` for verl, ``reward_func`` for OpenRLHF)."""


def prompts(n: int = N_PROMPTS, seed: int = 0) -> list[str]:
    """``n`` short prompts over :data:`LETTERS` (fixed by ``seed``)."""
    rng = random.Random(seed)
    return ["write " + "".join(rng.choice(LETTERS) for _ in range(4)) for _ in range(n)]


def build_chat_tokenizer() -> Any:
    """A byte-level BPE (vocab ~320) trained on the task's text, with ChatML markers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [*prompts(256, seed=1), "user\n", "assistant\n", "system\n", *LETTERS]
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    if len(fast.encode("\n", add_special_tokens=False)) != 1:
        raise AssertionError("the tiny chat tokenizer must encode '\\n' as one token")
    return fast


def build(root: Path) -> TinyTask:
    """Model, tokenizer, datasets and reward file under ``root`` (built once, then reused)."""
    root = Path(root)
    task = TinyTask(
        root=root,
        model=root / "model",
        parquet=root / "train.parquet",
        jsonl=root / "train.jsonl",
        reward=root / "reward.py",
    )
    done = root / ".built"
    if done.exists():
        return task
    root.mkdir(parents=True, exist_ok=True)
    save_model(task.model, build_chat_tokenizer(), max_positions=128)
    rows = [
        {
            "data_source": "kl_patches_tiny",
            "prompt": [{"role": "user", "content": text}],
            "ability": "letters",
            "reward_model": {"style": "rule", "ground_truth": TARGET},
            "extra_info": {"index": i},
        }
        for i, text in enumerate(prompts())
    ]
    with task.jsonl.open("w") as f:
        for row in rows:
            f.write(json.dumps({"prompt": row["prompt"], "label": TARGET}) + "\n")
    try:
        import pandas as pd
    except ImportError:  # only verl reads parquet
        pass
    else:
        pd.DataFrame(rows).to_parquet(task.parquet)
    task.reward.write_text(REWARD_SOURCE)
    done.write_text("ok\n")
    return task
