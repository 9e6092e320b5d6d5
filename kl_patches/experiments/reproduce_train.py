"""One training run of the miniature reproduction, measured exactly at every step.

The toy task: sequences of ``T`` tokens from a vocabulary of ``V``; the reward of a sequence is
the fraction of positions that match a fixed random target sequence (partial credit, in [0, 1]).
The reference policy is a random tabular policy (or a random tiny transformer); training starts
AT the reference, as RL fine-tuning does. Every one of the V^T sequences is enumerated, so the
policy's log-probabilities of all sequences are one differentiable ``[N, T]`` tensor: samples are
drawn from it exactly, and the expected reward, KL(pi || pi_ref), KL(pi_ref || pi) and the
regularised objective E[R] - beta * KL(pi || pi_ref) are exact weighted sums, not estimates.

The update is REINFORCE with a leave-one-out baseline over the batch. Every KL number comes from
:mod:`kl_patches.core`: ``reward_penalty`` (on the sampling policy's log-probs) is subtracted
from the reward BEFORE the baseline, ``loss_term`` is added to the loss. With
``updates_per_batch > 1`` (off-policy) a batch of ``updates_per_batch * batch_size`` samples is
drawn once and consumed in that many mini-batch updates; the policy-gradient term then carries the
token ratio pi/pi_old with PPO clipping (as the libraries do), and the loss-side KL gets
pi/pi_old only when the configuration asks for ``importance_weighting='token'``. With one update
per batch the ratio is 1 and the gradient is plain on-policy REINFORCE.

``importance_weighting='sequence'`` needs the current policy in its penalty, so that penalty is
recomputed at every update for the whole sampled batch (``core.reward_penalty`` with the
sampling policy as ``behaviour_logp`` and ``trainer_ratio=True``, the PPO-ratio form), a
per-token value, and the leave-one-out baseline is taken per position over the batch. At the
first update of a batch every weight is 1 and it equals the unweighted update.

The exact optimum of the regularised objective is known in closed form on this task:
pi*(y) ~ pi_ref(y) exp(R(y) / beta), with value beta * log E_ref[exp(R / beta)].
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import nn

from kl_patches import core
from kl_patches.config import KLConfig
from kl_patches.oracle import Enumeration, TabularPolicy

MODELS = ("tabular", "transformer")


@dataclass(frozen=True)
class ToyTask:
    """The enumerable task: sizes, the reference policy and the reward."""

    vocab: int = 3
    """V: vocabulary size."""
    length: int = 4
    """T: sequence length (fixed)."""
    model: str = "tabular"
    """``tabular`` (one softmax per prefix) or ``transformer`` (a tiny causal transformer)."""
    ref_scale: float = 1.0
    """Spread of the reference policy's logits (larger: a more peaked reference)."""
    seed: int = 0
    """Seed of the task instance (reference policy and reward target); runs differ only in
    their own sampling seed, so the spread over seeds is the training noise."""

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"ToyTask.model={self.model!r} is not valid; choose one of {MODELS}")
        if self.vocab < 2 or self.length < 1 or self.vocab**self.length > 20000:
            raise ValueError(
                f"ToyTask: need vocab >= 2, length >= 1 and vocab**length <= 20000 (every "
                f"sequence is enumerated); got vocab={self.vocab}, length={self.length}"
            )


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings shared by every configuration of a comparison."""

    steps: int = 200
    """Number of optimizer updates."""
    batch_size: int = 16
    """Sequences per update (the leave-one-out group)."""
    lr: float = 0.05
    """Adam learning rate."""
    updates_per_batch: int = 1
    """1: on-policy. k > 1: k mini-batch updates per sampled batch (off-policy after the first)."""
    clip: float = 0.2
    """PPO clip range of the policy-gradient ratio (used only off-policy)."""


@dataclass
class RunResult:
    """Exact metrics of one run, one entry per step (index 0 = before training)."""

    name: str
    """Label of the configuration (see :mod:`kl_patches.experiments.reproduce`)."""
    config: KLConfig
    """The KL configuration trained with (its coef is beta)."""
    seed: int
    """Seed of the sampling (the task instance is fixed by ``ToyTask.seed``)."""
    reward: list[float] = field(default_factory=list)
    """E_pi[R], exact."""
    reverse_kl: list[float] = field(default_factory=list)
    """KL(pi || pi_ref) at sequence level, exact."""
    forward_kl: list[float] = field(default_factory=list)
    """KL(pi_ref || pi) at sequence level, exact."""
    optimum: dict[float, float] = field(default_factory=dict)
    """beta -> max over policies of E[R] - beta * KL (closed form on this task)."""

    def objective(self, beta: float) -> list[float]:
        """E[R] - beta * KL(pi || pi_ref) at every step."""
        return [r - beta * k for r, k in zip(self.reward, self.reverse_kl, strict=True)]


# ---------------------------------------------------------------------------- policies
class ExactPolicy(nn.Module):
    """A policy small enough to give the log-probs of every sequence at once."""

    def all_token_logp(self) -> torch.Tensor:
        """[N, T] log pi(y_t | y_<t) of every enumerated sequence (differentiable)."""
        raise NotImplementedError


class TabularModel(ExactPolicy):
    """A logits table, one row per prefix; all sequences' log-probs via :class:`Enumeration`."""

    def __init__(self, enum: Enumeration, logits: torch.Tensor) -> None:
        super().__init__()
        self.enum = enum
        self.logits = nn.Parameter(logits.detach().clone())

    def all_token_logp(self) -> torch.Tensor:
        """[N, T] log pi(y_t | y_<t) of every enumerated sequence."""
        return self.enum.token_logp(self.logits)


