"""Independent recomputation of what the running trainers used, from the recorded inputs.

Written from the formulas (the paper's estimators, GRPO's group normalisation, each library's
documented loss normalisation) without importing kl-patches' kernel or the libraries' own
functions, so that an error in either shows as a disagreement. Per-token estimator values are
evaluated in the recorded dtype (what the trainer did), every sum and normalisation in float64.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

RTOL = 1e-5
"""Agreement required between what a trainer used and its recomputation (relative)."""


def array(x: Any) -> np.ndarray:
    """A float64 numpy copy of a tensor (or array-like)."""
    if hasattr(x, "detach"):
        x = x.detach().to("cpu").double().numpy()
    return np.asarray(x, dtype=np.float64)


def estimator(delta: Any, name: str, *, clamp: bool = False) -> np.ndarray:
    """k1 = delta, k2 = delta^2 / 2, k3 = exp(-delta) + delta - 1 for delta = log pi - log ref,
    evaluated in ``delta``'s own dtype when it is a tensor (as the trainer did: k3's
    ``exp(-delta) + delta - 1`` cancels to about one rounding of 1, which in float32 is far
    above 1e-5 of a small KL, so a float64 k3 would not be what the trainer used), returned in
    float64. ``clamp``: verl's k3 (delta clamped to [-20, 20], the value to [-10, 10])."""
    import torch

    d = delta if isinstance(delta, torch.Tensor) else torch.as_tensor(delta, dtype=torch.float64)
    if name == "k1":
        value = d
    elif name == "k2":
        value = 0.5 * d * d
    elif name == "k3":
        if clamp:  # verl: kl = ref - logp clamped, ratio = exp(kl), kld = ratio - kl - 1, clamped
            kl = torch.clamp(-d, min=-20, max=20)
            value = torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
        else:
            value = torch.exp(-d) + d - 1
    else:
        raise ValueError(name)
    return array(value)


def log_ratio(logp: Any, ref: Any) -> Any:
    """``logp - ref`` in the recorded dtype (exact for close values: Sterbenz)."""
    return logp - ref


def sequence_estimate(logp: Any, ref: Any, mask: Any, name: str, granularity: str) -> np.ndarray:
    """Per row: the sum over valid tokens of the token estimator (``token``), or the estimator
    of the summed log-ratio (``sequence``); sums in float64."""
    m = array(mask)
    if granularity == "sequence":
        total = (array(log_ratio(logp, ref)) * m).sum(-1)
        return estimator(total, name)
    return (estimator(log_ratio(logp, ref), name) * m).sum(-1)


def groups(keys: Sequence[Any]) -> list[list[int]]:
    """Row indices grouped by key (first appearance order)."""
    out: dict[Any, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return list(out.values())


def grpo(values: np.ndarray, keys: Sequence[Any], *, eps: float, scale: bool = True) -> np.ndarray:
    """GRPO's advantage per row: value minus its group mean, over the group's (unbiased) std
    plus ``eps`` when ``scale``."""
    out = np.zeros_like(values)
    for rows in groups(keys):
        v = values[rows]
        centred = v - v.mean()
        if scale:
            std = v.std(ddof=1) if len(rows) > 1 else 1.0
            centred = centred / (std + eps)
        out[rows] = centred
    return out


LARGEST: dict[str, float] = {}
"""The largest relative error each test computed (test id -> error), printed after the session
by ``conftest.pytest_terminal_summary`` (the figures of the closing notes and docs)."""


def relative_error(used: Any, expected: Any) -> float:
    """max |used - expected| over the largest |expected| (the tensor's scale)."""
    u, e = array(used), array(expected)
    scale = float(np.abs(e).max()) if e.size else 0.0
    diff = float(np.abs(u - e).max()) if e.size else 0.0
    error = diff / scale if scale > 0 else diff
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
    LARGEST[test] = max(LARGEST.get(test, 0.0), error)
    return error
