"""``kl-patches openrlhf``: OpenRLHF's ``train_ppo_ray`` with a KLConfig, in every Ray worker.

    python -m kl_patches.openrlhf <train_ppo_ray flags> --kl k1-in-reward --kl.coef 0.01
    kl-patches openrlhf <train_ppo_ray flags> --kl.estimator k3 --kl.placement both ...

``--kl NAME`` takes a short name (``k1-in-reward``, ``k3-in-both``, ``none``); ``--kl.FIELD VALUE``
sets any :class:`~kl_patches.config.KLConfig` field (``none`` for an optional one). The
coefficient defaults to OpenRLHF's own ``--algo.kl.init_coef`` default, 0.01 (not KLConfig's
0.05). ``--print`` prints the ``train_ppo_ray`` command with the native flags and
``--print-runtime-env`` the runtime_env JSON and the native flags, instead of running (neither
needs a GPU nor OpenRLHF); ``--check`` runs ``train_ppo_ray``'s own parser and post-parse
checks and stops before Ray (:func:`check`). The launcher prints the launch report
(:mod:`kl_patches.adapters.launch_report`), adds the native flags (``to_args``), refuses
``--algo.kl.*`` flags that set another value than ``--kl`` does (the same value is fine),
starts Ray with the setup hook ``kl_patches.openrlhf.ray_setup_hook`` and the configuration in
``runtime_env``, patches the driver and runs OpenRLHF's own entry point (see docs/openrlhf.md
for ``ray job submit``).
Imports only the standard library and kl-patches' config at module level.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
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

from .delivery import ENV_VAR, HOOK, config_to_env

OPENRLHF_ENV_DEFAULTS = {
    "TOKENIZERS_PARALLELISM": "true",
    "NCCL_DEBUG": "WARN",
    "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS": "1",
}
"""What ``train_ppo_ray.train`` would put in its own ``ray.init`` (skipped once Ray is up)."""
ENTRY = "openrlhf.cli.train_ppo_ray"

DEFAULTS_OF_FLAGS = {
    "coef": flags.Default(
        0.01, "OpenRLHF's own default (--algo.kl.init_coef, --init_kl_coef before 0.10.2)"
    )
}
"""The launcher's defaults where OpenRLHF has its own (the coefficient; the value is checked
against the adapter's recorded flag defaults by the tests)."""

OWN_FLAGS = ("--print", "--print-runtime-env", "--check")
"""The launcher's own switches (taken out before OpenRLHF sees the command line)."""


def help_parser() -> argparse.ArgumentParser:
    """The parser whose ``--help`` documents the launcher's own options."""
    p = errors.ArgumentParser(
        prog="python -m kl_patches.openrlhf",
        usage="python -m kl_patches.openrlhf [train_ppo_ray flags] --kl NAME [--kl.FIELD V ...]",
        description="Run OpenRLHF's train_ppo_ray with a kl-patches KL configuration in the "
        "driver and every Ray worker.",
        epilog="Every other flag goes to OpenRLHF's train_ppo_ray unchanged (python -m "
        f"{ENTRY} --help lists them); the --kl flags add the native --algo.kl.* flags, and a "
        "conflicting --algo.kl.* flag is an error.",
    )
    flags.add_arguments(p, name_required=True, defaults=DEFAULTS_OF_FLAGS)
    p.add_argument(
        "--print",
        action="store_true",
        help="print the train_ppo_ray command with the native KL flags and exit (no GPU, no "
        "OpenRLHF needed)",
    )
    p.add_argument(
        "--print-runtime-env",
        action="store_true",
        help="print the runtime_env JSON and the native flags for `ray job submit` and exit",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="parse the command with train_ppo_ray's own parser, run the checks it runs after "
        "parsing, and exit before Ray starts (needs OpenRLHF, no GPU)",
    )
    return p


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Separate ``--kl`` / ``--kl.*`` flags (with their values) from OpenRLHF's."""
    return flags.split_argv(argv)


def parse_kl_args(tokens: Sequence[str]) -> KLConfig | None:
    """``--kl NAME --kl.FIELD VALUE ...`` -> KLConfig (None when no ``--kl`` flag is given);
    the coefficient defaults to OpenRLHF's own (:data:`DEFAULTS_OF_FLAGS`)."""
    if not tokens:
        return None
    name, values = flags.parse_tokens(tokens)
    return flags.build(name, values, flags.base_of(DEFAULTS_OF_FLAGS))


