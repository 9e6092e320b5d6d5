"""TRL's changes for the audit's fix model (:mod:`kl_patches.audit.fix.plan`).

TRL's own options give k1 in the reward only to RLOO (``beta``, the reward KL of its
releases); GRPO's ``beta`` is k3 in the loss, so GRPO's fix is the kl-patches route: the KL
block kl-patches' TRL launcher reads (``kl: {name: k1-in-reward, coef: C}`` in a YAML config,
``--kl k1-in-reward --kl.coef C`` on its command line), ``beta=0.0`` (kl-patches runs the
reference model) and ``scale_rewards=none`` (``false`` where the release types it as a bool,
0.16-0.21; the group std would scale the reward KL), run with ``kl-patches trl grpo``. Releases
0.14-0.26 run it as a sequence-level KL reward function (0.18 included:
:data:`.versions.REFERENCE_IN_LOSS`), which the patch refuses for what
:func:`.legacy_reward.refusal` names: no fix is offered there.
A Python script that imports unsloth (whose generated GRPOTrainer the TRL patch refuses)
gets unsloth's own loss-side patch applied in the script instead (:func:`_unsloth_route`). A
``TrainingArguments`` field the installed transformers dropped is renamed to its successor
(:mod:`.successors`).
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from kl_patches.audit.fix.change import Change
from kl_patches.audit.model import AuditEntry, AuditFinding, AuditInput
from kl_patches.config import KLConfig

USER_CODES = {
    "trl.kl_weighted_by_default": "use_bias_correction_kl=false (the k3 of earlier "
    "releases) or use_bias_correction_kl=true (pin the choice)",
}
"""Findings about which release's behaviour to keep: the user's choice."""


def user_choices(entry: AuditEntry) -> dict[str, str]:
    """Codes of ``entry``'s findings only the user can settle, with the options. The group
    std scaling of a reward KL is one where the release has no ``scale_rewards`` (0.14-0.15
    always divide by it: :data:`.versions.ABSENT_MEANS`): upgrading is the user's call."""
    out = {f.code: USER_CODES[f.code] for f in entry.findings if f.code in USER_CODES}
    if any(f.code == "trl.std_scaled_kl" for f in entry.findings) and not _has(
        entry, "scale_rewards"
    ):
        out["trl.std_scaled_kl"] = (
            f"TRL {entry.library_version} always divides the rewards, KL included, by the group "
            "std (it has no scale_rewards): upgrade TRL and set scale_rewards=none, or keep it"
        )
    return out


def _release(entry: AuditEntry) -> str:
    """The launch's TRL release without a local tag (``0.18.2+cu`` -> ``0.18.2``); TRL 1.16,
    the newest recorded, when the launch pins none."""
    return (entry.library_version or "1.16.0").split("+")[0]


def _has(entry: AuditEntry, name: str) -> bool:
    """Whether the launch's release declares config field ``name`` (True when unrecorded)."""
    from .fieldsets import fields

    cls = "RLOOConfig" if _rloo(entry) else "GRPOConfig"
    try:
        found = fields(_release(entry), cls)
    except (ValueError, KeyError):
        return True
    return found is None or name in found


def _unscaled(entry: AuditEntry) -> str:
    """``scale_rewards``'s "no std scaling" value in the launch's release."""
    from .versions import unscaled_value

    return unscaled_value(_release(entry))


KL_SWITCHES = frozenset({"beta", "loss_type"})
"""The settings that decide whether a GRPO launch runs a KL at all: ``beta``, and under
unsloth ``loss_type`` (its ``beta`` default is 0.0 under dapo or dr_grpo, else 0.001:
``unsloth/models/rl.py:2911`` in 2026.9.12, recorded in :mod:`.unsloth_facts`)."""


def off_context(entry: AuditEntry, inp: AuditInput) -> frozenset[str]:
    """Warning codes that do not concern a launch running no KL, so its fix is "no KL, and
    none meant": unsloth's own loss (``trl.unsloth_loss``: with ``beta=0`` there is no KL
    term in it to replace), and settings the script computes at run time
    (``trl.unresolved_settings``) when none of them is a :data:`KL_SWITCHES` setting, a
    ``**`` expansion or the config itself."""
    if entry.kl_on:
        return frozenset()
    out = {"trl.unsloth_loss"}
    ctx = inp.context if isinstance(inp.context, dict) else {}
    unresolved = [str(u) for u in ctx.get("unresolved", ())]
    if not any(u in KL_SWITCHES or u.startswith("*") or u == "args" for u in unresolved):
        out.add("trl.unresolved_settings")
    return frozenset(out)