class TinyTransformer(ExactPolicy):
    """A one-layer causal transformer over the enumerated sequences (BOS token = ``vocab``)."""

    sequences: torch.Tensor
    inputs: torch.Tensor
    causal: torch.Tensor

    def __init__(self, sequences: torch.Tensor, vocab: int, width: int = 32) -> None:
        super().__init__()
        n, t = sequences.shape
        self.register_buffer("sequences", sequences)
        bos = torch.full((n, 1), vocab, dtype=torch.long)
        self.register_buffer("inputs", torch.cat([bos, sequences[:, :-1]], dim=1))
        self.embed = nn.Embedding(vocab + 1, width)
        self.pos = nn.Parameter(0.1 * torch.randn(t, width))
        self.block = nn.TransformerEncoderLayer(
            width, nhead=2, dim_feedforward=2 * width, dropout=0.0, batch_first=True
        )
        self.head = nn.Linear(width, vocab)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(t))

    def all_token_logp(self) -> torch.Tensor:
        """[N, T] log pi(y_t | y_<t) of every enumerated sequence."""
        h = self.embed(self.inputs) + self.pos
        h = self.block(h, src_mask=self.causal, is_causal=True)
        lsm = torch.log_softmax(self.head(h), dim=-1)
        return lsm.gather(-1, self.sequences.unsqueeze(-1)).squeeze(-1)


@dataclass
class Problem:
    """A task instance: the reference, the policy to train and the reward of each sequence."""

    enum: Enumeration
    """Every sequence of the task (and the tabular prefix layout)."""
    model: ExactPolicy
    """The policy to train; starts equal to the reference."""
    ref_model: ExactPolicy
    """A frozen copy of the initial policy: the reference."""
    ref_logp: torch.Tensor
    """[N, T] reference log-probs of every sequence (fixed)."""
    reward: torch.Tensor
    """[N] reward of every sequence."""


def make_toy(task: ToyTask) -> Problem:
    """Build the reference policy, the policy (a copy of it) and the reward of ``task``."""
    gen = torch.Generator().manual_seed(task.seed)
    enum = Enumeration(TabularPolicy(task.vocab, task.length))
    target = torch.randint(task.vocab, (task.length,), generator=gen)
    reward = (enum.sequences == target).double().mean(-1)
    model: ExactPolicy
    if task.model == "tabular":
        ref_logits = enum.policy.random_logits(gen, scale=task.ref_scale)
        model = TabularModel(enum, ref_logits)
    else:
        with torch.random.fork_rng():
            torch.manual_seed(task.seed)
            model = TinyTransformer(enum.sequences, task.vocab).double()
        with torch.no_grad():  # a peaked, non-uniform reference
            model.head.weight.mul_(4.0 * task.ref_scale)
    ref_model = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        ref_logp = ref_model.all_token_logp()
    return Problem(enum=enum, model=model, ref_model=ref_model, ref_logp=ref_logp, reward=reward)


def optimum(problem: Problem, beta: float) -> float:
    """max over pi of E[R] - beta * KL(pi || pi_ref) = beta * log E_ref[exp(R / beta)]."""
    ref_seq = problem.ref_logp.sum(-1)
    if beta == 0:
        return float(problem.reward.max())
    return beta * float(torch.logsumexp(ref_seq + problem.reward / beta, dim=0))


def exact_metrics(problem: Problem, all_logp: torch.Tensor) -> tuple[float, float, float]:
    """(E[R], KL(pi || pi_ref), KL(pi_ref || pi)) from every sequence's token log-probs."""
    lp, lr = all_logp.detach().sum(-1), problem.ref_logp.sum(-1)
    p, q = lp.exp(), lr.exp()
    return (
        float((p * problem.reward).sum()),
        float((p * (lp - lr)).sum()),
        float((q * (lr - lp)).sum()),
    )


