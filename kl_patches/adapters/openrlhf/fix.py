"""OpenRLHF's changes for the audit's fix model (:mod:`kl_patches.audit.fix.plan`).

k1 in the reward at the launch's coefficient, in the flags of the launch's release: the
adapter's own native fix (:attr:`NativeReading.fix`: ``--init_kl_coef C --kl_estimator k1`` or
the dotted ``--algo.kl.*`` flags from 0.10.2, ``(remove --use_kl_loss)``), plus removing the
pre-0.6.2 ``--use_kl_estimator_k3`` switch. Flags a release refuses are renamed where the
adapter knows the new name (:func:`kl_patches.adapters.openrlhf.translate.renames`).
"""

from __future__ import annotations

import re

from kl_patches.audit.fix.change import Change
from kl_patches.audit.fix.payload import flag_name, flag_span
from kl_patches.audit.model import AuditEntry, AuditFinding, AuditInput
from kl_patches.config import KLConfig

LAUNCHER = "kl_patches.openrlhf"


def user_choices(entry: AuditEntry) -> dict[str, str]:
    """OpenRLHF has no finding only the user can settle."""
    return {}


def intended_coef(entry: AuditEntry, inp: AuditInput) -> float | None:
    """OpenRLHF's KL is off only with a zero coefficient: no KL was meant."""
    return None


def _present(inp: AuditInput) -> dict[str, str]:
    argv = [str(w) for w in inp.payload] if isinstance(inp.payload, list) else []
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        n = flag_span(argv, i)
        if argv[i].startswith("--"):
            word = argv[i]
            out[flag_name(word)] = word.split("=", 1)[1] if "=" in word else (
                argv[i + 1] if n == 2 else "")  # fmt: skip
        i += n
    return out


def changes(entry: AuditEntry, inp: AuditInput, coef: float) -> list[Change]:
    """The adapter's native fix as changes (only flags whose value differs)."""
    present = _present(inp)
    why = ",".join(sorted({f.code for f in entry.findings if f.severity != "info"})) or "kl"
    words = " ".join(entry.reading.fix or ())
    out: list[Change] = []
    for name in re.findall(r"\(remove (--[\w.]+)\)", words):
        if name in present:
            out.append(Change("unset", "argparse", name, reason=why))
    tokens = re.sub(r"\([^)]*\)", "", words).split()
    i = 0
    while i < len(tokens):
        flag = tokens[i]
        value = tokens[i + 1] if i + 1 < len(tokens) and not tokens[i + 1].startswith("--") else ""
        i += 2 if value else 1
        if "coef" in flag:
            value = f"{coef:g}"
        if flag in present and (present[flag] == value or _eq(present[flag], value)):
            continue
        out.append(Change("set", "argparse", flag, value, reason=why))
    if "--use_kl_estimator_k3" in present:
        out.append(Change("unset", "argparse", "--use_kl_estimator_k3", reason=why))
    return out


def _eq(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _spelled(dotted: str, entry: AuditEntry) -> str:
    """``--algo.advantage.gamma`` or its flat name, as the launch's release spells it."""
    from packaging.version import InvalidVersion, Version

    from kl_patches.adapters.openrlhf.translate import _BY_NAME
    from kl_patches.adapters.openrlhf.versions import DOTTED_SINCE

    flag = _BY_NAME.get(dotted)
    try:
        flat = Version(entry.library_version or "0") < Version(DOTTED_SINCE)
    except InvalidVersion:
        flat = False
    return f"--{flag.flat}" if flag is not None and flag.flat and flat else f"--{dotted}"


def followup(finding: AuditFinding, entry: AuditEntry, inp: AuditInput) -> list[Change]:
    """The discount of the reward KL off (gamma, lambd 1); renames of flags the release
    refuses under their old or new name."""
    if finding.code == "openrlhf.kl_discounted":
        words = finding.fix.split()
        return [
            Change("set", "argparse", _spelled(w[2:], entry), words[i + 1], reason=finding.code)
            for i, w in enumerate(words[:-1])
            if w.startswith("--")
        ]
    if not finding.code.endswith("_rejected"):
        return []
    from kl_patches.adapters.openrlhf.translate import renames

    out = _named_estimator(finding, entry, inp)
    for text in renames(inp.payload, entry.library_version or ""):
        old, _, new = text.partition(" -> ")
        if " " in new:  # --use_kl_estimator_k3 -> --algo.kl.estimator k3: k1 is the fix
            out.append(Change("unset", "argparse", old, reason=finding.code))
        else:
            out.append(Change("rename", "argparse", old, new_key=new, reason=finding.code))
    return out


def _named_estimator(finding: AuditFinding, entry: AuditEntry, inp: AuditInput) -> list[Change]:
    """A refused ``--kl_estimator``/``--algo.kl.estimator`` on a release that selects k3 with
    the switch ``--use_kl_estimator_k3`` (0.5.0-0.6.0) is removed: the reading leaves it out
    (k1, the default), which is what the KL fix writes for, as the switch is removed on the
    releases that refuse it."""
    from kl_patches.adapters.openrlhf.semantics import semantics

    try:
        switch = semantics(entry.library_version or None).estimator_switch
    except ValueError:
        return []
    if not switch or not isinstance(inp.payload, (list, tuple)):
        return []
    names = {str(w).partition("=")[0] for w in inp.payload}
    return [
        Change("unset", "argparse", flag, reason=finding.code)
        for flag in ("--kl_estimator", "--algo.kl.estimator")
        if flag in names and flag in finding.message
    ]


def drop_refused(changes: list[Change], after: AuditEntry) -> tuple[list[Change], bool]:
    """OpenRLHF's fix flags come from the release's own spelling: nothing to drop."""
    return changes, False


def patched(
    entry: AuditEntry, inp: AuditInput, coef: float
) -> tuple[list[Change], KLConfig | None]:
    """The launch through kl-patches' OpenRLHF launcher: k1 in the reward at ``coef``."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    from kl_patches import adapters

    try:
        ok = Version(entry.library_version or "0").base_version in SpecifierSet(
            adapters.get("openrlhf").support.supported
        )
    except InvalidVersion:
        ok = False
    if not ok:
        return [], None
    kl = KLConfig(estimator="k1", placement="reward", coef=coef)
    value = f"{LAUNCHER} --kl k1-in-reward --kl.coef {coef:g}"
    out = [Change("entry_point", "argparse", "openrlhf.cli.train_ppo_ray", value)]
    # the launcher refuses KL flags that disagree with --kl: the launch's own set to its values
    present = _present(inp)
    from kl_patches.adapters.openrlhf.translate import to_args

    try:
        words = to_args(kl, version=entry.library_version or "")
    except ValueError:
        words = to_args(kl)
    for i, word in enumerate(words):
        if word.startswith("--") and word in present:
            val = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else ""
            if not (present[word] == val or _eq(present[word], val)):
                out.append(Change("set", "argparse", word, val, reason="kl"))
    for name in ("--use_kl_loss", "--algo.kl.use_loss", "--use_kl_estimator_k3"):
        if name in present:
            out.append(Change("unset", "argparse", name, reason="kl"))
    return out, kl
