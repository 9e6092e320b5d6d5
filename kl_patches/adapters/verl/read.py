"""Read a verl launch for the audit: the KLConfig it runs plus verl-specific findings.

Works without verl installed (the defaults of the tested version live in :mod:`.versions`).
The theory's verdict is added by the audit itself; the findings here are what only verl does:
estimators that drop the reward KL (GDPO, multi-turn GRPO), both switches on with k3, GRPO's
std normalisation scaling the KL, two coefficients, the aggregation shared with the policy
loss, and the loss KL without importance weights under several updates per batch. It also
turns a ``main_ppo`` command line into its Hydra overrides, and reads ``kl-patches verl``
launches.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from kl_patches.adapters.base import Finding, LaunchPayload, NativeReading
from kl_patches.adapters.flags import LAUNCH_ARGUMENTS, launcher_command
from kl_patches.config import KLConfig
from kl_patches.theory import verdict

from .config_groups import missing_groups
from .delivery import PatchSpec
from .entries import NOT_REFERENCE_KL, facts
from .history import RELEASES
from .keysets import CONFIGS
from .semantics import VerlSemantics, semantics, vendored_sign_bug
from .translate import (
    from_config,
    loss_side,
    parse_overrides,
    patch_spec_of,
    reward_side,
    settings_of,
    to_overrides,
)
from .vendored import read_code
from .versions import (
    ACTOR,
    AGG_FROM_VERL,
    GRPO_LIKE,
    MARKER,
    NATIVE_CLAMPS,
    VERL_ESTIMATORS,
    installed_version,
)

COVERS = {
    "verl.kl_off": "kl_off",
    "verl.gdpo_drops_kl": "kl_off",
    "verl.mismatched_coefficients": "coef_mismatch",
    "verl.mixed_estimators": "mixed_estimators",
    "verl.k3_clamp": "kl_clamp",
    "verl.token_mean_loss": "token_mean_loss",
    "verl.off_policy_loss_kl": "off_policy",
}
"""verl finding codes that already say an audit-level finding (the audit does not repeat it)."""

SECTIONS = ("actor_rollout_ref", "algorithm")
"""Top-level mapping keys that mark a YAML file as a verl (Hydra) config."""

HYDRA_SECTIONS = ("trainer", "data", "critic", "reward_model", "actor_rollout_ref", "algorithm")
"""verl's top-level config sections: one of them beside a Hydra ``defaults`` list marks a verl
config too (a project config that starts from its own base file, e.g. RAGEN's)."""

HYDRA_VALUE_OPTIONS = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd")
"""Hydra's own command-line options that take a value."""


EXTRA_KEYS = (
    "trainer.v1.trainer_mode",
    "distillation.enabled",
    "distillation.distillation_loss.loss_mode",
    "async_training.staleness_threshold",
)
"""Keys read besides the KL settings of :data:`~.versions.DEFAULTS` (off-policy trainer modes,
teacher distillation), when a launch sets them."""

ASYNC_MODES = ("colocate_async", "separate_async")
"""``trainer.v1.trainer_mode`` values whose rollouts come from an older policy."""


def _number(value: Any) -> int | None:
    """A batch-size setting as an int; None when unset (null, empty, not a whole number)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def is_off_policy(settings: dict[str, Any]) -> bool:
    """Several actor updates per batch: ``ppo_epochs > 1`` or mini-batches smaller than it."""
    epochs = int(settings[ACTOR + "ppo_epochs"])
    mini = int(settings[ACTOR + "ppo_mini_batch_size"])
    return epochs > 1 or mini < int(settings["data.train_batch_size"])


def off_policy_reasons(
    settings: dict[str, Any], extra: dict[str, Any], entry_reason: str = ""
) -> list[str]:
    """Why a verl run's updates are off-policy, each reason with the settings behind it."""
    out: list[str] = []
    epochs = _number(settings[ACTOR + "ppo_epochs"]) or 1
    mini = _number(settings[ACTOR + "ppo_mini_batch_size"])
    batch = _number(settings["data.train_batch_size"])
    if mini is not None and batch is not None and mini < batch:  # unset: no reason claimed
        out.append(
            f"ppo_mini_batch_size={mini} < data.train_batch_size={batch}: "
            f"{-(-batch // max(1, mini))} updates per batch"
        )
    if epochs > 1:
        out.append(f"ppo_epochs={epochs}: each batch is trained on {epochs} times")
    mode = extra.get("trainer.v1.trainer_mode")
    if mode in ASYNC_MODES and bool(settings["trainer.use_v1"]):
        out.append(f"trainer.v1.trainer_mode={mode}: rollouts come from an older policy")
    if entry_reason:
        out.append(entry_reason)
    return out


def undecided_updates(settings: dict[str, Any]) -> list[Finding]:
    """An info finding when no reason makes the run off-policy but the batch size is not a
    number (``data.train_batch_size: null``, a project's code sets it at run time): how many
    updates each batch gets is then not in the config, and no release default is assumed."""
    batch = settings["data.train_batch_size"]
    if _number(batch) is not None:
        return []
    return [
        Finding(
            "verl.updates_undecided",
            "info",
            f"data.train_batch_size is {'null' if batch is None else repr(batch)}, not a number: "
            "whether ppo_mini_batch_size="
            f"{settings[ACTOR + 'ppo_mini_batch_size']} splits each batch into several updates "
            "(off-policy) is decided by the code that sets it at run time; the audit does not "
            "call the run off-policy on that account.",
        )
    ]


def _merged_flat(source: Any, base: dict[str, Any] | None, defaults: dict[str, Any]) -> Any:
    """The reader's source with an entry's config defaults and a composed config file under
    the launch's own overrides (later wins)."""
    if not base and not defaults:
        return source
    flat: dict[str, Any] = dict(defaults)
    flat.update(base or {})
    if isinstance(source, (list, tuple)):
        flat.update(parse_overrides(source))
        return s_nested(flat)
    if isinstance(source, dict):
        flat.update(flatten(source))
        return s_nested(flat)
    return source


def _extra(source: Any, base: dict[str, Any] | None) -> dict[str, Any]:
    flat: dict[str, Any] = dict(base or {})
    if isinstance(source, (list, tuple)):
        with contextlib.suppress(ValueError):
            flat.update(parse_overrides(source))
    elif isinstance(source, dict):
        flat.update(flatten(source))
    return {k: flat[k] for k in EXTRA_KEYS if k in flat}


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{dotted.key: value}``."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


def read(
    source: Any,
    *,
    entry: str | None = None,
    base: dict[str, Any] | None = None,
    version: str | None = None,
    assumed: str = "",
    config_name: str | None = None,
    config_keys: tuple[str, ...] = (),
    config_check: bool | None = None,
    version_snapshot: bool = False,
    version_file: str = "",
    config_links: dict[str, tuple[str, ...]] | None = None,
    **_: Any,
) -> NativeReading:
    """What a verl config does with the KL: KLConfig, off-policy flag, findings, native fix.

    ``source`` is anything :func:`kl_patches.adapters.verl.translate.settings_of` reads: an
    OmegaConf/dict config, a YAML path or text, or a list of Hydra overrides. ``entry`` is the
    entry point that runs it (default ``verl.trainer.main_ppo``; see :mod:`.entries`), ``base``
    the flat settings of a config file the launch composes (``--config-name``), under the
    overrides. ``version`` is the verl version to read it as (default: the newest tested
    release), through :func:`.semantics.semantics`: its defaults, its keys (an override of a
    key the release's config lacks is refused by Hydra: an error finding, and the reading
    leaves it out), the reward gate of 0.1-0.3.x, the estimator names, k3's clamps and the loss
    aggregation of that release. ``config_name``/``config_keys``/``config_check`` say which
    composed config the overrides are checked against (the audit passes them; ``config_keys``
    are a project config's own keys); ``version_snapshot`` says the copy may hold code newer
    than ``version`` (a vendored copy or a dev label: when the launch uses keys of the next
    release only, that release is read, with a finding); ``version_file`` is a vendored copy's
    version file (its code is checked for the KL-loss sign bug). ``assumed`` says why an
    unrecorded entry is read as ``main_ppo`` (a finding). ``config_links``: the trainer configs
    a project's config folder links to (name -> the group folders on that folder's search
    path), refused when this release's file composes groups the folder lacks
    (:mod:`.config_groups`).
    """
    trainer_facts = facts(entry) if entry else None
    defaults = dict(trainer_facts.defaults) if trainer_facts else {}
    sem = semantics(version)
    findings: list[Finding] = []
    checked = checked_config(entry, trainer_facts, config_name, config_check)
    if isinstance(source, (list, tuple)) and checked == "ppo_trainer":
        checked = engine_config(list(source), sem)
    if isinstance(source, (list, tuple)) and checked is not None:
        source, sem, key_findings = _check_keys(
            list(source), sem, checked, config_keys, version_snapshot or _snapshot(version)
        )
        findings += key_findings
    findings += _link_findings(sem, config_links or {})
    promoted = any(f.code == "verl.version_newer_code" for f in findings)
    findings += _version_findings(sem, entry, version_file, promoted)
    if version_file:
        sem, code_findings = _vendored_rules(sem, version_file)
        findings += code_findings
    s = _settings(_merged_flat(source, base, defaults), sem)
    extra = _extra(source, base)
    effective = _effective(s, sem)
    findings += _sign_bug_findings(version_file, effective)
    loss_config: KLConfig | None = None
    names = _name_findings(effective, sem)
    if names:
        config = KLConfig(placement="none", coef=0.0)
        findings += names
    else:
        try:
            config = _clamped(from_config(s_nested(effective)), sem)
            loss_config = _loss_only(effective, sem)
        except ValueError as exc:
            config = KLConfig(placement="none", coef=0.0)
            findings.append(Finding("verl.unknown_estimator", "error", str(exc), fix=_fix_text(s)))
    reasons = off_policy_reasons(s, extra, trainer_facts.off_policy if trainer_facts else "")
    off_policy = bool(reasons)
    if not off_policy:
        findings += undecided_updates(s)
    findings += _findings(effective, config, off_policy, sem, entry in V1_ENTRIES)
    findings += _entry_findings(entry, trainer_facts, effective, assumed)
    findings += _other_kl_findings(s, extra)
    if any(f.code in DROPS_REWARD_KL for f in findings):
        config = loss_config if loss_config is not None else _without_reward_side(config)
        loss_config = None
    if any(f.code in DROPS_LOSS_KL for f in findings):
        config = _without_loss_side(config)
        loss_config = None
    if loss_config is not None and not (config.has_reward and config.has_loss):
        loss_config = None
    adv = str(s["algorithm.adv_estimator"])
    name = "main_ppo" if entry in (None, "verl.trainer.main_ppo") else entry
    return NativeReading(
        library="verl",
        version=sem.version if version is not None else installed_version() or sem.version,
        trainer=f"{name} ({adv})",
        config=config,
        off_policy=off_policy,
        settings=dict(s) | extra,
        findings=tuple(findings),
        fix=tuple(_fix(s)),
        off_policy_reason="; ".join(reasons),
        loss_config=loss_config,
    )


# ----------------------------------------------------------------------------- versions
def _snapshot(version: str | None) -> bool:
    """True for a version label that is not a final release (dev, pre-release, local label):
    the code may be anything up to the next release."""
    if version is None:
        return False
    try:
        v = Version(version)
    except InvalidVersion:
        return False
    return v.is_devrelease or v.is_prerelease or v.local is not None


def checked_config(
    entry: str | None, trainer_facts: Any, config_name: str | None, config_check: bool | None
) -> str | None:
    """The recorded config the overrides are checked against, None when unknown (an entry
    with its own config the audit did not compose, or the audit said not to check)."""
    if config_check is False:
        return None
    if config_name is not None:
        return config_name if config_name in CONFIGS or config_name == "" else None
    own = trainer_facts.config if trainer_facts is not None else "ppo_trainer"
    if entry and trainer_facts is None:
        own = "ppo_trainer"
    return own if own in CONFIGS else None


def engine_config(overrides: list[str], sem: VerlSemantics) -> str | None:
    """The recorded config a ``ppo_trainer`` launch's overrides are checked against, given
    its ``model_engine=`` choice.

    From 0.8.0 ``ppo_trainer.yaml``'s defaults list starts with the group ``model_engine: dp``
    and composes ``actor@actor_rollout_ref.actor: ${model_engine}_actor`` (and the ref and
    critic the same way; verl/trainer/config/ppo_trainer.yaml:10-30 at v0.9.0), so
    ``model_engine=megatron`` on the command line composes the megatron actor, ref and critic:
    the keys of ``ppo_megatron_trainer`` (which, from 0.8.0, is itself ``ppo_trainer`` with
    ``override model_engine: megatron``). An engine kl-patches has not recorded (``veomni``,
    ``torchtitan``) leaves the keys unchecked (None)."""
    engine = None
    for item in overrides:
        if not isinstance(item, str) or "=" not in item:
            continue
        prefix, key = override_key(item)
        if key == "model_engine" and prefix != "~":
            engine = item.split("=", 1)[1].strip().strip("'\"")
    if engine is None or "model_engine" not in sem.accepted_keys("ppo_trainer"):
        return "ppo_trainer"
    if engine == "dp":
        return "ppo_trainer"
    return "ppo_megatron_trainer" if engine == "megatron" else None


def override_key(item: str) -> tuple[str, str]:
    """(prefix ``""``/``+``/``++``/``~``, key) of one Hydra override."""
    text = item.strip()
    if text.startswith("~"):
        return "~", text[1:].split("=", 1)[0].strip()
    prefix = "++" if text.startswith("++") else "+" if text.startswith("+") else ""
    return prefix, text[len(prefix) :].split("=", 1)[0].strip()


def rejected_overrides(
    overrides: list[str], accepted: frozenset[str]
) -> list[tuple[int, str, str]]:
    """(index, override, Hydra's reason) of every override Hydra's strict composition refuses
    against a config with the keys ``accepted``; ``++`` always works, Hydra's own
    (``hydra.*``) and config-group overrides (``a/b=x``, ``a@b=x``) are not checked."""
    out: list[tuple[int, str, str]] = []
    added: set[str] = set()
    for index, item in enumerate(overrides):
        if not isinstance(item, str) or ("=" not in item and not item.startswith("~")):
            continue
        prefix, key = override_key(item)
        last = key.rsplit(".", 1)[-1]
        if not key or key.startswith("hydra.") or "/" in key or "@" in key or last.isdigit():
            continue
        exists = key in accepted or key in added
        if prefix == "++":
            added.add(key)
        elif prefix == "+":
            if exists:
                out.append((index, item, f"{APPEND_EXISTING} '{key}'"))
            else:
                added.add(key)
        elif prefix == "~":
            if not exists:
                out.append((index, item, f"Could not delete from config. '{key}' is missing"))
        elif not exists:
            out.append((index, item, f"Could not override '{key}'"))
    return out


APPEND_EXISTING = "Could not append to config. An item is already at"
"""Hydra's refusal of ``+key=value`` for a key the config has (``++key`` or ``key`` sets it)."""


def appended_existing(overrides: Any, version: str | None, context: Mapping[str, Any]) -> list[str]:
    """The keys a launch adds with a single ``+`` although its config already has them
    (Hydra refuses the launch: :data:`APPEND_EXISTING`); written without the ``+``, the same
    override sets the existing key, which is what the ``+`` meant in the release it was
    written for (a key the config gained later). ``context`` is the reader's (entry, composed
    config name and keys)."""
    if not isinstance(overrides, (list, tuple)):
        return []
    checked = checked_keys(overrides, version, context)
    if checked is None:
        return []
    _, accepted = checked
    return [
        override_key(item)[1]
        for _, item, why in rejected_overrides(list(overrides), accepted)
        if why.startswith(APPEND_EXISTING)
    ]


def checked_keys(
    overrides: list[str] | tuple[str, ...], version: str | None, context: Mapping[str, Any]
) -> tuple[str, frozenset[str]] | None:
    """The recorded config a launch's ``overrides`` are checked against in ``version`` (the
    entry's, the ``model_engine`` choice applied) and the keys they may name there
    (:func:`accepted_keys`, with the launch's own composed keys); None when the overrides are
    not checked. ``context`` is the reader's: entry, composed config name and keys."""
    entry = context.get("entry")
    config = checked_config(
        entry, facts(entry) if entry else None, context.get("config_name"),
        context.get("config_check"),
    )  # fmt: skip
    if config == "ppo_trainer":
        config = engine_config(list(overrides), semantics(version))
    if config is None:
        return None
    return config, accepted_keys(
        semantics(version), config, tuple(context.get("config_keys") or ())
    )


def accepted_keys(sem: VerlSemantics, config: str, extra: tuple[str, ...]) -> frozenset[str]:
    """The keys an override may name: every key of the recorded ``config`` in ``sem``'s release
    (none when ``config`` is empty), plus ``extra`` (the launch's own composed config keys)
    with each of their parent mappings."""
    own = sem.accepted_keys(config) if config else frozenset()
    more: set[str] = set()
    for key in extra:
        parts = key.split(".")
        more.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return own | more


def _check_keys(
    overrides: list[str],
    sem: VerlSemantics,
    config: str,
    extra: tuple[str, ...],
    snapshot: bool,
) -> tuple[list[str], VerlSemantics, list[Finding]]:
    """The overrides this release accepts, the semantics to read them with (the next release
    when a snapshot's launch uses keys only it has), and the findings."""
    refused = rejected_overrides(overrides, accepted_keys(sem, config, extra))
    findings: list[Finding] = []
    later = [r for r in RELEASES if Version(r) > Version(sem.release)]
    if refused and snapshot and later and config:
        nxt = semantics(later[0])
        refused_next = rejected_overrides(overrides, accepted_keys(nxt, config, extra))
        if {i for i, _, _ in refused_next} < {i for i, _, _ in refused}:
            gained = sorted(
                {override_key(o)[1] for i, o, _ in refused}
                - {override_key(o)[1] for i, o, _ in refused_next}
            )
            findings.append(
                Finding(
                    "verl.version_newer_code",
                    "warning",
                    f"The launch sets {', '.join(gained[:4])}, which verl {sem.release}'s "
                    f"{config}.yaml does not have and {nxt.release}'s does: the verl that runs "
                    f"is newer code than {sem.version} (a vendored copy or a branch snapshot; "
                    f"verl's main branch kept the version file at 0.1 until the 0.2 release), "
                    f"so it is read with the semantics of {nxt.release} (a verl "
                    f"{sem.version} would refuse these overrides).",
                )
            )
            sem = dataclasses.replace(nxt, version=sem.version)
            refused = refused_next
    if refused:
        shown = "; ".join(f"{item!r}: {why}" for _, item, why in refused[:4])
        rest = [override_key(item)[1] for _, item, _ in refused[4:]]
        more = f" (and {len(rest)} more: {', '.join(rest)})" if rest else ""
        findings.append(
            Finding(
                "verl.key_rejected",
                "error",
                f"verl {sem.version} refuses this launch: Hydra composes {config or 'the'} "
                f"config in strict mode and {shown}{more}. The reading leaves the refused "
                "overrides out (what runs once they are deleted). Delete them, or write "
                "++key=value to add a key the config lacks.",
            )
        )
    drop = {i for i, _, _ in refused}
    return [o for i, o in enumerate(overrides) if i not in drop], sem, findings


def _link_findings(sem: VerlSemantics, links: dict[str, tuple[str, ...]]) -> list[Finding]:
    """A refusal for each linked trainer config whose groups (in ``sem``'s release) the
    project's folder lacks: Hydra fails before the trainer starts."""
    out: list[Finding] = []
    for name, present in sorted(links.items()):
        missing = missing_groups(sem.release, set(present))
        if not missing:
            continue
        out.append(
            Finding(
                "verl.config_group_missing",
                "error",
                f"verl {sem.version} refuses this launch: the project's config folder links "
                f"{name}.yaml into verl, whose {name}.yaml in {sem.release} composes the config "
                f"groups {', '.join(missing)} through its defaults list, and Hydra looks them up "
                "on the project's search path, which has no such folders "
                f"(MissingConfigException: In '{name}': Could not find '{missing[0]}/...'). "
                "Add verl's config folder to the search path (hydra.searchpath: "
                "[pkg://verl.trainer.config]) or keep the verl the link was written for.",
            )
        )
    return out


def _version_findings(
    sem: VerlSemantics, entry: str | None, version_file: str, promoted: bool = False
) -> list[Finding]:
    out: list[Finding] = []
    if not sem.exact and not promoted:
        out.append(
            Finding(
                "verl.version_not_recorded",
                "info",
                f"verl {sem.version} is not a release kl-patches has recorded; it is read with "
                f"the semantics of verl {sem.release}"
                + (
                    " (the oldest recorded release)"
                    if Version(sem.release) > _version_or_zero(sem.version)
                    else " (the newest recorded release not after it)"
                )
                + ".",
            )
        )
    module = entry or "verl.trainer.main_ppo"
    if module in sem.entries and sem.entries[module] is None:
        out.append(
            Finding(
                "verl.entry_not_in_version",
                "error",
                f"{module} is not in verl {sem.release}: the launch fails to start "
                "(No module named ...).",
                f"python -m verl.trainer.main_ppo {LAUNCH_ARGUMENTS['verl']}",
            )
        )
    return out


def _sign_bug_findings(version_file: str, effective: dict[str, Any]) -> list[Finding]:
    """The vendored copy's KL-loss sign bug (see :func:`.semantics.vendored_sign_bug`): an
    error when this launch runs the loss-side KL (the effective ``use_kl_loss``), otherwise
    only a note, since the subtracting line is never reached."""
    bug = vendored_sign_bug(version_file) if version_file else None
    if not bug:
        return []
    line = (
        f"This vendored verl maximises the KL loss ({bug}: policy_loss - kl_loss * coef, "
        "verl's main branch from 2025-01-23 to 2025-02-01, fixed by PR #179)"
    )
    repair = "policy_loss = policy_loss + kl_loss * self.config.kl_loss_coef"
    if effective.get(ACTOR + "use_kl_loss"):
        return [
            Finding(
                "verl.kl_loss_sign_bug",
                "error",
                f"{line}: use_kl_loss pushes the policy away from the reference. Fix the line "
                f"to {repair}.",
            )
        ]
    return [
        Finding(
            "verl.kl_loss_sign_bug_unused",
            "info",
            f"{line}; this launch runs no KL loss (use_kl_loss is off), so it is not reached. "
            f"Before turning use_kl_loss on, fix the line to {repair}.",
        )
    ]


_GATE_TEXT = {
    "use_kl_in_reward": "runs the reward KL under algorithm.use_kl_in_reward",
    "not_use_kl_loss": "runs the reward KL whenever actor.use_kl_loss is off",
    "always": "always runs the reward KL",
    "never": "never runs the reward KL (no apply_kl_penalty call)",
}


def _vendored_rules(sem: VerlSemantics, version_file: str) -> tuple[VerlSemantics, list[Finding]]:
    """``sem`` with the reward gate and the KL loss the vendored copy's code has (see
    :mod:`.vendored`), and a finding when they differ from its version file's release."""
    code = read_code(version_file)
    changes: dict[str, Any] = {}
    said: list[str] = []
    if code.reward_gate is not None and code.reward_gate != sem.reward_gate:
        changes["reward_gate"] = code.reward_gate
        said.append(f"its trainer {_GATE_TEXT[code.reward_gate]} ({code.reward_where})")
    if code.kl_loss is not None and code.kl_loss != sem.kl_loss:
        changes["kl_loss"] = code.kl_loss
        said.append(
            f"its actor {'has' if code.kl_loss else 'has no'} the KL loss "
            f"(use_kl_loss, {code.kl_loss_where})"
        )
    if code.estimator_names is not None:
        names = _copy_estimators(code.estimator_names)
        if names != sem.estimator_names:
            changes["estimator_names"] = names
            gained = sorted(set(names) - set(sem.estimator_names))
            lost = sorted(set(sem.estimator_names) - set(names))
            said.append(
                f"its kl_penalty ({code.estimator_where}) accepts "
                + ", ".join(sorted(names))
                + (f" (beyond {sem.release}: {', '.join(gained)})" if gained else "")
                + (f" (not {', '.join(lost)})" if lost else "")
            )
    if not changes:
        return sem, []
    finding = Finding(
        "verl.vendored_code",
        "warning",
        f"This vendored verl says {sem.version} but its code differs from verl {sem.release} "
        f"in the KL rules: {'; '.join(said)}. It was taken from verl's main branch between "
        "tags (or changed by the project); the launch is read with the copy's own rules.",
    )
    return dataclasses.replace(sem, **changes), [finding]


def _copy_estimators(found: frozenset[str]) -> dict[str, str]:
    """What each estimator name a copy's ``kl_penalty`` accepts computes: the meaning the
    newest recorded release that has the name gives it (verl never reused a name for another
    estimator); a name no release has is left out (the reader then says it raises)."""
    meaning: dict[str, str] = {}
    for release in RELEASES:
        meaning.update(semantics(release).estimator_names)
    return {name: meaning[name] for name in sorted(found) if name in meaning}


def _version_or_zero(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def _flat_source(source: Any) -> dict[str, Any]:
    """The dotted settings a source sets itself (no defaults filled in)."""
    if isinstance(source, (list, tuple)):
        return parse_overrides(source)
    if isinstance(source, Mapping) or hasattr(source, "keys"):
        return flatten(_container(source))
    settings = settings_of(source)  # YAML path or text: read through translate
    return dict(settings)


def _container(source: Any) -> Any:
    if type(source).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(source, resolve=True)
    return source


def _settings(source: Any, sem: VerlSemantics) -> dict[str, Any]:
    """Every key the reader reads, from ``source`` or, when it does not set it, the default
    of the release (the newest tested release's defaults are :data:`~.versions.DEFAULTS`)."""
    if not isinstance(source, (list, tuple, Mapping)) and not hasattr(source, "keys"):
        settings_of(source)  # raises the reader's own error for what it cannot read
    flat = _flat_source(source)
    return {key: flat.get(key, default) for key, default in sem.defaults.items()}


def _effective(s: dict[str, Any], sem: VerlSemantics) -> dict[str, Any]:
    """The settings as the release's code acts on them: the reward-side switch it really
    uses (0.1: always on; 0.2-0.3.x: on whenever the KL loss is off) and the loss KL's fixed
    aggregation before 0.4.0."""
    out = dict(s)
    if not sem.kl_loss:
        out[ACTOR + "use_kl_loss"] = False
    if sem.reward_gate == "always":
        out["algorithm.use_kl_in_reward"] = True
    elif sem.reward_gate == "never":
        out["algorithm.use_kl_in_reward"] = False
    elif sem.reward_gate == "not_use_kl_loss":
        out["algorithm.use_kl_in_reward"] = not bool(out[ACTOR + "use_kl_loss"])
    if sem.loss_aggregation_fixed is not None:
        out[ACTOR + "loss_agg_mode"] = "token-mean"
    return out


def _name_findings(s: dict[str, Any], sem: VerlSemantics) -> list[Finding]:
    """Estimator names the release cannot run (it raises at the first KL step)."""
    out: list[Finding] = []
    sides = (
        (reward_side(s), "algorithm.kl_penalty"),
        (loss_side(s), ACTOR + "kl_loss_type"),
    )
    for side, key in sides:
        if not side.on or side.name == MARKER:
            continue
        base = side.name.removesuffix("+")
        if side.name.endswith("+") and base in sem.estimator_names:
            if sem.plus_names == "advertised_but_raises":
                out.append(
                    Finding(
                        "verl.plus_estimator_crashes",
                        "error",
                        f"{key}={side.name!r}: verl {sem.release} documents the '+' "
                        "(straight-through) names but passes them unstripped to "
                        "kl_penalty_forward, which raises NotImplementedError at the first KL "
                        f"step ({sem.sources['plus_names']}); fixed in verl 0.8.0.",
                        f"{key}={base}",
                    )
                )
                continue
            if sem.plus_names == "base_value_k2_gradient":
                continue
        if side.name.endswith("+") or base not in sem.estimator_names:
            known = sorted(n for n, v in sem.estimator_names.items() if v != "NotImplementedError")
            out.append(
                Finding(
                    "verl.unknown_estimator",
                    "error",
                    f"{key}={side.name!r} is not an estimator of verl {sem.release} (it has "
                    f"{known}): kl_penalty raises NotImplementedError at the first KL step.",
                    f"{key}={'low_var_kl' if 'low_var_kl' in known else 'kl'}",
                )
            )
        elif sem.estimator_names[base] == "NotImplementedError":
            out.append(
                Finding(
                    "verl.unknown_estimator",
                    "error",
                    f"{key}={side.name!r} raises NotImplementedError in verl {sem.release}.",
                )
            )
    return out


def _clamped(config: KLConfig, sem: VerlSemantics) -> KLConfig:
    """verl's k3 clamps as the release applies them (no log-ratio clamp before 0.4.1)."""
    if (
        config.estimator == "k3"
        and (config.log_ratio_clamp, config.kl_clamp) == (NATIVE_CLAMPS["k3"])
    ):
        return config.replace(log_ratio_clamp=sem.k3_clamps[0], kl_clamp=sem.k3_clamps[1])
    return config


def _loss_only(s: dict[str, Any], sem: VerlSemantics) -> KLConfig | None:
    """The loss side alone when both sides are on with different estimators, else None."""
    reward, loss = reward_side(s), loss_side(s)
    if not (reward.on and loss.on) or MARKER in (reward.name, loss.name):
        return None
    if reward.estimator == loss.estimator or loss.estimator is None:
        return None
    est = str(loss.estimator)
    log_clamp, kl_clamp = NATIVE_CLAMPS[est]
    agg = AGG_FROM_VERL.get(str(s[ACTOR + "loss_agg_mode"]), "token_mean")
    return _clamped(
        KLConfig(
            estimator=est,
            placement="loss",
            coef=loss.coef,
            loss_aggregation=agg,
            log_ratio_clamp=log_clamp,
            kl_clamp=kl_clamp,
        ),
        sem,
    )


DROPS_REWARD_KL = (
    "verl.gdpo_drops_kl",
    "verl.entry_drops_reward_kl",
)
"""Findings after which the reward-side KL never reaches the advantage (multi-turn GRPO's
``verl.multi_turn_drops_kl`` is not one: each trajectory's final output keeps its reward KL)."""

V1_ENTRIES = (None, "verl.trainer.main_ppo")
"""Entries that run verl's v1 trainer when ``trainer.use_v1`` is on (its multi-trajectory
GRPO, ``v1/utils.py:148``); the asynchronous and one-step-off trainers compute advantages with
``SeparateRayPPOTrainer._fit_compute_advantage`` (``experimental/separation/ray_trainer.py:
591``), every output with its own reward KL."""

DROPS_LOSS_KL = ("verl.entry_drops_loss_kl",)
"""Findings after which the loss-side KL never reaches the actor's loss."""


def _without_loss_side(config: KLConfig) -> KLConfig:
    """What verl runs when the trainer's actor never adds the loss-side KL."""
    if config.placement == "both":
        return config.replace(placement="reward", loss_coef=None)
    if config.placement == "loss":
        return KLConfig(placement="none", coef=config.coef)
    return config


def _entry_findings(
    entry: str | None, trainer_facts: Any, s: dict[str, Any], assumed: str
) -> list[Finding]:
    out: list[Finding] = []
    reward, loss = reward_side(s), loss_side(s)
    if entry and trainer_facts is None:
        out.append(
            Finding(
                "verl.entry_assumed",
                "warning",
                f"{entry} is not an entry point kl-patches has recorded"
                + (f" ({assumed})" if assumed else "")
                + "; it is read as verl.trainer.main_ppo on verl's default config. A trainer "
                "that overrides fit() may drop the reward KL, and its own config may set other "
                "defaults.",
            )
        )
    if trainer_facts is None:
        return out
    if reward.on and not trainer_facts.reward_kl:
        out.append(
            Finding(
                "verl.entry_drops_reward_kl",
                "error",
                f"{entry} never applies the reward-side KL ({trainer_facts.source}): "
                "algorithm.use_kl_in_reward only makes it build and run the reference model; "
                "the advantage is computed from the task reward alone. verl.trainer.main_ppo "
                "applies it (or put the KL in the loss: use_kl_loss with the estimator you "
                "want).",
                fix=f"python -m verl.trainer.main_ppo {LAUNCH_ARGUMENTS['verl']}",
            )
        )
    if loss.on and not trainer_facts.loss_kl:
        out.append(
            Finding(
                "verl.entry_drops_loss_kl",
                "error",
                f"{entry}'s actor never adds the loss-side KL ({trainer_facts.source}).",
            )
        )
    if trainer_facts.note:
        out.append(Finding("verl.entry_note", "info", f"{entry}: {trainer_facts.note}."))
    return out


def _other_kl_findings(s: dict[str, Any], extra: dict[str, Any]) -> list[Finding]:
    """Terms named "KL" in verl that are not the KL to the reference policy."""
    out: list[Finding] = []
    mode = str(s[ACTOR + "policy_loss.loss_mode"])
    if mode in ("kl_cov", "clip_cov"):
        out.append(
            Finding(
                "verl.kl_cov_not_reference_kl",
                "info",
                f"policy_loss.loss_mode={mode} regularises high-covariance tokens against the "
                "old policy (KL-Cov / Clip-Cov): a trust-region term of the policy loss, not "
                "the KL to the reference model; it is not part of the KL reading.",
            )
        )
    if bool(extra.get("distillation.enabled")):
        loss_mode = extra.get("distillation.distillation_loss.loss_mode", "k3")
        out.append(
            Finding(
                "verl.distillation_kl",
                "info",
                f"distillation.enabled adds a {loss_mode} distillation loss towards a teacher "
                "model: a KL to the teacher, not to the reference policy; it is not part of "
                "the KL reading.",
            )
        )
    return out


NOT_REFERENCE = NOT_REFERENCE_KL
"""Key globs of verl settings named "KL" that are not the reference KL (see :mod:`.entries`)."""


def _without_reward_side(config: KLConfig) -> KLConfig:
    """What verl runs when its advantage estimator discards the reward-side KL."""
    if config.placement == "both":
        return config.replace(placement="loss", coef=config.loss_coef_value, loss_coef=None)
    if config.placement == "reward":
        return KLConfig(placement="none", coef=config.coef)
    return config


def s_nested(flat: dict[str, Any]) -> dict[str, Any]:
    """Flat dotted settings -> nested dict (so they read back through ``settings_of``)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def _scale(s: dict[str, Any]) -> float:
    reward, loss = reward_side(s), loss_side(s)
    if reward.on:
        return reward.coef
    if loss.on:
        return loss.coef
    return float(s["algorithm.kl_ctrl.kl_coef"])


def _fix(s: dict[str, Any]) -> list[str]:
    return to_overrides(KLConfig(estimator="k1", placement="reward", coef=_scale(s)))


def _fix_text(s: dict[str, Any]) -> str:
    return " ".join(_fix(s))


def _findings(
    s: dict[str, Any], config: KLConfig, off_policy: bool, sem: VerlSemantics, v1: bool = True
) -> list[Finding]:
    reward, loss = reward_side(s), loss_side(s)
    adv = str(s["algorithm.adv_estimator"])
    fix = _fix_text(s)
    out: list[Finding] = []
    spec = _requested_patch(s)
    if spec is not None and MARKER in (reward.name, loss.name):
        out.append(
            Finding(
                "verl.kl_patches_patch",
                "info",
                f"The KL runs through the kl-patches verl patch ({spec.config}"
                + (", KL outside GRPO's std" if spec.kl_outside_std else "")
                + "): kl-patches must be installed on every node; verl alone raises on the "
                f"estimator name {MARKER!r}.",
            )
        )
    if not reward.on and not loss.on:
        out.append(
            Finding(
                "verl.kl_off",
                "info",
                "Both verl KL switches are off (use_kl_in_reward and actor.use_kl_loss), or their "
                "coefficients are 0: nothing keeps the policy near the reference model.",
                fix=fix,
            )
        )
    if reward.on and adv == "gdpo":
        out.append(
            Finding(
                "verl.gdpo_drops_kl",
                "error",
                "adv_estimator=gdpo rebuilds its scores from algorithm.gdpo_reward_keys and "
                "ignores token_level_rewards, so the KL subtracted by use_kl_in_reward never "
                "reaches the advantage: training runs without the reward KL. Keep the KL "
                "overrides and change the estimator.",
                fix="algorithm.adv_estimator=grpo or algorithm.adv_estimator=rloo",
            )
        )
    multi_turn = bool(s["actor_rollout_ref.rollout.multi_turn.enable"])
    if reward.on and multi_turn and adv == "grpo" and v1 and bool(s["trainer.use_v1"]):
        out.append(
            Finding(
                "verl.multi_turn_drops_kl",
                "error",
                "Multi-turn GRPO in verl's v1 trainer computes the advantage from the final "
                "output of each trajectory only and broadcasts it (v1/utils.py:148), so the "
                "reward KL reaches the advantage through each trajectory's final output only: "
                "that of its earlier outputs is dropped. The reading keeps the reward side as "
                "set (it is what the final output gets). RLOO, or one output per trajectory, "
                "keeps every output's reward KL.",
                fix="algorithm.adv_estimator=rloo",
            )
        )
    if reward.on and loss.on and "k3" in (reward.estimator, _value_estimator(loss.name)):
        exact = verdict(config, off_policy=off_policy).unbiased
        out.append(
            Finding(
                "verl.both_switches_k3",
                "info" if exact else "warning",
                f"Both KL switches are on (reward {reward.name!r}, loss {loss.name!r}) with k3 on "
                "at least one side. "
                + (
                    "With one estimator, one coefficient and a token-sum loss this is the exact "
                    "'both' construction (the reward gives the score-function term, the loss the "
                    "path-wise term); k1 in the reward alone is simpler and has less variance."
                    if exact
                    else "Only the same estimator on both sides, with one coefficient, a "
                    "token-sum loss (loss_agg_mode=seq-mean-token-sum) and no std scaling of the "
                    "reward KL, adds up to the reverse-KL gradient; otherwise k3 in the reward "
                    "cancels most of the regulariser and k3 in the loss follows a forward KL."
                ),
                fix="" if exact else fix,
            )
        )
    if reward.on and loss.on and reward.coef != loss.coef:
        out.append(
            Finding(
                "verl.mismatched_coefficients",
                "warning",
                f"algorithm.kl_ctrl.kl_coef={reward.coef:g} differs from "
                f"actor.kl_loss_coef={loss.coef:g}: the same estimator in both places is unbiased "
                "only with one coefficient.",
                fix=f"{ACTOR}kl_loss_coef={reward.coef!r}",
            )
        )
    if reward.on and loss.on and reward.estimator != loss.estimator:
        out.append(
            Finding(
                "verl.mixed_estimators",
                "warning",
                f"The reward uses {reward.name!r} and the loss {loss.name!r}: two estimators; "
                "the verdict combines the reward side's score term with the loss side's "
                "path-wise term.",
                fix=fix,
            )
        )
    outside_std = spec is not None and spec.kl_outside_std and reward.name == MARKER
    # grpo_vectorized divides by the std whatever norm_adv_by_std_in_grpo says: verl's
    # compute_advantage does not pass it the flag (0.6.0-0.9.1, where the estimator exists)
    vectorized = adv == "grpo_vectorized"
    std_on = vectorized or bool(s["algorithm.norm_adv_by_std_in_grpo"])
    if reward.on and adv in GRPO_LIKE and std_on and not outside_std:
        out.append(
            Finding(
                "verl.std_scaled_kl",
                "warning",
                "GRPO divides the KL-shaped score by the group's reward std, so the effective KL "
                "coefficient changes from group to group (large where rewards agree)"
                + (
                    "; the loss-side KL is not divided, so the two placements no longer share "
                    "one coefficient."
                    if loss.on
                    else "."
                )
                + (
                    " grpo_vectorized is not passed norm_adv_by_std_in_grpo: it always divides "
                    "by the std (the fix switches to grpo)."
                    if vectorized
                    else ""
                ),
                fix=(
                    "algorithm.adv_estimator=grpo algorithm.norm_adv_by_std_in_grpo=False"
                    if vectorized
                    else "algorithm.norm_adv_by_std_in_grpo=False"
                )
                + " or "
                + launcher_command(
                    "verl",
                    KLConfig.parse("k1-in-reward", coef=reward.coef),
                    options="--kl.outside_std",
                ),
            )
        )
    if reward.on and str(s["algorithm.kl_ctrl.type"]) == "adaptive":
        out.append(
            Finding(
                "verl.adaptive_kl",
                "info",
                "algorithm.kl_ctrl.type=adaptive moves the reward coefficient towards target_kl "
                "(per-token KL); the loss coefficient, if any, stays fixed.",
                fix="algorithm.kl_ctrl.type=fixed",
            )
        )
    if reward.on and bool(s["algorithm.rollout_correction.bypass_mode"]):
        out.append(
            Finding(
                "verl.bypass_mode_reward_kl",
                "warning",
                "rollout_correction.bypass_mode uses the rollout engine's log-probs as old log-"
                "probs, so the reward KL compares two engines (rollout vs reference model) and "
                "carries their numerical mismatch.",
                fix="algorithm.rollout_correction.bypass_mode=False",
            )
        )
    if loss.on:
        weighted = config.importance_weighting != "none"
        out += _loss_findings(s, loss.name, off_policy and not weighted, loss.coef)
    native_k3 = config.estimator == "k3" and MARKER not in (reward.name, loss.name)
    if native_k3 and config.placement != "none":
        log_clamp, value_clamp = sem.k3_clamps
        out.append(
            Finding(
                "verl.k3_clamp",
                "info",
                "verl's k3 clamps "
                + (f"the log-ratio to [-{log_clamp:g}, {log_clamp:g}] and " if log_clamp else "")
                + f"the value to [-{value_clamp or 10:g}, {value_clamp or 10:g}]; the clamp on the "
                "value saturates for per-token ratios pi_ref/pi above about 14"
                + ("" if log_clamp else f" (verl {sem.release} has no log-ratio clamp)")
                + ".",
            )
        )
    return out


def _requested_patch(s: dict[str, Any]) -> PatchSpec | None:
    try:
        return patch_spec_of(s)
    except ValueError:
        return None


def _value_estimator(name: str) -> str | None:
    """KLConfig estimator of a verl name's value (``+`` stripped); None if unknown."""
    return VERL_ESTIMATORS.get(name.removesuffix("+"))


def _loss_findings(
    s: dict[str, Any], name: str, off_policy: bool, coef: float = 0.0
) -> list[Finding]:
    out: list[Finding] = []
    # the patch aggregates its KL itself (KLConfig.loss_aggregation): loss_agg_mode is then the
    # policy loss's alone
    mode = "" if name == MARKER else str(s[ACTOR + "loss_agg_mode"])
    if mode == "token-mean":
        out.append(
            Finding(
                "verl.token_mean_loss",
                "info",
                "The loss KL is aggregated with loss_agg_mode=token-mean (mean over the mini-"
                "batch's tokens), as is the policy loss: the KL per sequence is weighted by its "
                "length relative to a per-sequence sum, and the step scales with 1/mean length.",
                fix=f"{ACTOR}loss_agg_mode=seq-mean-token-sum",
            )
        )
    elif mode == "seq-mean-token-mean":
        out.append(
            Finding(
                "verl.length_normalised_loss",
                "warning",
                "loss_agg_mode=seq-mean-token-mean divides each sequence's KL by its length: a "
                "length-normalised KL, not the sequence KL.",
                fix=f"{ACTOR}loss_agg_mode=seq-mean-token-sum",
            )
        )
    if name.endswith("+"):
        out.append(
            Finding(
                "verl.straight_through",
                "info",
                f"kl_loss_type={name!r} logs the value of {name[:-1]!r} but takes k2's gradient "
                "(a token-level k2 in the loss, read as k2).",
            )
        )
    if off_policy:
        epochs = s[ACTOR + "ppo_epochs"]
        mini = s[ACTOR + "ppo_mini_batch_size"]
        out.append(
            Finding(
                "verl.off_policy_loss_kl",
                "warning",
                f"ppo_epochs={epochs} and ppo_mini_batch_size={mini} < data.train_batch_size="
                f"{s['data.train_batch_size']} give several updates per batch, but verl's loss KL "
                "has no importance weight pi/pi_old: after the first update it is evaluated on "
                "samples from an older policy. Fixes: k1 in the reward with sequence weights "
                "(the reverse-KL gradient off-policy), this estimator with each token "
                "reweighted, or one update per batch.",
                fix=" or ".join(_off_policy_fixes(s, name, coef)),
            )
        )
    return out


def _off_policy_fixes(s: dict[str, Any], name: str, coef: float) -> list[str]:
    """The commands and overrides that make the loss-side KL right off-policy: kl-patches' k1
    in the reward with sequence weights, this estimator with token weights, one update per
    batch (when the batch size is a number)."""
    k1 = KLConfig.parse("k1-in-reward", coef=_scale(s), importance_weighting="sequence")
    out = [launcher_command("verl", k1)]
    estimator = _value_estimator(name)
    if estimator is not None and coef > 0:
        own = KLConfig(
            estimator=estimator, placement="loss", coef=coef, importance_weighting="token"
        )
        out.append(launcher_command("verl", own))
    batch = s["data.train_batch_size"]
    if isinstance(batch, int) and not isinstance(batch, bool):
        out.append(f"{ACTOR}ppo_mini_batch_size={batch} {ACTOR}ppo_epochs=1")
    return out


def claims(mapping: Mapping[str, Any]) -> bool:
    """A mapping with a verl section (``algorithm``, ``actor_rollout_ref``) is a verl config, so
    is a Hydra config whose ``defaults`` list or search path names verl's trainer configs, and
    one with a ``defaults`` list beside one of verl's sections (:data:`HYDRA_SECTIONS`)."""
    if any(isinstance(mapping.get(k), dict) for k in SECTIONS):
        return True
    defaults = mapping.get("defaults")
    names = [str(d) for d in defaults] if isinstance(defaults, list) else []
    if isinstance(defaults, list) and any(isinstance(mapping.get(k), dict) for k in HYDRA_SECTIONS):
        return True
    if any(n.endswith(("ppo_trainer", "ppo_megatron_trainer")) for n in names):
        return True
    hydra = mapping.get("hydra")
    search = hydra.get("searchpath") if isinstance(hydra, dict) else None
    return isinstance(search, list) and any("verl" in str(p) for p in search)


def split_hydra_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """(overrides, Hydra's own command-line options) of a Hydra app's argv."""
    overrides: list[str] = []
    options: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if tok.startswith("-") and not tok.startswith("--") and len(tok) > 1 and "=" in tok:
            options.append(tok)
        elif tok.startswith("-"):
            options.append(tok)
            if tok in HYDRA_VALUE_OPTIONS and i < len(argv):
                options.append(argv[i])
                i += 1
        else:
            overrides.append(tok)
    return overrides, options


def hydra_options(options: list[str]) -> dict[str, str]:
    """``--config-path``/``--config-name``/``--config-dir`` (and short forms) of an argv."""
    names = {
        "--config-path": "config_path",
        "-cp": "config_path",
        "--config-name": "config_name",
        "-cn": "config_name",
        "--config-dir": "config_dir",
        "-cd": "config_dir",
    }
    out: dict[str, str] = {}
    i = 0
    while i < len(options):
        tok = options[i]
        key, eq, value = tok.partition("=")
        if key in names:
            if eq:
                out[names[key]] = value
            elif i + 1 < len(options):
                out[names[key]] = options[i + 1]
                i += 1
        i += 1
    return out


def entry_payload(
    label: str, argv: list[str], base_dir: Path | None = None, origin: str = ""
) -> LaunchPayload:
    """A verl launch: its Hydra overrides, the entry point, and Hydra's config options (the
    audit composes the config file they name and hands it back as ``base``)."""
    overrides, options = split_hydra_options(argv)
    found = hydra_options(options)
    trainer_facts = facts(label)
    context: dict[str, Any] = {"entry": label}
    if trainer_facts is not None and trainer_facts.config and "config_name" not in found:
        found.setdefault("default_config", trainer_facts.config)
    elif trainer_facts is None and "config_name" not in found and "." in label:
        # an unrecorded entry is read as main_ppo: its own ppo_trainer.yaml where a checkout
        # has one (verl-tool's verl_tool/trainer/config/, beside @hydra.main(config_path=
        # "config", config_name="ppo_trainer")), else the release's
        found.setdefault("default_config", "ppo_trainer")
    if found:
        context["hydra"] = found
    other = [o for o in options if o not in _option_words(options)]
    notes: tuple[str, ...] = ()
    if other:
        notes = (f"Hydra options not read: {' '.join(other)}",)
    return LaunchPayload(overrides, notes, context=context)


def _option_words(options: list[str]) -> set[str]:
    """The words of ``options`` that are config path/name/dir options or their values."""
    keys = {"--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd"}
    out: set[str] = set()
    i = 0
    while i < len(options):
        key = options[i].partition("=")[0]
        if key in keys:
            out.add(options[i])
            if "=" not in options[i] and i + 1 < len(options):
                out.add(options[i + 1])
                i += 1
        i += 1
    return out


def installed_defaults() -> dict[str, Any]:
    """The KL-relevant defaults of the installed verl, read by composing its Hydra config."""
    from .hydra_config import compose
    from .versions import DEFAULTS

    settings = settings_of(compose([]))
    return {key: settings[key] for key in DEFAULTS}
