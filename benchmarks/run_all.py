"""Every benchmark in one run: core vs each library's KL function, the full-vocab monitor, and
each adapter's patched-vs-native step time and memory, each in its library's own venv.

Usage (from any Python with torch; the library venvs are found under /work/venvs/<lib> or
through $KLP_VENV_<LIB>, e.g. KLP_VENV_TRL=/path/to/venv):
    python benchmarks/run_all.py [--out benchmarks/results.md] [--only trl,verl] [--skip-adapters]
                                 [--slow]

For each library whose venv exists: ``bench_core.py --lib <lib>`` (core.kl_terms vs the
library's own function) and each adapter benchmark of that library (``bench_<lib>*.py`` or
``<lib>_*.py`` in this folder; its own output is kept verbatim). Then ``bench_core.py --full-kl``
in this interpreter. Prints one summary table and writes everything to ``--out`` as Markdown.
A library without a venv, or a benchmark that fails, is reported as such, never dropped.

The report opens with issue 16's targets: the core rows' ratios (bound :data:`CORE_TARGET`)
and every ``KLP_TARGET`` line the adapter benchmarks print (:mod:`targets`), each with its
median, min-max, memory ratio and met / NOT MET; those lines are kept as HTML comments after
their benchmark's output, so a carried-over section keeps its targets.

The slow benchmarks (:data:`SLOW`: the real-sized TRL model, about 30 minutes on a quiet
2-core machine) run only with ``--slow``; without it their section of the previous ``--out``
is carried over verbatim (it carries its own date) and the runs table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import machine  # benchmarks/machine.py (this script's folder is on sys.path)
import targets  # benchmarks/targets.py

HERE = Path(__file__).resolve().parent
LIBS = ("trl", "verl", "openrlhf")
SLOW = ("bench_trl_real.py",)
"""Adapter benchmarks run only with ``--slow`` (about half an hour each on 2 cores)."""
CORE_TARGET = 1.10
"""Issue 16's bound on core.kl_terms / the library's own function, forward and fwd+bwd."""
COMMENT = "<!-- "
"""Target lines are kept in the report as HTML comments after their section's output, so that
a section carried over from an earlier report brings its targets along."""
DEVICE_NOTE = (
    "No GPU figures: no accelerator machine was lent to the task that produced them, so the "
    "bf16 GPU run of the real-sized benchmark (issue 16, item 5) is not done."
)


def venv_python(lib: str) -> Path | None:
    """The library venv's python, or None when there is none."""
    root = Path(os.environ.get(f"KLP_VENV_{lib.upper()}", f"/work/venvs/{lib}"))
    python = root / "bin" / "python"
    return python if python.exists() else None


def adapter_scripts(lib: str, slow: bool = False) -> list[Path]:
    """The adapter engineers' benchmarks of ``lib``: ``bench_<lib>*.py`` or ``<lib>_*.py``;
    the :data:`SLOW` ones only when ``slow``."""
    found = sorted({*HERE.glob(f"bench_{lib}*.py"), *HERE.glob(f"{lib}_*.py")})
    return [path for path in found if slow or path.name not in SLOW]


def previous_sections(path: Path) -> dict[str, str]:
    """``## name`` -> that section's text (heading included) in an earlier report."""
    if not path.exists():
        return {}
    sections: dict[str, str] = {}
    name, lines = None, []
    for line in [*path.read_text().splitlines(), "## "]:
        if line.startswith("## "):
            if name is not None:
                sections[name] = "\n".join(lines).rstrip()
            name, lines = line[3:].strip(), [line]
        elif name is not None:
            lines.append(line)
    return sections


def run(cmd: list[str], timeout: int) -> tuple[int, str, float]:
    """(exit code, stdout + the tail of stderr, seconds), with the repository and the tests'
    library support folders (``tests/adapters/<library>``) on PYTHONPATH."""
    start = time.monotonic()
    support = [str(HERE.parent / "tests" / "adapters" / lib) for lib in ("trl", "verl", "openrlhf")]
    path = os.pathsep.join([str(HERE.parent), *support])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": path}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout}s", time.monotonic() - start
    text = proc.stdout
    if proc.returncode != 0:
        text += "\n" + "\n".join(proc.stderr.strip().splitlines()[-15:])
    return proc.returncode, text, time.monotonic() - start


