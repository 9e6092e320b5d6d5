"""``kl-patches verdict NAME``: which gradient a KL configuration follows, and the fix."""

from __future__ import annotations

import argparse

from kl_patches.config import (
    GRANULARITIES,
    IMPORTANCE_WEIGHTINGS,
    LOSS_AGGREGATIONS,
    REWARD_SHAPES,
    KLConfig,
)
from kl_patches.theory import verdict


def main(argv: list[str]) -> int:
    """Print the verdict of one configuration given as a short name plus options."""
    p = argparse.ArgumentParser(prog="kl-patches verdict", description=__doc__)
    p.add_argument("name", help="short name such as k1-in-reward, k3-in-loss, k3-in-both, none")
    p.add_argument("--coef", type=float, default=0.05)
    p.add_argument("--granularity", choices=GRANULARITIES, default="token")
    p.add_argument("--reward-shape", choices=REWARD_SHAPES, default="sequence")
    p.add_argument("--loss-aggregation", choices=LOSS_AGGREGATIONS, default="sum")
    p.add_argument("--importance-weighting", choices=IMPORTANCE_WEIGHTINGS, default="none")
    p.add_argument("--off-policy", action="store_true")
    a = p.parse_args(argv)
    try:
        cfg = KLConfig.parse(
            a.name,
            coef=a.coef,
            granularity=a.granularity,
            reward_shape=a.reward_shape,
            loss_aggregation=a.loss_aggregation,
            importance_weighting=a.importance_weighting,
        )
    except ValueError as err:
        print(f"kl-patches verdict: {err}")
        return 2
    v = verdict(cfg, off_policy=a.off_policy)
    print(f"config:      {cfg}")
    print(f"gradient:    {v.gradient}")
    print(f"unbiased:    {'yes' if v.unbiased else 'no'}")
    print(f"explanation: {v.explanation}")
    for c in v.caveats:
        print(f"caveat:      {c}")
    print(f"advice:      {v.advice}")
    return 0
