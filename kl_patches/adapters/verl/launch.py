"""``kl-patches verl``: run verl's trainer with a KLConfig's overrides and the worker delivery.

    kl-patches verl --kl k1-in-reward --kl.coef 0.001 -- algorithm.adv_estimator=grpo ...

Adds :func:`~kl_patches.adapters.verl.to_overrides` to the user's Hydra overrides (a key set
both ways to the same value is kept once; to different values it is an error naming both, not a
silent precedence rule), prints the launch report (:mod:`kl_patches.adapters.launch_report`:
on- or off-policy from the batch sizes, what changes beyond the KL) and the audit's findings for
the combined configuration before verl starts, and runs ``python -m verl.trainer.main_ppo``
with them. ``--check`` instead composes verl's config and runs the checks ``main_ppo`` runs
before it starts workers (:func:`check`).
When the config needs the patch, the overrides carry ``KL_PATCHES_VERL`` into every Ray
process through ``ray_kwargs.ray_init.runtime_env.env_vars``; the launcher also sets it for the
driver, with Ray's ``RAY_RUNTIME_ENV_HOOK`` (verl < 0.9 loads no entry point), and refuses to
start if the ``verl.plugins`` entry point cannot load in this install.

The KL flags are the uniform ``--kl NAME --kl.FIELD VALUE`` plus ``--kl.outside_std`` (a verl
patch option, not a KLConfig field). The coefficient defaults to verl's own default,
``algorithm.kl_ctrl.kl_coef`` = 0.001 (also ``kl_loss_coef``'s), not KLConfig's 0.05: a user
who adds ``--kl k1-in-reward`` to a verl launch keeps verl's scale. ``--coef X``, ``--set F=V``
and ``--kl-outside-std`` still work, with a deprecation warning.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

from kl_patches.adapters import flags
from kl_patches.adapters.base import LaunchPayload
from kl_patches.adapters.launch_report import (
    LaunchReport,
    Updates,
    announce,
    coef_source,
    integer,
)
from kl_patches.cli import errors
from kl_patches.config import KLConfig

from .read import ASYNC_MODES, read
from .translate import (
    needs_patch,
    parse_overrides,
    patch_spec_of,
    policy_aggregation_changed,
    settings_of,
)
from .translate import to_overrides as _to_overrides
from .versions import ACTOR, AGG_TO_VERL, DEFAULTS, ENV_VAR, TESTED_VERSIONS, installed_version

ENTRY = "verl.trainer.main_ppo"
AGG_KEY = ACTOR + "loss_agg_mode"
PLUGIN_MODULE = "kl_patches.adapters.verl.plugin"
"""The plugin, also loadable through ``VERL_USE_EXTERNAL_MODULES`` (verl >= 0.6)."""

DEFAULTS_OF_FLAGS = {
    "coef": flags.Default(
        DEFAULTS["algorithm.kl_ctrl.kl_coef"],
        "verl's own default (algorithm.kl_ctrl.kl_coef, and "
        f"{ACTOR}kl_loss_coef = {DEFAULTS[ACTOR + 'kl_loss_coef']})",
    )
}
"""The launcher's defaults where verl has its own (the coefficient)."""


