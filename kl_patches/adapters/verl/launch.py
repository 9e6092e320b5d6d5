"""``kl-patches verl``: run verl's trainer with a KLConfig's overrides and the worker delivery.

    kl-patches verl --kl k1-in-reward --kl.coef 0.001 -- algorithm.adv_estimator=grpo ...

Adds :func:`~kl_patches.adapters.verl.to_overrides` to the user's Hydra overrides (a key set
both ways is an error, not a silent precedence rule), prints the KL block
(:mod:`kl_patches.adapters.launch_report`) and the audit's findings for the combined
configuration before verl starts, and runs ``python -m verl.trainer.main_ppo`` with them.
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
from kl_patches.adapters.launch_report import LaunchReport, announce, coef_source
from kl_patches.cli import errors
from kl_patches.config import KLConfig

from .read import read
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
        "GPU: the first prints the command, the second composes verl's config with it.",
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
        help="compose verl's config with the overrides and exit (needs verl, no GPU)",
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
    """The user's overrides plus ours; raises if both set the same key."""
    ours = (
        []
        if config is None
        else _to_overrides(
            config, kl_outside_std=kl_outside_std, policy_loss_agg_mode=_user_aggregation(user)
        )
    )
    clash = sorted({_key(o) for o in ours} & {_key(o) for o in user})
    if clash:
        raise ValueError(
            f"these keys are set both by --kl and by your overrides: {clash}; drop them from "
            "the overrides (--kl sets them) or drop --kl"
        )
    return [*user, *ours]


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
    announce(_report(args, config, kl_outside_std, reading, user))
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
        from .hydra_config import compose

        try:
            compose(overrides)
        except ImportError:
            raise
        except Exception as err:  # Hydra's composition errors: the user's overrides
            if errors.debug_requested(own, True):
                raise
            raise errors.UsageError(f"verl's config refuses the overrides: {err}") from err
        print("kl-patches verl: verl's config accepts the overrides", file=sys.stderr)
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


def _report(
    args: argparse.Namespace,
    config: KLConfig | None,
    kl_outside_std: bool,
    reading: Any,
    user: list[str],
) -> LaunchReport:
    """The KL block of a launch: what verl will run with the combined overrides."""
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
        from kl_patches.theory import verdict

        if not verdict(reading.config, off_policy=reading.off_policy).unbiased:
            notes.append(f"k1-in-reward natively: {v_fix}")
    aggregation = aggregation_note(config, user)
    if aggregation is not None:
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
        coef_source=source,
        route=route,
        off_policy=reading.off_policy,
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