def json_rows(text: str) -> list[dict[str, object]]:
    """The JSON-object lines of a benchmark's output."""
    rows = []
    for line in text.splitlines():
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def core_targets(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """Target rows for the core's kl_terms against each library's function (bench_core rows
    carry no target lines: the bound is this report's)."""
    out: list[dict[str, object]] = []
    for row in rows:
        if row.get("reference"):  # informative: not against the library's own expression
            continue
        for key, part in (("ratio_forward", "forward"), ("ratio_fwd_bwd", "forward+backward")):
            if not isinstance(row.get(key), float):
                continue
            memory = row.get("memory_forward" if key == "ratio_forward" else "memory_fwd_bwd")
            out.append(
                {
                    "benchmark": "bench_core.py",
                    "what": f"{row['function']} / {row['library']}'s own, {part}",
                    "ratio": row[key],
                    "min": row[f"{key}_min"],
                    "max": row[f"{key}_max"],
                    "target": CORE_TARGET,
                    "memory": memory,
                    "measure": f"thread CPU time, {row.get('pairs')} pairs of "
                    f"{row.get('calls_per_sample')}-call samples",
                }
            )
    return out


def carried_targets(section: str) -> list[dict[str, object]]:
    """The target lines kept (as comments) in a section carried over from an earlier report."""
    lines = [
        line[len(COMMENT) : -len(" -->")]
        for line in section.splitlines()
        if line.startswith(COMMENT + targets.PREFIX) and line.endswith(" -->")
    ]
    rows, _ = targets.split("\n".join(lines))
    return rows


def target_lines(rows: list[dict[str, object]], carried: set[str]) -> list[str]:
    """The summary table of every target of the run (those of carried sections marked)."""
    out = [
        "## Targets (issue 16)",
        "",
        "Each ratio is patched (or core) / native, the median over the interleaved pairs or "
        "rounds of this run, with its min-max; met means the median is at most the target. "
        "Memory: the peak-memory ratio of the same two sides (torch CPU-allocator peak for the "
        "core and verl rows, process peak RSS for the real-sized TRL step).",
        "",
        "| benchmark | ratio | median (min-max) | target | memory | verdict | measured as |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        memory = r.get("memory")
        mem = f"{memory:.2f}x" if isinstance(memory, float) else "-"
        bench = str(r["benchmark"]) + (" (carried over)" if r["benchmark"] in carried else "")
        out.append(
            f"| {bench} | {r['what']} | {float(r['ratio']):.3f}x ({float(r['min']):.3f}-"  # type: ignore[arg-type]
            f"{float(r['max']):.3f}) | <= {float(r['target']):.2f} | {mem} | "  # type: ignore[arg-type]
            f"{'met' if targets.met(r) else 'NOT MET'} | {r['measure']} |"
        )
    if not rows:
        out.append("| - | no target measured in this run | | | | | |")
    return out


def _ms(row: dict[str, object], key: str) -> str:
    value = row.get(key)
    return f"{value:.2f}" if isinstance(value, float) else "-"


def _pair(row: dict[str, object], first: str, second: str, unit: str) -> str:
    """``a / b`` of two float fields (forward / forward+backward), or "" without them."""
    a, b = row.get(first), row.get(second)
    if not isinstance(a, float) or not isinstance(b, float):
        return ""
    return f"{a:.2f}{unit} / {b:.2f}{unit}"


def _ratio(row: dict[str, object], key: str) -> str:
    value, low, high = row.get(key), row.get(f"{key}_min"), row.get(f"{key}_max")
    if not isinstance(value, float):
        return ""
    spread = (
        f" ({low:.2f}-{high:.2f})" if isinstance(low, float) and isinstance(high, float) else ""
    )
    return f"{value:.2f}x{spread}"


def main(argv: list[str] | None = None) -> int:
    """Run everything; returns 1 when a benchmark failed."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--out", default=str(HERE / "results.md"), help="Markdown report path")
    p.add_argument("--only", default=",".join(LIBS), help="comma-separated libraries")
    p.add_argument("--skip-adapters", action="store_true", help="only the core benchmarks")
    p.add_argument("--timeout", type=int, default=900, help="seconds per benchmark")
    p.add_argument("--tokens", type=int, default=4096, help="positions for the full-KL monitor")
    p.add_argument("--slow", action="store_true", help=f"also run {', '.join(SLOW)}")
    p.add_argument("--slow-timeout", type=int, default=5400, help="seconds per slow benchmark")
    a = p.parse_args(argv)
    libs = [x.strip() for x in a.only.split(",") if x.strip()]
    bad = sorted(set(libs) - set(LIBS))
    if bad:
        p.error(f"--only: unknown {bad}; choose from {list(LIBS)}")

    status: list[tuple[str, str, str, float]] = []  # (library, benchmark, status, seconds)
    earlier = previous_sections(Path(a.out))
    carried: dict[str, str] = {}
    core_rows: list[dict[str, object]] = []
    adapter_out: dict[str, str] = {}
    adapter_targets: dict[str, list[dict[str, object]]] = {}
    target_rows: list[dict[str, object]] = []
    bench_core = str(HERE / "bench_core.py")
    for lib in libs:
        python = venv_python(lib)
        if python is None:
            status.append((lib, "all", "no venv (set $KLP_VENV_" + lib.upper() + ")", 0.0))
            continue
        print(f"[{lib}] core vs {lib}'s KL function ...", file=sys.stderr)
        rc, text, secs = run([str(python), bench_core, "--lib", lib, "--json"], a.timeout)
        status.append((lib, "bench_core.py", "ok" if rc == 0 else f"FAILED (rc={rc})", secs))
        core_rows += json_rows(text) if rc == 0 else []
        if rc != 0:
            adapter_out[f"bench_core.py --lib {lib}"] = text
        if a.skip_adapters:
            continue
        scripts = adapter_scripts(lib, a.slow)
        if not scripts:
            status.append((lib, f"bench_{lib}.py", "not written yet", 0.0))
        for script in scripts:
            print(f"[{lib}] {script.name} (patched vs native) ...", file=sys.stderr)
            timeout = a.slow_timeout if script.name in SLOW else a.timeout
            rc, text, secs = run([str(python), str(script)], timeout)
            status.append((lib, script.name, "ok" if rc == 0 else f"FAILED (rc={rc})", secs))
            found, text = targets.split(text)
            target_rows += found
            adapter_out[script.name] = text
            adapter_targets[script.name] = found
        for script in set(adapter_scripts(lib, True)) - set(scripts):
            if script.name in earlier:
                carried[script.name] = earlier[script.name]
                target_rows += carried_targets(earlier[script.name])
                state = "carried over from the previous report (rerun with --slow)"
            else:
                state = "not run (slow: use --slow)"
            status.append((lib, script.name, state, 0.0))
    print("[core] full-vocabulary KL monitor ...", file=sys.stderr)
    cmd = [sys.executable, bench_core, "--full-kl", "--tokens", str(a.tokens), "--json"]
    rc, text, secs = run(cmd, a.timeout)
    status.append(
        ("core", "bench_core.py --full-kl", "ok" if rc == 0 else f"FAILED (rc={rc})", secs)
    )
    full_rows = json_rows(text) if rc == 0 else []
    if rc != 0:
        adapter_out["bench_core.py --full-kl"] = text

    now = datetime.now(timezone.utc)
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `python benchmarks/run_all.py` on {now:%Y-%m-%d %H:%M} "
        f"UTC; {platform.machine()}, {os.cpu_count()} CPU cores, Python "
        f"{platform.python_version()}. CPU only: timings on a shared machine are noisy, read "
        "the ratios.",
        "",
        f"Machine (this interpreter's torch): {machine.describe()}.",
        "",
        DEVICE_NOTE,
        "",
        *target_lines(core_targets(core_rows) + target_rows, set(carried)),
        "",
        "## Runs",
        "",
        "| library | benchmark | status | seconds |",
        "|---|---|---|---|",
        *[f"| {lib} | {name} | {st} | {secs:.0f} |" for lib, name, st, secs in status],
        "",
        "## Core vs each library's own KL function (B=64, T=2048, 1 thread; medians of "
        "interleaved pairs of 10-call samples, ratio median (min-max); see bench_core.py)",
        "",
        "Peak MiB: torch's CPU allocator above the call's start (one call per side under the "
        "profiler, forward / forward+backward); memory: core / native of the same.",
        "",
        "| library | function | forward ms | fwd+bwd ms | core / native fwd | core / native "
        "fwd+bwd | peak MiB | memory | max abs diff | max err vs float64 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in core_rows:
        diff, err = row.get("max_abs_diff"), row.get("max_err_vs_float64")
        lines.append(
            f"| {row['library']} | {row['function']} | {_ms(row, 'forward_ms')} | "
            f"{_ms(row, 'fwd_bwd_ms')} | {_ratio(row, 'ratio_forward')} | "
            f"{_ratio(row, 'ratio_fwd_bwd')} | {_pair(row, 'fwd_mib', 'fwd_bwd_mib', '')} | "
            f"{_pair(row, 'memory_forward', 'memory_fwd_bwd', 'x')} | "
            f"{f'{diff:.1e}' if isinstance(diff, float) else ''} |"
            f" {f'{err:.1e}' if isinstance(err, float) else ''} |"
        )
    lines += [
        "",
        f"## Full-vocabulary KL monitor ({a.tokens} positions x V=32000, float32)",
        "",
        "| method | seconds | peak RSS increase (MiB) | inputs (MiB) |",
        "|---|---|---|---|",
        *[
            f"| {r['function']} | {float(r['seconds']):.2f} | "  # type: ignore[arg-type]
            f"{float(r['peak_increase_mib']):.0f} | {float(r['inputs_mib']):.0f} |"  # type: ignore[arg-type]
            for r in full_rows
        ],
    ]
    for name, text in adapter_out.items():
        lines += ["", f"## {name}", "", "```", text.rstrip(), "```"]
        found = adapter_targets.get(name, [])
        kept = [f"{COMMENT}{targets.PREFIX}{json.dumps(r)} -->" for r in found]
        lines += ["", *kept] if kept else []
    for text in carried.values():
        lines += ["", text]
    report = "\n".join(lines) + "\n"
    Path(a.out).write_text(report)
    print(report)
    print(f"written to {a.out}", file=sys.stderr)
    fine = ("ok", "not written yet", "no venv", "carried", "not run")
    return 0 if all(st.startswith(fine) for _, _, st, _ in status) else 1


if __name__ == "__main__":
    raise SystemExit(main())
