"""The paper miniature's evaluation on a hand-made policy whose accuracy and KL are known."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace
from typing import Any

import torch

from kl_patches.experiments import paper_eval, paper_pretrain
from kl_patches.experiments.paper_task import DIGITS, EOS, OPS, PAD, SEP, PretrainSettings


class CharTokenizer:
    """The layout of :func:`paper_task.build_tokenizer`, without transformers."""

    def __init__(self) -> None:
        self.vocab = {PAD: 0, EOS: 1}
        for ch in DIGITS + "".join(OPS) + SEP:
            self.vocab[ch] = len(self.vocab)
        self.inv = {i: c for c, i in self.vocab.items()}
        self.pad_token_id, self.eos_token_id = 0, 1

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        return [self.vocab[c] for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.inv[i] for i in ids if i > 1)

    def __call__(self, texts: list[str], **_: Any) -> dict[str, torch.Tensor]:
        rows = [self.encode(t) for t in texts]
        width = max(map(len, rows))
        ids = torch.tensor([[0] * (width - len(r)) + r for r in rows])
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
        return {"input_ids": ids, "attention_mask": mask}


class LastTokenPolicy(torch.nn.Module):
    """Next-token logits that depend only on the current token: after ``=`` it writes ``1``
    with probability ``a`` (else ``2``); after a digit it ends."""

    def __init__(self, tok: CharTokenizer, a: float) -> None:
        super().__init__()
        v = len(tok)
        table = torch.full((v, v), -1e4)
        table[tok.vocab[SEP], tok.vocab["1"]] = math.log(a)
        table[tok.vocab[SEP], tok.vocab["2"]] = math.log(1 - a)
        for d in DIGITS:
            table[tok.vocab[d], tok.eos_token_id] = 0.0
        self.table = torch.nn.Parameter(table, requires_grad=False)

    def forward(self, input_ids: torch.Tensor, **_: Any) -> Any:
        return SimpleNamespace(logits=self.table[input_ids])


def test_accuracy_and_kl_of_a_hand_made_policy() -> None:
    tok = CharTokenizer()
    a, b = 0.7, 0.4
    policy, ref = LastTokenPolicy(tok, a), LastTokenPolicy(tok, b)
    prompts = {"id": ["C1="] * 4000, "ood_length": ["C2="] * 500, "ood_ops": ["R1="] * 500}
    res = paper_eval.evaluate(policy, ref, tok, prompts, max_new=4, seed=0)
    exact_kl = a * math.log(a / b) + (1 - a) * math.log((1 - a) / (1 - b))
    assert abs(res["kl_full"].mean - exact_kl) < 1e-5  # one random step, its full KL is exact
    assert res["kl_full"].se < 1e-5
    k1 = res["kl_k1"]
    assert abs(k1.mean - exact_kl) < 4 * k1.se and k1.n == 4000
    acc = res["acc"]
    assert abs(acc["id"].mean - a) < 4 * acc["id"].se
    assert abs(acc["ood_length"].mean - (1 - a)) < 4 * acc["ood_length"].se
    assert abs(acc["ood_ops"].mean - a) < 4 * acc["ood_ops"].se  # R of "1" is "1"
    ent = -(a * math.log(a) + (1 - a) * math.log(1 - a)) / 2  # two tokens, the end certain
    assert abs(res["entropy"].mean - ent) < 1e-5


def test_samples_end_at_the_end_token_and_are_scored_exactly() -> None:
    tok = CharTokenizer()
    policy = LastTokenPolicy(tok, 0.5)
    gen = torch.Generator().manual_seed(3)
    s = paper_eval.sample(policy, policy, tok, ["C1=", "C22="] * 20, 5, gen, batch_size=7)
    assert len(s.completions) == 40 and bool(s.ended.all())
    assert set(s.completions) <= {"1", "2"}
    for p, c, ok in zip(s.prompts, s.completions, s.correct.tolist(), strict=True):
        assert ok == (c == p[1:-1])
    assert torch.equal(s.k1, torch.zeros(40)) and torch.allclose(s.full_kl, torch.zeros(40))


def test_estimate_is_mean_and_standard_error() -> None:
    e = paper_eval.Estimate.of(torch.tensor([1.0, 0.0, 1.0, 1.0]))
    assert e.mean == 0.75 and e.n == 4
    assert math.isclose(e.se, math.sqrt(0.25 / 4))
    assert paper_eval.Estimate.of(torch.tensor([2.0])).se == 0.0


def test_pretraining_batches_label_only_the_answer_and_end() -> None:
    tok = CharTokenizer()
    ids, mask, labels = paper_pretrain._batch(tok, ["R12=", "C5="])
    assert ids.tolist()[0] == [*tok.encode("R12=21"), 1]
    assert labels.tolist()[0] == [-100] * 4 + tok.encode("21") + [1]
    assert ids.tolist()[1] == [*tok.encode("C5=5"), 1, 0, 0]
    assert labels.tolist()[1] == [-100] * 3 + tok.encode("5") + [1, -100, -100]
    assert mask.tolist()[1] == [1] * 5 + [0, 0]


def test_pretraining_schedule_warms_up_then_decays_to_a_tenth() -> None:
    s = PretrainSettings(steps=200, lr=1.0)
    lrs = [paper_pretrain.lr_at(k, s) for k in range(200)]
    assert lrs[0] < lrs[9] == 1.0
    assert all(x >= y for x, y in itertools.pairwise(lrs[10:]))
    assert 0.1 <= lrs[-1] < 0.11
