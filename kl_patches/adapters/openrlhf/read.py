"""Read an OpenRLHF ``train_ppo_ray`` command line for the audit (no OpenRLHF needed).

:func:`read` returns a :class:`~kl_patches.adapters.base.NativeReading`: the KLConfig OpenRLHF runs
(:func:`~kl_patches.adapters.openrlhf.translate.from_args`), whether the updates are off-policy, and
the findings that are specific to OpenRLHF 0.11.2. The audit adds the theory's verdict itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from kl_patches.adapters.base import Finding, NativeReading
from kl_patches.adapters.flags import LAUNCH_ARGUMENTS, launcher_command, long_options
from kl_patches.config import KLConfig

from .entries import LEGACY_FLAGS, facts
from .fork import copy_options, package_of
from .history import RELEASES
from .semantics import OpenRLHFSemantics, semantics
from .translate import (
    FLAGS,
    Flag,
    config_from_settings,
    convert_value,
    is_off_policy,
    to_args,
    updates_per_rollout,
)
from .versions import (
    GROUP_ESTIMATORS,
    IS_WEIGHT_CLIP,
    NATIVE_KL_CLAMP,
    installed_version,
)

TRAINER = "train_ppo_ray"

COVERS = {
    "openrlhf.kl_off": "kl_off",
    "openrlhf.kl_clamp": "kl_clamp",
    "openrlhf.kl_loss_token_mean": "token_mean_loss",
    "openrlhf.off_policy_kl_loss": "off_policy",
}
"""OpenRLHF finding codes that already say an audit-level finding (not repeated by the audit)."""


def _flags(args: list[str]) -> str:
    return " ".join(args)


def findings_for(
    settings: dict[str, object],
    given: frozenset[str],
    sem: OpenRLHFSemantics | None = None,
) -> tuple[Finding, ...]:
    """OpenRLHF-specific findings for parsed ``train_ppo_ray`` settings (``sem``: the release's
    semantics, default the newest tested release)."""
    sem = sem or semantics()
    out: list[Finding] = []
    coef = float(settings["algo.kl.init_coef"])  # type: ignore[arg-type]
    use_loss = bool(settings["algo.kl.use_loss"])
    estimator = str(settings["algo.kl.estimator"])
    adv = str(settings["algo.advantage.estimator"])
    off_policy = is_off_policy(settings)
    recommended = _flags(_fix_args(KLConfig(coef=coef if coef > 0 else 0.01), sem))

    if coef <= 0:
        asked = given & {"algo.kl.use_loss", "algo.kl.estimator", "algo.kl.unbiased_gradient"}
        out.append(
            Finding(
                "openrlhf.kl_off",
                "error" if asked else "warning",
                f"--algo.kl.init_coef {coef:g} builds no reference model, so every KL term is "
                "zero"
                + (f" although {sorted('--' + g for g in asked)} ask for one" if asked else "")
                + ". There is no KL regularisation at all (or drop the other KL flags if no KL "
                "is intended).",
                recommended,
            )
        )
        return tuple(out)

    if sem.value_clamp is not None:
        out.append(
            Finding(
                "openrlhf.kl_clamp",
                "info",
                f"OpenRLHF clamps every per-token estimator value to [-{NATIVE_KL_CLAMP:g}, "
                f"{NATIVE_KL_CLAMP:g}] (k1 included); tokens beyond it lose their KL gradient. "
                "kl-patches' estimators run unclamped.",
                launcher_command("openrlhf", KLConfig.parse("k1-in-reward", coef=coef)),
            )
        )
    if not use_loss:
        if adv in GROUP_ESTIMATORS and sem.kl_after_baseline:
            scaled = (
                " divided by the group std while the KL is not, so beta is relative to a "
                "unit-std task reward and does not transfer from libraries that normalise "
                "after adding the KL"
                if adv == "group_norm"
                else ""
            )
            out.append(
                Finding(
                    "openrlhf.kl_after_baseline",
                    "info",
                    f"With {adv}, the KL penalty is added per token after the group baseline of "
                    f"the scalar reward: it is not baselined (unbiased, more variance), the task "
                    f"reward is{scaled or ' baselined alone'}. kl-patches can put the KL "
                    "inside the group baseline, as in the paper's RLOO runs.",
                    launcher_command(
                        "openrlhf",
                        KLConfig.parse("k1-in-reward", coef=coef, reward_shape="sequence"),
                    ),
                )
            )
        if adv in sem.whitened:
            out.append(
                Finding(
                    "openrlhf.kl_whitened",
                    "info",
                    f"With {adv}, advantages (task reward and KL together) are whitened over "
                    "the batch, which rescales the effective beta from batch to batch; "
                    "--algo.advantage.no_std_norm keeps the scale (mean-centring only).",
                    "--algo.advantage.no_std_norm",
                )
            )
        gamma = float(settings["algo.advantage.gamma"])  # type: ignore[arg-type]
        lambd = float(settings["algo.advantage.lambd"])  # type: ignore[arg-type]
        if (adv == "reinforce" and gamma != 1.0) or (adv == "gae" and (gamma, lambd) != (1, 1)):
            out.append(
                Finding(
                    "openrlhf.kl_discounted",
                    "warning",
                    f"gamma={gamma:g}, lambd={lambd:g} discount the per-token KL penalty, so "
                    "the reward side no longer follows the sequence KL gradient.",
                    "--algo.advantage.gamma 1 --algo.advantage.lambd 1",
                )
            )
    else:
        if settings["actor.loss_agg_mode"] != "token-mean" and sem.loss_aggregation == "token_mean":
            out.append(
                Finding(
                    "openrlhf.kl_loss_token_mean",
                    "info",
                    "--actor.loss_agg_mode changes only the policy loss: the KL loss stays a "
                    "token mean over the step's tokens (a length-normalised KL).",
                )
            )
        if settings["algo.kl.unbiased_gradient"]:
            out.append(
                Finding(
                    "openrlhf.unbiased_gradient_token_level",
                    "info",
                    f"--algo.kl.unbiased_gradient backpropagates w*k1 per token (w = pi/pi_old "
                    f"clipped at {IS_WEIGHT_CLIP:g}), whatever --algo.kl.estimator ({estimator}) "
                    "says: the own-token part of the reverse-KL gradient only, not the "
                    "sequence-level one.",
                    recommended,
                )
            )
        elif off_policy:
            out.append(
                Finding(
                    "openrlhf.off_policy_kl_loss",
                    "warning",
                    f"{updates_per_rollout(settings)} updates per rollout batch (or async) with "
                    "the KL in the loss and no importance weight: the KL-loss gradient is taken "
                    "on samples from an older policy.",
                    f"--algo.kl.unbiased_gradient or {recommended} (remove --algo.kl.use_loss)",
                )
            )
    if settings["algo.kl.target"] is not None:
        out.append(
            Finding(
                "openrlhf.adaptive_controller",
                "warning",
                "--algo.kl.target enables the adaptive KL controller, which OpenRLHF itself marks "
                "as incompatible with its trainer (TODO in ppo_trainer.py); beta drifts"
                + (
                    ", and under --algo.kl.use_loss it is driven by the aggregated KL loss, not "
                    "the per-sample KL"
                    if use_loss
                    else ""
                )
                + ".",
                "(remove --algo.kl.target)",
            )
        )
    return tuple(out)


def modernise(argv: Sequence[str]) -> tuple[list[str], list[Finding]]:
    """An argv with flags of older releases rewritten as the current flags they mean."""
    out: list[str] = []
    findings: list[Finding] = []
    for token in (str(t) for t in argv):
        name = token[2:].split("=", 1)[0] if token.startswith("--") else ""
        if name in LEGACY_FLAGS:
            replacement, text = LEGACY_FLAGS[name]
            out.extend(replacement)
            findings.append(Finding("openrlhf.legacy_flag", "info", text))
            continue
        out.append(token)
    return out, findings


def _canonical(name: str, known: frozenset[str] | None) -> tuple[str | None, str]:
    """(the option argparse takes ``--name`` for, or None; the refusal when None). Unique
    prefixes are accepted (argparse's ``allow_abbrev``); ``known`` None: nothing is checked."""
    if known is None or name in known:
        return name, ""
    matches = sorted(o for o in known if o.startswith(name))
    if len(matches) == 1:
        return matches[0], ""
    if matches:
        return None, f"ambiguous option: --{name} could match " + ", ".join(
            "--" + m for m in matches[:4]
        )
    return None, f"unrecognized arguments: --{name}"


def _convert(flag: Flag, name: str, values: list[str], choices: tuple[str, ...]) -> object:
    """translate's conversion, with the release's choices and argparse's wording for them."""
    value = convert_value(flag, name, values)
    if flag.kind == "str" and choices and value not in choices:
        raise ValueError(
            f"argument --{name}: invalid choice: {value!r} (choose from {', '.join(choices)})"
        )
    return value


def parse_at(
    argv: Sequence[str], sem: OpenRLHFSemantics, module: str = "train_ppo_ray"
) -> tuple[dict[str, object], frozenset[str], list[tuple[str, str]], list[Finding]]:
    """Read a command line as OpenRLHF ``sem.release``'s argparse does.

    Returns the settings of every flag of :data:`~.translate.FLAGS` (dotted names, the
    release's defaults filled in), those given, the options the release refuses
    ``(option, argparse's reason)`` (left out of the settings), and informational findings
    (the old k3 switch)."""
    known = sem.modules.get(module) if sem.modules else None
    by_name: dict[str, Flag] = {}
    for flag in FLAGS:
        spelled = sem.spelling.get(flag.dotted)
        if spelled is not None:
            by_name[spelled] = flag
    settings: dict[str, object] = {f.dotted: sem.defaults.get(f.dotted, f.default) for f in FLAGS}
    given: set[str] = set()
    refused: list[tuple[str, str]] = []
    info: list[Finding] = []
    for name, inline, following in long_options(argv):
        canonical, why = _canonical(name, known)
        if canonical is None:
            refused.append(("--" + name, why))
            continue
        if canonical == "use_kl_estimator_k3" and sem.estimator_switch:
            if inline is not None:
                raise ValueError(
                    f"--{name} is a switch and takes no value (got '--{name}={inline}')"
                )
            settings["algo.kl.estimator"] = "k3"
            given.add("algo.kl.estimator")
            info.append(
                Finding(
                    "openrlhf.legacy_flag",
                    "info",
                    f"--use_kl_estimator_k3 selects k3 in OpenRLHF {sem.release} (the switch of "
                    "0.5.0-0.6.0, openrlhf/cli/train_ppo_ray.py:283 in 0.5.0); 0.6.0.post1 "
                    "replaced it with --kl_estimator, and later releases refuse it.",
                )
            )
            continue
        found = by_name.get(canonical)
        if found is None or (found.dotted == "algo.kl.estimator" and sem.estimator_switch):
            continue
        flag = found
        if flag.kind == "bool":
            if inline is not None:
                raise ValueError(
                    f"--{name} is a switch and takes no value (got '--{name}={inline}')"
                )
            settings[flag.dotted] = True
            given.add(flag.dotted)
            continue
        need = 2 if flag.kind == "pair" else 1
        values = (([] if inline is None else [inline]) + following)[:need]
        if len(values) != need:
            raise ValueError(f"--{name} expects {need} value(s)")
        choices = sem.choices.get(flag.dotted, ())
        # a value outside the choices stops the reading (the audit's exit 2, as before)
        settings[flag.dotted] = _convert(flag, name, values, choices)
        given.add(flag.dotted)
    return settings, frozenset(given), refused, info


def _fix_args(config: KLConfig, sem: OpenRLHFSemantics) -> list[str]:
    """The native flags of ``config`` as release ``sem.release`` spells them."""
    if sem.estimator_switch:
        out = ["--init_kl_coef", repr(config.coef)]
        return out + (["--use_kl_estimator_k3"] if config.estimator == "k3" else [])
    version = sem.release if not sem.older_than_recorded else RELEASES[0]
    try:
        return to_args(config, version=version)
    except ValueError:
        return to_args(config)


def off_policy_reasons(settings: dict[str, object]) -> list[str]:
    """Why an OpenRLHF run's updates are off-policy, with the flags behind each reason."""
    out: list[str] = []
    n = updates_per_rollout(settings)
    if n > 1:
        out.append(
            f"{n} optimiser steps per rollout batch (rollout.batch_size "
            f"{settings['rollout.batch_size']} x n_samples_per_prompt "
            f"{settings['rollout.n_samples_per_prompt']} / train.batch_size "
            f"{settings['train.batch_size']}, x train.max_epochs {settings['train.max_epochs']})"
        )
    if settings["train.async_enable"]:
        out.append("train.async_enable: rollouts are generated by an older policy")
    return out


def _promote_choice(
    argv: Sequence[str],
    sem: OpenRLHFSemantics,
    module: str,
    later: list[str],
    err: ValueError,
    copy: tuple[str, dict[str, Any]] | None = None,
) -> tuple[OpenRLHFSemantics, Any, Finding] | None:
    """A snapshot (a fork, a vendored copy) whose launch passes a value its release's choices
    refuse (R1-Searcher's 0.5.5.post2 fork takes ``--advantage_estimator group_norm``): the
    first later release that parses it, read with its semantics (None when none does)."""
    if sem.older_than_recorded:
        return None
    for release in later:
        nxt = _with_copy(semantics(release), module, copy)
        try:
            parsed = parse_at(argv, nxt, module)
        except ValueError:
            continue
        finding = Finding(
            "openrlhf.version_newer_code",
            "warning",
            f"{err}: OpenRLHF {sem.release} refuses it and {nxt.release} accepts it, so the copy "
            f"that runs is newer code than {sem.version} (a fork or a branch snapshot); it is "
            f"read with the semantics of {nxt.release}.",
        )
        return dataclasses.replace(nxt, version=sem.version), parsed, finding
    return None


def _copy_defaults(sem: OpenRLHFSemantics, options: dict[str, Any]) -> dict[str, object]:
    """The KL flags' defaults of ``sem`` with the copy's argparse defaults where the copy
    defines the flag under the release's spelling with a literal default of the same kind."""
    defaults = dict(sem.defaults)
    for flag in FLAGS:
        spelled = sem.spelling.get(flag.dotted)
        found = options.get(spelled) if spelled else None
        if not found or "default" not in found:
            continue
        value = found["default"]
        old = defaults.get(flag.dotted, flag.default)
        if value is None or isinstance(value, bool) != isinstance(old, bool):
            continue
        if isinstance(value, int | float | str):
            defaults[flag.dotted] = value
    return defaults


def _with_copy(
    sem: OpenRLHFSemantics, module: str, copy: tuple[str, dict[str, Any]] | None
) -> OpenRLHFSemantics:
    """``sem`` checking options against the vendored copy's own argparse (``copy``: the file
    read and its options, :func:`.fork.copy_options`), with the copy's KL defaults; ``sem``
    itself when there is no copy to read."""
    if copy is None:
        return sem
    return dataclasses.replace(
        sem,
        modules={**sem.modules, module: frozenset(copy[1])},
        defaults=_copy_defaults(sem, copy[1]),
    )


def _fork_copy(version_file: str, module: str) -> tuple[str, dict[str, Any]] | None:
    """(the copy's ``cli/<module>.py``, its options) for the vendored copy whose version file
    is ``version_file`` (the audit's version choice, ``VersionChoice.copy``); None when there
    is none or it cannot be read."""
    if not version_file:
        return None
    package = package_of(version_file)
    if package is None:
        return None
    options = copy_options(package, module)
    if options is None:
        return None
    return str(package / "cli" / f"{module}.py"), options


def read(
    argv: Sequence[str],
    *,
    entry: str | None = None,
    version: str | None = None,
    assumed: str = "",
    version_snapshot: bool = False,
    version_file: str = "",
    **_: Any,
) -> NativeReading:
    """The audit's view of an OpenRLHF ``train_ppo_ray`` command line.

    ``entry`` is the entry point (``openrlhf.cli.train_ppo`` reads the same flags; an
    unrecorded one gives a finding naming ``assumed``); ``version`` the OpenRLHF version to
    read it as (default: the newest tested release), through :func:`.semantics.semantics`: an
    option that release does not define is refused (an error finding; the reading leaves it
    out), and its defaults, estimator switch, clamp, loss aggregation and whitening apply.
    ``version_snapshot`` says the copy may hold later code (a fork's version label): when the
    launch uses options only the next release has, that release is read, with a finding.
    ``version_file`` is the version file of the vendored copy that runs the launch (the audit's
    version choice): its own ``openrlhf/cli/<module>.py`` defines the options the launch may
    pass and their defaults (a fork adds its own; :mod:`.fork`), with an info finding; the
    release's KL semantics stay.
    """
    sem = semantics(version)
    module = "train_ppo" if entry == "openrlhf.cli.train_ppo" else "train_ppo_ray"
    extra: list[Finding] = []
    snapshot = version_snapshot or _snapshot(version)
    later = [r for r in RELEASES if Version(r) > Version(sem.release)]
    copy = None if sem.older_than_recorded else _fork_copy(version_file, module)
    sem = _with_copy(sem, module, copy)
    try:
        settings, given, refused, info = parse_at(argv, sem, module)
    except ValueError as err:  # a value the release's choices refuse (argparse exits)
        promoted = _promote_choice(argv, sem, module, later, err, copy) if snapshot else None
        if promoted is None:
            raise
        sem, (settings, given, refused, info), finding = promoted
        extra.append(finding)
        later = []
    if copy is not None:
        extra.append(
            Finding(
                "openrlhf.fork_options",
                "info",
                f"The launch runs the OpenRLHF copy in the project ({copy[0]}): its options are "
                f"checked against that file's own add_argument calls ({len(copy[1])} options) "
                f"and its argparse defaults, not OpenRLHF {sem.release}'s; the KL code is read "
                f"as OpenRLHF {sem.release}'s.",
            )
        )
        later = []  # the copy's own argparse decides which options exist
    if refused and snapshot and later and not sem.older_than_recorded:
        nxt = semantics(later[0])
        again = parse_at(argv, nxt, module)
        if {o for o, _ in again[2]} < {o for o, _ in refused}:
            gained = sorted({o for o, _ in refused} - {o for o, _ in again[2]})
            extra.append(
                Finding(
                    "openrlhf.version_newer_code",
                    "warning",
                    f"The launch uses {', '.join(gained[:4])}, which OpenRLHF {sem.release} does "
                    f"not define and {nxt.release} does: the copy that runs is newer code than "
                    f"{sem.version} (a fork or a branch snapshot), so it is read with the "
                    f"semantics of {nxt.release}.",
                )
            )
            sem = dataclasses.replace(nxt, version=sem.version)
            settings, given, refused, info = again
    extra += info
    if not sem.exact and not any(f.code == "openrlhf.version_newer_code" for f in extra):
        extra.append(
            Finding(
                "openrlhf.version_not_recorded",
                "info",
                f"OpenRLHF {sem.version} is not a release kl-patches has recorded; it is read "
                f"with the semantics of {sem.release}"
                + (
                    " (the oldest recorded release; its options are not checked)."
                    if sem.older_than_recorded
                    else " (the newest recorded release not after it)."
                ),
            )
        )
    if sem.modules and sem.modules.get(module) is None:
        extra.append(
            Finding(
                "openrlhf.entry_not_in_version",
                "error",
                f"openrlhf.cli.{module} is not in OpenRLHF {sem.release} (train_ppo.py was "
                "removed in 0.6.2): the launch fails to start.",
                f"python -m openrlhf.cli.train_ppo_ray {LAUNCH_ARGUMENTS['openrlhf']}",
            )
        )
    if refused:
        shown = "; ".join(f"{o} ({why})" for o, why in refused[:4])
        rest = [o for o, _ in refused[4:]]
        more = f" and {len(rest)} more: {', '.join(rest)}" if rest else ""
        extra.append(
            Finding(
                "openrlhf.flag_rejected",
                "error",
                f"OpenRLHF {sem.version}'s {module} refuses this launch (argparse): "
                f"{shown}{more}. The reading leaves them out (what runs once they are "
                "deleted)."
                + (
                    " Pre-0.10.2 flat names such as --init_kl_coef became --algo.kl.init_coef "
                    "etc. in 0.10.2; pass --library-version openrlhf=<your release> to read "
                    "the file as the release it was written for."
                    if Version(sem.release) >= Version("0.10.2")
                    and any("_" in o and "." not in o for o, _ in refused)
                    else ""
                )
                + " Delete them, or run the release this launch was written for.",
                "",
            )
        )
    config = config_from_settings(settings)
    coef = float(settings["algo.kl.init_coef"])  # type: ignore[arg-type]
    if config.placement != "none":
        config = config.replace(kl_clamp=sem.value_clamp)
        if config.placement == "loss":
            config = config.replace(loss_aggregation=sem.loss_aggregation)
    elif coef < 0 and sem.ref_model == "coef != 0":
        extra.append(
            Finding(
                "openrlhf.negative_kl_coef",
                "error",
                f"init_kl_coef={coef:g}: OpenRLHF {sem.release} builds the reference model for "
                "any non-zero coefficient, so a negative one rewards moving away from it "
                "(the KL is maximised).",
                _flags(_fix_args(KLConfig(coef=-coef), sem)),
            )
        )
    fix_coef = config.coef if config.coef > 0 else 0.01
    fix_config = KLConfig(coef=fix_coef, reward_shape="reward_to_go", kl_clamp=sem.value_clamp)
    fix = tuple(_fix_args(fix_config, sem))
    if settings["algo.kl.use_loss"]:
        fix += (f"(remove --{sem.spelling['algo.kl.use_loss']})",)
    if settings["algo.kl.unbiased_gradient"]:
        fix += ("(remove --algo.kl.unbiased_gradient)",)
    name = TRAINER
    if entry and entry not in ("openrlhf.cli.train_ppo_ray", TRAINER):
        name = entry.rsplit(".", 1)[-1] if facts(entry) is not None else entry
        if facts(entry) is None:
            extra.append(
                Finding(
                    "openrlhf.entry_assumed",
                    "warning",
                    f"{entry} is not an entry point kl-patches has recorded"
                    + (f" ({assumed})" if assumed else "")
                    + "; its flags are read as OpenRLHF train_ppo_ray's.",
                )
            )
    reasons = off_policy_reasons(settings)
    return NativeReading(
        library="openrlhf",
        version=sem.version if version is not None else installed_version() or sem.version,
        trainer=f"{name} ({settings['algo.advantage.estimator']})",
        config=config,
        off_policy=is_off_policy(settings),
        settings=dict(settings),
        findings=findings_for(settings, given, sem) + tuple(extra),
        fix=fix,
        off_policy_reason="; ".join(reasons),
    )


def _snapshot(version: str | None) -> bool:
    """True for a label that is not a final release (dev, pre-release, local label)."""
    if version is None:
        return False
    try:
        v = Version(version)
    except InvalidVersion:
        return False
    return v.is_devrelease or v.is_prerelease or v.local is not None