def parser() -> argparse.ArgumentParser:
    """The launcher's own options (everything after ``--`` goes to verl)."""
    p = errors.ArgumentParser(
        prog="kl-patches verl",
        description="Run verl's PPO/GRPO trainer with a kl-patches KL configuration.",
        epilog="Everything after '--' is passed to verl as Hydra overrides. Without --kl, "
        "verl's KL settings are left as the overrides give them. --print and --check need no "
        "GPU: the first prints the command, the second runs verl's own config checks on it.",
    )
    flags.add_arguments(p, defaults=DEFAULTS_OF_FLAGS)
    p.add_argument(
        "--kl.outside_std",
        dest="outside_std",
        action="store_true",
        help="GRPO only: keep the KL penalty out of the group std normalisation (a patch; "
        "default off, as in verl)",
    )
    p.add_argument("--coef", type=float, help=argparse.SUPPRESS)  # deprecated: --kl.coef
    p.add_argument("--set", action="append", default=[], help=argparse.SUPPRESS)  # --kl.FIELD
    p.add_argument("--kl-outside-std", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--print",
        dest="print_only",
        action="store_true",
        help="print the command instead of running it (no GPU needed)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="compose verl's config with the overrides, run the checks verl's main_ppo runs "
        "before it starts workers (validate_config) and exit (needs verl, no GPU)",
    )
    p.add_argument("--entry", default=ENTRY, help=f"python module to run (default {ENTRY})")
    p.add_argument("--strict", action="store_true", help="exit 1 if the audit finds an error")
    errors.add_debug_option(p)
    return p


def outside_std(args: argparse.Namespace) -> bool:
    """``--kl.outside_std`` (or the deprecated ``--kl-outside-std``, which warns)."""
    if args.kl_outside_std:
        flags.deprecated("--kl-outside-std", "--kl.outside_std")
    return bool(args.outside_std or args.kl_outside_std)


def config_of(args: argparse.Namespace) -> KLConfig | None:
    """The KLConfig of the parsed options (None without ``--kl``); ValueError if invalid.

    The coefficient defaults to verl's own (:data:`DEFAULTS_OF_FLAGS`)."""
    extra: list[str] = []
    if args.coef is not None:
        flags.deprecated("--coef", "--kl.coef")
        extra += [f"{flags.PREFIX}coef", repr(args.coef)]
    for item in args.set:
        flags.deprecated("--set FIELD=VALUE", "--kl.FIELD VALUE")
        if "=" not in item:
            raise errors.UsageError(f"--set {item!r}: write FIELD=VALUE", field="--set", value=item)
        key, value = item.split("=", 1)
        try:
            flags.parse_tokens([f"{flags.PREFIX}{key.strip()}", value.strip()])
        except ValueError as err:
            raise errors.UsageError(f"--set {item}: {err}", field="--set", value=item) from None
        extra += [f"{flags.PREFIX}{key.strip()}", value.strip()]
    _, deprecated_values = flags.parse_tokens(extra)
    values = {**flags.values_from_namespace(args), **deprecated_values}
    if args.kl_name is None:
        if values or args.outside_std or args.kl_outside_std:
            raise ValueError(
                "--kl.FIELD, --coef, --set and --kl.outside_std need --kl (the estimator and "
                "placement)"
            )
        return None
    return flags.build(args.kl_name, values, flags.base_of(DEFAULTS_OF_FLAGS))


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        k = argv.index("--")
        return argv[:k], argv[k + 1 :]
    return argv, []


def overrides_of(argv: list[str]) -> list[str]:
    """The Hydra overrides a ``kl-patches verl ARGV`` launch hands to verl.

    Raises ValueError when the launcher would refuse it (bad options, invalid KL, clashing keys).
    """
    own, user = _split(list(argv))
    try:
        args = parser().parse_args(own)
    except errors.UsageError as err:
        raise ValueError(f"kl-patches verl cannot parse {' '.join(own)!r}: {err}") from None
    except SystemExit as err:  # --help
        raise ValueError(f"kl-patches verl cannot parse {' '.join(own)!r}") from err
    return build(config_of(args), user, outside_std(args))


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def build(config: KLConfig | None, user: list[str], kl_outside_std: bool = False) -> list[str]:
    """The user's overrides plus ours. A key both set to the same value is kept once (the
    user's spelling); set to different values, it is an error naming both."""
    ours = (
        []
        if config is None
        else _to_overrides(
            config, kl_outside_std=kl_outside_std, policy_loss_agg_mode=_user_aggregation(user)
        )
    )
    theirs = {_key(o): o for o in user}
    clashes: list[str] = []
    kept: list[str] = []
    for override in ours:
        mine = theirs.get(_key(override))
        if mine is None:
            kept.append(override)
        elif _same(mine, override):
            continue  # the user already sets it to what --kl sets: keep theirs
        else:
            clashes.append(f"{mine} (your overrides) vs {override.lstrip('+')} (--kl)")
    if clashes:
        raise ValueError(
            "--kl and your overrides set the same keys to different values: "
            + "; ".join(clashes)
            + ". Drop those overrides (--kl sets them), change --kl to match them, or drop --kl"
        )
    return [*user, *kept]