def intended_coef(entry: AuditEntry, inp: AuditInput) -> float | None:
    """TRL's KL is off only with ``beta=0``: no KL was meant."""
    return None


def _rloo(entry: AuditEntry) -> bool:
    return "rloo" in entry.reading.trainer.lower()


def changes(entry: AuditEntry, inp: AuditInput, coef: float) -> list[Change]:
    """Native changes: RLOO's ``beta`` (GRPO has none that give k1 in the reward)."""
    if _rloo(entry):
        return [Change("set", "trl", "beta", f"{coef:g}", reason="kl")]
    return []


def followup(finding: AuditFinding, entry: AuditEntry, inp: AuditInput) -> list[Change]:
    """Native follow-ups: the reward KL outside the group std; the TrainingArguments fields
    the installed transformers dropped renamed to their successor (:func:`successor_renames`)."""
    if finding.code == "trl.std_scaled_kl" and _has(entry, "scale_rewards"):
        return [Change("set", "trl", "scale_rewards", _unscaled(entry), reason=finding.code)]
    if finding.code == "trl.field_rejected":
        return successor_renames(entry, inp)
    return []


def successor_renames(entry: AuditEntry, inp: AuditInput) -> list[Change]:
    """``rename`` changes for the launch's fields that the transformers of a fresh install of
    its release dropped and that have a successor (:data:`.successors.SUCCESSORS`), unless the
    launch already sets the successor (then which value was meant is the user's call)."""
    from .semantics import semantics
    from .successors import SUCCESSORS

    payload = inp.payload if isinstance(inp.payload, dict) else {}
    keys = [k for k in payload if isinstance(k, str)]
    try:
        gone = semantics(entry.library_version or None).refused_by_transformers(keys)
    except ValueError:
        return []
    return [
        Change("rename", "trl", k, new_key=SUCCESSORS[k].field, reason="trl.field_rejected")
        for k in gone
        if k in SUCCESSORS and SUCCESSORS[k].field not in payload
    ]


def drop_refused(changes: list[Change], after: AuditEntry) -> tuple[list[Change], bool]:
    """TRL's fix keys exist in every release the fix is offered for: nothing to drop."""
    return changes, False


def legacy_refusal(version: str | None, coef: float) -> str | None:
    """Why the TRL patch of ``version`` cannot run k1 in the reward (None: it can)."""
    try:
        v = Version(version or "1.16.0")
    except InvalidVersion:
        return None
    if v >= Version("0.27"):
        return None
    from kl_patches.adapters.trl.legacy_reward import refusal

    return refusal(KLConfig(estimator="k1", placement="reward", coef=coef,
                            reward_shape="sequence"))  # fmt: skip


def _fused_off(entry: AuditEntry) -> list[Change]:
    """The fused Liger loss switched off (the ``trl.fused_loss`` finding's ``FLAG=False``):
    its k3 is fixed when the trainer is built, so the patch refuses it on every route
    (``use_liger_loss`` in :func:`.legacy.check`, ``use_liger_loss``/``use_liger_kernel`` in
    :func:`.hooks.validate`) and the launcher would stop on the written file."""
    out = []
    for finding in entry.findings:
        flag, _, value = finding.fix.partition("=")
        if finding.code == "trl.fused_loss" and value == "False" and flag.isidentifier():
            out.append(Change("set", "trl", flag, "false", reason=finding.code))
    return out


def route_refusal(entry: AuditEntry, inp: AuditInput) -> str | None:
    """Why the kl-patches route of :func:`patched` cannot run this launch (None: it can).

    A GRPO launch that imports unsloth, read from a shell launch: unsloth rebinds
    ``trl.GRPOTrainer`` to its generated trainer, which the TRL patch refuses
    (``kl_patches/adapters/trl/foreign.py:49``, checked by ``patch.guard``), and unsloth's own
    patch (:mod:`.unsloth`) must be applied inside the script (:func:`_unsloth_route` writes it
    there when the script itself is the file fixed)."""
    own = [f for f in entry.findings if f.code == "trl.project_trainer"]
    if own:  # the project's own trainer class: TRL's patched classes never run
        return (
            "the script trains the project's own trainer class, which neither the kl-patches "
            "launcher nor kl_patches.trl.apply reaches (trl.project_trainer)"
        )
    if _unsloth(inp, entry) and inp.kind != "python":
        return (
            "kl_patches.trl refuses unsloth's generated GRPOTrainer (it computes the loss in its "
            "own compute_loss); kl_patches.adapters.trl.unsloth.apply runs only a loss-side KL "
            "there (see the trl.unsloth_kl finding's fix): apply it in the script that imports "
            "unsloth, or build the trainer without importing unsloth"
        )
    return None


