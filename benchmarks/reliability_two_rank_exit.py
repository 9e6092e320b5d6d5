"""Repeat the 2-rank ``accelerate launch -m kl_patches.trl grpo`` run and count how each ended.

    python benchmarks/reliability_two_rank_exit.py --runs 30 [--native] [--log runs.jsonl]

Each run is the one of ``tests/adapters/trl/test_launch_accelerate.py`` (2 CPU ranks, gloo,
TRL's GRPO script, 2 steps of the tiny model), guarded the same way: a run that has not ended
after ``--timeout`` seconds counts as hung, and every process of a run (found by a marker in
its environment: torchrun starts each rank in its own session) is killed at its end, so none
outlives it. ``--native`` runs TRL's own ``trl.scripts.grpo`` instead (no kl-patches), for the
comparison. Prints one JSON line per run and a summary: runs, clean exits, hangs, failures,
processes that outlived their launcher, wall time. Needs TRL and accelerate (the trl venv).
No timing is asserted; the counts are the result.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests" / "adapters" / "trl"


def main() -> int:
    """Run the loop; exit 0 when every run ended cleanly with both ranks' reports."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=30, help="consecutive runs (30)")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds before a run is hung")
    p.add_argument("--native", action="store_true", help="TRL's own GRPO script, no kl-patches")
    p.add_argument("--log", type=Path, help="also append each run's JSON line to this file")
    args = p.parse_args()
    sys.path.insert(0, str(TESTS))
    import test_launch_accelerate as launch  # the test's own run and guard

    records = []
    with tempfile.TemporaryDirectory() as tmp:
        config = launch.write_run(Path(tmp), native=args.native)
        cmd = launch.launch_command(config, args.native)
        for i in range(args.runs):
            done = launch.run_guarded(cmd, launch.launch_env(), args.timeout)
            reports = len(launch.REPORT.findall(done.stderr))
            record = {
                "run": i + 1,
                "mode": "native" if args.native else "kl_patches",
                "returncode": done.returncode,
                "hung": done.hung,
                "reports": reports,
                "outlived": list(done.killed) if not done.hung else [],
                "left_after_kill": list(done.left),
                "wall_s": round(done.wall_s, 1),
            }
            records.append(record)
            line = json.dumps(record)
            print(line, flush=True)
            if args.log:
                with open(args.log, "a") as f:
                    f.write(line + "\n")
    clean = [
        r
        for r in records
        if r["returncode"] == 0
        and not r["outlived"]
        and (args.native or r["reports"] == 2)
        and not r["left_after_kill"]
    ]
    walls = [r["wall_s"] for r in records if not r["hung"]]
    summary = {
        "runs": len(records),
        "clean": len(clean),
        "hung": sum(r["hung"] for r in records),
        "failed": sum(1 for r in records if not r["hung"] and r["returncode"] != 0),
        "outlived_launcher": sum(1 for r in records if r["outlived"]),
        "left_after_kill": sum(1 for r in records if r["left_after_kill"]),
        "wall_s_median": statistics.median(walls) if walls else None,
        "wall_s_max": max(walls) if walls else None,
    }
    print(json.dumps({"summary": summary}), flush=True)
    return 0 if len(clean) == len(records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
