"""The audit's own, library-independent findings, and a trainer's status.

Adapters report what only their library does (codes prefixed by the library); these findings
follow from the KLConfig alone (KL off, two coefficients, clamps, a token-mean loss, off-policy
updates) or from the input (a comment that cuts a command, unset variables, a KL-looking key no
reader used). An adapter finding that already says one of them is listed in its descriptor's
``covers`` table, and the audit does not repeat it.
"""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Iterable

from kl_patches import adapters
from kl_patches.adapters.base import NativeReading
from kl_patches.adapters.flags import launcher_command
from kl_patches.audit.model import AuditFinding, AuditInput
from kl_patches.audit.shell.vocabulary import PLACEHOLDER_LABEL
from kl_patches.config import KLConfig
from kl_patches.theory import Verdict, recommended

KL_OFF = "kl_off"
"""No KL term reaches the gradient."""
COEF_MISMATCH = "coef_mismatch"
"""Both placements with different coefficients."""
KL_CLAMP = "kl_clamp"
"""Clamps change the estimator where they fire."""
TOKEN_MEAN_LOSS = "token_mean_loss"
"""The loss-side KL is length-normalised."""
OFF_POLICY = "off_policy"
"""Updates reuse samples from an older policy."""
IGNORED_KL_KEY = "ignored_kl_key"
"""A KL-looking key that no reader used."""
SCRIPT_COMMENT_ENDS_COMMAND = "script_comment_ends_command"
"""A comment inside a continued command cut it short."""
UNRESOLVED_VARIABLES = "unresolved_variables"
"""The launch uses shell variables the script never sets."""
UNKNOWN_VALUE = "unknown_value"
"""A setting's value comes from a command substitution, which the audit never runs."""
BRANCH_DEPENDENT = "branch_dependent"
"""The launch is in one branch of a test the audit cannot decide."""
SCRIPT_PARTLY_READ = "script_partly_read"
"""A parse error stops the script (bash stops there too): the rest is not read."""
CONFIG_NOT_FOUND = "config_not_found"
"""A config file the launch composes is not where the audit can read it."""
NOT_REFERENCE_KL = "not_reference_kl"
"""Settings named "KL" that are not the KL to the reference policy."""
SCRIPT_ARGUMENTS = "script_arguments"
"""The launch forwards the script's arguments, which are empty in a run without arguments."""
MIXED_ESTIMATORS = "mixed_estimators"
"""The reward and the loss side use different estimators."""
VERSION_RANGE_DIFFERS = "version_range_differs"
"""A range pin allows releases that run the file differently."""
VERSION_INSTALLED_DIFFERS = "version_installed_differs"
"""The pinned (or vendored, or given) version runs the file differently from the installed one."""
VERSION_NEWEST_DIFFERS = "version_newest_differs"
"""The pinned (or vendored, or given) version runs the file differently from the newest tested
release (nothing installed)."""
LAUNCH_UNREADABLE = "launch_unreadable"
"""One launch of a file with several could not be read (the others are reported)."""
VERSION_PIN_CONFLICT = "version_pin_conflict"
"""Two pins of one dependency file that no single release satisfies (pip refuses the file)."""
VERSION_FROM_NAMES = "version_from_names"
"""No pin says the release; the launch's names select older releases, and it is read as the
newest of them, while the installed (error) or newest tested (warning) release refuses it."""
TEMPLATE_PLACEHOLDER = "template_placeholder"
"""The file is a template with ``VAR=<PATH>`` placeholders, which bash cannot run (a warning
when an option of the launch takes its value from one)."""
ACCELERATOR_ASSUMED = "accelerator_assumed"
"""The script probes for a vendor accelerator package (``python3 -c 'import torch_npu'``): read
as failing (an NVIDIA GPU machine), with the other run named."""

CODES = (
    KL_OFF,
    COEF_MISMATCH,
    KL_CLAMP,
    TOKEN_MEAN_LOSS,
    OFF_POLICY,
    IGNORED_KL_KEY,
    SCRIPT_COMMENT_ENDS_COMMAND,
    UNRESOLVED_VARIABLES,
    UNKNOWN_VALUE,
    BRANCH_DEPENDENT,
    SCRIPT_PARTLY_READ,
    CONFIG_NOT_FOUND,
    NOT_REFERENCE_KL,
    SCRIPT_ARGUMENTS,
    MIXED_ESTIMATORS,
    VERSION_RANGE_DIFFERS,
    VERSION_INSTALLED_DIFFERS,
    VERSION_NEWEST_DIFFERS,
    LAUNCH_UNREADABLE,
    VERSION_PIN_CONFLICT,
    VERSION_FROM_NAMES,
    TEMPLATE_PLACEHOLDER,
    ACCELERATOR_ASSUMED,
)
"""Every audit-level finding code (adapter codes are ``<library>.<name>``)."""


