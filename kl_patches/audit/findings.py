"""The audit's own, library-independent findings, and a trainer's status.

Adapters report what only their library does (codes prefixed by the library); these findings
follow from the KLConfig alone (KL off, two coefficients, clamps, a token-mean loss, off-policy
updates) or from the input (a comment that cuts a command, unset variables, a KL-looking key no
reader used). An adapter finding that already says one of them is listed in its descriptor's
``covers`` table, and the audit does not repeat it.
"""

from __future__ import annotations

from collections.abc import Iterable

from kl_patches import adapters
from kl_patches.adapters.base import NativeReading
from kl_patches.audit.model import AuditFinding, AuditInput
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

CODES = (
    KL_OFF,
    COEF_MISMATCH,
    KL_CLAMP,
    TOKEN_MEAN_LOSS,
    OFF_POLICY,
    IGNORED_KL_KEY,
    SCRIPT_COMMENT_ENDS_COMMAND,
    UNRESOLVED_VARIABLES,
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
        add(
            OFF_POLICY,
            "warning" if unweighted_loss else "info",
            (
                "Updates reuse samples from an older policy"
                + (" and the KL loss has no importance weight. " if unweighted_loss else ". ")
                + caveats.get("Off-policy", "")
            ).strip(),
        )
    return out


def status_of(reading: NativeReading, on_policy: Verdict, findings: Iterable[AuditFinding]) -> str:
    if any(f.severity == "error" for f in findings):
        return "error"
    if not (reading.config.has_reward or reading.config.has_loss):
        return "kl_off"
    return "unbiased" if on_policy.unbiased else "biased"


def switch_fix(config: KLConfig) -> str:
    """The kl-patches switch giving k1 in the reward at the configuration's coefficient."""
    if config.has_reward:
        coef = config.coef
    elif config.has_loss:
        coef = config.loss_coef_value
    else:
        coef = recommended().coef
    return f"KLConfig.parse('k1-in-reward', coef={coef:g})"


def input_findings(inp: AuditInput) -> list[AuditFinding]:
    """Findings about the launch itself: a comment that cut it short, unset variables."""
    out: list[AuditFinding] = []
    for w in inp.warnings:
        dropped = " ".join(inp.dropped)
        kl_lost = "kl" in dropped.lower()
        out.append(
            AuditFinding(
                SCRIPT_COMMENT_ENDS_COMMAND,
                "error" if kl_lost else "warning",
                w
                + (f"; never passed to the trainer: {dropped}" if dropped else "")
                + (" (KL settings among them)" if kl_lost else ""),
                "delete the commented line, or move it below the command",
                "audit",
            )
        )
    if inp.unresolved:
        names = ", ".join("$" + u for u in inp.unresolved)
        out.append(
            AuditFinding(
                UNRESOLVED_VARIABLES,
                "warning",
                f"The launch uses {names}, which the script never sets (the audit does not read "
                "the environment): they were read as literal text, so flags they carry are "
                "missing.",
                f"kl-patches audit --var {inp.unresolved[0]}=VALUE ...",
                "audit",
            )
        )
    return out
