"""The task family of the paper-shaped miniature (:mod:`.paper`): string operations on digits.

A prompt is one operation letter, a string of digits and ``=``; the answer is the operation
applied to the digits, then the end-of-sequence token. Every answer is checkable exactly:

* ``C`` copy: ``C3141=`` -> ``3141``;
* ``R`` reverse: ``R3141=`` -> ``1413``;
* ``I`` increment every digit mod 10: ``I3149=`` -> ``4250``.

The family is split into a *domain* (the part RL trains on) and held-out parts. With the
default :class:`Split`: RL trains on reversal at lengths 2-5 (in domain); out of domain are
reversal at lengths 6-7 (longer inputs, seen in pre-training only for the other operations)
and copy and increment at lengths 2-7 (other operations, pre-trained but never RL-trained).

The vocabulary is character level (``tokenizers``, no hub): ``<pad>``, ``<eos>``, the digits,
the operation letters and ``=``. Nothing here imports TRL.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

DIGITS = "0123456789"
OPS = ("C", "R", "I")
SEP = "="
PAD, EOS = "<pad>", "<eos>"


def apply_op(op: str, digits: str) -> str:
    """The answer of operation ``op`` on ``digits`` (a string of 0-9)."""
    if not digits or any(c not in DIGITS for c in digits):
        raise ValueError(f"digits must be a non-empty string of 0-9; got {digits!r}")
    if op == "C":
        return digits
    if op == "R":
        return digits[::-1]
    if op == "I":
        return "".join(DIGITS[(int(c) + 1) % 10] for c in digits)
    raise ValueError(f"op={op!r} is not valid; choose one of {list(OPS)}")


def prompt_of(op: str, digits: str) -> str:
    """The prompt text of ``op`` on ``digits``: ``op + digits + '='``."""
    return f"{op}{digits}{SEP}"


def parse_prompt(prompt: str) -> tuple[str, str]:
    """(op, digits) of a prompt made by :func:`prompt_of`."""
    if len(prompt) < 3 or prompt[-1] != SEP or prompt[0] not in OPS:
        raise ValueError(f"not a task prompt: {prompt!r}")
    return prompt[0], prompt[1:-1]


def answer_of(prompt: str) -> str:
    """The correct answer (without the end token) of a prompt."""
    return apply_op(*parse_prompt(prompt))


def is_correct(prompt: str, completion: str, ended: bool) -> bool:
    """A completion is correct when it is exactly the answer and the model then ended it."""
    return ended and completion == answer_of(prompt)


@dataclass(frozen=True)
class Part:
    """One part of the family: an operation at a range of input lengths."""

    op: str
    """Operation letter (one of :data:`OPS`)."""
    lengths: tuple[int, ...]
    """Input lengths (number of digits)."""
    weight: float = 1.0
    """Relative frequency of this part in a mixture (pre-training)."""

    @property
    def name(self) -> str:
        """``op:minlen-maxlen``."""
        return f"{self.op}:{min(self.lengths)}-{max(self.lengths)}"

    def sample(self, rng: random.Random) -> str:
        """One random prompt of this part."""
        n = rng.choice(self.lengths)
        return prompt_of(self.op, "".join(rng.choice(DIGITS) for _ in range(n)))


@dataclass(frozen=True)
class Split:
    """Which parts the reference is pre-trained on, which RL trains on, and the held-out ones."""

    pretrain: tuple[Part, ...] = (
        Part("C", tuple(range(1, 8))),
        Part("I", tuple(range(1, 8))),
        Part("R", tuple(range(1, 6))),
        Part("R", (6, 7), weight=0.1),
    )
    """Supervised pre-training mixture (parts drawn in proportion to their weights)."""
    domain: Part = Part("R", (2, 3, 4, 5))
    """The in-domain part: RL trains on it, "ID accuracy" is measured on it."""
    ood_length: Part = Part("R", (6, 7))
    """Held out: the same operation on longer inputs (rare in pre-training, never RL-trained)."""
    ood_ops: tuple[Part, ...] = (Part("C", tuple(range(2, 8))), Part("I", tuple(range(2, 8))))
    """Held out: the other operations (pre-trained, never RL-trained)."""

    @property
    def max_answer(self) -> int:
        """The longest answer of any part (digits)."""
        parts = (*self.pretrain, self.domain, self.ood_length, *self.ood_ops)
        return max(max(p.lengths) for p in parts)

    def pretrain_prompt(self, rng: random.Random) -> str:
        """One prompt of the pre-training mixture."""
        weights = [p.weight for p in self.pretrain]
        return rng.choices(self.pretrain, weights=weights)[0].sample(rng)

    def eval_parts(self) -> dict[str, tuple[Part, ...]]:
        """Evaluation group -> its parts: ``id``, ``ood_length``, ``ood_ops``."""
        return {"id": (self.domain,), "ood_length": (self.ood_length,), "ood_ops": self.ood_ops}


def eval_prompts(split: Split, per_group: int, seed: int = 1234) -> dict[str, list[str]]:
    """A fixed evaluation set: ``per_group`` prompts per group, spread evenly over its parts."""
    rng = random.Random(seed)
    out: dict[str, list[str]] = {}
    for group, parts in split.eval_parts().items():
        out[group] = [parts[i % len(parts)].sample(rng) for i in range(per_group)]
    return out


def train_prompts(split: Split, n: int, seed: int) -> list[str]:
    """``n`` random in-domain prompts for RL (drawn with ``seed``)."""
    rng = random.Random(seed)
    return [split.domain.sample(rng) for _ in range(n)]


@dataclass(frozen=True)
class ModelSize:
    """The Qwen2 shape of the policy (built from a config with random weights)."""

    hidden: int = 64
    """Model width."""
    layers: int = 2
    """Decoder layers."""
    heads: int = 4
    """Attention heads (and key/value heads)."""
    intermediate: int = 256
    """MLP width."""


@dataclass(frozen=True)
class PretrainSettings:
    """Supervised pre-training of the reference (cross-entropy on the answer tokens)."""

    steps: int = 300
    """AdamW updates (few on purpose: the reference stays imperfect)."""
    batch_size: int = 64
    """Examples per update."""
    lr: float = 3e-3
    """Peak learning rate (linear warm-up over 5% of the steps, cosine decay to 10%)."""
    seed: int = 0
    """Seed of the weights and of the data order."""
    size: ModelSize = field(default_factory=ModelSize)
    """The model shape."""
    target_accuracy: float | None = None
    """If set, stop at the first check (every 50 steps) where the reference's sampled
    in-domain accuracy, on prompts other than the evaluation set, reaches this value: a
    larger model gets a reference as imperfect as the small one's. None: run every step."""


def build_tokenizer() -> Any:
    """The character-level tokenizer (``<pad>`` 0, ``<eos>`` 1, digits, ops, ``=``)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {PAD: 0, EOS: 1}
    for ch in DIGITS + "".join(OPS) + SEP:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=PAD))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, padding_side="left"
    )


def build_model(tokenizer: Any, size: ModelSize, seed: int) -> Any:
    """A randomly initialised ``Qwen2ForCausalLM`` of ``size`` for ``tokenizer``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.heads,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return Qwen2ForCausalLM(config)
