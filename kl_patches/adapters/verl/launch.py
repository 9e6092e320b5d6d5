"""``kl-patches verl``: run verl's trainer with a KLConfig's overrides and the worker delivery.

    kl-patches verl --kl k1-in-reward --kl.coef 0.001 -- algorithm.adv_estimator=grpo ...

Adds :func:`~kl_patches.adapters.verl.to_overrides` to the user's Hydra overrides (a key set
both ways is an error, not a silent precedence rule), prints the audit's findings for the
combined configuration as warnings, and runs ``python -m verl.trainer.main_ppo`` with them.
When the config needs the patch, the overrides carry ``KL_PATCHES_VERL`` into every Ray
process through ``ray_kwargs.ray_init.runtime_env.env_vars``; the launcher also sets it for the
driver, with Ray's ``RAY_RUNTIME_ENV_HOOK`` (verl < 0.9 loads no entry point), and refuses to
start if the ``verl.plugins`` entry point cannot load in this install.
The KL flags are the uniform ``--kl NAME --kl.FIELD VALUE``; ``--coef X`` and ``--set F=V``
still work, with a deprecation warning.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from pathlib import Path

from kl_patches.adapters import flags
from kl_patches.adapters.base import LaunchPayload
from kl_patches.cli import errors
from kl_patches.config import KLConfig

from .read import read
from .translate import needs_patch, patch_spec_of, settings_of
from .translate import to_overrides as _to_overrides
from .versions import ENV_VAR, TESTED_VERSIONS, installed_version

ENTRY = "verl.trainer.main_ppo"


def parser() -> argparse.ArgumentParser:
    """The launcher's own options (everything after ``--`` goes to verl)."""
    p = errors.ArgumentParser(
        prog="kl-patches verl",
        description="Run verl's PPO/GRPO trainer with a kl-patches KL configuration.",
        epilog="Everything after '--' is passed to verl as Hydra overrides. Without --kl, "
        "verl's KL settings are left as the overrides give them.",
    )
    flags.add_arguments(p)
    p.add_argument("--coef", type=float, help="deprecated: use --kl.coef")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="deprecated: use --kl.FIELD VALUE",
    )
    p.add_argument(
        "--kl-outside-std",
        action="store_true",
        help="GRPO: keep the KL penalty out of the std normalisation (patch)",
    )
    p.add_argument(
        "--print",
        dest="print_only",
        action="store_true",
        help="print the command instead of running it",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="compose verl's config with the overrides (needs verl) and exit",
    )
    p.add_argument("--entry", default=ENTRY, help=f"python module to run (default {ENTRY})")
    p.add_argument("--strict", action="store_true", help="exit 1 if the audit finds an error")
    errors.add_debug_option(p)
    return p


def config_of(args: argparse.Namespace) -> KLConfig | None:
    """The KLConfig of the parsed options (None without ``--kl``); ValueError if invalid."""
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
        if values or args.kl_outside_std:
            raise ValueError(
                "--kl.FIELD, --coef, --set and --kl-outside-std need --kl (the estimator and "
                "placement)"
            )
        return None
    return flags.build(args.kl_name, values)


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
    return build(config_of(args), user, args.kl_outside_std)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def build(config: KLConfig | None, user: list[str], kl_outside_std: bool = False) -> list[str]:
    """The user's overrides plus ours; raises if both set the same key."""
    ours = [] if config is None else _to_overrides(config, kl_outside_std=kl_outside_std)
    clash = sorted({_key(o) for o in ours} & {_key(o) for o in user})
    if clash:
        raise ValueError(
            f"these keys are set both by --kl and by your overrides: {clash}; drop them from "
            "the overrides (--kl sets them) or drop --kl"
        )
    return [*user, *ours]


def _check_plugin() -> None:
    from importlib.metadata import entry_points

    names = [ep.name for ep in entry_points(group="verl.plugins")]
    if "kl_patches" not in names:
        raise RuntimeError(
            "the 'kl_patches' verl.plugins entry point is not installed (pip install kl-patches "
            "on every node): without it Ray workers would not apply the patch"
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
    overrides = build(config, user, args.kl_outside_std)
    reading = read(overrides)
    print(f"kl-patches verl: KL as configured: {reading.config}", file=sys.stderr)
    from kl_patches.theory import verdict

    v = verdict(reading.config, off_policy=reading.off_policy)
    state = "unbiased" if v.unbiased else "biased" if reading.config.placement != "none" else "off"
    print(f"kl-patches verl: verdict: {state} ({v.gradient}). {v.advice}", file=sys.stderr)
    if not v.unbiased:
        print(f"kl-patches verl: k1-in-reward natively: {' '.join(reading.fix)}", file=sys.stderr)
    version = installed_version()
    if version is not None and version not in TESTED_VERSIONS:
        print(
            f"kl-patches verl: warning: verl {version} is installed; the overrides and findings "
            f"are those of verl {', '.join(TESTED_VERSIONS)}",
            file=sys.stderr,
        )
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
    if spec is not None or (config is not None and needs_patch(config, args.kl_outside_std)):
        try:
            _check_plugin()
        except RuntimeError as exc:
            raise errors.UsageError(str(exc)) from None
        if spec is not None:
            env[ENV_VAR] = spec.to_json()
            _add_runtime_env_hook(env)
    return subprocess.call(command, env=env)


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
