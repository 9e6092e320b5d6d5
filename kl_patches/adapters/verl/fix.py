"""verl's changes for the audit's fix model (:mod:`kl_patches.audit.fix.plan`).

k1 in the reward at the launch's coefficient, in verl's own Hydra keys: the reward switch on,
the estimator ``kl`` (verl's k1 name in every release), a fixed controller, the coefficient,
the KL loss off. GRPO divides the reward KL by the group's std unless
``algorithm.norm_adv_by_std_in_grpo=False`` (``grpo_vectorized`` always divides: it becomes
``grpo``), so that follows once the KL is in the reward. A key the release's config lacks is
dropped again (0.2 has no reward switch: its reward KL is on whenever the loss KL is off).
What verl cannot express (a release without ``norm_adv_by_std_in_grpo``) goes through the
kl-patches launcher, which keeps the KL outside the std.
"""

from __future__ import annotations

import re
from typing import Any

from kl_patches.audit.fix.change import Change
from kl_patches.audit.model import AuditEntry, AuditFinding, AuditInput
from kl_patches.config import KLConfig

ACTOR = "actor_rollout_ref.actor."
LAUNCHER = "kl_patches.adapters.verl.launch"

USER_CODES = {
    "verl.gdpo_drops_kl": "adv_estimator=gdpo drops the reward KL: choose "
    "algorithm.adv_estimator=grpo or rloo (a different advantage), or keep gdpo without a KL",
    "verl.multi_turn_drops_kl": "multi-turn GRPO keeps only the final output's KL: choose "
    "algorithm.adv_estimator=rloo, or one output per trajectory",
}
"""Findings whose fix changes the training algorithm itself: the user's choice."""


def _h(key: str, value: str, reason: str) -> Change:
    return Change("set", "hydra", key, value, reason=reason)


def _same(current: Any, target: str) -> bool:
    return str(current).lower() == target.lower() or (
        _num(current) is not None and _num(current) == _num(target)
    )


def _num(x: Any) -> float | None:
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def user_choices(entry: AuditEntry) -> dict[str, str]:
    """Codes of ``entry``'s findings only the user can settle, with the options."""
    return {f.code: USER_CODES[f.code] for f in entry.findings if f.code in USER_CODES}


def intended_coef(entry: AuditEntry, inp: AuditInput) -> float | None:
    """The coefficient a launch with no KL writes: under its switched-off placements, or
    under a switch it turns on whose KL the trainer drops (a recipe entry)."""
    written = _written(inp)
    s = entry.reading.settings
    switches = {"algorithm.use_kl_in_reward": "algorithm.kl_ctrl.kl_coef",
                ACTOR + "use_kl_loss": ACTOR + "kl_loss_coef"}  # fmt: skip
    for switch, key in switches.items():  # a switch written on whose KL the trainer drops
        if switch in written and str(s.get(switch)).lower() == "true":
            v = _num(s.get(key))
            if v is not None and v > 0:
                return v
    for key in ("algorithm.kl_ctrl.kl_coef", ACTOR + "kl_loss_coef"):
        if key in written:
            v = _num(entry.reading.settings.get(key))
            if v is not None and v > 0:
                return v
    return None


def _written(inp: AuditInput) -> set[str]:
    if isinstance(inp.payload, dict):
        from kl_patches.adapters.verl.read import flatten

        return set(flatten(inp.payload))
    from kl_patches.audit.fix.payload import override_key

    return {override_key(str(i)) for i in inp.payload}


def changes(entry: AuditEntry, inp: AuditInput, coef: float) -> list[Change]:
    """k1 in the reward at ``coef`` (only the keys whose value differs)."""
    s = entry.reading.settings
    why = ",".join(sorted({f.code for f in entry.findings if f.severity != "info"})) or "kl"
    want = [
        ("algorithm.use_kl_in_reward", "True"),
        ("algorithm.kl_penalty", "kl"),
        ("algorithm.kl_ctrl.kl_coef", f"{coef:g}"),
        (ACTOR + "use_kl_loss", "False"),
    ]
    if str(s.get("algorithm.kl_ctrl.type", "fixed")) != "fixed":
        want.append(("algorithm.kl_ctrl.type", "fixed"))
    out = [_h(k, v, why) for k, v in want if k not in s or not _same(s[k], v)]
    if str(s.get("algorithm.kl_penalty")) in ("k1", "kl"):
        out = [c for c in out if c.key != "algorithm.kl_penalty"]
    return out


