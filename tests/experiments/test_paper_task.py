"""The paper miniature's task family: answers checkable, splits disjoint where they must be."""

from __future__ import annotations

import random

import pytest

from kl_patches.experiments import paper_task as task


def test_operations_on_hand_made_inputs() -> None:
    assert task.apply_op("C", "3141") == "3141"
    assert task.apply_op("R", "3141") == "1413"
    assert task.apply_op("I", "3149") == "4250"
    assert task.answer_of(task.prompt_of("R", "907")) == "709"


@pytest.mark.parametrize("op", task.OPS)
def test_answers_invert_where_the_operation_has_an_inverse(op: str) -> None:
    rng = random.Random(0)
    for _ in range(50):
        digits = "".join(rng.choice(task.DIGITS) for _ in range(rng.randint(1, 8)))
        ans = task.apply_op(op, digits)
        assert len(ans) == len(digits)
        if op == "R":
            assert task.apply_op("R", ans) == digits
        if op == "I":  # ten increments is the identity
            x = digits
            for _ in range(10):
                x = task.apply_op("I", x)
            assert x == digits


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="choose one of"):
        task.apply_op("X", "12")
    with pytest.raises(ValueError, match="digits"):
        task.apply_op("C", "1a")
    with pytest.raises(ValueError, match="not a task prompt"):
        task.parse_prompt("R12")


def test_correctness_needs_the_exact_answer_and_the_end() -> None:
    prompt = task.prompt_of("R", "123")
    assert task.is_correct(prompt, "321", ended=True)
    assert not task.is_correct(prompt, "321", ended=False)
    assert not task.is_correct(prompt, "3210", ended=True)
    assert not task.is_correct(prompt, "123", ended=True)


def test_parts_draw_only_their_operation_and_lengths() -> None:
    rng = random.Random(1)
    part = task.Part("I", (3, 5))
    for _ in range(100):
        op, digits = task.parse_prompt(part.sample(rng))
        assert op == "I" and len(digits) in (3, 5)
    assert part.name == "I:3-5"


def test_default_split_holds_out_what_it_says() -> None:
    split = task.Split()
    domain = split.domain
    assert split.ood_length.op == domain.op
    assert not set(split.ood_length.lengths) & set(domain.lengths)
    assert all(p.op != domain.op for p in split.ood_ops)
    # the reference sees every evaluated part in pre-training (the held-out lengths rarely)
    for part in (domain, split.ood_length, *split.ood_ops):
        seen = {n for p in split.pretrain if p.op == part.op for n in p.lengths}
        assert set(part.lengths) <= seen
    rare = [
        p
        for p in split.pretrain
        if p.op == domain.op and set(p.lengths) & set(split.ood_length.lengths)
    ]
    assert rare and all(p.weight < 1 for p in rare)


def test_eval_and_train_prompts_are_fixed_by_their_seed() -> None:
    split = task.Split()
    a = task.eval_prompts(split, 30)
    assert a == task.eval_prompts(split, 30)
    assert set(a) == {"id", "ood_length", "ood_ops"} and all(len(v) == 30 for v in a.values())
    ops = {task.parse_prompt(p)[0] for p in a["ood_ops"]}
    assert ops == {p.op for p in split.ood_ops}
    t = task.train_prompts(split, 40, seed=3)
    assert t == task.train_prompts(split, 40, seed=3) != task.train_prompts(split, 40, seed=4)
    assert all(len(task.parse_prompt(p)[1]) in split.domain.lengths for p in t)