def _covered(reading: NativeReading) -> set[str]:
    """Audit codes that the reading's adapter findings already say."""
    if reading.library not in adapters.names():
        return set()
    covers = adapters.get(reading.library).covers
    return {covers[f.code] for f in reading.findings if f.code in covers}


def audit_findings(reading: NativeReading, as_run: Verdict) -> list[AuditFinding]:
    """The audit's own, library-independent findings for a reading (not repeating the adapter).

    ``as_run`` is theory's verdict with the reading's off-policy flag (its caveats are reused).
    """
    config = reading.config
    covered = _covered(reading)
    out: list[AuditFinding] = []

    def add(code: str, severity: str, message: str, fix: str = "") -> None:
        if code not in covered:
            out.append(AuditFinding(code, severity, message, fix, "audit"))

    kl_on = config.has_reward or config.has_loss
    if not kl_on:
        add(
            KL_OFF,
            "info",
            "No KL term reaches the gradient (placement none or coefficient 0): the policy is "
            "not held near the reference.",
        )
    if config.placement == "both" and abs(config.loss_coef_value - config.coef) > 1e-12:
        add(
            COEF_MISMATCH,
            "warning",
            f"Both placements are on with different coefficients (reward {config.coef:g}, loss "
            f"{config.loss_coef_value:g}): the two sides only combine into the reverse-KL "
            "gradient with one shared coefficient and a token sum.",
        )
    caveats = {c.split(" ")[0]: c for c in as_run.caveats}
    if kl_on and (config.kl_clamp is not None or config.log_ratio_clamp is not None):
        add(KL_CLAMP, "info", caveats.get("Clamps", "Clamps bias the estimator where they fire."))
    if config.has_loss and config.loss_aggregation != "sum":
        text = next((c for c in as_run.caveats if c.startswith("loss_aggregation=")), "")
        add(TOKEN_MEAN_LOSS, "info", text or "The loss-side KL is length-normalised.")
    if kl_on and reading.off_policy:
        unweighted_loss = config.has_loss and config.importance_weighting == "none"
        why = f" ({reading.off_policy_reason})" if reading.off_policy_reason else ""
        add(
            OFF_POLICY,
            "warning" if unweighted_loss else "info",
            (
                f"Updates reuse samples from an older policy{why}"
                + (" and the KL loss has no importance weight. " if unweighted_loss else ". ")
                + caveats.get("Off-policy", "")
            ).strip(),
        )
    loss = reading.loss_config
    if loss is not None and config.has_reward and loss.has_loss:
        add(
            MIXED_ESTIMATORS,
            "warning",
            f"The reward side runs {config.estimator} and the loss side {loss.estimator}: the "
            "sides only combine into the reverse-KL gradient with one estimator, one "
            "coefficient and a token sum.",
        )
    return out


def status_of(reading: NativeReading, on_policy: Verdict, findings: Iterable[AuditFinding]) -> str:
    if any(f.severity == "error" for f in findings):
        return "error"
    if not (reading.config.has_reward or reading.config.has_loss):
        return "kl_off"
    return "unbiased" if on_policy.unbiased else "biased"


def switch_fix(config: KLConfig, library: str = "", trainer: str = "") -> str:
    """The kl-patches switch giving k1 in the reward at the configuration's coefficient: the
    library's launcher command (:func:`~kl_patches.adapters.flags.launcher_command`)."""
    if config.has_reward:
        coef = config.coef
    elif config.has_loss:
        coef = config.loss_coef_value
    else:
        coef = recommended().coef
    return launcher_command(library, KLConfig.parse("k1-in-reward", coef=coef), trainer)


def _relevant(key: str, reading: NativeReading | None) -> bool:
    """Whether an input key matters for the KL reading (a read setting, or named like KL)."""
    bare = key.lstrip("-+~")
    low = bare.lower()
    if "kl" in low.replace(".", "_").split("_") or "kl_" in low or "_kl" in low:
        return True
    if reading is None:
        return False
    return any(
        bare == s or str(s).endswith("." + bare) or bare.endswith("." + str(s))
        for s in reading.settings
    )


def _sentence(text: str, capital: bool) -> str:
    """``text`` with a capital first letter, unless it starts with a key name (kept as written:
    ``algorithm.adv_estimator``, not ``Algorithm.adv_estimator``)."""
    return text[:1].upper() + text[1:] if capital else text