def _same(a: str, b: str) -> bool:
    """True when two overrides of one key set the same value (as Hydra reads them)."""
    if a.startswith("~") or b.startswith("~"):
        return False
    try:
        return parse_overrides([a]) == parse_overrides([b])
    except ValueError:
        return False


def _user_aggregation(user: list[str]) -> str | None:
    value = parse_overrides(user).get(AGG_KEY)
    return None if value is None else str(value)


def aggregation_note(config: KLConfig | None, user: list[str]) -> str | None:
    """What the launch output says about verl's ``loss_agg_mode`` for ``config`` (None: nothing
    to say). verl aggregates its policy loss and its KL loss with the same mode."""
    if config is None or not config.has_loss:
        return None
    current = _user_aggregation(user)
    changed = policy_aggregation_changed(config, current)
    shown = current or "token-mean (verl's default)"
    if changed is not None:
        return (
            f"{AGG_KEY}={changed} (was {shown}): with placement 'both' the reward-side KL "
            "reaches the gradient through the policy loss, so the policy loss is aggregated "
            f"like the loss-side KL ({config.loss_aggregation}) for the two to add up to one "
            "coef * KL"
        )
    if config.placement == "loss" and AGG_TO_VERL[config.loss_aggregation] != (
        current or "token-mean"
    ):
        return (
            f"{AGG_KEY} stays {shown} for the policy loss; kl-patches aggregates the KL loss "
            f"itself ({config.loss_aggregation})"
        )
    return None


def _check_plugin() -> None:
    from importlib.metadata import PackageNotFoundError, distribution, entry_points

    external = os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",")
    if PLUGIN_MODULE in {m.strip() for m in external}:
        return  # verl imports the plugin in every process without the entry point
    names = [ep.name for ep in entry_points(group="verl.plugins")]
    if "kl_patches" not in names:
        import kl_patches

        where = Path(kl_patches.__file__).resolve().parent.parent
        try:
            distribution("kl-patches")
            installed = True
        except PackageNotFoundError:
            installed = False
        how = (
            f"kl_patches is imported from {where} but is not installed as a package (on "
            "PYTHONPATH only), so verl cannot find its plugin. Install it in this environment "
            f"and on every node: pip install -e {where} (a checkout) or pip install kl-patches"
            if not installed
            else "the installed kl-patches has no 'kl_patches' verl.plugins entry point: "
            "reinstall it (pip install --force-reinstall kl-patches) on every node"
        )
        raise RuntimeError(
            f"{how}. Without the entry point Ray workers would not apply the patch. Or load the "
            f"plugin without it: VERL_USE_EXTERNAL_MODULES={PLUGIN_MODULE} with "
            "kl_patches importable in every Ray worker."
        )
    policy = os.environ.get("VERL_USE_EXTERNAL_PLUGINS", "auto").strip().lower()
    if policy != "auto" and "kl_patches" not in {p.strip() for p in policy.split(",")}:
        raise RuntimeError(
            f"VERL_USE_EXTERNAL_PLUGINS={policy!r} disables the kl_patches plugin; add "
            "kl_patches to it or unset it"
        )


