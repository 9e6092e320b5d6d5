"""The fix model: from one audited launch to the :class:`~.change.ChangeSet` that makes its
re-audit clean.

For a launch whose audit is not clean (:func:`blocking`: an error, a biased status, or a KL
warning), the library's producer (``kl_patches.adapters.<lib>.fix``) proposes the native
changes giving k1 in the reward at the launch's coefficient; the changes are applied to the
reader's payload (:mod:`.payload`) and the launch is re-audited. Findings the re-audit still
raises get the producer's follow-up changes (verl's GRPO std scaling needs
``algorithm.norm_adv_by_std_in_grpo=False`` once the KL is in the reward), until the re-audit
is clean or nothing more can be done natively. Then the kl-patches route is tried: an
``entry_point`` change to the library's kl-patches launcher (``with kl-patches``), re-audited
with the launcher's KLConfig. Findings only the user can settle (an estimator that drops the
reward, a version pin) are listed in :attr:`ChangeSet.user_choices` with their options and do
not count against a clean re-audit.

A launch its release refuses (a key, flag or field it lacks, an entry point it does not have:
:func:`refusals`) still gets its KL fix when the refusal is all that is left: the reader reads
what runs once the refused names are gone, the producer's follow-ups rename those its name
tables know (OpenRLHF's flat and dotted flags), and the rest are listed in
:attr:`ChangeSet.user_choices` (which release or name was meant is the user's to say). Such a
re-audit still reports the refusal: the file is not clean until the user settles it. A
refused launch whose KL needs no change gets none (nor a switch of launcher, which would pass
the same names on).

A launch with no KL keeps none, unless the launch shows a KL was meant (the producer's
``intended_coef``: a coefficient written under switched-off placements); then the fix turns on
k1 in the reward at that coefficient. Findings the producer's optional ``off_context`` names
(about the trainer's context, such as a patcher's own loss, not about a KL) do not stand in
the way of "no KL, and none meant" for a launch running none. A producer's optional
``route_refusal`` says why its kl-patches route does not apply to a launch (the reason then
ends the plan's "no change" text).
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kl_patches.audit import findings as F
from kl_patches.audit.fix.change import Change, ChangeSet
from kl_patches.audit.fix.payload import apply_payload
from kl_patches.audit.model import AuditEntry, AuditError, AuditFinding, AuditInput
from kl_patches.config import KLConfig

__all__ = ["NOT_KL", "Plan", "blocking", "merge", "plan_launch", "refusals"]

NOT_KL = frozenset(
    {
        F.UNRESOLVED_VARIABLES,
        F.UNKNOWN_VALUE,
        F.TEMPLATE_PLACEHOLDER,
        F.SCRIPT_COMMENT_ENDS_COMMAND,
        F.VERSION_RANGE_DIFFERS,
        F.VERSION_INSTALLED_DIFFERS,
        F.VERSION_NEWEST_DIFFERS,
        F.VERSION_PIN_CONFLICT,
        F.BRANCH_DEPENDENT,
        F.SCRIPT_ARGUMENTS,
        F.NOT_REFERENCE_KL,
        F.CONFIG_NOT_FOUND,
        F.IGNORED_KL_KEY,
        F.VERSION_FROM_NAMES,
        F.SCRIPT_PARTLY_READ,
    }
)
"""Warning codes about the launch file itself, not about the KL it runs: a KL fix leaves them
as they are (they are reported, and do not make a re-audit unclean)."""

MAX_ROUNDS = 5
"""Re-audits of one launch while follow-up changes are added."""


@dataclass(frozen=True)
class Plan:
    """What the fix model decided for one launch."""

    entry: AuditEntry
    """The launch's audit."""
    changes: ChangeSet | None
    """The changes to make; None when there is nothing to fix or no fix was found."""
    after: AuditEntry | None = None
    """The re-audit of the launch with the changes applied to its payload."""
    why: str = ""
    """Why there is no change set (nothing to fix, no KL meant, what stays unclean)."""
    allowed: frozenset[str] = frozenset()
    """Finding codes left to the user (:attr:`ChangeSet.user_choices`): a clean re-audit may
    still raise them."""


def blocking(entry: AuditEntry, allowed: frozenset[str] = frozenset()) -> list[AuditFinding]:
    """What keeps a re-audit from being clean: errors, a biased status, KL warnings (codes in
    ``allowed`` are the user's choices and do not count)."""
    out = [
        f
        for f in entry.findings
        if f.code not in allowed
        and (
            f.severity == "error"
            or (f.severity == "warning" and f.code not in NOT_KL and not _about_file(f.code))
        )
    ]
    if _biased(entry) and not out:
        out.append(
            AuditFinding("biased", "warning", f"the verdict is biased: {entry.verdict.gradient}")
        )
    return out


