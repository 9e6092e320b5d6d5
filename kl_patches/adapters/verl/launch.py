"""``kl-patches verl``: run verl's trainer with a KLConfig's overrides and the worker delivery.

    kl-patches verl --kl k1-in-reward --coef 0.001 -- algorithm.adv_estimator=grpo ...

Adds :func:`~kl_patches.adapters.verl.to_overrides` to the user's Hydra overrides (a key set
both ways is an error, not a silent precedence rule), prints the audit's findings for the
combined configuration as warnings, and runs ``python -m verl.trainer.main_ppo`` with them.
When the config needs the patch, the overrides carry ``KL_PATCHES_VERL`` into every Ray
process through ``ray_kwargs.ray_init.runtime_env.env_vars``; the launcher also sets it for the
driver and refuses to start if the ``verl.plugins`` entry point cannot load in this install.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any

from kl_patches.adapters.verl.audit import installed_version, read
from kl_patches.adapters.verl.native import (
    ENV_VAR,
    TESTED_VERSIONS,
    needs_patch,
    patch_spec_of,
    settings_of,
)
from kl_patches.adapters.verl.native import to_overrides as _to_overrides
from kl_patches.config import KLConfig

ENTRY = "verl.trainer.main_ppo"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kl-patches verl",
        description="Run verl's PPO/GRPO trainer with a kl-patches KL configuration.",
        epilog="Everything after '--' is passed to verl as Hydra overrides.",
    )
    p.add_argument(
        "--kl",
        help="short name, e.g. k1-in-reward, k3-in-loss, none (default: leave "
        "verl's KL settings as the overrides give them)",
    )
    p.add_argument("--coef", type=float, help="KL coefficient beta (default: KLConfig's)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="another KLConfig field, e.g. --set granularity=sequence (repeatable)",
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
    return p


def _config(args: argparse.Namespace) -> KLConfig | None:
    if args.kl is None:
        if args.coef is not None or args.set or args.kl_outside_std:
            raise ValueError(
                "--coef, --set and --kl-outside-std need --kl (the estimator and placement)"
            )
        return None
    fields: dict[str, Any] = {}
    if args.coef is not None:
        fields["coef"] = args.coef
    for item in args.set:
        if "=" not in item:
            raise ValueError(f"--set {item!r}: write FIELD=VALUE")
        key, value = item.split("=", 1)
        fields[key.strip()] = _value(value.strip())
    return KLConfig.parse(args.kl, **fields)


def _value(text: str) -> Any:
    if text.lower() in ("none", "null"):
        return None
    try:
        return float(text)
    except ValueError:
        return text


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


def main(argv: list[str]) -> int:
    """Entry point of ``kl-patches verl``; returns the trainer's exit code."""
    if "--" in argv:
        split = argv.index("--")
        own, user = argv[:split], argv[split + 1 :]
    else:
        own, user = argv, []
    args = _parser().parse_args(own)
    try:
        config = _config(args)
        overrides = build(config, user, args.kl_outside_std)
        reading = read(overrides)
    except ValueError as exc:
        print(f"kl-patches verl: {exc}", file=sys.stderr)
        return 2
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
        from kl_patches.adapters.verl.hydra_config import compose

        compose(overrides)
        print("kl-patches verl: verl's config accepts the overrides", file=sys.stderr)
        return 0
    env = dict(os.environ)
    spec = patch_spec_of(settings_of(overrides))
    if spec is not None or (config is not None and needs_patch(config, args.kl_outside_std)):
        try:
            _check_plugin()
        except RuntimeError as exc:
            print(f"kl-patches verl: {exc}", file=sys.stderr)
            return 2
        if spec is not None:
            env[ENV_VAR] = spec.to_json()
    return subprocess.call(command, env=env)


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)
