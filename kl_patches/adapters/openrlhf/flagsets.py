"""Every long option of OpenRLHF's trainers in each release (argparse refuses others).

``train_ppo_ray`` (and ``train_ppo``, shipped up to 0.6.1) parse their command line with a plain
``argparse.ArgumentParser()`` and ``parse_args()``: an option the release does not define stops
the launch with ``unrecognized arguments``, and, since ``allow_abbrev`` is left on, a unique
prefix of a defined option is accepted as that option. Flags were renamed wholesale in 0.10.2
(``--init_kl_coef`` -> ``--algo.kl.init_coef``, ``--pretrain`` -> ``--actor.model_name_or_path``
...), so a launch written for one release is often refused by another. For each recorded
release this module gives every ``--option`` of ``openrlhf/cli/train_ppo_ray.py`` and
``openrlhf/cli/train_ppo.py`` with argparse's default and choices.

Source: the data files ``data/<release>.json``, written by ``python -m kl_patches.dev record
openrlhf V`` from each release's files: every ``parser.add_argument("--name", ...)`` call of
the module read with :mod:`ast`, including the f-string options of the per-prefix loop (``for
prefix in ("actor", "critic"): parser.add_argument(f"--{prefix}.adam.lr", ...)``, 0.10.2 on);
``record --check`` re-reads them. ``tests/adapters/openrlhf/test_flagsets.py`` reads the
installed release's ``train_ppo_ray.py`` the same way and checks that its options are exactly
the data's for that release.
"""

from __future__ import annotations

from functools import cache

from kl_patches.adapters.releases import Entry, Recording, recording

from .history import RELEASES

__all__ = ["MODULES", "RELEASES", "data", "entry", "options", "releases_accepting"]

MODULES = ("train_ppo_ray", "train_ppo")
"""The trainer modules recorded (``openrlhf.cli.<module>``)."""


def data() -> Recording:
    """Every recorded OpenRLHF release (``data/<release>.json``)."""
    return recording("kl_patches.adapters.openrlhf")


def _check(module: str) -> None:
    if module not in MODULES:
        raise ValueError(f"module={module!r} is not recorded; choose one of {list(MODULES)}")


@cache
def options(release: str, module: str = "train_ppo_ray") -> frozenset[str] | None:
    """Every ``--option`` (without the dashes) of ``openrlhf.cli.<module>`` in ``release``;
    None when the module is not in that release. ValueError for an unrecorded release."""
    _check(module)
    return data().names(release, module)


def entry(release: str, option: str, module: str = "train_ppo_ray") -> Entry | None:
    """What ``release`` defines for ``--option`` (``default``, ``choices``, ``action``, ``type``,
    ``at``), or None when it does not define it."""
    _check(module)
    return data().at(release).entry(module, option)


def releases_accepting(
    flags: set[str] | frozenset[str], module: str = "train_ppo_ray"
) -> tuple[str, ...]:
    """The recorded releases whose ``module`` defines every option of ``flags``, ascending."""
    _check(module)
    return data().releases_accepting(flags, (module,))