def input_findings(inp: AuditInput, reading: NativeReading | None = None) -> list[AuditFinding]:
    """Findings about the launch itself: a comment that cut it short, unset variables, values
    the audit cannot know, branches it cannot decide, and what the input layer found."""
    out: list[AuditFinding] = list(inp.findings)
    for w in inp.warnings:
        dropped = " ".join(inp.dropped)
        kl_lost = "kl" in dropped.lower()
        out.append(
            AuditFinding(
                SCRIPT_COMMENT_ENDS_COMMAND,
                "error" if kl_lost else "warning",
                w
                + (f"; never passed to the trainer: {dropped}" if dropped else "")
                + (" (KL settings among them)" if kl_lost else "")
                + ". Delete the commented line, or move it below the command.",
                "",
                "audit",
            )
        )
    empty = [(k, v) for k, v in inp.empty_items if _relevant(k, reading)]
    if inp.vanished or empty:
        parts = []
        if inp.vanished:
            names = ", ".join("$" + u for u in inp.vanished)
            parts.append(
                f"the launch uses {names}, which the script never sets: as in bash run in a "
                "clean environment, they expand to nothing, so any flags they would carry are "
                "missing"
            )
        for key, names in empty:
            parts.append(
                f"{key} is empty because {names} is never set (bash passes an empty value; "
                "read as the library reads an empty value)"
            )
        first = (inp.vanished or [e[1].split(",")[0].lstrip("$") for e in empty])[0]
        out.append(
            AuditFinding(
                UNRESOLVED_VARIABLES,
                "warning",
                _sentence("; ".join(parts), capital=bool(inp.vanished)) + ".",
                f"kl-patches audit --var {first}=VALUE {shlex.quote(inp.path or '') or '<file>'}",
                "audit",
            )
        )
    placeholders = [(k, v) for k, v in inp.unknown_items if PLACEHOLDER_LABEL in v]
    elsewhere = [n.split(" (bash reads")[0] for n in inp.notes if f"is {PLACEHOLDER_LABEL}" in n]
    if placeholders:
        out.append(
            AuditFinding(
                TEMPLATE_PLACEHOLDER,
                "warning",
                "; ".join(f"{k or 'an argument'} comes from {v}" for k, v in placeholders)
                + ": the file is a template (bash reads '<' as a redirection and cannot run it as "
                "written); the audit reads each such option at the library's default. Replace "
                "the placeholder with the value you run with.",
                "",
                "audit",
            )
        )
    elif elsewhere:
        out.append(
            AuditFinding(
                TEMPLATE_PLACEHOLDER,
                "info",
                "The file is a template: "
                + "; ".join(elsewhere)
                + ". Bash reads '<' as a redirection and cannot run it as written; no option of "
                "this launch takes its value from a placeholder. Replace the placeholder with the "
                "value you run with.",
                "",
                "audit",
            )
        )
    relevant = [
        (k, v)
        for k, v in inp.unknown_items
        if (not k or _relevant(k, reading)) and PLACEHOLDER_LABEL not in v
    ]
    if relevant:
        out.append(
            AuditFinding(
                UNKNOWN_VALUE,
                "warning",
                "; ".join(
                    f"{k} comes from {v}"
                    if k
                    else f"an argument (any option, KL ones too) comes from {v}"
                    for k, v in relevant
                )
                + ": the audit never runs commands nor reads their input, so these are read at "
                "the library's defaults. Write the value in the script, or pass it with --var.",
                "",
                "audit",
            )
        )
    if inp.branch:
        out.append(
            AuditFinding(
                BRANCH_DEPENDENT,
                "info",
                f"This launch runs only in some branches ({', '.join(inp.branch)}) of tests the "
                "audit cannot decide (they depend on command output, files, the node or the "
                "script's arguments: see the notes); every branch is read and reported.",
                "",
                "audit",
            )
        )
    if inp.assumed:
        out.append(
            AuditFinding(
                ACCELERATOR_ASSUMED,
                "info",
                "The script picks its settings by probing the machine: "
                + "; ".join(inp.assumed)
                + ". This launch is the run on such a GPU machine; the audit never runs the "
                "probe.",
                "",
                "audit",
            )
        )
    if inp.args_forwarded:
        out.append(
            AuditFinding(
                SCRIPT_ARGUMENTS,
                "info",
                "The launch forwards the script's own arguments ($@, $1, ...): none in a run "
                "without arguments; options passed to the script at run time are not seen.",
                "kl-patches audit -- <the launch with its arguments>",
                "audit",
            )
        )
    return out


def not_reference_findings(
    library: str, keys: Iterable[str]
) -> tuple[list[str], AuditFinding | None]:
    """The keys named "KL" that the library's descriptor says are not the reference KL, and a
    finding naming them (None when there are none)."""
    if library not in adapters.names():
        return [], None
    table = adapters.get(library).not_reference_kl
    hits: dict[str, str] = {}
    for key in keys:
        for pattern, what in table.items():
            if fnmatch.fnmatchcase(key, pattern) or fnmatch.fnmatchcase(key, "*." + pattern):
                hits[key] = what
                break
    if not hits:
        return [], None
    text = "; ".join(f"{k}: {w}" for k, w in hits.items())
    return list(hits), AuditFinding(
        NOT_REFERENCE_KL,
        "info",
        f"Settings named like a KL that are not the KL to the reference policy, so not part of "
        f"the reading: {text}.",
        "",
        "audit",
    )
