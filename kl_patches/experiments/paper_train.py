"""One RL fine-tuning run of the paper-shaped miniature, through TRL's real GRPOTrainer.

The policy starts at the pre-trained reference (:mod:`.paper_pretrain`) and is trained on the
in-domain prompts with a verifiable 0/1 reward (exactly the answer, then the end token).
Configurations with a kl-patches KL run :class:`kl_patches.trl.GRPOTrainer` (TRL's trainer with
the adapter's hooks); ``native`` configurations run ``trl.GRPOTrainer`` itself, unpatched:
``k3-in-loss`` is TRL's own KL term (``beta``, with ``use_bias_correction_kl=False``, the
classic k3 of GRPO/DeepSeekMath that the paper studies) and ``none`` is ``beta=0``.

Deviations from TRL's defaults, the same for every configuration, so that every placement
regularises the paper's objective E[R] - beta * KL(pi || pi_ref) with sequence sums:
``loss_type="luspo"`` (per-sequence token sum, then the mean over sequences; on-policy this is
REINFORCE on the whole sequence, and TRL's k3 term is a per-sequence sum as the adapter's
``loss_aggregation="sum"``), ``scale_rewards="none"`` (no std division, which would rescale a
reward-side beta per group), a constant learning rate, fp32 on CPU, dropout off. One update per
generation batch (on-policy), as in the paper's main experiments.

Every ``eval_every`` updates a callback samples the fixed evaluation prompts
(:mod:`.paper_eval`); the last evaluation uses more samples. A run that raises (a non-finite KL,
for example) is recorded as diverged with its error, not re-raised.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kl_patches.config import KLConfig

from .paper_eval import Estimate, evaluate
from .paper_task import Split, eval_prompts, is_correct, train_prompts

NATIVE = ("k3-in-loss", "none")
"""Configurations run by unpatched ``trl.GRPOTrainer`` (TRL's own KL, or none)."""


@dataclass(frozen=True)
class RLSettings:
    """RL settings shared by every configuration of the comparison."""

    steps: int = 200
    """Optimizer updates (one per generation batch)."""
    prompts_per_step: int = 8
    """Distinct prompts per update."""
    group: int = 8
    """Completions per prompt (the GRPO group); the batch is prompts x group."""
    lr: float = 3e-4
    """Adam learning rate (constant). The pilots: at 1e-4 the policy barely leaves the
    reference in 300 updates (KL about 0.2, every configuration alike); at 1e-3 it collapses
    whatever the KL; 3e-4 moves it enough for the KL term to matter."""
    max_grad_norm: float = 1.0
    """Gradient clipping (TRL's default)."""
    max_completion: int = 10
    """Longest completion in tokens (the longest answer plus the end token fits)."""
    eval_every: int = 50
    """Updates between evaluations."""
    eval_prompts: int = 128
    """Prompts per evaluation group (a fixed set)."""
    final_repeats: int = 8
    """Samples per prompt at the final evaluation (smaller standard errors)."""
    device: str = "cpu"
    """``cpu`` or ``cuda``."""
    bf16: bool = False
    """Train in bfloat16 autocast (GPU only)."""


@dataclass
class RunRecord:
    """What one run measured; JSON-serialisable through :meth:`as_dict`."""

    name: str
    """Configuration label (see :data:`kl_patches.experiments.paper.GRID`)."""
    beta: float
    """The KL coefficient (0 for ``none``)."""
    seed: int
    """Seed of the run (sampling, data order)."""
    steps: list[int] = field(default_factory=list)
    """Update counts at which the evaluations ran (0 = the reference)."""
    evals: list[dict[str, Any]] = field(default_factory=list)
    """One entry per evaluation: accuracies, KLs and entropy as ``{mean, se, n}``."""
    train_reward: list[float] = field(default_factory=list)
    """TRL's logged mean task reward of each update."""
    error: str | None = None
    """The exception that stopped the run, if any."""
    seconds: float = 0.0
    """Wall time of the run."""

    def as_dict(self) -> dict[str, Any]:
        """Plain-dict form (for JSON lines)."""
        return asdict(self)


def kl_config(name: str, beta: float) -> KLConfig | None:
    """The KLConfig of a patched configuration; None for the native ones."""
    if name in NATIVE:
        return None
    if name == "k2-in-loss (sequence)":
        return KLConfig.parse("k2-in-loss", coef=beta, granularity="sequence")
    return KLConfig.parse(name, coef=beta)


def _flatten(result: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {f"acc_{g}": e.as_dict() for g, e in result["acc"].items()}
    for key in ("kl_k1", "kl_full", "entropy"):
        out[key] = result[key].as_dict()
    return out


def reward_fn(prompts: list[str], completion_ids: list[list[int]], **kw: Any) -> list[float]:
    """The verifiable reward: 1 for exactly the answer followed by the end token, else 0."""
    tokenizer, eos = kw["_tokenizer"], kw["_eos"]
    out = []
    for p, ids in zip(prompts, completion_ids, strict=True):
        ended = eos in ids
        text = tokenizer.decode(ids[: ids.index(eos)] if ended else ids)
        out.append(1.0 if is_correct(p, text, ended) else 0.0)
    return out


def train_run(
    name: str,
    beta: float,
    seed: int,
    reference: Path,
    split: Split,
    settings: RLSettings,
    workdir: Path | None = None,
) -> RunRecord:
    """Fine-tune the reference with configuration ``name`` at ``beta``; never raises on a
    diverging run (its error is recorded)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback

    from kl_patches.trl import GRPOTrainer

    record = RunRecord(name=name, beta=beta if name != "none" else 0.0, seed=seed)
    start = time.monotonic()
    device = settings.device
    tokenizer = AutoTokenizer.from_pretrained(reference)
    policy = AutoModelForCausalLM.from_pretrained(reference, dtype=torch.float32)
    ref_model = AutoModelForCausalLM.from_pretrained(reference, dtype=torch.float32).to(device)
    ref_model.eval().requires_grad_(False)
    groups = eval_prompts(split, settings.eval_prompts)
    max_new = settings.max_completion

    def run_eval(model: Any, step: int, final: bool = False) -> None:
        res = evaluate(
            model,
            ref_model,
            tokenizer,
            groups,
            max_new,
            seed=1000 * seed + step,
            repeats=settings.final_repeats if final else 1,
        )
        record.steps.append(step)
        record.evals.append(_flatten(res))

    class EvalCallback(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            step = state.global_step
            if step % settings.eval_every == 0 and step < settings.steps:
                run_eval(kw["model"], step)

    def reward(prompts: list[str], completion_ids: list[list[int]], **kw: Any) -> list[float]:
        return reward_fn(prompts, completion_ids, _tokenizer=tokenizer, _eos=tokenizer.eos_token_id)

    reward.__name__ = "exact_match"
    n_prompts = settings.steps * settings.prompts_per_step
    data = Dataset.from_dict({"prompt": train_prompts(split, n_prompts, seed=10_000 + seed)})
    config = kl_config(name, beta)
    with tempfile.TemporaryDirectory(dir=workdir) as out_dir:
        args = trl.GRPOConfig(
            output_dir=out_dir,
            per_device_train_batch_size=settings.prompts_per_step * settings.group,
            num_generations=settings.group,
            max_completion_length=max_new,
            learning_rate=settings.lr,
            lr_scheduler_type="constant",
            max_grad_norm=settings.max_grad_norm,
            max_steps=settings.steps,
            loss_type="luspo",
            scale_rewards="none",
            beta=beta if name == "k3-in-loss" else 0.0,
            use_bias_correction_kl=False,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            disable_dropout=True,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            use_cpu=device == "cpu",
            bf16=settings.bf16,
            fp16=False,
            gradient_checkpointing=False,
            dataloader_num_workers=0,
            seed=seed,
            disable_tqdm=True,
            shuffle_dataset=False,
        )
        kwargs: dict[str, Any] = {
            "model": policy,
            "reward_funcs": reward,
            "args": args,
            "train_dataset": data,
            "processing_class": tokenizer,
            "callbacks": [EvalCallback()],
        }
        try:
            trainer = (
                trl.GRPOTrainer(**kwargs) if config is None else GRPOTrainer(**kwargs, kl=config)
            )
            trainer.remove_callback(PrinterCallback)  # the metrics go to the record
            run_eval(trainer.model, 0)
            trainer.train()
            record.train_reward = [
                float(h["reward"]) for h in trainer.state.log_history if "reward" in h
            ]
            run_eval(trainer.model, settings.steps, final=True)
        except Exception as err:  # a diverging run is a result, not a crash of the sweep
            record.error = f"{type(err).__name__}: {err}"[:500]
    record.seconds = time.monotonic() - start
    return record


def final(record: RunRecord) -> dict[str, Any] | None:
    """The final evaluation of a finished run (None if it stopped early)."""
    if record.error is not None or not record.steps or record.steps[-1] == 0:
        return None
    return record.evals[-1]


def is_finite(value: float) -> bool:
    """True for a finite float."""
    return isinstance(value, float) and math.isfinite(value)


__all__ = ["NATIVE", "Estimate", "RLSettings", "RunRecord", "final", "kl_config", "train_run"]