def launcher_payload(
    label: str, argv: list[str], base_dir: Path | None = None, origin: str = ""
) -> LaunchPayload:
    """The Hydra overrides ``kl-patches verl [--kl ...] -- OVERRIDES`` hands to verl.

    The launcher writes the KLConfig as verl overrides (with the patch's marker where verl
    cannot express it), which :func:`read` reads back, so no KLConfig is carried here.
    """
    with warnings.catch_warnings():  # reading a script is not running it: no deprecation noise
        warnings.simplefilter("ignore", FutureWarning)
        return LaunchPayload(overrides_of(argv))


@errors.command("kl-patches verl", debug_option=True)
def main(argv: list[str]) -> int:
    """Entry point of ``kl-patches verl``; returns the trainer's exit code.

    A bad option, an invalid KL configuration or a key set both ways is one line on stderr and
    exit code 2 (:mod:`kl_patches.cli.errors`), before verl starts.
    """
    own, user = _split(list(argv))
    args = parser().parse_args(own)
    config = config_of(args)
    kl_outside_std = outside_std(args)
    overrides = build(config, user, kl_outside_std)
    reading = read(overrides)
    announce(_report(args, config, kl_outside_std, reading, user, overrides))
    for finding in reading.findings:
        fix = f" Fix: {finding.fix}" if finding.fix else ""
        print(
            f"kl-patches verl: {finding.severity}: [{finding.code}] {finding.message}{fix}",
            file=sys.stderr,
        )
    if args.strict and any(f.severity == "error" for f in reading.findings):
        return 1
    command = [sys.executable, "-m", args.entry, *overrides]
    if args.print_only:
        print(" ".join(_quote(c) for c in command))
        return 0
    if args.check:
        check(overrides, debug=errors.debug_requested(own, True))
        return 0
    env = dict(os.environ)
    spec = patch_spec_of(settings_of(overrides))
    if spec is not None or (config is not None and needs_patch(config, kl_outside_std)):
        try:
            _check_plugin()
        except RuntimeError as exc:
            raise errors.UsageError(str(exc)) from None
        if spec is not None:
            env[ENV_VAR] = spec.to_json()
            _add_runtime_env_hook(env)
    return subprocess.call(command, env=env)


def check(overrides: list[str], debug: bool = False) -> None:
    """``--check``: what ``verl.trainer.main_ppo`` does with its config before it starts Ray.

    Composes verl's config with the overrides (Hydra, strict keys), then runs the checks
    ``main_ppo.main`` runs on it before any worker starts, through the names main_ppo itself
    uses: ``auto_set_device`` where it has it, then ``validate_config(config,
    use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))``
    (verl 0.9.1: batch sizes divisible by the GPUs, micro-batch sizes set, the actor and
    critic dataclasses' own ``validate``). verl's own printing goes to stderr. A refusal is a
    UsageError with verl's message; a verl whose main_ppo has no such function (its checks run
    inside the trainer, after Ray starts) is an error saying so, not a pass.
    """
    import contextlib
    import importlib

    from .hydra_config import compose

    try:
        with contextlib.redirect_stdout(sys.stderr):
            config = compose(overrides)
    except ImportError:
        raise
    except Exception as err:  # Hydra's composition errors: the user's overrides
        if debug:
            raise
        raise errors.UsageError(f"verl's config refuses the overrides: {err}") from err
    main_ppo = importlib.import_module(ENTRY)
    names = ("validate_config", "need_reference_policy", "need_critic")
    missing = [n for n in names if not hasattr(main_ppo, n)]
    if missing:
        raise errors.UsageError(
            f"verl {installed_version()}: {ENTRY} has no {', '.join(missing)}, so its config "
            "checks run inside the trainer after Ray starts; --check composed the config only "
            "(verl's config accepts the overrides) and cannot run those checks"
        )
    try:
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # need_critic's "Disabled critic"
            if hasattr(main_ppo, "auto_set_device"):
                main_ppo.auto_set_device(config)
            main_ppo.validate_config(
                config=config,
                use_reference_policy=main_ppo.need_reference_policy(config),
                use_critic=main_ppo.need_critic(config),
            )
    except ImportError:
        raise
    except Exception as err:  # verl's own validation: assertions and ValueErrors
        if debug:
            raise
        text = str(err).strip() or type(err).__name__
        raise errors.UsageError(
            f"verl's validation (main_ppo's validate_config) refuses the config: {text}"
        ) from err
    print(
        "kl-patches verl: verl's config accepts the overrides and passes main_ppo's "
        "validate_config (the checks verl runs before it starts workers)",
        file=sys.stderr,
    )


