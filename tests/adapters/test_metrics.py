"""The KL metric names all three adapters log: one prefix, one list."""

from __future__ import annotations

import re
from pathlib import Path

from kl_patches.adapters import metrics

ADAPTERS = Path(metrics.__file__).resolve().parent
METRIC_LITERAL = re.compile(r"[\"'](kl(?:_patches)?/[a-z_{}.]+)[\"']")


def test_every_name_has_the_shared_prefix() -> None:
    assert metrics.PREFIX == "kl_patches/"
    assert len(set(metrics.ALL)) == len(metrics.ALL)
    assert all(name.startswith(metrics.PREFIX) for name in metrics.ALL)


def test_adapters_log_only_the_shared_names() -> None:
    """A metric name written as a literal in an adapter is one of ``metrics.ALL`` (the TRL
    adapter's former ``kl/...`` names are gone)."""
    found: dict[str, str] = {}
    for path in sorted(ADAPTERS.rglob("*.py")):
        for name in METRIC_LITERAL.findall(path.read_text()):
            found[name] = str(path.relative_to(ADAPTERS))
    assert found, "the scan found no metric literal at all"
    stray = {name: where for name, where in found.items() if name not in metrics.ALL}
    # the only literals left are names in metrics.ALL (offpolicy modules) or the sample weight
    assert set(stray) <= {"kl_patches/is_weight"}, stray
