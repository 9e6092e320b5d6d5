"""Overhead of kl-patches inside each library's real training loop (CPU, tiny model).

    python benchmarks/e2e_overhead.py verl      # in the e2e(library='verl') environment
    python benchmarks/e2e_overhead.py openrlhf  # ... 'openrlhf'
    python benchmarks/e2e_overhead.py trl       # ... 'trl'
    [--pairs 2] [--steps 4]

Runs the library's own trainer through the end-to-end harness (``tests/e2e/harness``) in
interleaved pairs, the order inside a pair alternating: the native k3-in-loss (the library's own
KL code: verl's ``kl_loss_type=low_var_kl``, OpenRLHF's ``--algo.kl.use_loss --algo.kl.estimator
k3``, TRL's ``beta``) against the same estimator and placement through kl-patches
(``--kl k3-in-loss``: the patch computes the KL, summed per sequence). Reported per side: the
median step time the library itself logs (verl ``timing_s/step``, OpenRLHF
``timing/step_total``, TRL ``step_time``; steps after the first, which carries the warm-up), the
per-pair ratio patched / native (median, min, max), and for the patched side the share of the
step spent in ``kl_patches.core`` (timed in every process by ``tests/e2e/harness/profile.py``,
summed over the run's processes, divided by the run's summed step time). The model is tiny, so
the KL code's share is an upper bound on a real model's. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kl_patches.experiments import tiny  # noqa: E402
from tests.e2e.harness import openrlhf, runs, trl, verl  # noqa: E402

COEF = "0.05"


def _commands(library: str, task: tiny.TinyTask, folder: Path, steps: int) -> dict[str, list[str]]:
    py = sys.executable
    if library == "verl":
        base = verl.overrides(task, steps=steps)
        actor = "actor_rollout_ref.actor."
        native = [
            f"{actor}use_kl_loss=True",
            f"{actor}kl_loss_type=low_var_kl",
            f"{actor}kl_loss_coef={COEF}",
        ]
        return {
            "native": [py, "-m", "kl_patches", "verl", "--", *base, *native],
            "patched": [
                py,
                "-m",
                "kl_patches",
                "verl",
                "--kl",
                "k3-in-loss",
                "--kl.coef",
                COEF,
                "--",
                *base,
            ],
        }
    if library == "openrlhf":
        flags = openrlhf.flags(task, folder, steps=steps)
        flags[flags.index("--data.max_samples") + 1] = str(4 * steps)
        return {
            "native": [
                py,
                "-m",
                "openrlhf.cli.train_ppo_ray",
                *flags,
                "--algo.kl.use_loss",
                "--algo.kl.estimator",
                "k3",
                "--algo.kl.init_coef",
                COEF,
            ],
            "patched": [
                py,
                "-m",
                "kl_patches.openrlhf",
                *flags,
                "--kl",
                "k3-in-loss",
                "--kl.coef",
                COEF,
            ],
        }
    native_yaml = trl.write_config(task, folder / "native", steps=steps, beta=float(COEF))
    patched_yaml = trl.write_config(task, folder / "patched", steps=steps)
    return {
        "native": [py, "-m", "trl.scripts.grpo", "--config", str(native_yaml)],
        "patched": [
            py,
            "-m",
            "kl_patches.trl",
            "grpo",
            "--config",
            str(patched_yaml),
            "--kl",
            "k3-in-loss",
            "--kl.coef",
            COEF,
        ],
    }


def _env(library: str, profile: Path) -> dict[str, str]:
    env = {"verl": verl.environment, "openrlhf": openrlhf.environment, "trl": trl.environment}[
        library
    ]()
    env["KL_E2E_PROFILE"] = str(profile)
    return env


def _step_times(library: str, output: str) -> list[float]:
    if library == "verl":
        steps = runs.verl_logged(output)
        return [float(steps[s]["timing_s/step"]) for s in sorted(steps)]
    if library == "openrlhf":
        found = re.findall(r"Global step \d+: (\{.*\})", output)
        return [float(ast.literal_eval(f)["timing/step_total"]) for f in found]
    logs = [ast.literal_eval(line) for line in output.splitlines() if line.startswith("{'loss'")]
    return [float(entry["step_time"]) for entry in logs]


def run_once(library: str, side: str, cmd: list[str], work: Path) -> dict[str, float]:
    """One run: the median step time after the first step and the KL code's share."""
    folder = Path(tempfile.mkdtemp(dir=work))
    profile = folder / "profile"
    profile.mkdir()
    done = runs.launch(cmd, _env(library, profile), folder / "record", folder / "run.log", 1200)
    if done.returncode != 0:
        raise RuntimeError(f"{library} {side} failed:\n{done.tail(3000)}")
    times = _step_times(library, done.output)
    kl = sum(json.loads(p.read_text())["seconds"] for p in profile.glob("kl-*.json"))
    return {
        "step_s": statistics.median(times[1:]) if len(times) > 1 else times[0],
        "kl_share": kl / sum(times) if times else float("nan"),
        "wall_s": done.wall_s,
    }


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, run the pairs, print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("library", choices=["verl", "openrlhf", "trl"])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix=f"kl_e2e_bench_{args.library}_"))
    task = tiny.build(work / "tiny")
    commands = _commands(args.library, task, work, args.steps)
    results: dict[str, list[dict[str, float]]] = {"native": [], "patched": []}
    for pair in range(args.pairs):
        order = ["native", "patched"] if pair % 2 == 0 else ["patched", "native"]
        for side in order:
            results[side].append(run_once(args.library, side, commands[side], work))
            print(f"pair {pair + 1} {side}: {results[side][-1]}", flush=True)
    ratios = [
        p["step_s"] / n["step_s"]
        for n, p in zip(results["native"], results["patched"], strict=True)
    ]
    native = statistics.median(r["step_s"] for r in results["native"])
    patched = statistics.median(r["step_s"] for r in results["patched"])
    share = statistics.median(r["kl_share"] for r in results["patched"])
    print(
        f"{args.library}: step native {native * 1000:.0f} ms, patched {patched * 1000:.0f} ms; "
        f"patched/native {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f} "
        f"over {len(ratios)} pairs); kl_patches.core {share:.1%} of the patched step"
    )


if __name__ == "__main__":
    main()