# ---------------------------------------------------------------------------- the update
class Adam:
    """Plain Adam (Kingma & Ba, default betas, no weight decay), the same update rule as
    ``torch.optim.Adam``; written out because the first ``torch.optim`` optimizer of a process
    imports ``torch._dynamo``, seconds that would dominate these small runs."""

    def __init__(self, params: list[nn.Parameter], lr: float) -> None:
        self.params, self.lr, self.t = params, lr, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def zero_grad(self) -> None:
        """Drop the gradients."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
        """One update from the current gradients."""
        self.t += 1
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            if p.grad is None:
                continue
            m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            denom = (v / (1 - beta2**self.t)).sqrt_().add_(eps)
            p.addcdiv_(m, denom, value=-self.lr / (1 - beta1**self.t))


def policy_loss(
    config: KLConfig,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor,
    advantage: torch.Tensor,
    clip: float,
) -> torch.Tensor:
    """Policy-gradient surrogate plus the KL loss term, for one mini-batch ``[B, T]``.

    ``advantage`` already contains the reward-side KL penalty (subtracted before the baseline):
    ``[B]`` (one value per sequence) or ``[B, T]`` (one per token).
    """
    mask = torch.ones_like(logp, dtype=torch.bool)
    ratio = torch.exp(logp - old_logp)
    adv = advantage.unsqueeze(-1) if advantage.dim() == 1 else advantage
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)
    pg = -surrogate.sum(-1).mean()
    return pg + core.loss_term(logp, ref_logp, mask, config, old_logp=old_logp)


def leave_one_out(shaped: torch.Tensor) -> torch.Tensor:
    """shaped_i - mean_{j != i} shaped_j (the RLOO advantage), over the first dimension."""
    n = shaped.shape[0]
    return shaped - (shaped.sum(0) - shaped) / (n - 1)


def batch_advantage(
    config: KLConfig,
    logp_now: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor,
    reward: torch.Tensor,
) -> torch.Tensor:
    """Leave-one-out advantage of a sampled batch, the reward-side KL subtracted first.

    Unweighted configs: ``[B]``, the penalty from the sampling policy's log-probs ``old_logp``
    (fixed for the batch). ``importance_weighting='sequence'``: ``[B, T]``, the prefix-weighted
    penalty from the current log-probs ``logp_now`` (PPO-ratio form), baselined per position.
    """
    mask = torch.ones_like(old_logp, dtype=torch.bool)
    if config.importance_weighting == "sequence":
        penalty = core.reward_penalty(
            logp_now.detach(), ref_logp, mask, config, behaviour_logp=old_logp, trainer_ratio=True
        )
        return leave_one_out(reward.unsqueeze(-1) - penalty)
    return leave_one_out(reward - core.reward_penalty(old_logp, ref_logp, mask, config))


def train(
    name: str,
    config: KLConfig,
    task: ToyTask,
    settings: TrainSettings,
    seed: int,
    betas: tuple[float, ...] = (),
) -> RunResult:
    """Train ``config`` from the reference; exact metrics before every update and at the end.

    ``seed`` seeds the sampling; ``betas`` lists the coefficients whose optimum is recorded.
    Runs on one torch thread (restored after): the tensors are tiny, and intra-op threads only
    add contention.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(name, config, task, settings, seed, betas)
    finally:
        torch.set_num_threads(threads)


def _train(
    name: str,
    config: KLConfig,
    task: ToyTask,
    settings: TrainSettings,
    seed: int,
    betas: tuple[float, ...],
) -> RunResult:
    problem = make_toy(task)
    model = problem.model
    opt = Adam(list(model.parameters()), lr=settings.lr)
    gen = torch.Generator().manual_seed(10_000 + seed)
    result = RunResult(name=name, config=config, seed=seed)
    result.optimum = {b: optimum(problem, b) for b in (*betas, config.coef)}
    k, bsz = settings.updates_per_batch, settings.batch_size
    if k < 1 or bsz < 2:
        raise ValueError(f"need updates_per_batch >= 1 and batch_size >= 2; got {k}, {bsz}")
    step = 0
    advantage = idx = old_logp = None
    while True:
        all_logp = model.all_token_logp()
        er, rkl, fkl = exact_metrics(problem, all_logp)
        result.reward.append(er)
        result.reverse_kl.append(rkl)
        result.forward_kl.append(fkl)
        if step == settings.steps:
            break
        if step % k == 0:  # sample a fresh batch from the current policy
            probs = all_logp.detach().sum(-1).exp()
            idx = torch.multinomial(probs, k * bsz, replacement=True, generator=gen)
            old_logp = all_logp.detach()[idx]
            advantage = batch_advantage(
                config, old_logp, old_logp, problem.ref_logp[idx], problem.reward[idx]
            )
        elif config.importance_weighting == "sequence":  # its penalty follows the policy
            assert idx is not None and old_logp is not None
            advantage = batch_advantage(
                config, all_logp[idx], old_logp, problem.ref_logp[idx], problem.reward[idx]
            )
        assert idx is not None and old_logp is not None and advantage is not None
        part = slice((step % k) * bsz, (step % k + 1) * bsz)
        sel = idx[part]
        loss = policy_loss(
            config,
            all_logp[sel],
            old_logp[part],
            problem.ref_logp[sel],
            advantage[part],
            settings.clip,
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
    return result
