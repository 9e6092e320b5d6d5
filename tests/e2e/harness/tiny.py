"""The tiny task every end-to-end run trains on, built locally (nothing downloaded).

* a byte-level BPE tokenizer trained here with ``tokenizers`` on the task's own text, with
  Qwen's chat markers (``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``) and a ChatML chat
  template; ``"\\n"`` is one token, as verl's Qwen token builder requires;
* a random 2-layer Qwen2 (hidden 32) saved with the tokenizer to one directory, float32;
* prompts asking for letters, as verl's parquet (chat messages + ground truth), OpenRLHF's and
  TRL's JSONL, and a rule-based reward (the share of the letter ``a`` in the response) as a
  file each library can import by path.

:func:`build` writes all of it into a directory once; the runs reuse it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
LETTERS = "abcdefgh"
TARGET = "a"
N_PROMPTS = 16

REWARD_SOURCE = '''"""Rule-based reward of the end-to-end runs: the share of 'a' in the response."""


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


@dataclass(frozen=True)
class TinyTask:
    """Paths of one built task."""

    root: Path
    model: Path
    """The model and tokenizer directory (``from_pretrained`` loads both)."""
    parquet: Path
    """verl's dataset: ``prompt`` (chat messages), ``data_source``, ``reward_model``."""
    jsonl: Path
    """OpenRLHF's and TRL's dataset: ``prompt`` (chat messages) and ``label``."""
    reward: Path
    """The reward file (``compute_score`` for verl, ``reward_func`` for OpenRLHF)."""


def prompts(n: int = N_PROMPTS, seed: int = 0) -> list[str]:
    """``n`` short prompts over the task's letters (fixed by ``seed``)."""
    rng = random.Random(seed)
    return ["write " + "".join(rng.choice(LETTERS) for _ in range(4)) for _ in range(n)]


def build_tokenizer():  # -> transformers.PreTrainedTokenizerFast
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
        raise AssertionError("the tiny tokenizer must encode '\\n' as one token")
    return fast


def build_model(path: Path, seed: int = 0) -> Path:
    """A random 2-layer Qwen2 and the tokenizer, saved to ``path`` (float32)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tokenizer()
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        torch_dtype="float32",
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    ).save_pretrained(path)
    return path


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
    build_model(task.model)
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
