"""``python -m kl_patches.dev record LIB VERSION...`` and ``record --check LIB [VERSION...]``.

``record`` writes ``kl_patches/adapters/<lib>/data/<VERSION>.json`` for each release (the
installed copy when it is that release, else the wheel, downloaded once into the cache; see
:mod:`kl_patches.dev.source`). ``record --check`` re-extracts each release (default: every
recorded one; ``--installed``: the installed one) and prints every difference from the
committed data; it exits 1 when there is one, 0 when the data are exact. ``--offline`` never
downloads (a missing wheel is an error). ``releases LIB`` lists the recorded releases;
``changes LIB NEW`` prints what NEW changes against the newest recorded release before it
(names, defaults, choices, patched functions), which is how a new release is classified;
``unpack LIB DIR`` links each recorded release's files under ``DIR/<version>`` for the
reviewed-row checks (``KL_PATCHES_TRL_WHEELS=DIR``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .record import (
    changes,
    check,
    installed,
    record,
    recorded_releases,
    spec_of,
    specs,
    unpack,
)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m kl_patches.dev", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="record releases, or --check the recorded data")
    rec.add_argument("library", help=f"one of {sorted(specs())}")
    rec.add_argument("versions", nargs="*", help="releases (PEP 440 text as published)")
    rec.add_argument("--check", action="store_true", help="diff against the data, write nothing")
    rec.add_argument("--installed", action="store_true", help="the installed release")
    rec.add_argument("--offline", action="store_true", help="never download a wheel")
    rec.add_argument(
        "--no-installed-copy",
        action="store_true",
        help="read the wheel even when the installed copy is the same release",
    )
    lst = commands.add_parser("releases", help="list the recorded releases of a library")
    lst.add_argument("library", help=f"one of {sorted(specs())}")
    chg = commands.add_parser(
        "changes", help="what a release changes against a recorded one (classify a new release)"
    )
    chg.add_argument("library", help=f"one of {sorted(specs())}")
    chg.add_argument("new", nargs="?", help="the new release (default with --installed)")
    chg.add_argument("--from", dest="old", help="the recorded release to compare with")
    chg.add_argument("--installed", action="store_true", help="the installed release")
    chg.add_argument("--lines", action="store_true", help="list line moves too")
    unp = commands.add_parser(
        "unpack", help="link each release's files under DIR/<version> (reviewed-row checks)"
    )
    unp.add_argument("library", help=f"one of {sorted(specs())}")
    unp.add_argument("folder", help="DIR")
    unp.add_argument("versions", nargs="*", help="releases (default: every recorded one)")
    args = parser.parse_args(argv)

    try:
        if args.command == "releases":
            print("\n".join(recorded_releases(spec_of(args.library))))
            return 0
        if args.command == "unpack":
            links = unpack(args.library, Path(args.folder), args.versions or None)
            print(f"{len(links)} release(s) under {args.folder}")
            return 0
        if args.command == "changes":
            new = installed(args.library) if args.installed else args.new
            if new is None:
                parser.error("changes needs NEW or --installed")
            found = changes(args.library, new, args.old, lines=args.lines)
            print("\n".join(found) if found else f"{args.library} {new}: nothing recorded changed")
            return 0
        versions = list(args.versions)
        if args.installed:
            versions.append(installed(args.library))
        options = {"installed": not args.no_installed_copy, "download": not args.offline}
        if args.check:
            problems = check(args.library, versions or None, **options)
            checked = versions or recorded_releases(spec_of(args.library))
            for line in problems:
                print(line)
            state = f"{len(problems)} difference(s)" if problems else "no difference"
            print(f"record --check {args.library}: {len(checked)} release(s), {state}")
            return 1 if problems else 0
        if not versions:
            parser.error("record needs at least one VERSION (or --installed)")
        for version in versions:
            print(record(args.library, version, **options))
        return 0
    except (ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
