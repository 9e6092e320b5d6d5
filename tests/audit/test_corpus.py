"""The audit on the corpus in tests/audit_corpus: every file read, every expectation met.

Expectations live in tests/audit_corpus/expected.yaml with the arithmetic behind them; each
file of the corpus must have an entry (a new file without one fails the suite). An entry is a
list of trainers, or ``{error: TEXT}`` for a file the audit must refuse with a message that
contains TEXT (exit code 2), or ``{helper: WHY}`` for a file that another corpus file reads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kl_patches.audit import AuditEntry, AuditError, audit
from kl_patches.audit.report import entry_dict
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


def _launches() -> dict[str, list[dict[str, Any]]]:
    return {name: wants for name, wants in EXPECTED.items() if isinstance(wants, list)}


def _check(entry: AuditEntry, want: dict[str, Any], name: str) -> None:
    r = entry.reading
    cfg = r.config
    doc = entry_dict(entry)
    for key in ("loss_estimator", "loss_coef"):
        if key in want:
            assert (
                doc["config"].get(key) == pytest.approx(want[key])
                if isinstance(want[key], float)
                else doc["config"].get(key) == want[key]
            ), (name, key, doc["config"])
    if "trainer" in want:
        assert want["trainer"] in r.trainer, (name, r.trainer)
    if "off_policy_reason" in want:
        assert want["off_policy_reason"] in r.off_policy_reason, (name, r.off_policy_reason)
    if "origin" in want:
        assert want["origin"] in entry.origin, (name, entry.origin)
    if "description" in want:
        assert doc["description"] == want["description"], (name, doc["description"])
    if "fix_switch" in want:  # the kl-patches change printed last (a substring of it)
        assert want["fix_switch"] in entry.fix_switch, (name, entry.fix_switch)
    absent = set(want.get("not_findings", [])) & {f.code for f in entry.findings}
    assert not absent, f"{name}: findings {sorted(absent)} must not appear"
    skip = {
        "trainer",
        "off_policy_reason",
        "origin",
        "description",
        "fix_switch",
        "not_findings",
        "loss_estimator",
        "loss_coef",
    }
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
        if key in ("why", "findings") or key in skip:
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
    wants = EXPECTED[name]
    if isinstance(wants, dict) and "helper" in wants:
        return  # read by another corpus file (its expectation covers it)
    if isinstance(wants, dict):
        with pytest.raises(AuditError) as info:
            audit(CORPUS / name)
        assert wants["error"] in str(info.value), str(info.value)
        return
    entries = audit(CORPUS / name)
    assert len(entries) == len(wants), [e.origin for e in entries]
    for entry, want in zip(entries, wants, strict=True):
        _check(entry, want, name)


def test_strict_exit_code_follows_the_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    """--strict fails exactly on the files with a biased or error status."""
    for name, wants in sorted(_launches().items()):
        failing = any(w["status"] in ("biased", "error") for w in wants)
        code = main(["--strict", "--json", str(CORPUS / name)])
        doc = json.loads(capsys.readouterr().out)
        assert code == (1 if failing else 0), name
        assert doc["exit_code"] == code


def test_whole_corpus_in_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    """Every readable corpus file in one run (the refused ones are checked one by one)."""
    launches = _launches()
    paths = [str(CORPUS / n) for n in sorted(launches)]
    assert main(["--json", *paths]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["trainers"] == sum(len(w) for w in launches.values())
    statuses = [w["status"] for ws in launches.values() for w in ws]
    for status in ("unbiased", "biased", "kl_off", "error"):
        assert doc["summary"][status] == statuses.count(status)


def test_docs_list_every_finding_code_of_the_corpus() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text(encoding="utf-8")
    codes = {
        f.code for name in _launches() for entry in audit(CORPUS / name) for f in entry.findings
    }
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
