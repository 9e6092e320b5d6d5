"""Run the stall experiments of :mod:`kl_patches.experiments.paper_stall` and print the table.

    python benchmarks/paper_stall.py [--seeds 4] [--long 3000] [--json FILE] [--markdown FILE]

About 20 CPU-minutes on one core with the defaults (the transformer runs dominate); progress
on stderr. Every metric is exact (all 81 sequences enumerated), so the numbers depend only on
the seeds, not on the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from kl_patches.experiments import paper_stall
from kl_patches.experiments.progress import progress


def main(argv: list[str] | None = None) -> int:
    """Run every stall experiment; print (and optionally write) the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--seeds", type=int, default=4, help="sampling seeds per setting (4)")
    p.add_argument("--long", type=int, default=3000, help="updates of the long runs (3000)")
    p.add_argument("--json", type=Path, help="write every run's outcome to FILE")
    p.add_argument("--markdown", type=Path, help="write the table to FILE")
    p.add_argument("--quiet", action="store_true", help="no progress")
    args = p.parse_args(argv)
    jobs = paper_stall.jobs(seeds=args.seeds, long_steps=args.long)
    start = time.monotonic()
    shown = not args.quiet and sys.stderr.isatty()
    outcomes = []
    for k, outcome in enumerate(
        progress(map(paper_stall.run_job, jobs), len(jobs), "stall", shown), 1
    ):
        outcomes.append(outcome)
        if not args.quiet and not shown and (k % 10 == 0 or k == len(jobs)):
            print(f"stall: {k}/{len(jobs)} runs, {time.monotonic() - start:.0f} s", file=sys.stderr)
    table = paper_stall.format_markdown(outcomes)
    print(table)
    print(f"\n{len(jobs)} runs in {(time.monotonic() - start) / 60:.1f} min")
    if args.json:
        args.json.write_text(json.dumps([o.as_dict() for o in outcomes], indent=1))
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
