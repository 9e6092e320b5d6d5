"""The paper miniature on a GPU machine: a larger model, more seeds, within a time budget.

    python benchmarks/paper_gpu.py --out DIR [--budget-min 4.5] [--workers 12] [--tiny]

Runs the ``gpu`` preset of :mod:`kl_patches.experiments.paper` (Qwen2 of width 256 and four
layers, 16 prompts x 8 completions per update) on ``cuda`` with ``--workers`` processes sharing
the GPU, starting runs until ``--budget-min`` minutes have passed (seed-major, so what finished
covers every configuration for the first seeds), then writes to ``--out``: ``runs.jsonl``,
``table.md``, ``paper_gpu_curves.png``, ``paper_gpu_summary.png`` and ``env.txt``. The
pre-trained reference goes to a cache outside ``--out``.

``--report-only`` rebuilds the table and plots from ``--out/runs.jsonl`` (after a run that was
cut short). ``--tiny`` is a CPU smoke test of the same code path in well under a minute of
training (a tiny model, two configurations, a few updates).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

from kl_patches.experiments import paper, paper_report
from kl_patches.experiments.paper_task import ModelSize


def _plan(tiny: bool, device: str) -> paper.Plan:
    plan = paper.PRESETS["gpu"]()
    if tiny:
        plan = replace(
            plan,
            betas=(0.3,),
            seeds=2,
            configs=("k1-in-reward", "k3-in-loss"),
            pretrain=replace(plan.pretrain, steps=60, batch_size=32, size=ModelSize(hidden=32)),
            rl=replace(plan.rl, steps=4, prompts_per_step=4, eval_every=2, eval_prompts=16),
        )
    return replace(plan, rl=replace(plan.rl, device=device))


def _env(path: Path) -> None:
    import torch
    import transformers
    import trl

    lines = [
        f"python {platform.python_version()}",
        f"torch {torch.__version__}, transformers {transformers.__version__}",
        f"trl {trl.__version__}",
        f"cuda available: {torch.cuda.is_available()}",
    ]
    if torch.cuda.is_available():
        lines.append(f"gpu: {torch.cuda.get_device_name(0)}")
    lines.append(f"cpus: {os.cpu_count()}")
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


def report(out: Path, prefix: str) -> None:
    """Table and plots from ``out/runs.jsonl``."""
    records = paper_report.records_from_json_lines((out / "runs.jsonl").read_text())
    if not records:
        print("no finished runs to report", flush=True)
        return
    table = paper_report.format_markdown(records)
    gains = paper_report.gain_lines(records)
    (out / "table.md").write_text(table + "\n\n" + "\n".join(gains) + "\n")
    print(table)
    print("\n".join(gains), flush=True)
    try:
        paper_report.plot(records, out, prefix=prefix)
    except ImportError as err:
        print(f"no plots: {err}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the budgeted sweep (or only the report) and write the outputs."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--cache", type=Path, default=Path("/tmp/kl-patches-paper-cache"))
    p.add_argument("--budget-min", type=float, default=4.5, help="start no run after this")
    p.add_argument("--workers", type=int, default=12, help="processes sharing the device")
    p.add_argument("--tiny", action="store_true", help="CPU smoke test")
    p.add_argument("--report-only", action="store_true", help="only the table and plots")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    prefix = "paper_gpu"
    if args.report_only:
        report(args.out, prefix)
        return 0
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    _env(args.out / "env.txt")
    plan = _plan(args.tiny, device)
    print(paper.describe(plan, args.workers), flush=True)
    start = time.monotonic()
    records = paper.run_sweep(
        plan,
        args.out / "runs.jsonl",
        args.cache,
        workers=args.workers,
        deadline=60 * args.budget_min,
    )
    minutes = (time.monotonic() - start) / 60
    errors = [r.error for r in records if r.error]
    print(
        json.dumps({"runs": len(records), "minutes": round(minutes, 2), "errors": errors[:3]}),
        flush=True,
    )
    report(args.out, prefix)
    return 0 if records and len(errors) < len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
