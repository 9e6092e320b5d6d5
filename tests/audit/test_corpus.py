"""The audit on the corpus in tests/audit_corpus: every file read, every expectation met.

Expectations live in tests/audit_corpus/expected.yaml with the arithmetic behind them; each
file of the corpus must have an entry (a new file without one fails the suite).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kl_patches.audit import AuditEntry, audit
from kl_patches.cli.audit import main

CORPUS = Path(__file__).resolve().parents[1] / "audit_corpus"
EXPECTED: dict[str, list[dict[str, Any]]] = yaml.safe_load(
    (CORPUS / "expected.yaml").read_text(encoding="utf-8")
)


def _corpus_files() -> list[str]:
    return sorted(
        str(p.relative_to(CORPUS))
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name != "expected.yaml" and "__pycache__" not in p.parts
    )


def test_every_corpus_file_has_expectations() -> None:
    assert sorted(EXPECTED) == _corpus_files()


def _check(entry: AuditEntry, want: dict[str, Any], name: str) -> None:
    r = entry.reading
    cfg = r.config
    got = {
        "library": r.library,
        "status": entry.status,
        "estimator": cfg.estimator,
        "placement": cfg.placement,
        "coef": cfg.coef,
        "gradient": entry.verdict.gradient if entry.kl_on else "zero",
        "off_policy": r.off_policy,
        "input_kind": entry.kind,
    }
    for key, value in want.items():
        if key in ("why", "findings"):
            continue
        if key == "loop":
            assert entry.origin.endswith(f"[{value}]"), entry.origin
            continue
        if key == "line":
            assert re.search(rf"{re.escape(name)}:{value}( \[.*\])?$", entry.origin), entry.origin
            continue
        if key == "coef":
            assert got["coef"] == pytest.approx(float(value)), (name, key)
            continue
        assert got[key] == value, f"{name}: {key} is {got[key]!r}, expected {value!r}"
    codes = {f.code for f in entry.findings}
    missing = set(want.get("findings", [])) - codes
    assert not missing, f"{name}: findings {sorted(missing)} missing; got {sorted(codes)}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(name: str) -> None:
    entries = audit(CORPUS / name)
    wants = EXPECTED[name]
    assert len(entries) == len(wants), [e.origin for e in entries]
    for entry, want in zip(entries, wants, strict=True):
        _check(entry, want, name)


def test_strict_exit_code_follows_the_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    """--strict fails exactly on the files with a biased or error status."""
    for name, wants in sorted(EXPECTED.items()):
        failing = any(w["status"] in ("biased", "error") for w in wants)
        code = main(["--strict", "--json", str(CORPUS / name)])
        doc = json.loads(capsys.readouterr().out)
        assert code == (1 if failing else 0), name
        assert doc["exit_code"] == code


def test_whole_corpus_in_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(CORPUS / n) for n in sorted(EXPECTED)]
    assert main(["--json", *paths]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["trainers"] == sum(len(w) for w in EXPECTED.values())
    statuses = [w["status"] for ws in EXPECTED.values() for w in ws]
    for status in ("unbiased", "biased", "kl_off", "error"):
        assert doc["summary"][status] == statuses.count(status)


def test_docs_list_every_finding_code_of_the_corpus() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text(encoding="utf-8")
    codes = {f.code for name in EXPECTED for entry in audit(CORPUS / name) for f in entry.findings}
    missing = sorted(c for c in codes if f"`{c}`" not in docs)
    assert not missing, f"docs/audit.md does not list {missing}"


@pytest.mark.parametrize(
    ("name", "severity"),
    [("verl/both_k3_same.sh", "info"), ("verl/both_k3_mismatch.sh", "warning")],
)
def test_both_switches_k3_severity_follows_the_verdict(name: str, severity: str) -> None:
    """k3 on both sides is only a warning when the combination is not the exact construction."""
    (entry,) = audit(CORPUS / name)
    found = {f.code: f.severity for f in entry.reading.findings}
    assert found.get("verl.both_switches_k3") == severity