def followup(finding: AuditFinding, entry: AuditEntry, inp: AuditInput) -> list[Change]:
    """Changes for a finding the re-audit still raises ([] when verl has none)."""
    s = entry.reading.settings
    code = finding.code
    if code == "verl.std_scaled_kl":
        out = [_h("algorithm.norm_adv_by_std_in_grpo", "False", code)]
        if str(s.get("algorithm.adv_estimator")) == "grpo_vectorized":
            out.append(_h("algorithm.adv_estimator", "grpo", code))
        return out
    if code == "verl.bypass_mode_reward_kl":
        return [_h("algorithm.rollout_correction.bypass_mode", "False", code)]
    if code == "verl.adaptive_kl":
        return [_h("algorithm.kl_ctrl.type", "fixed", code)]
    if code == "verl.key_rejected":
        return _refused_keys(entry, inp)
    if code == "verl.entry_not_in_version":  # a module the release renamed: its new name
        from .refused import entry_successor

        module = str(inp.context.get("entry") or "")
        new = entry_successor(module, entry.library_version or entry.reading.version)
        return [Change("entry_point", "hydra", module, new, reason=code)] if new else []
    return []


def _refused_keys(entry: AuditEntry, inp: AuditInput) -> list[Change]:
    """The refused overrides written so the release accepts them: ``+key`` for a key the
    config has becomes ``key`` (it sets it); a key under an open mapping gets ``+``; a key
    verl moved is renamed, one it removed is deleted (:mod:`.refused`)."""
    from .read import appended_existing
    from .refused import rewrites

    code = "verl.key_rejected"
    version = entry.library_version or entry.reading.version
    out = [
        Change("rename", "hydra", f"+{key}", new_key=key, reason=code)
        for key in appended_existing(inp.payload, version, inp.context)
    ]
    for r in rewrites(inp.payload, version, inp.context):
        if r.action == "append":
            out.append(Change("rename", "hydra", r.key, new_key=f"+{r.key}", reason=code))
        elif r.action == "rename":
            out.append(
                Change("rename", "hydra", r.key, new_key=r.new_key, reason=f"{code}: {r.why}")
            )
        else:
            out.append(Change("unset", "hydra", r.key, reason=f"{code}: {r.why}"))
    return out


def drop_refused(changes: list[Change], after: AuditEntry) -> tuple[list[Change], bool]:
    """``changes`` without the keys the release refuses (its config lacks them)."""
    refused = " ".join(
        f.message for f in after.findings if f.severity == "error" and "rejected" in f.code
    )
    keep = [c for c in changes if c.key not in refused]
    return keep, len(keep) != len(changes)


def patched(
    entry: AuditEntry, inp: AuditInput, coef: float
) -> tuple[list[Change], KLConfig | None]:
    """The launch through kl-patches' verl launcher: k1 in the reward at ``coef``."""
    if not supported(entry.library_version):
        return [], None
    if any(f.code.startswith("verl.entry_drops") for f in entry.findings):
        return [], None  # the trainer never applies that KL: patching its maths cannot add it
    kl = KLConfig(estimator="k1", placement="reward", coef=coef)
    std = " --kl.outside_std" if str(entry.reading.settings.get("algorithm.adv_estimator")) in (
        "grpo", "grpo_vectorized") else ""  # fmt: skip
    entry_point = str(inp.context.get("entry") or "verl.trainer.main_ppo")
    if not re.fullmatch(r"[\w.]+", entry_point):
        return [], None  # a script path, not a module the launcher's --entry runs
    other = "" if entry_point == "verl.trainer.main_ppo" else f" --entry {entry_point}"
    value = f"{LAUNCHER} --kl k1-in-reward --kl.coef {coef:g}{std}{other} --"
    return [
        Change("entry_point", "hydra", entry_point, value, reason="kl"),
        *_agree(inp, kl),
    ], kl


def _agree(inp: AuditInput, kl: KLConfig) -> list[Change]:
    """The launch's own KL overrides set to the launcher's values (it refuses a key set to
    another value by ``--kl`` and by the overrides)."""
    from kl_patches.adapters.verl.translate import to_overrides

    written = {}
    if isinstance(inp.payload, list):
        from kl_patches.audit.fix.payload import override_key

        written = {override_key(str(i)): str(i).split("=", 1)[-1] for i in inp.payload}
    out = []
    for item in to_overrides(kl):
        key, _, value = item.partition("=")
        if key in written and not _same(written[key], value):
            out.append(_h(key, value, "kl"))
    return out


def supported(version: str | None) -> bool:
    """True when kl-patches' verl patch accepts ``version`` (its support range)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    from kl_patches import adapters

    try:
        return Version(version or "0").base_version in SpecifierSet(
            adapters.get("verl").support.supported
        )
    except InvalidVersion:
        return False