def _biased(entry: AuditEntry) -> bool:
    """The verdict is biased, also under an error status (a release's refusal hides it)."""
    return entry.status == "biased" or (
        entry.status == "error" and entry.kl_on and not entry.verdict.unbiased
    )


def _about_file(code: str) -> bool:
    """An adapter warning about how the file was read (an entry point assumed, the release
    told from the launch's keys, a config key the release's parser ignores), not its KL."""
    return (
        code.endswith(("_assumed", "config_key_ignored")) or "version" in code or "vendored" in code
    )


def producer(library: str) -> ModuleType:
    """The library's change producer (``kl_patches.adapters.<lib>.fix``)."""
    return importlib.import_module(f"kl_patches.adapters.{library}.fix")


def merge(*groups: list[Change]) -> list[Change]:
    """One change per key, later groups winning (a follow-up overrides an earlier value)."""
    by_key: dict[tuple[str, str], Change] = {}
    for group in groups:
        for c in group:
            by_key.pop((c.namespace, c.key), None)
            by_key[(c.namespace, c.key)] = c
    return list(by_key.values())


def _reaudit(
    inp: AuditInput, changes: list[Change], versions: dict[str, str] | None, kl: KLConfig | None
) -> AuditEntry:
    from kl_patches.audit.run import audit_input

    new = _changed(inp, changes)
    if kl is not None:
        new = dataclasses.replace(new, kl_config=kl)
    return audit_input(new, versions=versions)


def _changed(inp: AuditInput, changes: list[Change]) -> AuditInput:
    """``inp`` with ``changes`` applied to its payload, and a switch of the entry module to the
    release's own module (:attr:`Change.module_switch`) to the reader's context."""
    new = dataclasses.replace(inp, payload=apply_payload(inp.payload, changes))
    for c in changes:
        if c.module_switch:
            new = dataclasses.replace(new, context={**new.context, "entry": c.value})
    return new


def _coef(entry: AuditEntry) -> float | None:
    c = entry.reading.config
    if c.has_reward:
        return c.coef
    if c.has_loss:
        return c.loss_coef_value
    return None


def plan_launch(inp: AuditInput, entry: AuditEntry, versions: dict[str, str] | None = None) -> Plan:
    """The change set for one launch (see the module docstring)."""
    if entry.kind == "unreadable" or entry.reading.trainer == "(unreadable launch)":
        return Plan(entry, None, why="the launch could not be read, so it cannot be fixed")
    try:
        lib = producer(inp.library)
    except ModuleNotFoundError:
        return Plan(entry, None, why=f"no fix producer for {inp.library}")
    renames = [c for f in entry.findings if _refused(f.code) for c in lib.followup(f, entry, inp)]
    if renames:
        try:
            return _renamed_first(inp, entry, renames, versions)
        except AuditError as err:
            return Plan(entry, None, why=f"the renamed launch cannot be read: {err}")
    choices = lib.user_choices(entry)
    allowed = frozenset(choices)
    coef = _coef(entry)
    if coef is None:
        coef = lib.intended_coef(entry, inp)
    if entry.kl_on and _only_refused(blocking(entry, allowed), entry):
        return Plan(entry, None, why="the KL needs no change; " + _refused_text(entry))
    if coef is None or (entry.kl_on and not blocking(entry, allowed)):
        now = blocking(entry, allowed)
        if coef is not None or not now:
            why = "nothing to fix: the audit is clean" if entry.kl_on else "no KL, and none meant"
            return Plan(entry, None, why=why)
        quiet: frozenset[str] = getattr(lib, "off_context", lambda e, i: frozenset())(entry, inp)
        off = [f for f in now if f.code.endswith("kl_off")]
        if off and all(f.code.endswith("kl_off") or f.code in quiet for f in now):
            return Plan(entry, None, why="no KL, and none meant (" + off[0].code + ")")
        return Plan(entry, None, why=_left_text(now))
    needs_kl = _biased(entry) or any(not _refused(f.code) for f in blocking(entry, allowed))
    changes = lib.changes(entry, inp, coef)
    missing: dict[str, str] = {}
    route = ""
    after: AuditEntry | None = None
    left: list[AuditFinding] = []
    try:
        for _ in range(MAX_ROUNDS):
            after = _reaudit(inp, changes, versions, None)
            kept, _ = lib.drop_refused(changes, after)
            if kept != changes:
                for c in changes:
                    if c not in kept and c.reason.startswith(inp.library + "."):
                        missing[c.reason] = (
                            f"{inp.library} {entry.library_version} has no {c.key} (the fix of "
                            f"{c.reason}): upgrade {inp.library}, or keep it as it is"
                        )
                changes = kept
                after = _reaudit(inp, changes, versions, None)
            allowed = allowed | frozenset(missing)
            left = blocking(after, allowed | frozenset(lib.user_choices(after)))
            if not left:
                return _done(entry, changes, "native", after, lib, missing)
            more = [c for f in left for c in lib.followup(f, after, inp) if c.reason not in missing]
            new = merge(changes, more)
            if new == changes:
                break
            changes = new
        if needs_kl and changes and after is not None and _only_refused(left, after):
            return _done(entry, changes, "native", after, lib, missing | refusals(after))
        kl_changes, kl = lib.patched(entry, inp, coef)
        if not kl_changes:
            refused = getattr(lib, "route_refusal", lambda e, i: None)(entry, inp)
            route = (
                f"; no kl-patches route for {inp.library} {entry.library_version} ("
                + (refused or "outside the patch's support, or refused there")
                + ")"
            )
        if kl_changes:
            after = _reaudit(inp, kl_changes, versions, kl)
            left2 = blocking(after, allowed | frozenset(lib.user_choices(after)))
            if not left2:
                return _done(entry, kl_changes, "with kl-patches", after, lib, {})
            if needs_kl and _only_refused(left2, after):
                return _done(entry, kl_changes, "with kl-patches", after, lib, refusals(after))
            left = left2
    except AuditError as err:
        return Plan(entry, None, why=f"the changed launch cannot be read: {err}")
    return Plan(entry, None, after=after, why=_left_text(left) + route)