def _kl_block_dropped(entry: AuditEntry, inp: AuditInput) -> bool:
    """True for a YAML config of a release whose TrlParser drops keys no dataclass declares
    (before :data:`.fieldsets.CONFIG_KEYS_CHECKED_SINCE`): there the ``kl`` block is lost
    without a word when the file is run without kl-patches (a project's own script, the old
    command), so its ``beta`` is kept, not set to 0. A run without the patch then keeps the
    file's own KL instead of silently running none; with the patch, ``beta`` is the patch's
    to set (``PATCH_SETS`` in :mod:`kl_patches.audit.fix.apply`: 0.14-0.26 set it from the
    KL config)."""
    from .fieldsets import config_keys_checked

    try:
        return inp.kind == "yaml" and not config_keys_checked(_release(entry))
    except InvalidVersion:
        return False


def _unsloth(inp: AuditInput, entry: AuditEntry) -> bool:
    """A GRPO launch of a script that imports unsloth (its generated trainer runs)."""
    patchers = inp.context.get("patchers", ()) if isinstance(inp.context, dict) else ()
    return "unsloth" in patchers and not _rloo(entry)


UNSLOTH_PATCH = "kl_patches.adapters.trl.unsloth"
"""The patch of unsloth's own GRPO loss (:mod:`.unsloth`): the kl-patches route of a script
that imports unsloth."""


def _unsloth_route(coef: float) -> tuple[list[Change], KLConfig]:
    """The script-side fix of unsloth's GRPO: its loss-side patch with k2 on the sequence
    log-ratio (unbiased: :mod:`.unsloth` module docstring, the nearest setting it can express,
    since it refuses a reward placement), and ``beta`` set to the coefficient, which is what
    the patch gives every trainer built under it (``UnslothGRPOTrainer.__init__`` wrapped: beta
    = KLConfig.coef), so the config says what runs (``trl.unsloth_default_beta``)."""
    config = KLConfig.parse("k2-in-loss", granularity="sequence", coef=coef)
    value = f"{UNSLOTH_PATCH} --kl k2-in-loss --kl.granularity sequence --kl.coef {coef:g}"
    return [
        Change("entry_point", "trl", "trl", value, reason="trl.unsloth_kl"),
        Change("set", "trl", "beta", f"{coef:g}", reason="trl.unsloth_default_beta"),
    ], config


def patched(
    entry: AuditEntry, inp: AuditInput, coef: float
) -> tuple[list[Change], KLConfig | None]:
    """GRPO through kl-patches' TRL launcher ([] where its patch refuses the release or the
    trainer: :func:`legacy_refusal`, :func:`route_refusal`)."""
    if legacy_refusal(entry.library_version, coef) is not None:
        return [], None
    if route_refusal(entry, inp) is not None:
        return [], None
    if _unsloth(inp, entry):  # a script importing unsloth: its own loss patched there
        return _unsloth_route(coef)
    try:
        legacy = Version(_release(entry)) < Version("0.27")
    except InvalidVersion:
        legacy = False
    shape = ["--kl.reward_shape", "sequence"] if legacy else []
    out = (
        [] if _kl_block_dropped(entry, inp) else [Change("set", "trl", "beta", "0.0", reason="kl")]
    )
    out += _fused_off(entry)
    if _has(entry, "scale_rewards"):  # 0.14-0.15 have none (user_choices says so)
        out.append(Change("set", "trl", "scale_rewards", _unscaled(entry), reason="kl"))
    if inp.kind == "yaml":
        out += [
            Change("set", "trl", "kl.name", "k1-in-reward", reason="kl"),
            Change("set", "trl", "kl.coef", f"{coef:g}", reason="kl"),
        ]
        if legacy:
            out.append(Change("set", "trl", "kl.reward_shape", "sequence", reason="kl"))
        return out, None
    value = " ".join(["kl_patches.trl", "--kl", "k1-in-reward", "--kl.coef", f"{coef:g}", *shape])
    out.insert(0, Change("entry_point", "trl", "trl", value, reason="kl"))
    kl = KLConfig(estimator="k1", placement="reward", coef=coef,
                  reward_shape="sequence" if legacy else "reward_to_go")  # fmt: skip
    return out, kl
