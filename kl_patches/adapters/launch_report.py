"""The launch-time report every launcher prints before the library starts: one function for all.

``kl-patches verl``, ``python -m kl_patches.openrlhf``, ``python -m kl_patches.trl`` and
``kl-patches smoke`` call :func:`announce` with what they are about to run, after their own
arguments are checked and before the library's trainer is imported or started, so a user reads
the regulariser of the run at its start, not when it ends. The block is written to stderr in one
write (ranks of a distributed launch may share the stream). What it says is built by
:func:`lines` alone, the same lines in the same order for every launcher:

* ``KL as run``: the KLConfig the library will follow (both sides when they differ);
* ``coef``: the coefficient and where it comes from;
* ``updates``: on-policy, off-policy or unknown for *this* run, with the settings behind it
  (:class:`Updates`; a value the launch leaves unset makes it unknown, never a number);
* ``verdict``: theory's verdict (:func:`kl_patches.theory.verdict`, or
  :func:`kl_patches.audit.verdicts.verdict_of` for a reading with two estimators) for that
  case only: an off-policy run is not told what its on-policy verdict would be, except as the
  way out (one update per batch); an unknown run gets both cases, each labelled;
* ``advice``: only for a biased verdict; theory's ``KLConfig.parse(...)`` written as this
  launcher's complete command (:func:`in_launcher_terms`);
* ``how``: the route (native options, a patch);
* ``also changes``: everything kl-patches changes beyond the KL, each with why (verl's
  ``loss_agg_mode``, which verl shares with the policy-gradient loss; TRL's ``beta``; Ray's
  setup hook);
* then the launcher's notes (findings, version warnings), as given.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kl_patches.adapters.flags import LAUNCH_ARGUMENTS, launcher_command
from kl_patches.cli import errors
from kl_patches.config import KLConfig

if TYPE_CHECKING:
    from kl_patches.theory import Verdict

UPDATE_STATES = ("on-policy", "off-policy", "unknown")
"""What :attr:`Updates.state` can be."""


@dataclass(frozen=True)
class Updates:
    """Whether this run's policy updates are on- or off-policy, and why."""

    state: str
    """``on-policy`` (one update per batch of fresh samples), ``off-policy`` (several updates
    per batch, or stale rollouts) or ``unknown`` (a setting that decides it is not set)."""
    reason: str = ""
    """The settings behind :attr:`state`, as the user wrote them (e.g. ``ppo_mini_batch_size
    =256 < data.train_batch_size=1024: 4 updates per batch``)."""
    on_policy_how: str = ""
    """For an off-policy run: the settings that would make it on-policy, complete overrides or
    flags in the library's own syntax (empty: not said)."""

    def __post_init__(self) -> None:
        if self.state not in UPDATE_STATES:
            raise ValueError(
                f"Updates.state={self.state!r} is not valid; choose one of {list(UPDATE_STATES)}"
            )


@dataclass(frozen=True)
class LaunchReport:
    """What a launcher is about to run."""

    prog: str
    """The launcher's name as it starts each line (``kl-patches verl``, ``kl_patches.trl``)."""
    library: str
    """The library, as users write it (``TRL``, ``verl``, ``OpenRLHF``)."""
    config: KLConfig
    """The KL regulariser the run will follow (its reward side when :attr:`loss_config` is
    set)."""
    updates: Updates
    """On- or off-policy for this run, and why."""
    coef_source: str = ""
    """Where the coefficient comes from (``--kl.coef``, a file's line, a library default)."""
    route: str = ""
    """How it reaches the library: native options, a patch, or both (one line)."""
    changes: tuple[str, ...] = ()
    """What kl-patches changes beyond the KL, one line each with why."""
    loss_config: KLConfig | None = None
    """The loss side when it runs another estimator than the reward side (a library with two
    independent switches, read from the user's own options); None when :attr:`config` is the
    whole KL."""
    notes: tuple[str, ...] = ()
    """Further lines (findings, warnings), printed as given after the block."""


def _verdict(report: LaunchReport, off_policy: bool) -> Verdict:
    if report.loss_config is None:
        from kl_patches.theory import verdict

        return verdict(report.config, off_policy=off_policy)
    from kl_patches.adapters.base import NativeReading
    from kl_patches.audit.verdicts import verdict_of

    reading = NativeReading(
        report.library, None, "", report.config, off_policy, loss_config=report.loss_config
    )
    return verdict_of(reading, off_policy=off_policy)


