"""``kl-patches audit``: the command line of :mod:`kl_patches.audit`.

A folder (a repository) is walked for the launch files the audit recognises, skipping what git
ignores (:mod:`kl_patches.audit.walk`). ``--installed`` reads the defaults of the libraries
installed here; with none installed it says so and exits 2.

Exit codes: 0 read (and, with ``--strict``, no biased setup); 1 ``--strict`` and a biased or
KL-dropping setup; 2 unreadable input, a folder with no launch file, or ``--installed`` with no
library installed. Status of each trainer: ``unbiased`` (KL on, the
on-policy expected gradient is coef * grad KL(pi || pi_ref)), ``biased`` (any other expected
gradient), ``kl_off`` (no KL term reaches the gradient), ``error`` (an adapter finding of
severity ``error``: the KL is silently dropped, or the objective is not what the flags say).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kl_patches import adapters
from kl_patches.adapters.files import STDIN, InputError, NotALaunchError, read_stdin
from kl_patches.audit import report
from kl_patches.audit.inputs import inputs_from_argv
from kl_patches.audit.model import AuditEntry, AuditError
from kl_patches.audit.run import audit, audit_input, audit_installed, audit_text
from kl_patches.audit.versions import FORMS, cached, parse_given
from kl_patches.audit.walk import launch_files
from kl_patches.cli import errors, fix_commands
from kl_patches.experiments.progress import progress


def parser() -> argparse.ArgumentParser:
    """The ``kl-patches audit`` argument parser."""
    p = errors.ArgumentParser(
        prog="kl-patches audit",
        usage="kl-patches audit [options] [PATH ...] [-- ARGV ...]",
        description="Which KL gradient a verl, OpenRLHF or TRL setup follows, and the fix.",
        epilog=(
            "Examples: kl-patches audit run_grpo.sh | kl-patches audit . (every launch file "
            "of a repository, skipping what git ignores) | kl-patches audit config.yaml "
            "--library trl | kl-patches audit --library openrlhf -- --algo.kl.use_loss ... | "
            "kl-patches audit --installed. Exit codes: 0 read (and, with --strict, no biased "
            "setup); 1 --strict and a biased or KL-dropping setup; 2 an input could not be read "
            "(the others are still audited), a folder without a launch file, --installed with "
            "no library installed, or bad options."
        ),
    )
    p.add_argument(
        "paths",
        nargs="*",
        help="launch scripts, YAML/JSON configs, override files, or folders (every launch "
        "file in them); - reads standard input",
    )
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
    p.add_argument(
        "--fix",
        action="store_true",
        help="print the unified diff that fixes each file (checked by re-auditing the edit)",
    )
    p.add_argument("--write", action="store_true", help="with --fix: apply it (backup FILE.orig)")
    p.add_argument("--no-backup", action="store_true", help="with --fix --write: no FILE.orig")
    return p


def _error_item(origin: str, failure: errors.Failure) -> dict[str, Any]:
    """One item of the JSON report's ``errors`` list."""
    return {"origin": origin, **failure.to_dict()}


def _document(
    entries: list[AuditEntry],
    notes: list[str],
    failed: list[dict[str, Any]],
    strict: bool,
    code: int,
) -> dict[str, Any]:
    """The ``kl-patches.audit/1`` report, plus an ``errors`` list when an input was not read
    (``{"origin", "kind", "message", ...}`` per input; absent when every input was read)."""
    doc: dict[str, Any] = json.loads(report.to_json(entries, notes, strict=strict, exit_code=code))
    if failed:
        doc["errors"] = failed
    return doc


def _not_a_launch(err: BaseException | None) -> bool:
    """True when ``err`` (or what caused it) says the file launches no trainer."""
    while err is not None:
        if isinstance(err, NotALaunchError):
            return True
        err = err.__cause__ or err.__context__
    return False


def _json_failure(failure: errors.Failure, argv: list[str]) -> dict[str, Any]:
    """The report printed with ``--json`` when the audit cannot start (bad options)."""
    strict = "--strict" in argv
    return _document([], [], [_error_item("argv", failure)], strict, failure.exit_code)


