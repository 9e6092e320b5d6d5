"""Behaviour canaries for the OpenRLHF adapter: OpenRLHF's own KL functions on tiny batches.

The translation and the reader rely on what OpenRLHF computes for each ``--algo.kl.estimator``
(and its clamp to [-10, 10] from 0.8.6, none before: :func:`~.versions.native_kl_clamp` of the
installed release); the reward patch relies on
``compute_reward`` putting the scalar reward on the last valid token and ``-coef * kl`` on every
token (the sequence shape subtracts the core's penalty from the scalar reward and zeroes
``kl``); the loss patch relies on the KL mean being the masked token mean it replaces. Each
:class:`~kl_patches.adapters.support.Canary` calls the real function (the original when
patched) on fixed tensors and compares it with that formula.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

from kl_patches.adapters.patching import is_replacement
from kl_patches.adapters.support import Canary

from .versions import installed_version, native_kl_clamp

TOL = 1e-6
"""Absolute tolerance of every comparison (float32 on a handful of numbers); unclamped k3 of a
log-ratio of -25 (about 7e10, releases before 0.8.6) is compared to the same relative 1e-6."""

MASK = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.float32)


def original(module: str, name: str) -> Callable[..., Any]:
    """OpenRLHF's own ``module.name`` (the registry's original when kl-patches replaced it)."""
    function = getattr(importlib.import_module(module), name)
    while is_replacement(function):
        function = function.__wrapped__
    return function  # type: ignore[no-any-return]


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float = 0.0) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.float(), b.float(), atol=TOL, rtol=rtol))


def _fmt(x: torch.Tensor) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in x.detach().flatten().tolist()) + "]"


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    """(log_probs, base): log-ratios in [-0.8, 0.8], one of -25 that hits the k3 clamp."""
    gen = torch.Generator().manual_seed(2468)
    logp = -0.2 - torch.rand(4, 3, generator=gen)
    base = logp + 0.8 * (2 * torch.rand(4, 3, generator=gen) - 1)
    base[3, 2] = logp[3, 2] + 25.0
    return logp, base


def estimator(
    name: str, logp: torch.Tensor, base: torch.Tensor, clamp: float | None = 10.0
) -> torch.Tensor:
    """The value the adapter assumes for ``--algo.kl.estimator name``, clamped to
    ``+-clamp`` (None: unclamped, OpenRLHF before 0.8.6)."""
    delta = logp - base
    value = {"k1": delta, "k2": delta.square() / 2, "k3": (-delta).exp() - 1 + delta}[name]
    return value if clamp is None else value.clamp(-clamp, clamp)


def _probe_approx_kl() -> str | None:
    compute_approx_kl = original("openrlhf.models.utils", "compute_approx_kl")
    clamp = native_kl_clamp(installed_version())
    logp, base = _batch()
    for name in ("k1", "k2", "k3"):
        got = compute_approx_kl(logp, base, kl_estimator=name)
        want = estimator(name, logp, base, clamp)
        if not _close(got, want, rtol=0.0 if clamp else TOL):
            return f"{_fmt(got)} for kl_estimator={name!r}, not {_fmt(want)}"
    return None


def _probe_compute_reward() -> str | None:
    compute_reward = original("openrlhf.models.utils", "compute_reward")
    logp, base = _batch()
    kl = (logp - base) * MASK
    r = torch.tensor([1.0, 0.0, 0.5, 2.0])
    got = compute_reward(r, 0.1, kl, action_mask=MASK)
    want = -0.1 * kl
    last = MASK.sum(-1).long() - 1
    want[torch.arange(4), last] += r
    if not _close(got, want):
        return f"{_fmt(got)}, not the reward on the last valid token minus 0.1 * kl {_fmt(want)}"
    return None


def _probe_kl_mean() -> str | None:
    module = importlib.import_module("openrlhf.trainer.ray.ppo_actor")
    name = "aggregate_loss" if callable(vars(module).get("aggregate_loss")) else "masked_mean"
    mean = original(module.__name__, name)
    logp, base = _batch()
    values = logp - base
    got = mean(values, MASK)
    want = (values * MASK).sum() / MASK.sum()
    if not _close(got, want):
        return f"{float(got):.6g} from {name}(kl, mask), not the token mean {float(want):.6g}"
    return None


def canaries() -> tuple[Canary, ...]:
    """The OpenRLHF canaries."""
    return (
        Canary(
            "openrlhf.models.utils.compute_approx_kl",
            "k1 = log-ratio, k2 = half its square, k3 = exp(-r) - 1 + r, each clamped to +-10 "
            "(from 0.8.6; unclamped before)",
            _probe_approx_kl,
        ),
        Canary(
            "openrlhf.models.utils.compute_reward",
            "the scalar reward on the last valid token plus -kl_coef * kl on every token",
            _probe_compute_reward,
        ),
        Canary(
            "openrlhf.trainer.ray.ppo_actor aggregate_loss / masked_mean",
            "the KL loss of a micro-batch without global counts is its masked token mean",
            _probe_kl_mean,
        ),
    )
