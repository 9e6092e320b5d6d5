"""Exact gradients by enumeration of a tabular autoregressive policy's every sequence.

The policy has one softmax over a vocabulary of ``V`` tokens per prefix (1 + V + ... + V^(T-1)
prefixes) and generates sequences of fixed length ``T``; a reference policy has the same form.
All V^T sequences are enumerated, so every expectation is an exact weighted sum and every
expected gradient is exact up to float64 rounding.

Two independent routes to a gradient are kept apart on purpose:
  * :meth:`Enumeration.config_gradient` runs the *implementation*: :mod:`kl_patches.core`'s
    ``reward_penalty`` and ``loss_term`` inside a REINFORCE surrogate, weighted by the exact
    sequence probabilities;
  * :meth:`Enumeration.basis_gradient` differentiates the *definitions* (KL divergences over the
    enumerated distributions, prefix-wise KLs) directly, without touching :mod:`kl_patches.core`.
The tests check that the first equals the combination :func:`kl_patches.theory.verdict` names.

Off-policy, samples come from a behaviour policy mu != pi, and every expectation is a sum over
all sequences weighted by mu(y):
  * :meth:`Enumeration.off_policy_gradient` is the implementation route: core's penalty inside
    a trainer-style surrogate, REINFORCE (sum_t (P_t - R) log pi_t) or PPO-ratio
    (sum_t ratio_t (P_t - R), ratio_t = pi_t / mu_t, inside the clip range) form;
  * :meth:`Enumeration.prefix_weighted_gradient` is the derived expression of
    ``importance_weighting="sequence"`` (clipped or not), summed over prefixes with the measure
    min(pi, c * mu), written from the definitions without :mod:`kl_patches.core`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from kl_patches import core
from kl_patches.config import KLConfig
from kl_patches.theory import BASES, Term, expected_terms


@dataclass(frozen=True)
class TabularPolicy:
    """Logits of a tabular autoregressive policy: one row of ``V`` logits per prefix."""

    vocab: int
    """V: vocabulary size."""
    length: int
    """T: sequence length (fixed; no end-of-sequence token)."""

    @property
    def num_prefixes(self) -> int:
        """1 + V + ... + V^(T-1)."""
        return sum(self.vocab**t for t in range(self.length))

    def random_logits(
        self, generator: torch.Generator, scale: float = 1.0, dtype: torch.dtype = torch.float64
    ) -> torch.Tensor:
        """Random logits ``[num_prefixes, V]`` drawn N(0, scale^2)."""
        return scale * torch.randn(self.num_prefixes, self.vocab, generator=generator, dtype=dtype)


class Enumeration:
    """Every sequence of a :class:`TabularPolicy`, with exact expectations over them."""

    def __init__(self, policy: TabularPolicy) -> None:
        self.policy = policy
        v, t = policy.vocab, policy.length
        n = v**t
        seqs = torch.zeros(n, t, dtype=torch.long)
        for i in range(t):
            seqs[:, i] = (torch.arange(n) // v ** (t - 1 - i)) % v
        offsets = [sum(v**k for k in range(d)) for d in range(t)]
        prefix = torch.zeros(n, t, dtype=torch.long)
        for d in range(t):
            code = torch.zeros(n, dtype=torch.long)
            for i in range(d):
                code = code * v + seqs[:, i]
            prefix[:, d] = offsets[d] + code
        self.sequences = seqs
        """[N, T] token ids of every sequence (N = V^T)."""
        self.prefix_ids = prefix
        """[N, T] index of the prefix (row of the logits table) each token is drawn from."""
        parent = torch.full((policy.num_prefixes,), -1, dtype=torch.long)
        last = torch.zeros(policy.num_prefixes, dtype=torch.long)
        for d in range(1, t):
            for k in range(v**d):
                parent[offsets[d] + k] = offsets[d - 1] + k // v
                last[offsets[d] + k] = k % v
        self._parent, self._last, self._offsets = parent, last, offsets

    # ------------------------------------------------------------------ probabilities
    def token_logp(self, logits: torch.Tensor) -> torch.Tensor:
        """[N, T] log pi(y_t | y_<t) of every enumerated sequence."""
        lsm = torch.log_softmax(logits, dim=-1)
        return lsm[self.prefix_ids, self.sequences]

    def prefix_prob(self, logits: torch.Tensor) -> torch.Tensor:
        """[num_prefixes] probability that the policy reaches each prefix."""
        probs = torch.softmax(logits, dim=-1)
        out = [torch.ones((), dtype=logits.dtype)]
        for idx in range(1, self.policy.num_prefixes):
            out.append(out[int(self._parent[idx])] * probs[self._parent[idx], self._last[idx]])
        return torch.stack(out)

    def reverse_kl(self, logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
        """Exact sequence-level KL(pi || pi_ref)."""
        lp, lr = self.token_logp(logits).sum(-1), self.token_logp(ref_logits).sum(-1)
        return (lp.exp() * (lp - lr)).sum()

    def forward_kl(self, logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
        """Exact sequence-level KL(pi_ref || pi)."""
        lp, lr = self.token_logp(logits).sum(-1), self.token_logp(ref_logits).sum(-1)
        return (lr.exp() * (lr - lp)).sum()

    # ------------------------------------------------------------------ the definitions
    def basis_gradient(
        self, basis: str, logits: torch.Tensor, ref_logits: torch.Tensor
    ) -> torch.Tensor:
        """Exact gradient (w.r.t. the logits table) of one basis of :mod:`kl_patches.theory`."""
        theta = logits.detach().clone().requires_grad_(True)
        ref = ref_logits.detach()
        objective = self._basis_objective(basis, theta, ref)
        (grad,) = torch.autograd.grad(objective, theta)
        return grad

    def _basis_objective(self, basis: str, theta: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        if basis == "reverse_kl":
            return self.reverse_kl(theta, ref)
        if basis == "forward_kl":
            return self.forward_kl(theta, ref)
        lsm, ref_lsm = torch.log_softmax(theta, -1), torch.log_softmax(ref, -1)
        reach = self.prefix_prob(theta).detach()  # prefixes held fixed: token-level quantities
        if basis == "forward_kl_token":
            per_prefix = (ref_lsm.exp() * (ref_lsm - lsm)).sum(-1)
            return (reach * per_prefix).sum()
        if basis == "reverse_kl_partial":
            per_prefix = (lsm.exp() * (lsm - ref_lsm)).sum(-1)
            return (reach * per_prefix).sum()
        if basis == "k2_own_score":
            half_sq = (0.5 * (lsm - ref_lsm) ** 2).detach()
            return (reach * (lsm.exp() * half_sq).sum(-1)).sum()
        seq_prob = self.token_logp(theta).sum(-1).exp()
        delta = (self.token_logp(theta) - self.token_logp(ref)).detach()
        if basis == "k2_score":
            return (seq_prob * (0.5 * delta**2).sum(-1)).sum()
        if basis == "k2_sequence_score":
            return (seq_prob * 0.5 * delta.sum(-1) ** 2).sum()
        raise ValueError(f"unknown basis {basis!r}; valid: {list(BASES)}")

    def basis_gradients(
        self, logits: torch.Tensor, ref_logits: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Every basis gradient at once (compute once, reuse for many configurations)."""
        return {b: self.basis_gradient(b, logits, ref_logits) for b in BASES}

    def terms_gradient(
        self,
        terms: tuple[Term, ...],
        logits: torch.Tensor,
        ref_logits: torch.Tensor,
        bases: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Sum of basis gradients with the terms' coefficients (1/T for length-normalised)."""
        bases = self.basis_gradients(logits, ref_logits) if bases is None else bases
        total = torch.zeros_like(logits)
        for term in terms:
            scale = term.coef / (self.policy.length if term.length_normalised else 1)
            total = total + scale * bases[term.basis]
        return total

    # ------------------------------------------------------------------ the implementation
    def per_sequence_surrogate(
        self,
        config: KLConfig,
        theta: torch.Tensor,
        ref_logits: torch.Tensor,
        reward: torch.Tensor | None = None,
        token_logp: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """[N] REINFORCE surrogate of each sequence, built from :mod:`kl_patches.core`.

        ``-(R - reward_penalty) * sum_t logp + loss_term``, each sequence as its own batch of one
        (``reward_to_go`` charges token t its own penalty). Its gradient, weighted by the
        detached sequence probabilities, is the configuration's exact expected gradient.
        """
        logp = self.token_logp(theta) if token_logp is None else token_logp
        ref_logp = self.token_logp(ref_logits).detach()
        mask = torch.ones_like(logp, dtype=torch.bool)
        r = torch.zeros(logp.shape[0], dtype=logp.dtype) if reward is None else reward
        penalty = core.reward_penalty(
            logp, ref_logp, mask, config, behaviour_logp=logp.detach()
        )  # on-policy: the sampler is the policy itself, every prefix weight is 1
        if penalty.dim() == 2:
            pg = -((r.unsqueeze(-1) - penalty) * logp).sum(-1)
        else:
            pg = -(r - penalty) * logp.sum(-1)

        def one(lp: torch.Tensor, rl: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            return core.loss_term(lp[None], rl[None], m[None], config, old_logp=lp[None].detach())

        loss = torch.func.vmap(one)(logp, ref_logp, mask)
        return pg + loss

    def config_gradient(
        self,
        config: KLConfig,
        logits: torch.Tensor,
        ref_logits: torch.Tensor,
        reward: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Exact expected gradient of the surrogate loss for ``config`` (on-policy)."""
        theta = logits.detach().clone().requires_grad_(True)
        weights = self.token_logp(theta).sum(-1).exp().detach()
        surrogate = self.per_sequence_surrogate(config, theta, ref_logits, reward)
        (grad,) = torch.autograd.grad((weights * surrogate).sum(), theta)
        return grad

    def per_sequence_gradients(
        self, config: KLConfig, logits: torch.Tensor, ref_logits: torch.Tensor
    ) -> torch.Tensor:
        """[N, *logits.shape]: the single-sample KL-gradient estimate of every sequence."""
        n = self.sequences.shape[0]
        theta = logits.detach().unsqueeze(0).repeat(n, 1, 1).requires_grad_(True)
        lsm = torch.log_softmax(theta, dim=-1)
        rows = torch.arange(n).unsqueeze(-1).expand_as(self.prefix_ids)
        logp = lsm[rows, self.prefix_ids, self.sequences]
        surrogate = self.per_sequence_surrogate(config, theta, ref_logits, token_logp=logp)
        (grad,) = torch.autograd.grad(surrogate.sum(), theta)
        return grad

    # ------------------------------------------------------------------ off-policy
    def off_policy_surrogate(
        self,
        config: KLConfig,
        theta: torch.Tensor,
        ref_logits: torch.Tensor,
        behaviour_logits: torch.Tensor,
        trainer_ratio: bool,
        reward: torch.Tensor | None = None,
        token_logp: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """[N] trainer surrogate of each sequence under samples from the behaviour policy mu.

        The penalty is :func:`kl_patches.core.reward_penalty` with ``logp`` the current policy
        and ``behaviour_logp`` = mu: prefix-weighted for ``importance_weighting="sequence"``,
        else computed from mu's log-probs as the libraries do (once, at sampling time). A
        sequence-shaped ``[N]`` penalty is charged to every token. REINFORCE form
        (``trainer_ratio=False``): sum_t (P_t - R) log pi_t; PPO-ratio form: sum_t ratio_t (P_t -
        R) with ratio_t = pi_t / mu_t (the unclipped branch of PPO's surrogate). Plus
        ``loss_term`` with ``old_logp`` = mu. Weighted by mu(y), its gradient is the exact
        expected gradient of that trainer.
        """
        logp = self.token_logp(theta) if token_logp is None else token_logp
        ref_logp = self.token_logp(ref_logits).detach()
        mu_logp = self.token_logp(behaviour_logits).detach()
        mask = torch.ones_like(logp, dtype=torch.bool)
        r = torch.zeros(logp.shape[0], dtype=logp.dtype) if reward is None else reward
        penalty = core.reward_penalty(
            logp.detach(),
            ref_logp,
            mask,
            config,
            behaviour_logp=mu_logp,
            trainer_ratio=trainer_ratio,
        )
        if penalty.dim() == 1:
            penalty = penalty.unsqueeze(-1).expand_as(logp)
        advantage = r.unsqueeze(-1) - penalty
        if trainer_ratio:
            pg = -(torch.exp(logp - mu_logp) * advantage).sum(-1)
        else:
            pg = -(advantage * logp).sum(-1)

        def one(lp: torch.Tensor, rl: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
            return core.loss_term(lp[None], rl[None], mask[:1], config, old_logp=old[None])

        loss = torch.func.vmap(one)(logp, ref_logp, mu_logp)
        return pg + loss

    def off_policy_gradient(
        self,
        config: KLConfig,
        logits: torch.Tensor,
        ref_logits: torch.Tensor,
        behaviour_logits: torch.Tensor,
        trainer_ratio: bool = False,
        reward: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Exact expected gradient of the trainer surrogate under samples from mu."""
        theta = logits.detach().clone().requires_grad_(True)
        weights = self.token_logp(behaviour_logits).sum(-1).exp().detach()
        surrogate = self.off_policy_surrogate(
            config, theta, ref_logits, behaviour_logits, trainer_ratio, reward
        )
        (grad,) = torch.autograd.grad((weights * surrogate).sum(), theta)
        return grad

    def off_policy_per_sequence_gradients(
        self,
        config: KLConfig,
        logits: torch.Tensor,
        ref_logits: torch.Tensor,
        behaviour_logits: torch.Tensor,
        trainer_ratio: bool = False,
    ) -> torch.Tensor:
        """[N, *logits.shape]: each sequence's single-sample estimate under samples from mu.

        Their mu-weighted mean is :meth:`off_policy_gradient`; draw sequences from mu to get
        Monte-Carlo batch estimates.
        """
        n = self.sequences.shape[0]
        theta = logits.detach().unsqueeze(0).repeat(n, 1, 1).requires_grad_(True)
        lsm = torch.log_softmax(theta, dim=-1)
        rows = torch.arange(n).unsqueeze(-1).expand_as(self.prefix_ids)
        logp = lsm[rows, self.prefix_ids, self.sequences]
        surrogate = self.off_policy_surrogate(
            config, theta, ref_logits, behaviour_logits, trainer_ratio, token_logp=logp
        )
        (grad,) = torch.autograd.grad(surrogate.sum(), theta)
        return grad

    def _nodes(self, logits: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per depth d = 1..T: (log pi of the node's last token, log pi of the whole prefix).

        Node k at depth d is the prefix with base-V code k; its parent is k // V at depth d-1,
        its last token k % V drawn from row offsets[d-1] + k // V of the logits table.
        """
        v = self.policy.vocab
        lsm = torch.log_softmax(logits, dim=-1)
        out = []
        cum = torch.zeros(1, dtype=logits.dtype)
        for d in range(1, self.policy.length + 1):
            code = torch.arange(v**d)
            last = lsm[self._offsets[d - 1] + code // v, code % v]
            cum = cum[code // v] + last
            out.append((last, cum))
        return out

    def prefix_weighted_gradient(
        self,
        config: KLConfig,
        logits: torch.Tensor,
        ref_logits: torch.Tensor,
        behaviour_logits: torch.Tensor,
    ) -> torch.Tensor:
        """Derived expected gradient of ``importance_weighting="sequence"`` under samples from mu.

        Each term of token u depends on the prefix y_1..u only, and carries the weight
        min(W_1..u, c) (W = pi/mu over the prefix). Summed over prefixes with probability mu,
        that is a sum with the measure nu(y_1..u) = min(pi(y_1..u), c * mu(y_1..u)) (pi when
        ``is_clip`` is None):

          reward side:  coef * sum_u sum_{y_1..u} nu * k_u * grad log pi(y_1..u)
                        (+ for reward_shape "sequence": nu * (sum_{s<u} k_s) * grad log pi_u)
          loss side:    loss_coef * sum_u sum_{y_1..u} nu * grad k_u   (/ T unless "sum")

        Written from the definitions over a table of prefixes, without kl_patches.core. Clamps
        are not modelled.
        """
        if config.importance_weighting != "sequence":
            raise ValueError("prefix_weighted_gradient is for importance_weighting='sequence'")
        if config.log_ratio_clamp is not None or config.kl_clamp is not None:
            raise ValueError("prefix_weighted_gradient does not model clamps")
        theta = logits.detach().clone().requires_grad_(True)
        pi_nodes = self._nodes(theta)
        ref_nodes = self._nodes(ref_logits.detach())
        mu_nodes = self._nodes(behaviour_logits.detach())

        def value(delta: torch.Tensor) -> torch.Tensor:
            if config.estimator == "k1":
                return delta
            if config.estimator == "k2":
                return 0.5 * delta**2
            return torch.exp(-delta) - 1 + delta

        objective = torch.zeros((), dtype=logits.dtype)
        past = torch.zeros(1, dtype=logits.dtype)  # sum of k over the strict ancestors
        length = self.policy.length
        per_token = 1.0 if config.loss_aggregation == "sum" else 1.0 / length
        for (last, cum), (ref_last, _), (_, mu_cum) in zip(
            pi_nodes, ref_nodes, mu_nodes, strict=True
        ):
            code = torch.arange(last.shape[0])
            k = value(last - ref_last)
            reach = cum.detach().exp()
            if config.is_clip is not None:
                reach = torch.minimum(reach, config.is_clip * mu_cum.exp())
            ancestors = past[code // self.policy.vocab]
            if config.has_reward:
                objective = objective + config.coef * (reach * k.detach() * cum).sum()
                if config.reward_shape == "sequence":
                    objective = objective + config.coef * (reach * ancestors * last).sum()
            if config.has_loss:
                objective = objective + config.loss_coef_value * per_token * (reach * k).sum()
            past = ancestors + k.detach()
        (grad,) = torch.autograd.grad(objective, theta)
        return grad


def behaviour_policy(logits: torch.Tensor, distance: float, seed: int) -> torch.Tensor:
    """A seeded behaviour policy mu: ``logits`` + N(0, distance^2) noise (0: mu = pi)."""
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(logits.shape, generator=gen, dtype=logits.dtype)
    return logits + distance * noise


def behaviour_at_level(
    enum: Enumeration, logits: torch.Tensor, kl_per_token: float, seed: int
) -> tuple[torch.Tensor, float]:
    """A behaviour policy with KL(mu || pi) / T = ``kl_per_token`` (exact), and its scale.

    mu = logits + s * noise along one seeded N(0, 1) direction; s is found by bisection on the
    enumerated KL between a scale below the target and one above it (a root lies between, the
    KL being continuous in s), to 1e-10 relative in s.
    """
    if kl_per_token <= 0:
        return logits.clone(), 0.0
    target = kl_per_token * enum.policy.length

    def kl(scale: float) -> float:
        return float(enum.reverse_kl(behaviour_policy(logits, scale, seed), logits))

    lo, hi = 0.0, 1.0
    while kl(hi) < target:
        lo, hi = hi, 2 * hi
        if hi > 1e4:
            raise ValueError(f"KL(mu || pi) / T = {kl_per_token} is out of reach")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if kl(mid) < target else (lo, mid)
        if hi - lo <= 1e-10 * hi:
            break
    return behaviour_policy(logits, hi, seed), hi


# ---------------------------------------------------------------------------- bias and variance
@dataclass(frozen=True)
class BiasReport:
    """Exact and Monte-Carlo bias of one configuration's KL-gradient estimator."""

    config: KLConfig
    length: int
    exact_relative_bias: float
    """||E[g] - G_rev|| / ||G_rev||, exact by enumeration."""
    cosine: float
    """cosine(E[g], G_rev), exact."""
    mc_relative_bias: float
    """||mean of N batch estimates - G_rev|| / ||G_rev||."""
    mc_standard_error: float
    """Relative standard error of that mean: sqrt(sum of coordinate variances / N) / ||G_rev||."""
    variance: float
    """Per-coordinate variance of one batch estimate, averaged over coordinates, / ||G_rev||^2."""
    kl_behaviour: float = 0.0
    """KL(mu || pi) at sequence level of the behaviour policy the samples came from (0:
    on-policy)."""
    trainer_ratio: bool = False
    """Off-policy only: True for the PPO-ratio trainer form, False for REINFORCE."""
    max_weight: float = 1.0
    """Largest prefix weight pi(y_1..u) / mu(y_1..u) over every prefix (1 on-policy)."""


def make_problem(
    vocab: int, length: int, seed: int, ref_distance: float = 0.5
) -> tuple[Enumeration, torch.Tensor, torch.Tensor]:
    """A seeded policy/reference pair: ref = policy logits + N(0, ref_distance^2) noise."""
    gen = torch.Generator().manual_seed(seed)
    policy = TabularPolicy(vocab, length)
    logits = policy.random_logits(gen)
    ref = logits + policy.random_logits(gen, scale=ref_distance)
    return Enumeration(policy), logits, ref


def bias_report(
    config: KLConfig,
    enum: Enumeration,
    logits: torch.Tensor,
    ref_logits: torch.Tensor,
    batch_size: int = 16,
    num_batches: int = 200,
    seed: int = 0,
    behaviour_logits: torch.Tensor | None = None,
    trainer_ratio: bool = False,
) -> BiasReport:
    """Bias of ``config``'s KL gradient against coef * grad KL(pi || pi_ref): exact and by MC.

    With ``behaviour_logits`` the samples come from that policy mu and the estimate is the
    trainer surrogate of :meth:`Enumeration.off_policy_surrogate` (``trainer_ratio`` picks its
    form). The cosine is NaN when the exact expected gradient is zero (to 1e-12 of the target):
    its direction would be round-off.
    """
    target = config.coef * enum.basis_gradient("reverse_kl", logits, ref_logits)
    norm = float(target.norm())
    kl_behaviour, max_weight = 0.0, 1.0
    if behaviour_logits is None:
        g = enum.per_sequence_gradients(config, logits, ref_logits).flatten(1)
        probs = enum.token_logp(logits).sum(-1).exp()
    else:
        g = enum.off_policy_per_sequence_gradients(
            config, logits, ref_logits, behaviour_logits, trainer_ratio
        ).flatten(1)
        mu_logp = enum.token_logp(behaviour_logits)
        probs = mu_logp.sum(-1).exp()
        kl_behaviour = float(enum.reverse_kl(behaviour_logits, logits))
        max_weight = float((enum.token_logp(logits) - mu_logp).cumsum(-1).exp().max())
    exact_mean = (probs.unsqueeze(-1) * g).sum(0)
    t = target.flatten()
    if float(exact_mean.norm()) <= 1e-12 * norm:
        cos = math.nan
    else:
        cos = float(exact_mean @ t / (exact_mean.norm() * t.norm()))
    gen = torch.Generator().manual_seed(seed)
    idx = torch.multinomial(probs, batch_size * num_batches, replacement=True, generator=gen)
    batches = g[idx].reshape(num_batches, batch_size, -1).mean(1)
    mc_mean = batches.mean(0)
    var = batches.var(0, unbiased=True)
    return BiasReport(
        config=config,
        length=enum.policy.length,
        exact_relative_bias=float((exact_mean - t).norm()) / norm,
        cosine=cos,
        mc_relative_bias=float((mc_mean - t).norm()) / norm,
        mc_standard_error=math.sqrt(float(var.sum()) / num_batches) / norm,
        variance=float(var.mean()) / norm**2,
        kl_behaviour=kl_behaviour,
        trainer_ratio=trainer_ratio if behaviour_logits is not None else False,
        max_weight=max_weight,
    )


def check_config(
    config: KLConfig,
    enum: Enumeration,
    logits: torch.Tensor,
    ref_logits: torch.Tensor,
    bases: dict[str, torch.Tensor] | None = None,
) -> tuple[float, torch.Tensor, torch.Tensor]:
    """(relative error, implemented gradient, theory's gradient) for one configuration.

    The error is relative to the larger of the theory's gradient and coef * ||grad KL||, so a
    configuration whose expected gradient is zero must produce (numerically) zero.
    """
    bases = enum.basis_gradients(logits, ref_logits) if bases is None else bases
    got = enum.config_gradient(config, logits, ref_logits)
    want = enum.terms_gradient(expected_terms(config), logits, ref_logits, bases)
    unit = max(config.coef, config.loss_coef_value) * float(bases["reverse_kl"].norm())
    scale = max(float(want.norm()), unit, 1e-300)
    return float((got - want).norm()) / scale, got, want


ProgressFn = Callable[[int, int], None]