KL_KEYS = frozenset(
    {
        "algorithm.use_kl_in_reward",
        "algorithm.kl_penalty",
        "algorithm.kl_ctrl.type",
        "algorithm.kl_ctrl.kl_coef",
        ACTOR + "use_kl_loss",
        ACTOR + "kl_loss_type",
        ACTOR + "kl_loss_coef",
    }
)
"""The KL switches :func:`to_overrides` writes; every other key it writes is a change beyond the
KL, which the launch report says."""


def updates_of(overrides: list[str]) -> Updates:
    """On- or off-policy for this launch, from the combined overrides (verl's defaults where
    they set nothing, said as such); unknown when a batch size is set to no number."""
    given = parse_overrides(overrides)
    s = settings_of(overrides)
    shown: dict[str, str] = {}
    values: dict[str, int | None] = {}
    for key in (ACTOR + "ppo_mini_batch_size", "data.train_batch_size", ACTOR + "ppo_epochs"):
        short = key.removeprefix(ACTOR)
        values[short] = integer(s[key])
        default = "" if key in given else " (verl's default)"
        text = "null" if s[key] is None else s[key]
        shown[short] = f"{short}={text}{default}"
    unset = [shown[k] for k, v in values.items() if v is None]
    mini, batch, epochs = (
        values["ppo_mini_batch_size"],
        values["data.train_batch_size"],
        values["ppo_epochs"],
    )
    how = f"{ACTOR}ppo_mini_batch_size={batch} {ACTOR}ppo_epochs=1" if batch is not None else ""
    reasons: list[str] = []
    if mini is not None and batch is not None and mini < batch:
        reasons.append(
            f"{shown['ppo_mini_batch_size']} < {shown['data.train_batch_size']}: "
            f"{-(-batch // max(1, mini))} updates per batch"
        )
    if epochs is not None and epochs > 1:
        reasons.append(f"{shown['ppo_epochs']}: each batch is trained on {epochs} times")
    mode = given.get("trainer.v1.trainer_mode")
    if mode in ASYNC_MODES and bool(s["trainer.use_v1"]):
        reasons.append(f"trainer.v1.trainer_mode={mode}: rollouts come from an older policy")
        how = ""
    if reasons:
        return Updates("off-policy", "; ".join(reasons), on_policy_how=how)
    if unset:
        return Updates(
            "unknown", f"{', '.join(unset)}: not a number, so the updates per batch are unknown"
        )
    return Updates(
        "on-policy",
        f"{shown['ppo_mini_batch_size']} {'=' if mini == batch else '>'} "
        f"{shown['data.train_batch_size']}, "
        f"{shown['ppo_epochs']}: one update per batch",
    )


