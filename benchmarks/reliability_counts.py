"""Count the bad inputs the reliability suite tries, and how many are handled, per category.

    python benchmarks/reliability_counts.py [--json] [pytest options ...]

Imports every ``tests/reliability/test_*.py`` module's ``CASES`` (a list of ``(category,
name)``), runs the suite with pytest, and counts a case as handled when every test whose
parameter id is the case's name (or ``<category>-<name>``) passed. A case with no passing test
(failed, skipped or not found) is tried but not handled, and listed. Prints a table "category:
tried / handled" and a total, so the number can be tracked from one commit to the next.
Exit code 0 when every case is handled, 1 otherwise, 2 when a module has no CASES or repeats a
name. Run it where the core session's packages are installed (torch, pyyaml, rich).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "tests" / "reliability"


def load_cases() -> dict[str, list[tuple[str, str]]]:
    """Module stem -> its CASES; raises SystemExit(2) on a module without CASES or a repeat."""
    sys.path.insert(0, str(ROOT))
    out: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(SUITE.glob("test_*.py")):
        module = importlib.import_module(f"tests.reliability.{path.stem}")
        cases = getattr(module, "CASES", None)
        if not cases:
            print(f"{path.name}: no CASES list", file=sys.stderr)
            raise SystemExit(2)
        names = [str(name) for _, name in cases]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            print(f"{path.name}: case names used twice: {repeated}", file=sys.stderr)
            raise SystemExit(2)
        out[path.stem] = [(str(c), str(n)) for c, n in cases]
    return out


class Collector:
    """A pytest plugin: the outcome of every test, by (module stem, parameter id)."""

    def __init__(self) -> None:
        self.outcomes: dict[tuple[str, str], list[str]] = defaultdict(list)

    def pytest_runtest_logreport(self, report: Any) -> None:
        """Record the call phase, or a setup that failed or skipped (no call then)."""
        if report.when != "call" and not (report.when == "setup" and not report.passed):
            return
        path, _, rest = report.nodeid.partition("::")
        ident = rest.partition("[")[2].rstrip("]") if "[" in rest else rest
        self.outcomes[(Path(path).stem, ident)].append(report.outcome)


def handled(collector: Collector, module: str, category: str, name: str) -> bool:
    """True when at least one test of this case ran and every one passed."""
    found = [
        outcome
        for (stem, ident), outcomes in collector.outcomes.items()
        if stem == module and ident in (name, f"{category}-{name}")
        for outcome in outcomes
    ]
    return bool(found) and all(o == "passed" for o in found)


def main() -> int:
    """Run the suite and print the counts."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    args, pytest_args = p.parse_known_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cases = load_cases()
    import pytest

    collector = Collector()
    pytest.main(["-q", "-p", "no:cacheprovider", str(SUITE), *pytest_args], plugins=[collector])
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    missed: list[str] = []
    for module, items in cases.items():
        for category, name in items:
            table[category][0] += 1
            if handled(collector, module, category, name):
                table[category][1] += 1
            else:
                missed.append(f"{module}: {category}/{name}")
    tried = sum(t for t, _ in table.values())
    done = sum(h for _, h in table.values())
    if args.json:
        counts = {c: {"tried": t, "handled": h} for c, (t, h) in sorted(table.items())}
        print(json.dumps({"categories": counts, "tried": tried, "handled": done, "missed": missed}))
    else:
        width = max(len("category"), *(len(c) for c in table))
        print(f"\n{'category'.ljust(width)}  tried / handled")
        for category, (t, h) in sorted(table.items()):
            print(f"{category.ljust(width)}  {t:5d} / {h}")
        print(f"{'total'.ljust(width)}  {tried:5d} / {done}")
        for line in missed:
            print(f"not handled: {line}")
    return 0 if done == tried else 1


if __name__ == "__main__":
    raise SystemExit(main())