def _state(v: Verdict) -> str:
    """``unbiased``/``biased`` with theory's gradient name; off-policy and biased without a
    clip to name, the name of the on-policy gradient would mislead: the samples are said."""
    named = v.on_policy or v.unbiased or v.gradient.endswith("_clipped")
    why = v.gradient if named else "on samples of an older policy"
    return f"{'unbiased' if v.unbiased else 'biased'} for the reverse KL ({why})"


def _advice(report: LaunchReport, off: Verdict) -> str:
    """The off-policy advice without theory's "On-policy: ..." tail (the run is off-policy:
    the on-policy case is said as the way out instead, when it helps)."""
    on = _verdict(report, off_policy=False)
    tail = f" On-policy: {on.advice}"
    advice = off.advice[: -len(tail)] if off.advice.endswith(tail) else off.advice
    if on.unbiased and report.updates.on_policy_how:
        advice += (
            f" Or make the run on-policy ({report.updates.on_policy_how}): this configuration "
            "is unbiased there."
        )
    return advice.strip()


_CALL = re.compile(r"KLConfig\.parse\([^()]*\)")


def in_launcher_terms(text: str, report: LaunchReport) -> str:
    """``text`` (theory's advice) with each ``KLConfig.parse(...)`` written as the complete
    command of the report's launcher (``kl-patches verl --kl ... -- <your overrides>``); as
    it is for a library without a launcher."""
    library = report.library.lower()
    if library not in LAUNCH_ARGUMENTS:
        return text
    trainer = "RLOOTrainer" if "RLOO" in report.route else "GRPOTrainer"

    def command(match: re.Match[str]) -> str:
        call = ast.parse(match.group(0), mode="eval").body
        assert isinstance(call, ast.Call)
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
        return launcher_command(library, KLConfig.parse(*args, **kwargs), trainer)

    return _CALL.sub(command, text)


def lines(report: LaunchReport) -> list[str]:
    """The block's lines, without the trailing newline."""
    config = report.config
    out = [f"{report.prog}: KL regulariser for {report.library}"]
    shown = str(config) if report.loss_config is None else f"reward side {config}"
    out.append(f"  KL as run:    {shown}")
    if report.loss_config is not None:
        out.append(f"                loss side {report.loss_config}")
    updates = report.updates
    out.append(
        f"  updates:      {updates.state}" + (f": {updates.reason}" if updates.reason else "")
    )
    if config.placement == "none" and report.loss_config is None:
        out.append("  verdict:      no KL regularisation (placement none)")
    else:
        coef = f"{config.coef:g}"
        if config.loss_coef is not None:
            coef += f" (loss side {config.loss_coef:g})"
        out.append(
            f"  coef:         {coef}" + (f" ({report.coef_source})" if report.coef_source else "")
        )
        if updates.state == "unknown":
            on, off = _verdict(report, False), _verdict(report, True)
            if on.unbiased == off.unbiased and on.gradient == off.gradient:
                out.append(f"  verdict:      {_state(on)}, on- or off-policy")
            else:
                out.append(f"  verdict:      on-policy {_state(on)}; off-policy {_state(off)}")
            if not off.unbiased:
                advice = in_launcher_terms(_advice(report, off), report)
                out.append(f"  advice:       if off-policy: {advice}")
            if not on.unbiased:
                out.append(f"  advice:       if on-policy: {in_launcher_terms(on.advice, report)}")
        else:
            off_policy = updates.state == "off-policy"
            v = _verdict(report, off_policy)
            out.append(f"  verdict:      {_state(v)}, for these {updates.state} updates")
            if not v.unbiased:
                advice = _advice(report, v) if off_policy else v.advice
                out.append(f"  advice:       {in_launcher_terms(advice, report)}")
    if report.route:
        out.append(f"  how:          {report.route}")
    for i, change in enumerate(report.changes):
        out.append(f"  {'also changes:' if i == 0 else '':<13} {change}")
    if not report.changes:
        out.append("  also changes: nothing beyond the KL")
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


def integer(value: object) -> int | None:
    """A batch-size-like setting as an int, None when it is unset (None, empty, an
    interpolation or any text that is not a whole number): the report then says unknown."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    try:
        return int(str(value).strip())
    except ValueError:
        return None
