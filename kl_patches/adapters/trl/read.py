"""Read what a TRL launch runs, for the audit: ``read(source) -> NativeReading``.

Accepted sources: a ``GRPOConfig``/``RLOOConfig`` (or any object with the same attributes), a
trainer (TRL's or the kl-patches one), or a dict such as a TRL YAML config; a dict names its
trainer with ``trainer: grpo|rloo`` (default grpo, or rloo when it has RLOO-only keys).
``kl_*`` keys (see :class:`.KLArguments`) mean the run goes through kl-patches. The KLConfig
comes from :mod:`.translate`; this module adds whether the updates are off-policy, TRL-specific
findings and the native fix. It also turns a TRL command line (``--config FILE --key value``,
``TrlParser`` style) into that dict. TRL need not be installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from packaging.version import Version

from kl_patches.adapters.base import Finding, LaunchPayload, NativeReading
from kl_patches.adapters.files import load_mapping, safe_yaml, yaml_module
from kl_patches.adapters.flags import launcher_command, long_options
from kl_patches.config import KLConfig

from . import unsloth_facts
from .entries import PPO_DEFAULTS, PPO_LAST_RELEASE, PYTHON
from .fieldsets import (
    CONFIG_KEYS_CHECKED_SINCE,
    CONFIG_KEYS_SOURCE,
    HF_ARGPARSER_BOOL,
    config_keys_checked,
    needs_value,
)
from .history import HISTORY
from .semantics import TrlSemantics, semantics
from .translate import KL_BLOCK, KL_KEYS, MONITOR_FIELD, flatten_kl_block, kind_of, patched_config
from .versions import (
    ABSENT_MEANS,
    GRPO_DEFAULTS,
    HOOKS_FROM,
    RLOO_DEFAULTS,
    SUPPORT,
    unscaled_value,
)

COVERS = {
    "trl.kl_off": "kl_off",
    "trl.token_mean_loss": "token_mean_loss",
}
"""TRL finding codes that already say an audit-level finding (the audit does not repeat it)."""


def _off_policy(s: dict[str, object]) -> bool:
    spg = s["steps_per_generation"]
    ga = s["gradient_accumulation_steps"]
    return int(s["num_iterations"]) > 1 or (spg is not None and int(spg) > int(ga))  # type: ignore[call-overload]


def _int(value: object, default: int) -> int:
    try:
        return int(value)  # type: ignore[call-overload,no-any-return]
    except (TypeError, ValueError):
        return default


def off_policy_reasons(s: dict[str, object], source: Any) -> list[str]:
    """Why a GRPO/RLOO run's updates are off-policy, with the settings behind each reason.

    ``steps_per_generation`` defaults to ``gradient_accumulation_steps``; a
    ``generation_batch_size`` sets it to ``generation_batch_size / (per_device_train_batch_size
    * processes)`` (one process assumed; noted in the reason)."""
    out: list[str] = []
    iterations = _int(s["num_iterations"], 1)
    if iterations > 1:
        out.append(
            f"num_iterations={iterations}: each generation batch is used for {iterations} "
            "passes of updates"
        )
    ga = _int(s["gradient_accumulation_steps"], 1)
    spg = s["steps_per_generation"]
    assumed = ""
    if spg is None and isinstance(source, dict) and source.get("generation_batch_size"):
        per_device = _int(source.get("per_device_train_batch_size", 8), 8)
        spg = _int(source["generation_batch_size"], 0) // max(1, per_device)
        assumed = " (from generation_batch_size / per_device_train_batch_size, one process)"
    if spg is not None and _int(spg, ga) > ga:
        out.append(
            f"steps_per_generation={spg} > gradient_accumulation_steps={ga}{assumed}: one "
            f"generation batch feeds {_int(spg, ga) // max(1, ga)} optimiser steps"
        )
    if "num_ppo_epochs" in s:
        epochs = _int(s["num_ppo_epochs"], 4)
        minis = _int(s.get("num_mini_batches", 1), 1)
        if epochs * minis > 1:
            out.append(
                f"num_ppo_epochs={epochs} x num_mini_batches={minis}: the PPO-style RLOOTrainer "
                f"of TRL < 0.22 takes {epochs * minis} updates per batch"
            )
    return out


def _findings(
    kind: str,
    s: dict[str, object],
    config: KLConfig,
    patched: bool,
    sem: TrlSemantics | None = None,
    given: frozenset[str] | None = None,
) -> list[Finding]:
    """TRL-specific findings; ``given`` is the set of keys the launch sets itself (None: every
    key, as for a config object, whose defaults are the installed release's own)."""
    sem = sem or semantics()
    out: list[Finding] = []
    beta = float(s["beta"])  # type: ignore[arg-type]
    if not patched and beta == 0.0:
        out.append(
            Finding(
                "trl.kl_off",
                "warning" if kind == "GRPO" else "info",
                f"{kind}Config.beta=0: no KL regularisation and no reference model"
                + (" (GRPO's default since TRL 0.19)." if kind == "GRPO" else "."),
                f"beta={KLConfig().coef!r}"
                if kind == "RLOO"
                else _switch(kind, s, KLConfig().coef, sem),
            )
        )
    if not patched and kind == "GRPO" and beta != 0.0:
        if (
            given is not None
            and "use_bias_correction_kl" not in given
            and s["use_bias_correction_kl"]
            and sem.bias_correction
        ):
            since = _bias_correction_default_since(sem.release)
            out.append(
                Finding(
                    "trl.kl_weighted_by_default",
                    "warning",
                    f"TRL {sem.release} multiplies each token's k3 by pi/pi_old by default "
                    f"(use_bias_correction_kl=True from TRL {since}, "
                    f"{sem.sources['use_bias_correction_kl']}): the same config trained an "
                    f"unweighted k3 on TRL < {since}, so its KL gradient differs from runs on "
                    "earlier releases (on-policy the weight is 1 and only the gradient changes). "
                    "Pin the choice: use_bias_correction_kl=false gives the k3 of earlier "
                    "releases, use_bias_correction_kl=true keeps this one.",
                    "use_bias_correction_kl=false or use_bias_correction_kl=true",
                )
            )
        if s["use_bias_correction_kl"] and s["importance_sampling_level"] == "sequence":
            out.append(
                Finding(
                    "trl.sequence_ratio_on_token_kl",
                    "warning",
                    "use_bias_correction_kl with importance_sampling_level='sequence' multiplies "
                    "each token's k3 by the sequence-mean ratio (TRL issue #6586), adding a "
                    "spurious gradient term; read as token weighting here.",
                    f"use_bias_correction_kl=false or {_switch(kind, s, config.coef, sem)}",
                )
            )
        if s["use_vllm"]:
            out.append(
                Finding(
                    "trl.kl_not_is_corrected",
                    "info",
                    "With vLLM, TRL's importance-sampling correction multiplies the policy loss "
                    "but not the k3 term.",
                )
            )
        if config.loss_aggregation != "sum":
            what = (
                f"loss_type={s['loss_type']!r}"
                if s["loss_type"] is not None
                else f"TRL {sem.release} (no loss_type option yet)"
            )
            out.append(
                Finding(
                    "trl.token_mean_loss",
                    "info",
                    f"{what} averages the k3 term over tokens: the "
                    "regulariser is a length-normalised KL, not the sequence KL.",
                    " or ".join(
                        [
                            f"loss_type={t}"
                            for t in ("luspo", "dr_grpo")
                            if t in sem.grpo_aggregation
                        ]
                        + [_switch(kind, s, config.coef, sem)]
                    ),
                )
            )
    if config.has_reward and kind == "GRPO" and s["scale_rewards"] != "none":
        out.append(
            Finding(
                "trl.std_scaled_kl",
                "warning",
                f"KL in the reward with scale_rewards={s['scale_rewards']!r}: reward minus KL is "
                "divided by the group std, so the effective coefficient varies per group.",
                "scale_rewards=none",
            )
        )
    return out


def _coef(s: dict[str, object], config: KLConfig) -> float:
    beta = float(s["beta"])  # type: ignore[arg-type]
    return config.coef if config.placement != "none" and config.coef > 0 else (beta or 0.05)


def _fix(kind: str, s: dict[str, object], config: KLConfig) -> tuple[str, ...]:
    """The native fields giving k1 in the reward: RLOO's ``beta`` (per sequence); GRPO has no
    native reward-side KL, so none (its fix is the kl-patches switch, :func:`_switch`)."""
    return (f"beta={_coef(s, config)!r}",) if kind == "RLOO" else ()


def _switch(kind: str, s: dict[str, object], coef: float, sem: TrlSemantics | None = None) -> str:
    """``kl-patches trl grpo|rloo ... --kl k1-in-reward``, with ``--scale_rewards none`` (``false``
    where the field is a bool, 0.16-0.21: :func:`.versions.unscaled_value`) where GRPO would
    divide the KL-shaped reward by the group std and the release has that field (0.16 on), and
    ``--kl.reward_shape sequence`` where the patch runs the KL as a reward function (before
    0.27: :mod:`.legacy_reward` refuses reward-to-go)."""
    sem = sem or semantics()
    has_scale = not sem.accepted or "scale_rewards" in sem.accepted
    scaled = kind == "GRPO" and has_scale and s.get("scale_rewards") not in ("none", False, None)
    extra = f"--scale_rewards {unscaled_value(sem.release)}" if scaled else ""
    config = KLConfig.parse("k1-in-reward", coef=coef)
    if kind == "GRPO" and Version(sem.release) < Version(HOOKS_FROM):
        config = config.replace(reward_shape="sequence")
    return launcher_command("trl", config, kind, extra)


NATIVE_COEF_SETTINGS = {
    "max_completion_length": "loss_type='dr_grpo' runs beta / max_completion_length "
    "(native_at); kl-patches' loss term has no such divisor (kl_patches.core.loss_term)",
}
"""KL-relevant settings (:data:`.versions.GRPO_DEFAULTS`) that enter the reading only
through TRL's native KL coefficient: under a kl-patches config (the launcher's or an
``apply`` in the script) the KL no longer depends on them, so a value the audit cannot compute
is reported as an info, not a KL warning."""

PATCHER_PATCHES = {"kl_patches.adapters.trl.unsloth": "unsloth"}
"""kl-patches module -> the patcher whose own KL code its ``apply`` replaces: unsloth's
generated trainer keeps its loss, with its k3 term replaced by the KL config's loss side
(:mod:`.unsloth`, module docstring), so the trainer runs the config the script applies."""


def _context_findings(
    kind: str,
    patchers: tuple[str, ...],
    subclass: str,
    overrides: tuple[str, ...],
    unresolved: tuple[str, ...],
    entry: str,
    assumed: str,
) -> list[Finding]:
    out: list[Finding] = []
    for module in patchers:
        text = PYTHON.patchers.get(module)
        if text and kind == "GRPO":
            out.append(Finding(f"trl.{module}_loss", "warning", text + "."))
    if subclass:
        kl = [m for m in overrides if m in PYTHON.kl_methods]
        out.append(
            Finding(
                "trl.subclass_overrides",
                "warning" if kl else "info",
                f"{subclass} subclasses {kind}Trainer"
                + (
                    f" and overrides {', '.join(kl)}, which compute the KL: what runs may "
                    "differ from the config's meaning read here"
                    if kl
                    else " without overriding a method that computes the KL"
                )
                + ".",
            )
        )
    if unresolved:
        out.append(
            Finding(
                "trl.unresolved_settings",
                "warning",
                f"{', '.join(unresolved)}: set from values the audit cannot compute without "
                "running the script (a variable from elsewhere, a function call, **kwargs); "
                "read at their defaults.",
            )
        )
    if assumed:
        out.append(
            Finding(
                "trl.entry_assumed",
                "warning",
                f"{entry or 'the script'} is not an entry point kl-patches has recorded; "
                f"{assumed}.",
            )
        )
    return out


def read(
    source: Any,
    *,
    entry: str | None = None,
    version: str | None = None,
    patchers: tuple[str, ...] = (),
    subclass: str = "",
    overrides: tuple[str, ...] = (),
    unresolved: tuple[str, ...] = (),
    assumed: str = "",
    config_file: bool = False,
    script_fields: dict[str, str] | None = None,
    script_copies: tuple[str, ...] = (),
    project_trainer: str = "",
    kl_patch: str = "",
    **_: Any,
) -> NativeReading:
    """Full reading of a TRL config, trainer or dict for the audit.

    A dict with ``trainer: ppo`` is read as PPOTrainer. The keyword arguments come from the
    audit's Python reader: ``patchers`` (modules such as ``unsloth`` that replace the trainer's
    loss), ``subclass`` and ``overrides`` (a subclass of the trainer and the methods it
    overrides), ``unresolved`` (settings the script computes at run time), ``entry``/``assumed``
    (an unrecorded script read as a TRL trainer, and why). ``version`` is the TRL version to
    read it as (default: the newest tested release), through :func:`.semantics.semantics`: its
    defaults (``beta`` 0.04 before 0.19.0), its ``loss_type`` aggregations, its fused Liger
    loss, RLOO's PPO-style trainer before 0.22.0; a key of a dict that TRL's dataclasses had
    in other releases but not in this one is refused (an error finding; the reading leaves it
    out). A GRPO launch under ``unsloth`` is read with unsloth's defaults and its own k3 code
    (:mod:`.unsloth_facts`). ``config_file``: the dict is a YAML config file given to TrlParser
    (``--config``), whose keys no dataclass declares TrlParser before 0.19.0 ignores (a
    warning, not a refusal; :data:`FROM_CONFIG` marks such keys of a command line's file).
    ``script_fields``: the fields of the launched script's own dataclasses that its parser
    reads (:attr:`kl_patches.audit.python.PyScript.parser_fields`), accepted keys of this
    launch (:func:`_own_fields`); ``script_copies``: TRL config class names the script binds
    to its own copy (a file of its checkout), whose fields are in ``script_fields``;
    ``project_trainer``: the trainer classes of the project's own that the script builds (a
    ``trl.project_trainer`` warning). ``kl_patch``: the kl-patches module whose ``apply`` the
    script calls before the trainer (:attr:`kl_patches.audit.python.PyLaunch.kl_module`);
    :data:`PATCHER_PATCHES` names those that replace a patcher's own KL code (unsloth's loss:
    :mod:`.unsloth`), whose ``trl.<patcher>_loss`` warning is then settled.
    """
    sem = semantics(version)
    extra_findings: list[Finding] = []
    if project_trainer:
        extra_findings.append(
            Finding(
                "trl.project_trainer",
                "warning",
                f"The script trains {project_trainer}: a trainer class of the project's own, "
                "not TRL's. It is read here as TRL's GRPOTrainer with the launch's options; "
                "what runs is the project's code, which kl-patches' TRL patch (it replaces "
                "the KL of TRL's trainers) does not reach, so no kl-patches fix applies: "
                "change the KL in that class's own code.",
            )
        )
    if isinstance(source, dict) and KL_BLOCK in source:  # kl: {coef: ...} as kl_* keys
        source = flatten_kl_block(source)
    own: frozenset[str] = frozenset()
    if isinstance(source, dict):
        source, own = _own_fields(source, script_fields or {})
    if isinstance(source, dict) and STRAY in source:
        stray = [str(w) for w in source[STRAY]]
        source = {k: v for k, v in source.items() if k != STRAY}
        extra_findings.append(
            Finding(
                "trl.argument_rejected",
                "error",
                f"TRL's parser refuses this command line: {stray[:4]!r} "
                f"{'is' if len(stray) == 1 else 'are'} taken by no flag (HfArgumentParser: "
                "'Some specified arguments are not used'; a line continuation followed by a "
                "space passes ' ' as an argument). The reading leaves them out: remove the stray "
                "words (check for spaces after the backslashes).",
            )
        )
    if isinstance(source, dict) and BARE in source:
        bare = [str(w) for w in source[BARE]]
        source = {k: v for k, v in source.items() if k != BARE}
        extra_findings += _bare_flags(source, bare, sem, own, script_copies)
    if isinstance(source, dict):
        from_file = frozenset(source.get(FROM_CONFIG) or ())
        source = {k: v for k, v in source.items() if k != FROM_CONFIG}
        if config_file:
            from_file = frozenset(k for k in source if k != "trainer")
        ppo = str(source.get("trainer", "")).lower() == "ppo"
        # PPOTrainer on a release without it is read as its last release: fields too
        fields_at = semantics(PPO_LAST_RELEASE) if ppo and not sem.ppo else sem
        source, refused = _refuse(source, fields_at, unresolved, from_file, own)
        extra_findings += refused
    if isinstance(source, dict) and str(source.get("trainer", "")).lower() == "ppo":
        return _read_ppo(
            source, patchers, subclass, overrides, unresolved, entry or "", assumed, sem,
            extra_findings, version is not None,
        )  # fmt: skip
    kind = kind_of(source)
    s = settings_at(source, kind, sem)
    patched_kl = patched_config(source)
    patched = patched_kl is not None
    # unsloth replaces GRPOTrainer: its defaults and its own k3 code (unsloth_facts)
    unsloth = kind == "GRPO" and "unsloth" in patchers and not patched
    trl_settings = s
    if unsloth:
        s = unsloth_facts.resolve_settings(s, _given(source), sem.version)
    fused = _fused_on(source, sem) if kind == "GRPO" else ""
    config = patched_kl if patched_kl is not None else native_at(kind, s, sem, fused)
    if unsloth:
        config = unsloth_facts.native(config)
    reasons = off_policy_reasons(s, source)
    if patched and PATCHER_PATCHES.get(kl_patch) in patchers:  # its own KL code replaced
        patchers = tuple(p for p in patchers if p != PATCHER_PATCHES[kl_patch])
    native_only = [u for u in unresolved if patched and u in NATIVE_COEF_SETTINGS]
    unresolved = tuple(u for u in unresolved if u not in native_only)
    extra = _context_findings(kind, patchers, subclass, overrides, unresolved, entry or "", assumed)
    if native_only:
        extra.append(
            Finding(
                "trl.unresolved_settings",
                "info",
                f"{', '.join(native_only)}: set from values the audit cannot compute without "
                "running the script; TRL's own KL coefficient is the only KL reading that "
                "uses them (" + "; ".join(NATIVE_COEF_SETTINGS[u] for u in native_only) + "), "
                "and kl-patches' KL config replaces it here.",
            )
        )
    if unsloth:
        extra += unsloth_facts.findings(trl_settings, s, _given(source), sem.version, config=config)
    if fused and not patched and config.placement != "none":
        extra.append(
            Finding(
                "trl.fused_loss",
                "info",
                f"{fused}=True runs GRPO's fused Liger loss (TRL {sem.release}): its own k3, "
                f"outside _compute_loss ({sem.fused_kl}; {sem.sources['fused']}); a kl-patches "
                "patch of _compute_loss never runs under it.",
                f"{fused}=False",
            )
        )
    if not sem.exact:
        extra.append(
            Finding(
                "trl.version_not_recorded",
                "info",
                f"TRL {sem.version} is not a release kl-patches has recorded; it is read with "
                f"the semantics of {sem.release}.",
            )
        )
    return NativeReading(
        library="trl",
        version=sem.version if version is not None else SUPPORT.installed() or sem.version,
        trainer=(subclass or f"{kind}Trainer")
        + (f" ({kind}Trainer)" if subclass else "")
        + (" (kl-patches)" if patched else "")
        + (" (unsloth)" if unsloth else ""),
        config=config,
        off_policy=bool(reasons) or _off_policy(s),
        settings=s,
        findings=tuple(extra_findings)
        + tuple(_findings(kind, s, config, patched, sem, _given(source)))
        + tuple(extra),
        fix=unsloth_facts.fix(config, s) if unsloth else _fix(kind, s, config),
        off_policy_reason="; ".join(reasons),
        # the TRL patch refuses unsloth's trainer: its own loss-side patch is the change
        switch=unsloth_facts.patch_advice(config, s)
        if unsloth
        else _switch(kind, s, _coef(s, config), sem),
    )


def _given(source: Any) -> frozenset[str] | None:
    """The keys a dict launch sets itself; None for a config or trainer object (every field is
    set there, to the installed release's defaults)."""
    return frozenset(k for k in source if isinstance(k, str)) if isinstance(source, dict) else None


def _bias_correction_default_since(release: str) -> str:
    """The release from which ``use_bias_correction_kl`` defaults to True (as of ``release``)."""
    row = HISTORY.latest("grpo.use_bias_correction_kl_default", release)
    return row.since if row is not None else release


def _refuse(
    source: dict[str, Any],
    sem: TrlSemantics,
    unresolved: tuple[str, ...] = (),
    from_file: frozenset[str] = frozenset(),
    own: frozenset[str] = frozenset(),
) -> tuple[dict[str, Any], list[Finding]]:
    """``source`` without the keys the release refuses, and the error finding naming them.
    ``unresolved`` keys (set to a value the script computes at run time) are judged too: the
    release refuses the name whatever its value. ``from_file``: keys of a ``--config`` YAML,
    which a release before 0.19.0 ignores instead (a warning; the reading leaves them out).
    ``own``: fields of the launched script's own dataclasses, which its parser accepts."""
    keys = [
        k for k in [*source, *unresolved] if isinstance(k, str) and k.isidentifier()
        and k != "trainer" and k not in KL_KEYS and k != MONITOR_FIELD and k not in own
    ]  # fmt: skip
    keys = list(dict.fromkeys(keys))
    findings = _refuse_gone(keys, sem)
    refused = sem.refused(keys)
    checked = sem.older_than_recorded or config_keys_checked(sem.release)
    ignored = [] if checked else [k for k in refused if k in from_file]
    if ignored:
        refused = [k for k in refused if k not in ignored]
        source = {k: v for k, v in source.items() if k not in ignored}
        findings.append(
            Finding(
                "trl.config_key_ignored",
                "warning",
                f"TRL {sem.version}'s TrlParser ignores {', '.join(ignored[:6])} in the config "
                f"file: no dataclass of this release declares "
                f"{'it' if len(ignored) == 1 else 'them'} (set_defaults_with_config returns "
                f"the keys it did not use and parse_args_and_config drops them, "
                f"{CONFIG_KEYS_SOURCE}; TRL {CONFIG_KEYS_CHECKED_SINCE} and later refuse "
                "them). The setting has no effect; a project script with its own dataclasses "
                "may read it.",
            )
        )
    if not refused:
        gone = set(sem.refused_by_transformers(keys))
        return {k: v for k, v in source.items() if k not in gone}, findings
    parts = []
    for key in refused[:6]:
        last, first = sem.last_release_with(key), sem.first_release_with(key)
        when = (
            f"TRL {first} and later"
            if first is not None and Version(first) > Version(sem.release)
            else f"TRL up to {last}"
        )
        parts.append(f"{key} ({when})")
    more = f" and {len(refused) - 6} more ({', '.join(refused[6:])})" if len(refused) > 6 else ""
    finding = Finding(
        "trl.field_rejected",
        "error",
        f"TRL {sem.version} refuses this config: {', '.join(parts)}{more} "
        f"{'is' if len(refused) == 1 else 'are'} not a field of any of its dataclasses "
        "(TrlParser: 'Unknown arguments', GRPOConfig(...): TypeError). The reading leaves "
        "them out (what runs once they are deleted). Delete them, or run the TRL release the "
        "config was written for.",
    )
    dropped = {*refused, *sem.refused_by_transformers(keys)}
    return {k: v for k, v in source.items() if k not in dropped}, [finding, *findings]


def _own_fields(
    source: dict[str, Any], fields: dict[str, str]
) -> tuple[dict[str, Any], frozenset[str]]:
    """``source`` as the launched script's own parser reads it, and the keys its own
    dataclasses declare.

    A script that builds its parser from dataclasses it defines (``TrlParser((
    GRPOScriptArguments, GRPOConfig, ModelConfig))`` with its own ``GRPOScriptArguments``) gets
    their fields as options besides TRL's: HfArgumentParser adds one option per field of every
    dataclass it is given (transformers hf_argparser.py ``_add_dataclass_arguments`` ->
    ``_parse_dataclass_field``). A ``list`` field takes every word up to the next flag
    (``nargs="+"``: ``--reward_funcs accuracy format``), so those words are its values, not
    stray ones. A field TRL's dataclasses also declare keeps TRL's meaning (the reading below
    reads it as TRL's). Keys come from the command line only: ``AFTER`` is argv_dict's."""
    after = source.get(AFTER) or {}
    out = {k: v for k, v in source.items() if k != AFTER}
    if not fields:
        return out, frozenset()
    taken: list[str] = []
    for name, words in after.items():
        if fields.get(name) == "list" and name in out:
            out[name] = [out[name], *(_scalar(w, name) for w in words)]
            taken += words
    if taken and STRAY in out:
        stray = list(out[STRAY])
        for word in taken:
            stray.remove(word)
        out = {k: v for k, v in out.items() if k != STRAY}
        if stray:
            out[STRAY] = stray
    return out, frozenset(fields)


def _bare_flags(
    source: dict[str, Any],
    bare: list[str],
    sem: TrlSemantics,
    own: frozenset[str] = frozenset(),
    copies: tuple[str, ...] = (),
) -> list[Finding]:
    """The error finding for flags given without a value whose field needs one (argparse:
    "argument --NAME: expected one argument"); the reading keeps them as True. A field of the
    script's own dataclasses (``own``) is not judged here; a TRL config class the script
    replaces by its own copy (``copies``, VLM-R1's ``GRPOConfig`` on ``TrainingArguments``)
    is not consulted: a field the copy does not declare is transformers' (``bf16: bool =
    False``, a bare flag is True), not the field TRL's class redeclares."""
    if sem.older_than_recorded:
        return []
    trainer = str(source.get("trainer", "grpo")).lower()
    config = {"rloo": "RLOOConfig", "ppo": "PPOConfig"}.get(trainer, "GRPOConfig")
    classes = tuple(c for c in (config, "ModelConfig", "ScriptArguments") if c not in copies)
    refused: list[str] = []
    for name in bare:
        if name in own:
            continue
        judged = needs_value(sem.release, name, classes)
        if judged is not None and judged[0]:
            refused.append(f"--{name} ({judged[1]})")
    if not refused:
        return []
    return [
        Finding(
            "trl.argument_rejected",
            "error",
            f"TRL {sem.version}'s parser refuses this command line: {', '.join(refused[:4])} "
            f"{'is' if len(refused) == 1 else 'are'} given without a value, and the field is "
            "not a boolean with a default, so HfArgumentParser gives it no implicit True "
            f"({HF_ARGPARSER_BOOL}; argparse: 'expected one argument'). The reading takes it "
            "as True. Give each a value (a boolean: --NAME true).",
        )
    ]


def _refuse_gone(keys: list[str], sem: TrlSemantics) -> list[Finding]:
    """The error finding for keys the transformers of a fresh install no longer has."""
    from .successors import SUCCESSORS

    gone = sem.refused_by_transformers(keys)
    if not gone:
        return []
    renames = [f"{k} -> {SUCCESSORS[k].field}" for k in gone if k in SUCCESSORS]
    todo = "Delete them, or pin a transformers that still has them."
    if renames:
        rest = "delete the others, " if len(renames) < len(gone) else ""
        todo = (
            f"Rename {', '.join(renames)} (transformers' successor, value kept), {rest}or pin "
            "a transformers that still has them."
        )
    return [
        Finding(
            "trl.field_rejected",
            "error",
            f"TRL {sem.version} as installed (pip install trl=={sem.release} resolves "
            f"transformers {sem.transformers}) refuses this config: {', '.join(gone[:6])} "
            f"{'is' if len(gone) == 1 else 'are'} a field of older transformers' "
            f"TrainingArguments, not of {sem.transformers}'s, nor of any TRL dataclass "
            "(GRPOConfig(...): TypeError 'unexpected keyword argument'; TrlParser: 'not used "
            "by the HfArgumentParser'). The reading leaves them out. " + todo,
        )
    ]


def _fused_on(source: Any, sem: TrlSemantics) -> str:
    """The fused-loss flag a GRPO config switches on in this release ("" when none)."""
    args = getattr(source, "args", source)
    for flag in sem.fused_flags:
        value = args.get(flag) if isinstance(args, dict) else getattr(args, flag, None)
        if value is True or str(value).lower() == "true":
            return flag
    return ""


def settings_at(source: Any, kind: str, sem: TrlSemantics) -> dict[str, object]:
    """The KL-relevant settings of ``source`` with the release's defaults filled in (the
    newest tested release's are :data:`~.versions.GRPO_DEFAULTS` / ``RLOO_DEFAULTS``)."""
    defaults = sem.grpo_defaults if kind == "GRPO" else sem.rloo_defaults
    args = getattr(source, "args", source)  # a trainer carries its config in .args

    def get(key: str, default: object) -> object:
        if isinstance(args, dict):
            return args.get(key, default)
        return getattr(args, key, default)

    out: dict[str, object] = {key: get(key, default) for key, default in defaults.items()}
    if kind == "RLOO":
        for key in reversed(sem.rloo_coef_keys):  # the canonical key wins over the alias
            out["beta"] = get(key, out["beta"])
    if kind == "GRPO" and isinstance(out["scale_rewards"], bool):
        out["scale_rewards"] = "group" if out["scale_rewards"] else "none"
    return out


def native_at(kind: str, s: dict[str, object], sem: TrlSemantics, fused: str = "") -> KLConfig:
    """The KLConfig TRL ``sem.release``'s own code runs for the settings ``s`` of a ``kind``
    trainer (``fused``: the fused-loss flag that is on, if any)."""
    beta = float(s["beta"])  # type: ignore[arg-type]
    if beta == 0.0:
        return KLConfig(placement="none", coef=0.0)
    if kind == "RLOO":
        return KLConfig(estimator="k1", placement="reward", coef=beta)
    loss_type = s["loss_type"]
    if sem.loss_type_default is None or loss_type is None:
        aggregation = sem.grpo_aggregation[""]
    else:
        if str(loss_type) not in sem.grpo_aggregation:
            valid = sorted(k for k in sem.grpo_aggregation if k)
            raise ValueError(
                f"loss_type={loss_type!r} is not valid for TRL {sem.release}; choose one of {valid}"
            )
        aggregation = sem.grpo_aggregation[str(loss_type)]
    coef = beta
    if loss_type == "dr_grpo":  # sum / (B * max_completion_length): a sum with beta / L
        coef = beta / float(s["max_completion_length"])  # type: ignore[arg-type]
    weighted = bool(s["use_bias_correction_kl"]) and sem.bias_correction
    if fused and sem.fused_kl is not None and "times pi/pi_old" not in sem.fused_kl:
        weighted = False
    return KLConfig(
        estimator="k3",
        placement="loss",
        coef=coef,
        loss_aggregation=aggregation,
        importance_weighting="token" if weighted else "none",
    )


def _read_ppo(
    source: dict[str, Any],
    patchers: tuple[str, ...],
    subclass: str,
    overrides: tuple[str, ...],
    unresolved: tuple[str, ...],
    entry: str,
    assumed: str,
    sem: TrlSemantics | None = None,
    before: list[Finding] | None = None,
    asked: bool = False,
) -> NativeReading:
    """PPOTrainer as its release ran it (1.12.0's, its last, when the release has none): per-
    token k1 (or k3 from 0.17.0) in the reward, then GAE."""
    sem = sem or semantics()
    s: dict[str, object] = {k: source.get(k, v) for k, v in PPO_DEFAULTS.items()}
    estimator = str(s["kl_estimator"])
    if estimator not in ("k1", "k3"):
        raise ValueError(f"kl_estimator={estimator!r} is not valid; choose one of ['k1', 'k3']")
    coef = float(s["kl_coef"])  # type: ignore[arg-type]
    findings: list[Finding] = list(before or [])
    if not sem.ppo:
        findings.append(
            Finding(
                "trl.ppo_not_in_release",
                "warning",
                f"PPOTrainer is not in TRL {sem.version} (trl.experimental.ppo was last "
                f"shipped in {PPO_LAST_RELEASE}): read with the semantics of "
                f"{PPO_LAST_RELEASE}.",
            )
        )
    if coef > 0:
        config = KLConfig(
            estimator=estimator, placement="reward", coef=coef, reward_shape="reward_to_go"
        )
    else:
        config = KLConfig(placement="none", coef=0.0)
        findings.append(Finding("trl.kl_off", "info", "PPOConfig.kl_coef=0: no KL regularisation."))
    gamma, lam = float(s["gamma"]), float(s["lam"])  # type: ignore[arg-type]
    if coef > 0 and (gamma, lam) != (1.0, 1.0):
        findings.append(
            Finding(
                "trl.ppo_gae_discounts_kl",
                "warning",
                f"GAE with gamma={gamma:g}, lam={lam:g} discounts the per-token KL penalty "
                "through the critic's advantage, so the reward side no longer follows the "
                "sequence KL gradient exactly.",
                "gamma=1.0 lam=1.0",
            )
        )
    if s["whiten_rewards"]:
        findings.append(
            Finding(
                "trl.ppo_whiten_rewards",
                "info",
                "whiten_rewards rescales the KL-shaped rewards from batch to batch.",
            )
        )
    epochs = _int(s["num_ppo_epochs"], 4)
    minis = _int(s["num_mini_batches"], 1)
    reasons = []
    if epochs > 1 or minis > 1:
        reasons.append(
            f"num_ppo_epochs={epochs} x num_mini_batches={minis}: "
            f"{epochs * minis} updates per batch"
        )
    findings += _context_findings("PPO", patchers, subclass, overrides, unresolved, entry, assumed)
    return NativeReading(
        library="trl",
        version=sem.version if sem.ppo and asked else PPO_LAST_RELEASE,
        trainer=(subclass + " (PPOTrainer)") if subclass else "PPOTrainer",
        config=config,
        off_policy=bool(reasons),
        settings=s,
        findings=tuple(findings),
        fix=(f"trl rloo --beta {coef if coef > 0 else 0.05!r}",),
        off_policy_reason="; ".join(reasons),
    )


def installed_defaults() -> dict[str, dict[str, object]]:
    """KL-relevant defaults of the installed TRL (imports it), to compare with :mod:`.versions`."""
    import trl

    out: dict[str, dict[str, object]] = {}
    for kind, cls, keys in (
        ("GRPO", trl.GRPOConfig, GRPO_DEFAULTS),
        ("RLOO", trl.RLOOConfig, RLOO_DEFAULTS),
    ):
        cfg = cls(output_dir="/tmp/kl-patches-defaults", use_cpu=True, bf16=False)
        values = {k: getattr(cfg, k, ABSENT_MEANS.get(k)) for k in keys}  # 0.x: may lack some
        values["steps_per_generation"] = None  # TRL fills it from gradient_accumulation_steps
        out[kind] = values
    return out


def claims(mapping: dict[str, Any]) -> bool:
    """A flat mapping is a TRL ``TrlParser`` config; so is one whose only nested values are
    kl-patches' ``kl:`` block or fields TRL's dataclasses or transformers' TrainingArguments
    take as a dict (``gradient_checkpointing_kwargs``, ``model_init_kwargs``, any ``*_kwargs``),
    as long as one of its keys is such a field."""
    if not mapping:
        return False
    from .fieldsets import TRAINING_ARGUMENTS, known_fields

    fields = known_fields() | TRAINING_ARGUMENTS
    nested = [k for k, v in mapping.items() if isinstance(v, dict) and k != KL_BLOCK]
    if not nested:
        return True
    if any(not (isinstance(k, str) and (k in fields or k.endswith("_kwargs"))) for k in nested):
        return False
    return any(isinstance(k, str) and k in fields and k not in nested for k in mapping)


KNOWN_KEYS = frozenset({*GRPO_DEFAULTS, *RLOO_DEFAULTS, *PPO_DEFAULTS})
"""TRL config keys the reader reads (for the audit's unknown-script heuristics)."""

CONFIG_MARKERS = frozenset(
    {"beta", "num_generations", "reward_funcs", "loss_type", "scale_rewards", KL_BLOCK,
     MONITOR_FIELD, *KL_KEYS}
)  # fmt: skip
"""Keys only a TRL RL trainer config (or a kl-patches one) has: a flat YAML found by walking a
folder is read as TRL's only when it has one of them (a CI or tool config is flat too)."""


def recognises(mapping: dict[str, Any]) -> bool:
    """A TRL RL trainer config: :func:`claims` and one of :data:`CONFIG_MARKERS`."""
    return claims(mapping) and any(k in CONFIG_MARKERS for k in mapping)


def _scalar(text: str, flag: str = "") -> Any:
    """A flag value as TRL's parser would type it (YAML scalars: 0.1, true, null, ...); an
    integer too large for a float is an InputError naming the flag."""
    yaml = yaml_module()
    try:
        value = safe_yaml(text, f"--{flag}" if flag else "a flag value")
    except yaml.YAMLError:
        return text
    return value if isinstance(value, (str, int, float, bool)) or value is None else text


def _resolve(name: str, base_dir: Path | None) -> Path:
    path = Path(name)
    if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
        return base_dir / path
    return path


BARE = "__flags_without_value__"
"""Key of :func:`argv_dict`'s mapping for the flags given without a value (``--bf16`` followed
by another flag): read as True, refused where the field is not a boolean with a default
(:func:`.fieldsets.needs_value`)."""
FROM_CONFIG = "__config_file_keys__"
"""Key of :func:`argv_dict`'s mapping for the keys that come from the ``--config`` YAML only
(no flag sets them): TrlParser before 0.19.0 ignores those no dataclass declares
(:data:`~.fieldsets.CONFIG_KEYS_CHECKED_SINCE`)."""
STRAY = "__unused_arguments__"
"""Key of :func:`argv_dict`'s mapping for the words no flag takes (HfArgumentParser refuses
them: "Some specified arguments are not used by the HfArgumentParser")."""
AFTER = "__words_after_flag__"
"""Key of :func:`argv_dict`'s mapping: flag -> the words after its value (part of
:data:`STRAY`), which a list field of a script's own dataclass takes as further values
(HfArgumentParser gives such a field ``nargs="+"``; :func:`_own_fields`)."""


def argv_dict(argv: list[str], trainer: str | None, base_dir: Path | None) -> dict[str, Any]:
    """``--config FILE --key value ...`` (TrlParser style) as one mapping; flags win. Words no
    flag takes (a second value, a stray word) are kept under :data:`STRAY`."""
    out: dict[str, Any] = {}
    flags: dict[str, Any] = {}
    stray: list[str] = []
    bare: list[str] = []
    after: dict[str, list[str]] = {}
    for name, inline, following in long_options(argv):
        value = inline if inline is not None else (following[0] if following else "true")
        stray += following[1:] if inline is None else following
        if inline is None and len(following) > 1:
            after[name] = following[1:]
        if inline is None and not following and name != "config":
            bare.append(name)
        if name == "config":
            out.update(load_mapping(_resolve(value, base_dir), what="TRL config"))
            continue
        flags[name] = _scalar(value, name)
    from_file = [k for k in out if isinstance(k, str) and k not in flags]
    out.update(flags)
    if from_file:
        out[FROM_CONFIG] = from_file
    if stray:
        out[STRAY] = stray
        if after:
            out[AFTER] = after
    if bare:
        out[BARE] = bare
    if trainer is not None:
        out["trainer"] = trainer
    return out


def entry_payload(
    label: str, argv: list[str], base_dir: Path | None, origin: str = ""
) -> LaunchPayload:
    """A ``trl grpo|rloo|ppo`` (or ``trl.scripts.*``) launch as the reader's dict."""
    trainer = label.split()[-1]
    return LaunchPayload(argv_dict(argv, trainer, base_dir), context={"entry": label})


def bare_payload(words: list[str]) -> dict[str, Any]:
    """TRL flags without an entry point (``--library trl``) as the reader's dict."""
    return argv_dict(words, None, None)