def runtime_env(config: KLConfig | None, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """``ray.init`` runtime_env: OpenRLHF's env defaults, plus the hook and config if any."""
    env = dict(base or {})
    env_vars = {k: os.environ.get(k, v) for k, v in OPENRLHF_ENV_DEFAULTS.items()}
    env_vars.update(env.get("env_vars", {}))
    if config is not None:
        if "worker_process_setup_hook" in env:
            raise ValueError("runtime_env already has a worker_process_setup_hook")
        env["worker_process_setup_hook"] = HOOK
        env_vars[ENV_VAR] = config_to_env(config)
    env["env_vars"] = env_vars
    return env


def ray_init(config: KLConfig | None, **ray_kwargs: Any) -> Any:
    """Start or join Ray as the launcher does; with a config, patch this process too."""
    import ray

    env = runtime_env(config, ray_kwargs.pop("runtime_env", None))
    # Ray first: a local cluster inherits this process's environment, and the configuration
    # must reach workers only through the job's runtime_env, next to the hook.
    info = ray.init(runtime_env=env, **ray_kwargs)
    if config is not None:
        from . import delivery

        os.environ[ENV_VAR] = env["env_vars"][ENV_VAR]
        delivery.install()
    return info


def build_argv(config: KLConfig, openrlhf_argv: Sequence[str], version: str) -> list[str]:
    """OpenRLHF's argv with the native KL flags for ``config``; conflicting ones raise."""
    from .translate import KL_FLAGS, parse_settings, to_args

    native = to_args(config, version=version)
    wanted, _ = parse_settings(native)
    given_settings, given = parse_settings(openrlhf_argv)
    for key in sorted(given & set(KL_FLAGS)):
        if given_settings[key] != wanted[key]:
            raise ValueError(
                f"--{key} {given_settings[key]} conflicts with the KL configuration ({config}), "
                f"which needs {' '.join(native)}; set the KL only through --kl.* flags"
            )
    return [*openrlhf_argv, *native]


def warnings_for(config: KLConfig, openrlhf_argv: Sequence[str]) -> list[str]:
    """OpenRLHF's own findings for the launch (theory's verdict is the report's own line).

    OpenRLHF's findings describe what its flags alone would run; the ones about the clamp, the
    shaping and the aggregation are superseded when a patch takes over that side.
    """
    from .read import read
    from .translate import native_gaps
    from .versions import TESTED_VERSION, installed_version

    reading = read(openrlhf_argv)
    out = []
    patched = any(native_gaps(config, installed_version() or TESTED_VERSION).values())
    for finding in reading.findings:
        if finding.severity == "info" or (
            patched and finding.code != "openrlhf.adaptive_controller"
        ):
            continue
        out.append(f"[{finding.severity}] {finding.message} Fix: {finding.fix}".strip())
    return out


@errors.command("kl_patches.openrlhf")
def main(argv: list[str]) -> int:
    """Launch OpenRLHF's train_ppo_ray with the KL configuration given by ``--kl`` flags.

    A bad ``--kl`` flag, a conflicting ``--algo.kl.*`` flag or an unsupported OpenRLHF is one
    line on stderr and exit code 2 before Ray starts (:mod:`kl_patches.cli.errors`;
    ``KL_PATCHES_DEBUG=1`` shows the traceback); OpenRLHF's own run keeps its own errors.
    """
    args = list(argv)
    if not args or "-h" in args or "--help" in args:
        print(help_parser().format_help())
        return 0
    show = "--print-runtime-env" in args
    print_only = "--print" in args
    check_only = "--check" in args
    ours, rest = split_argv([a for a in args if a not in OWN_FLAGS])
    config = parse_kl_args(ours)
    if config is None:
        raise errors.UsageError(
            "no --kl flag given; pass e.g. --kl k1-in-reward --kl.coef 0.01 (or run python -m "
            f"{ENTRY} directly for OpenRLHF's own KL)",
            field="--kl",
        )
    if show:  # for `ray job submit --runtime-env-json` with the stock entry point
        import json

        from .translate import to_args

        env = runtime_env(config)
        env["env_vars"] = {ENV_VAR: env["env_vars"][ENV_VAR]}
        print(json.dumps(env))
        print(" ".join(to_args(config)))
        return 0
    import runpy

    from . import patch as patches

    if print_only:
        from .versions import TESTED_VERSION, installed_version

        final = build_argv(config, rest, installed_version() or TESTED_VERSION)
        announce(_report(config, ours, final, rest, patches.needed_sides(config)))
        print(" ".join(shlex.quote(w) for w in [sys.executable, "-m", ENTRY, *final]))
        return 0
    try:
        version = patches.check_version()
    except RuntimeError as err:
        raise errors.UsageError(str(err)) from None
    final = build_argv(config, rest, version)
    announce(_report(config, ours, final, rest, patches.needed_sides(config)))
    if check_only:
        check(final)
        return 0
    with errors.library_code():
        ray_init(config)
        sys.argv = [ENTRY, *final]
        runpy.run_module(ENTRY, run_name="__main__", alter_sys=True)
    return 0


class _Checked(Exception):
    """Raised in place of ``train(args)`` once train_ppo_ray's checks have passed."""


def check(argv: Sequence[str]) -> None:
    """``--check``: ``train_ppo_ray``'s own ``__main__`` block on ``argv`` (its argparse
    parser, ``hierarchize`` and every check it runs after parsing), stopped where it would call
    ``train(args)``: that one statement is replaced, nothing else. OpenRLHF's own messages go
    to stderr; a failed check is a UsageError with OpenRLHF's message, a bad flag argparse's
    exit 2. Raises UsageError when the installed ``train_ppo_ray`` does not end its
    ``__main__`` block with ``train(args)`` (the check would not be OpenRLHF's)."""
    import ast
    import contextlib

    origin, tree, block = _main_block(ENTRY)
    last = block.body[-1] if block is not None and block.body else None
    if not (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and ast.unparse(last.value) == "train(args)"
    ):
        raise errors.UsageError(
            f"{origin} does not end its __main__ block with train(args); --check runs "
            "OpenRLHF's checks only up to that call, so it cannot check this release"
        )
    stop = ast.parse("raise __kl_patches_checked__(args)").body[0]
    block.body[-1] = ast.copy_location(stop, last)
    code = compile(ast.fix_missing_locations(tree), origin, "exec")
    scope: dict[str, Any] = {
        "__name__": "__main__",
        "__file__": origin,
        "__kl_patches_checked__": _Checked,
    }
    saved = sys.argv
    sys.argv = [origin, *argv]
    try:
        with contextlib.redirect_stdout(sys.stderr):
            exec(code, scope)
    except _Checked:
        pass
    except AssertionError as err:
        raise errors.UsageError(
            f"OpenRLHF's train_ppo_ray refuses the arguments: {err}".rstrip(": ")
        ) from None
    finally:
        sys.argv = saved
    print(
        f"kl_patches.openrlhf: {ENTRY}'s parser and the checks it runs after parsing accept "
        "the command",
        file=sys.stderr,
    )


def _main_block(module: str) -> tuple[str, Any, Any]:
    """(file, module AST, its ``if __name__ == "__main__":`` block) of an OpenRLHF entry point,
    read from the installed source without importing it. UsageError when it is not installed
    or has no such block."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise errors.UsageError(f"{module} is not importable here: install OpenRLHF")
    source = Path(spec.origin).read_text(encoding="utf-8")
    tree = ast.parse(source, spec.origin)
    block = next(
        (
            node
            for node in tree.body
            if isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and ast.unparse(node.test).replace("'", '"') == '__name__ == "__main__"'
        ),
        None,
    )
    if block is None or not block.body:
        raise errors.UsageError(f"{spec.origin} has no __main__ block to take its parser from")
    return spec.origin, tree, block


def parser_of(module: str = ENTRY) -> argparse.ArgumentParser:
    """The entry point's own argparse parser, built as the installed release builds it: its
    ``__main__`` block run up to ``args = parser.parse_args()``, with the file's top-level
    imports that import here (the parser needs none of OpenRLHF's GPU modules, which a CPU
    install lacks). Nothing is parsed; the post-parse checks are :func:`check`'s."""
    import ast

    origin, tree, block = _main_block(module)
    at = next(
        (
            i
            for i, node in enumerate(block.body)
            if isinstance(node, ast.Assign)
            and ast.unparse(node.value).endswith("parser.parse_args()")
        ),
        None,
    )
    if at is None:
        raise errors.UsageError(f"{origin}: no `args = parser.parse_args()` in its __main__ block")
    scope: dict[str, Any] = {"__name__": "__kl_patches_parse__", "__file__": origin}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            try:
                exec(compile(ast.Module([node], []), origin, "exec"), scope)
            except Exception:  # a GPU-only module (vllm): the parser does not use it
                continue
    body = ast.Module(block.body[:at], [])
    exec(compile(ast.fix_missing_locations(body), origin, "exec"), scope)
    parser: argparse.ArgumentParser = scope["parser"]
    return parser


def parse_args(argv: Sequence[str], module: str = ENTRY) -> argparse.Namespace:
    """``argv`` through the entry point's own parser (:func:`parser_of`); a bad flag or value
    is argparse's SystemExit(2) with its message on stderr."""
    return parser_of(module).parse_args(list(argv))


def updates_of(reading: Any) -> Updates:
    """On- or off-policy for this launch, from the reader's settings (OpenRLHF's defaults for
    flags not given); unknown when a batch size is no number."""
    from .read import off_policy_reasons

    s = reading.settings
    keys = ("rollout.batch_size", "rollout.n_samples_per_prompt", "train.batch_size")
    numbers = {k: integer(s.get(k)) for k in (*keys, "train.max_epochs")}
    batch, n, train, epochs = (numbers[k] for k in (*keys, "train.max_epochs"))
    how = ""
    if batch is not None and n is not None:
        how = f"--train.batch_size {batch * n} --train.max_epochs 1"  # rollout batch x samples
        how += " (remove --train.async_enable)" if s.get("train.async_enable") else ""
    if None in numbers.values():
        unset = [f"{k}={s.get(k)}" for k, v in numbers.items() if v is None]
        if s.get("train.async_enable"):
            return Updates("off-policy", "train.async_enable: rollouts come from an older policy")
        return Updates("unknown", f"{', '.join(unset)}: not a number")
    reasons = off_policy_reasons(s)
    if reasons:
        return Updates("off-policy", "; ".join(reasons), on_policy_how=how)
    return Updates(
        "on-policy",
        f"rollout.batch_size {batch} x n_samples_per_prompt {n} <= train.batch_size {train}, "
        f"train.max_epochs {epochs}: one optimiser step per rollout batch",
    )


def _report(
    config: KLConfig,
    ours: Sequence[str],
    final: Sequence[str],
    rest: Sequence[str],
    sides: Sequence[str],
) -> LaunchReport:
    """The launch report (:mod:`kl_patches.adapters.launch_report`)."""
    from .read import read

    given = [t.split("=")[0] for t in ours if t.split("=")[0] == "--kl.coef"]
    native = " ".join(final[len(rest) :])
    route = f"OpenRLHF flags {native}" + (
        f"; kl-patches patches {', '.join(sides)} in the driver and every Ray worker"
        if sides
        else " (no patch needed)"
    )
    reading = read(list(final))
    changes = [
        f"Ray is started by the launcher (ray.init) with runtime_env worker_process_setup_hook="
        f"{HOOK} and {ENV_VAR} in env_vars, plus the env_vars train_ppo_ray would set "
        f"({', '.join(OPENRLHF_ENV_DEFAULTS)}): how the configuration reaches every worker"
    ]
    return LaunchReport(
        prog="kl_patches.openrlhf",
        library="OpenRLHF",
        config=config,
        updates=updates_of(reading),
        coef_source=coef_source(given, DEFAULTS_OF_FLAGS["coef"].source),
        route=route,
        changes=tuple(changes),
        notes=tuple(warnings_for(config, final)),
    )


def launcher_payload(
    label: str, argv: list[str], base_dir: Path | None = None, origin: str = ""
) -> LaunchPayload:
    """The launcher's ``--kl`` flags as a KLConfig, and the OpenRLHF argv it runs.

    Raises ValueError when the launcher would refuse the flags.
    """
    from .versions import TESTED_VERSION

    ours, rest = split_argv([a for a in argv if a not in OWN_FLAGS])  # the launcher's own
    config = parse_kl_args(ours)
    if config is None:
        return LaunchPayload(rest)
    return LaunchPayload(build_argv(config, rest, TESTED_VERSION), kl_config=config)
