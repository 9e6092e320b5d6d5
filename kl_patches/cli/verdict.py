"""``kl-patches verdict NAME [--kl.FIELD VALUE ...]``: which gradient a KL configuration follows.

The configuration is a short name (``k1-in-reward``, ``k3-in-loss``, ``none``) plus any KLConfig
field in the uniform ``--kl.FIELD VALUE`` syntax. The spellings of earlier releases
(``--coef``, ``--granularity``, ``--reward-shape``, ``--loss-aggregation``,
``--importance-weighting``) still work, with a deprecation warning.
"""

from __future__ import annotations

import argparse

from kl_patches.adapters import flags
from kl_patches.adapters.flags import plain
from kl_patches.cli import errors
from kl_patches.config import FIELD_CHOICES
from kl_patches.theory import verdict

_OLD = ("coef", "granularity", "reward_shape", "loss_aggregation", "importance_weighting")
"""KLConfig fields that had their own option before the ``--kl.FIELD`` syntax."""


def parser() -> argparse.ArgumentParser:
    """The ``kl-patches verdict`` argument parser."""
    p = errors.ArgumentParser(prog="kl-patches verdict", description=plain(__doc__ or ""))
    p.add_argument("name", help="short name such as k1-in-reward, k3-in-loss, k3-in-both, none")
    flags.add_arguments(p)
    for field in _OLD:
        option = "--" + field.replace("_", "-")
        p.add_argument(
            option,
            dest=f"old_{field}",
            type=float if field == "coef" else str,
            choices=FIELD_CHOICES.get(field),
            help=argparse.SUPPRESS,  # the old spelling works (it warns) but is not offered
        )
    p.add_argument("--off-policy", action="store_true", help="updates on older samples")
    errors.add_debug_option(p)
    return p


@errors.command("kl-patches verdict", debug_option=True)
def main(argv: list[str]) -> int:
    """Print the verdict of one configuration given as a short name plus options.

    Errors (an unknown name, a bad field value, a contradiction) are one line on stderr, exit 2.
    """
    a = parser().parse_args(argv)
    values = flags.values_from_namespace(a)
    for field in _OLD:
        old = getattr(a, f"old_{field}")
        if old is not None:
            flags.deprecated("--" + field.replace("_", "-"), f"--kl.{field}")
            values.setdefault(field, old)
    if a.kl_name is not None:
        raise errors.UsageError(
            f"--kl {a.kl_name}: give the configuration as the positional NAME, not with --kl",
            field="--kl",
            value=a.kl_name,
        )
    cfg = flags.build(a.name, values)
    v = verdict(cfg, off_policy=a.off_policy)
    print(f"config:      {cfg}")
    print(f"gradient:    {v.gradient}")
    print(f"unbiased:    {'yes' if v.unbiased else 'no'}")
    print(f"explanation: {v.explanation}")
    for c in v.caveats:
        print(f"caveat:      {c}")
    print(f"advice:      {v.advice}")
    return 0
