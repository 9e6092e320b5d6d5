"""The KL block every launcher prints before the library starts: one function for all of them.

``kl-patches verl``, ``python -m kl_patches.openrlhf``, ``python -m kl_patches.trl`` and
``kl-patches smoke`` call :func:`announce` with what they are about to run, after their own
arguments are checked and before the library's trainer is imported or started, so a user reads
the regulariser of the run at its start, not when it ends. The block is written to stderr in one
write (ranks of a distributed launch may share the stream). What the block says is built by
:func:`lines` alone, so the launch-time report can be refined in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kl_patches.cli import errors
from kl_patches.config import KLConfig


@dataclass(frozen=True)
class LaunchReport:
    """What a launcher is about to run."""

    prog: str
    """The launcher's name as it starts each line (``kl-patches verl``, ``kl_patches.trl``)."""
    library: str
    """The library, as users write it (``TRL``, ``verl``, ``OpenRLHF``)."""
    config: KLConfig
    """The KL regulariser the run will follow."""
    coef_source: str = ""
    """Where the coefficient comes from (``--kl.coef``, a file's line, a library default)."""
    route: str = ""
    """How it reaches the library: native options, a patch, or both (one line)."""
    off_policy: bool = False
    """True when the run's updates are off-policy (the verdict is asked for that case)."""
    notes: tuple[str, ...] = ()
    """Further lines (findings, a fix), printed as given after the block."""


def lines(report: LaunchReport) -> list[str]:
    """The block's lines, without the trailing newline."""
    from kl_patches.theory import verdict

    config = report.config
    head = f"{report.prog}: KL regulariser for {report.library}"
    out = [head, f"  config:    {config}"]
    if config.placement == "none":
        out.append("  verdict:   no KL regularisation (placement none)")
    else:
        v = verdict(config, off_policy=report.off_policy)
        state = "unbiased" if v.unbiased else "biased"
        updates = "off-policy" if report.off_policy else "on-policy"
        out.append(f"  verdict:   {state} for the reverse KL ({v.gradient}, {updates} updates)")
        if not v.unbiased and v.advice:
            out.append(f"  advice:    {v.advice}")
        coef = f"{config.coef:g}"
        if config.loss_coef is not None:
            coef += f" (loss side {config.loss_coef:g})"
        out.append(
            f"  coef:      {coef}" + (f" ({report.coef_source})" if report.coef_source else "")
        )
    if report.route:
        out.append(f"  how:       {report.route}")
    out += [f"  {note}" for note in report.notes]
    return out


def announce(report: LaunchReport) -> None:
    """Write the block to stderr in one write, before the library starts."""
    errors.say("\n".join(lines(report)))


def coef_source(given: Sequence[str], default_source: str) -> str:
    """``from --kl.coef`` when flags or files set it (``given`` names where), else ``the
    default: <where the launcher's default comes from>``."""
    if given:
        return f"from {', '.join(given)}"
    return f"the default: {default_source}"
