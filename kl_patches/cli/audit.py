"""``kl-patches audit``: the command line of :mod:`kl_patches.audit`.

Exit codes: 0 read (and, with ``--strict``, no biased setup); 1 ``--strict`` and a biased or
KL-dropping setup; 2 unreadable input. Status of each trainer: ``unbiased`` (KL on, the
on-policy expected gradient is coef * grad KL(pi || pi_ref)), ``biased`` (any other expected
gradient), ``kl_off`` (no KL term reaches the gradient), ``error`` (an adapter finding of
severity ``error``: the KL is silently dropped, or the objective is not what the flags say).
"""

from __future__ import annotations

import argparse
import os
import sys

from kl_patches import adapters
from kl_patches.audit import report
from kl_patches.audit.inputs import inputs_from_argv
from kl_patches.audit.model import AuditEntry, AuditError, InputError
from kl_patches.audit.run import audit, audit_input, audit_installed
from kl_patches.audit.versions import parse_given


def parser() -> argparse.ArgumentParser:
    """The ``kl-patches audit`` argument parser."""
    p = argparse.ArgumentParser(
        prog="kl-patches audit",
        usage="kl-patches audit [options] [PATH ...] [-- ARGV ...]",
        description="Which KL gradient a verl, OpenRLHF or TRL setup follows, and the fix.",
        epilog=(
            "Examples: kl-patches audit run_grpo.sh | kl-patches audit config.yaml "
            "--library trl | kl-patches audit --library openrlhf -- --algo.kl.use_loss ... | "
            "kl-patches audit --installed. Exit codes: 0 read (and, with --strict, no biased "
            "setup); 1 --strict and a biased or KL-dropping setup; 2 unreadable input."
        ),
    )
    p.add_argument("paths", nargs="*", help="launch scripts, YAML/JSON configs, override files")
    p.add_argument("--library", choices=adapters.names(), help="read every input as this library's")
    p.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a shell variable the scripts use but do not set (the environment is not read)",
    )
    p.add_argument(
        "--library-version",
        action="append",
        default=[],
        metavar="[LIB=]VERSION",
        help="read launches as this library version (trl=0.18.0; a specifier such as "
        "'trl>=0.18,<=0.24' reads the newest release it allows); default: detected from pins, "
        "a vendored copy, the installed package, else the newest tested release",
    )
    p.add_argument("--installed", action="store_true", help="audit installed libraries' defaults")
    p.add_argument("--json", action="store_true", help="machine-readable report (schema: docs)")
    p.add_argument("--strict", action="store_true", help="exit 1 if any setup is biased/drops KL")
    p.add_argument("--plain", action="store_true", help="plain text even if rich is installed")
    p.add_argument("--debug", action="store_true", help="show tracebacks of reader failures")
    return p


def main(argv: list[str]) -> int:
    """``kl-patches audit ...``; returns the exit code (see the module docstring)."""
    args_in = list(argv)
    extra: list[str] | None = None
    if "--" in args_in:
        k = args_in.index("--")
        args_in, extra = args_in[:k], args_in[k + 1 :]
    p = parser()
    try:
        args = p.parse_args(args_in)
    except SystemExit as exc:  # argparse already printed the usage and the reason
        return int(exc.code) if isinstance(exc.code, int) else 2
    if not args.paths and not extra and not args.installed:
        p.print_usage(sys.stderr)
        print(
            "kl-patches audit: give a launch script, a config file, an argv after --, or "
            "--installed",
            file=sys.stderr,
        )
        return 2
    variables: dict[str, str] = {}
    for item in args.var:
        name, eq, value = item.partition("=")
        if not eq or not name:
            print(f"kl-patches audit: --var expects NAME=VALUE, got {item!r}", file=sys.stderr)
            return 2
        variables[name] = value
    entries: list[AuditEntry] = []
    notes: list[str] = []
    try:
        versions = parse_given(args.library_version)
    except ValueError as err:
        print(f"kl-patches audit: {err}", file=sys.stderr)
        return 2
    try:
        for path in args.paths:
            entries += audit(path, args.library, variables, versions)
        if extra:
            entries += [
                audit_input(i, versions=versions) for i in inputs_from_argv(extra, args.library)
            ]
        if args.installed:
            found, skipped = audit_installed()
            entries += found
            notes += skipped
    except (AuditError, InputError) as err:
        print(f"kl-patches audit: {err}", file=sys.stderr)
        return 2
    except Exception as err:
        if args.debug:
            raise
        print(
            f"kl-patches audit: internal error while reading ({type(err).__name__}: {err}); "
            "rerun with --debug for the traceback and report it",
            file=sys.stderr,
        )
        return 2
    code = 1 if args.strict and any(e.fails_strict for e in entries) else 0
    if args.json:
        text = report.to_json(entries, notes, strict=args.strict, exit_code=code)
    else:
        text = report.render(entries, notes, strict=args.strict, rich=not args.plain)
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `kl-patches audit ... | head`: the reader left, keep the code
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (stop the flush at exit failing)
    return code