def changes_of(config: KLConfig | None, user: list[str], overrides: list[str]) -> list[str]:
    """What the launch changes beyond the KL, each with why (empty without ``--kl``)."""
    if config is None:
        return []
    from .delivery import RUNTIME_ENV_HOOK

    theirs = {_key(o) for o in user}
    ours = [o for o in overrides[len(user) :] if _key(o) not in KL_KEYS]
    out: list[str] = []
    for override in ours:
        key = _key(override)
        if key == AGG_KEY:
            was = _user_aggregation(user) or "token-mean, verl's default"
            out.append(
                f"{override} (was {was}): verl aggregates the policy-gradient loss with this "
                "same key, so the policy loss changes too; with placement 'both' the "
                "reward-side KL reaches the gradient through the policy loss, which must then "
                f"be aggregated like the loss-side KL ({config.loss_aggregation})"
            )
        elif key.endswith("env_vars." + ENV_VAR):
            out.append(
                f"{ENV_VAR} in every Ray worker's environment ({key.rsplit('.', 1)[0]}) and "
                f"RAY_RUNTIME_ENV_HOOK={RUNTIME_ENV_HOOK} in the driver's: the patch's "
                "configuration and its delivery to each worker"
            )
        elif key not in theirs:
            out.append(f"{override}: set by kl-patches")
    before = settings_of(user)
    after = settings_of(overrides)

    def reference(s: dict[str, Any]) -> bool:
        return bool(s["algorithm.use_kl_in_reward"]) or bool(s[ACTOR + "use_kl_loss"])

    if reference(after) and not reference(before):
        out.append(
            "verl now loads the reference policy (actor_rollout_ref.ref: one more model in "
            "memory), which it does whenever a KL is on"
        )
    return out


def _report(
    args: argparse.Namespace,
    config: KLConfig | None,
    kl_outside_std: bool,
    reading: Any,
    user: list[str],
    overrides: list[str],
) -> LaunchReport:
    """The launch report: what verl will run with the combined overrides."""
    if config is None:
        source = "from the overrides (no --kl given)"
        route = "verl's own options as the overrides give them (no --kl: nothing added)"
    else:
        given = [f for f in ("--kl.coef", "--coef") if _given(args, f)]
        source = coef_source(given, DEFAULTS_OF_FLAGS["coef"].source)
        patch = needs_patch(config, kl_outside_std)
        route = (
            "verl's native options plus the kl-patches patch in every Ray worker"
            if patch
            else "verl's native options only (no patch needed)"
        )
    notes: list[str] = []
    v_fix = " ".join(reading.fix)
    if reading.config.placement != "none" and v_fix:
        from kl_patches.audit.verdicts import verdict_of

        if not verdict_of(reading, off_policy=False).unbiased:  # the KL itself, not the updates
            notes.append(f"k1-in-reward with verl alone: {v_fix}")
    aggregation = aggregation_note(config, user)
    if aggregation is not None and AGG_KEY not in {_key(o) for o in overrides[len(user) :]}:
        notes.append(aggregation)
    version = installed_version()
    if version is not None and version not in TESTED_VERSIONS:
        notes.append(
            f"warning: verl {version} is installed; the overrides and findings are those of "
            f"verl {', '.join(TESTED_VERSIONS)}"
        )
    return LaunchReport(
        prog="kl-patches verl",
        library="verl",
        config=reading.config,
        updates=updates_of(overrides),
        coef_source=source,
        route=route,
        changes=tuple(changes_of(config, user, overrides)),
        loss_config=reading.loss_config,
        notes=tuple(notes),
    )


def _given(args: argparse.Namespace, flag: str) -> bool:
    if flag == "--coef":
        return args.coef is not None
    return hasattr(args, "kl_field_coef")


def _add_runtime_env_hook(env: dict[str, str]) -> None:
    """Ray's ``RAY_RUNTIME_ENV_HOOK`` for verl's driver: every Ray worker of the job gets the
    setup hook and ``KL_PATCHES_VERL`` whatever runtime env verl builds (the route of verl
    < 0.9, which loads no entry point; 0.4-0.5 ignore ``ray_kwargs``)."""
    from .delivery import RAY_HOOK_VAR, RUNTIME_ENV_HOOK

    found = env.get(RAY_HOOK_VAR, RUNTIME_ENV_HOOK)
    if found != RUNTIME_ENV_HOOK:
        raise errors.UsageError(
            f"{RAY_HOOK_VAR}={found} is set; kl-patches needs {RUNTIME_ENV_HOOK} there to reach "
            "verl's Ray workers (unset it, or call it from your hook)"
        )
    env[RAY_HOOK_VAR] = RUNTIME_ENV_HOOK


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)