def _renamed_first(
    inp: AuditInput, entry: AuditEntry, renames: list[Change], versions: dict[str, str] | None
) -> Plan:
    """The plan of the launch with the names its release refuses renamed first (the producer
    knows the release's spelling), so that the KL fix is found for the KL those names set
    (the reading of the refused launch leaves them out), then written after the renames."""
    renamed_inp = _changed(inp, renames)
    renamed = _reaudit(inp, renames, versions, None)
    plan = plan_launch(renamed_inp, renamed, versions)
    if plan.changes is not None:
        changes = merge(renames, list(plan.changes.changes))
        cs = dataclasses.replace(plan.changes, changes=tuple(changes))
        return dataclasses.replace(plan, entry=entry, changes=cs)
    left = blocking(renamed, plan.allowed)
    if plan.why.startswith(("nothing", "no KL")) or _only_refused(left, renamed):
        texts = refusals(renamed)
        cs = ChangeSet(tuple(renames), "native", tuple(texts.values()))
        return Plan(entry, cs, after=renamed, allowed=plan.allowed | frozenset(texts))
    return dataclasses.replace(plan, entry=entry)


def _refused(code: str) -> bool:
    return code.endswith("_rejected") or code.endswith(".entry_not_in_version")


def refusals(entry: AuditEntry) -> dict[str, str]:
    """The launch's refusals by its release (``*_rejected``, ``*.entry_not_in_version``), by
    code, each with the names refused and what the user can do."""
    out = {}
    for f in entry.findings:
        if not _refused(f.code):
            continue
        said = f.message.split(" The reading leaves")[0].rstrip(". ")
        if f.code.endswith(".entry_not_in_version"):
            todo = "switch the entry point" + (f" ({f.fix})" if f.fix else "")
        else:
            todo = "rename or delete them"
        out[f.code] = (
            f"{said}: {todo}, or run the release the launch was written for (the KL fix is "
            "written for what runs once they are gone)"
        )
    return out


def _refused_text(entry: AuditEntry) -> str:
    return "left to you: " + "; ".join(f"{k} ({v})" for k, v in refusals(entry).items())


def _only_refused(left: list[AuditFinding], after: AuditEntry) -> bool:
    """True when the release's refusals are all that keeps ``after`` from being clean."""
    return bool(left) and all(_refused(f.code) for f in left) and not _biased(after)


def _left_text(left: list[AuditFinding]) -> str:
    return "no change makes the re-audit clean; left: " + "; ".join(
        f"{f.code} ({f.severity})" for f in left
    )


def _done(
    entry: AuditEntry,
    changes: list[Change],
    label: str,
    after: AuditEntry,
    lib: Any,
    missing: dict[str, str],
) -> Plan:
    texts = dict(lib.user_choices(after)) | missing
    return Plan(
        entry,
        ChangeSet(tuple(changes), label, tuple(texts.values())),
        after=after,
        allowed=frozenset(texts),
    )