PROGRESS_FROM = 20
"""Inputs on one command line from which a progress bar is drawn (when stderr is a terminal)."""
SECONDS_PER_INPUT = 60
"""Wall time one input may take before it is reported as an error and the next is read (every
reader is bounded by size and step limits; this is the backstop, on platforms with SIGALRM)."""


class InputTimeout(AuditError):
    """An input took longer than :data:`SECONDS_PER_INPUT`."""


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _bounded(job: Callable[[], list[AuditEntry]], origin: str) -> list[AuditEntry]:
    """``job()``, stopped with an InputError-like message after :data:`SECONDS_PER_INPUT`
    (only in the main thread of a platform with SIGALRM; elsewhere ``job()`` as it is)."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        return job()

    def expire(signum: int, frame: Any) -> None:
        raise InputTimeout(
            f"{origin}: not read within {SECONDS_PER_INPUT} s (the audit's bound per input); "
            "the other inputs are still audited"
        )

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(SECONDS_PER_INPUT)
    try:
        return job()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _audit_path(
    path: str, library: str | None, variables: dict[str, str], versions: dict[str, str]
) -> list[AuditEntry]:
    """One path of the command line (``-``: standard input)."""
    if path != STDIN:
        return audit(path, library, variables, versions)
    try:
        found = read_stdin()
    except InputError as err:
        raise AuditError(str(err)) from err
    entries = audit_text(found.text, "<stdin>", library, variables, versions)
    if found.note:
        entries = [dataclasses.replace(e, notes=(*e.notes, found.note)) for e in entries]
    return entries


@errors.command(
    "kl-patches audit", debug_option=True, json_output=True, json_document=_json_failure
)
def main(argv: list[str]) -> int:
    """``kl-patches audit ...``; returns the exit code (see the module docstring).

    Each input is audited on its own: one that cannot be read is reported (one line on stderr,
    an item of ``errors`` in the JSON report) and the others are still audited; the exit code is
    then 2.
    """
    args_in = list(argv)
    extra: list[str] | None = None
    if "--" in args_in:
        k = args_in.index("--")
        args_in, extra = args_in[:k], args_in[k + 1 :]
    p = parser()
    args = p.parse_args(args_in)
    if not args.paths and not extra and not args.installed:
        raise errors.UsageError(
            "give a launch script, a config file, an argv after --, or --installed "
            "(see kl-patches audit --help)"
        )
    if (args.write or args.no_backup) and not args.fix:
        raise errors.UsageError(
            "--write and --no-backup go with --fix (kl-patches audit FILE --fix --write)",
            field="--write",
            choices=["--fix", "--fix --write", "--fix --write --no-backup"],
        )
    variables: dict[str, str] = {}
    for item in args.var:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise errors.UsageError(
                f"--var expects NAME=VALUE, got {item!r}", field="--var", value=item
            )
        variables[name] = value
    entries: list[AuditEntry] = []
    notes: list[str] = []
    try:
        versions = parse_given(args.library_version)
    except ValueError as err:
        raise errors.UsageError(
            str(err), field="--library-version", value=args.library_version, choices=FORMS
        ) from err
    if args.paths.count(STDIN) > 1:
        raise errors.UsageError(
            "- (standard input) is given more than once; it can be read once",
            field="paths",
            value=STDIN,
        )
    if args.fix:
        return _fix_main(args, variables, versions)
    failed: list[dict[str, Any]] = []
    paths: list[str] = []
    empty_folders: list[str] = []
    for path in args.paths:
        if not os.path.isdir(path):
            paths.append(path)
            continue
        found, said = launch_files(Path(path))
        notes += said
        paths += [str(p) for p in found]
        if not found:
            empty_folders.append(path)
    walked = set(paths) - set(args.paths)  # found in a folder, not named by the user
    not_launches: list[str] = []
    unread: list[str] = []
    jobs: list[tuple[str, Callable[[], list[AuditEntry]]]] = [
        (path, functools.partial(_audit_path, path, args.library, variables, versions))
        for path in paths
    ]
    if extra:
        argv_extra = extra
        jobs.append(
            (
                "argv",
                lambda: [
                    audit_input(i, versions=versions)
                    for i in inputs_from_argv(argv_extra, args.library)
                ],
            )
        )
    shown = len(jobs) >= PROGRESS_FROM and _is_terminal(sys.stderr)
    with cached():
        for origin, job in progress(jobs, len(jobs), "audit", shown):
            try:
                entries += _bounded(job, origin)
            except Exception as err:
                if args.debug or errors.debug_requested([], False):
                    raise
                if origin in walked:  # found in a folder: a note, not a failure of the command
                    if _not_a_launch(err):
                        not_launches.append(origin)  # it names a library but launches nothing
                    else:
                        unread.append(f"not read: {errors.failure_of('', err).message}")
                    continue
                failure = errors.failure_of("kl-patches audit", err)
                where = "" if failure.message.startswith(origin) else f"{origin}: "
                errors.say(f"kl-patches audit: {where}{failure.message}")
                failed.append(_error_item(origin, failure))
    notes += unread
    if not_launches:
        notes.append(
            f"{len(not_launches)} file(s) found in the folder name a library but launch no "
            f"trainer (e.g. {not_launches[0]}); not audited"
        )
    for folder in empty_folders:
        message = f"{folder}: no launch file of verl, OpenRLHF or TRL recognised in this folder"
        errors.say(f"kl-patches audit: {message}")
        failed.append({"origin": folder, "kind": "input", "message": message})
    if args.installed:
        installed, skipped = audit_installed()
        entries += installed
        notes += skipped
        if not installed:
            message = (
                "--installed: none of verl, OpenRLHF, TRL is installed in this environment "
                f"({sys.executable}); run it in the environment you train in, or audit a "
                "launch file"
            )
            errors.say(f"kl-patches audit: {message}")
            failed.append({"origin": "--installed", "kind": "input", "message": message})
    code = 1 if args.strict and any(e.fails_strict for e in entries) else 0
    if failed:
        code = errors.EXIT_ERROR
    if args.json:
        text = json.dumps(_document(entries, notes, failed, args.strict, code), indent=2)
    elif entries or not failed:
        text = report.render(entries, notes, strict=args.strict, rich=not args.plain)
    else:
        return code
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `kl-patches audit ... | head`: the reader left, keep the code
        errors.quiet_stdout()
    return code


def _fix_main(args: argparse.Namespace, variables: dict[str, str], versions: dict[str, str]) -> int:
    """``--fix [--write [--no-backup]]``: the diff per file, what each launch gets, and why a
    file is left unchanged; exit 2 when a file cannot be read or fixed, 1 when the fixed file
    still has a biased or refused launch (choices left to the user), else 0."""
    from kl_patches.audit.fix.apply import diff, fix_file, summary, write_fix

    if not args.paths or any(os.path.isdir(p) or p == STDIN for p in args.paths):
        raise errors.UsageError(
            "--fix takes launch files (not folders, standard input or an argv after --)",
            field="paths",
            value=args.paths,
        )
    code = 0
    for path in args.paths:
        try:
            with cached():
                fix = fix_file(path, args.library, variables, versions)
        except AuditError as err:
            errors.say(f"kl-patches audit: {err}")
            code = errors.EXIT_ERROR
            continue
        text = diff(fix)
        if text:
            print(text, end="" if text.endswith("\n") else "\n")
        for line in summary(fix):
            print(f"# {line}")
        for problem in fix.problems:
            errors.say(f"kl-patches audit: {path}: not fixed: {problem}")
            code = errors.EXIT_ERROR
        if args.write and fix.changed:
            saved = write_fix(fix, backup=not args.no_backup)
            print(f"# wrote {path}" + (f" (backup {saved})" if saved else ""))
        elif not fix.changed and not fix.problems:
            print(f"# {path}: nothing to change")
        if not fix.problems and fix.left:
            names = "; ".join(f"{e.origin} ({e.status})" for e in fix.left)
            errors.say(f"kl-patches audit: {path}: left to you after the fix: {names}")
            code = max(code, 1)
    return code


fix_commands.register(parser)  # the audit's fix checks parse kl-patches commands
