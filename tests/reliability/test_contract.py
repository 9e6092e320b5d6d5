"""The audit's command-line contract (issue 32): with ``--json`` a bad ``--library-version`` still
prints one JSON document on stdout; an empty version is an error naming the valid forms; ``-``
is standard input; a failing ``$((...))`` is said as bash says it, at its line; a pin search
that stops at its bound says so.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from kl_patches import cli
from tests.reliability.reliability3 import (
    GRPO_NO_BETA,
    VERL_LAUNCH,
    audit_json,
    notes,
    nothing_installed,
    repo,
    trainer,
)

BAD_VERSIONS: list[tuple[str, str, str]] = [
    # (case, --library-version value, a fragment of the message)
    ("json-unknown-library", "foo=1", "unknown library 'foo'; choose one of"),
    ("json-not-a-version", "banana", "'banana' is neither a version nor a specifier; give"),
    ("json-equals-alone", "=", "'=' is neither a version nor a specifier; give"),
    ("json-operator-without-version", "trl==", "no version after '=='; give VERSION (0.18.0)"),
    ("empty-version", "", "--library-version '' is empty; give VERSION (0.18.0)"),
    ("library-without-version", "trl=", "no version after '='; give VERSION (0.18.0)"),
]

CASES: list[tuple[str, str]] = [
    *(("contract", name) for name, _, _ in BAD_VERSIONS),
    ("contract", "stdin-dash"),
    ("contract", "stdin-dash-twice"),
    ("contract", "arithmetic-error-at-its-line"),
    ("contract", "pin-search-bound-is-said"),
]
"""Every case of this module as (category, name); the test parameter id is the name."""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    nothing_installed(monkeypatch)


@pytest.mark.parametrize(
    ("value", "fragment"), [pytest.param(v, f, id=n) for n, v, f in BAD_VERSIONS]
)
def test_a_bad_library_version_is_one_line_and_a_json_document(
    value: str, fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``--json`` printed nothing on stdout for these, and ``''``/``trl=`` were
    ignored silently."""
    root = repo(tmp_path, {"grpo.yaml": GRPO_NO_BETA})
    code = cli.main(["audit", "--json", "--library-version", value, str(root / "grpo.yaml")])
    out = capsys.readouterr()
    (line,) = out.err.strip().splitlines()
    assert (
        code == 2 and line.startswith("kl-patches audit: --library-version ") and fragment in line
    )
    doc = json.loads(out.out)
    assert doc["schema"] == "kl-patches.audit/1" and doc["exit_code"] == 2 and doc["trainers"] == []
    (item,) = doc["errors"]
    assert item["kind"] == "usage" and item["field"] == "--library-version"
    assert fragment in item["message"]


class _Stdin(io.StringIO):
    """Standard input as a pipe: text behind a binary buffer, not a terminal."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


@pytest.mark.parametrize("name", ["stdin-dash"])
def test_dash_reads_standard_input(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: ``-`` was read as a file named ``-`` ("no such file")."""
    root = repo(tmp_path, {"requirements.txt": "verl==0.3.0\n"})
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "stdin", _Stdin(VERL_LAUNCH.encode("utf-16")))
    code, doc, _ = audit_json(capsys, ["-"])
    t = trainer(doc)
    assert code == 0 and t["origin"] == "<stdin>:1" and t["config"]["placement"] == "reward"
    assert (t["library_version"], t["version_source"]) == ("0.3.0", "pin")


@pytest.mark.parametrize("name", ["stdin-dash-twice"])
def test_dash_twice_is_refused(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", _Stdin(b""))
    assert cli.main(["audit", "-", "-"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "kl-patches audit: - (standard input) is given more than once; it can be read once"
    )


@pytest.mark.parametrize("name", ["arithmetic-error-at-its-line"])
def test_a_failing_arithmetic_expansion_is_said_at_its_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``$((1/0))`` was called a command substitution, at line 0, and its literal
    text kept as the value. bash reports the division by zero at its line and abandons that
    command: the variable stays unset."""
    script = f"\nN=$((1/0))\n{VERL_LAUNCH.strip()} trainer.total_epochs=$N\n"
    root = repo(tmp_path, {"run.sh": script})
    code, doc, _ = audit_json(capsys, [str(root / "run.sh")])
    t = trainer(doc)
    assert code == 0 and t["config"]["placement"] == "reward"
    text = notes(doc)
    assert "line 2: arithmetic expansion $((1/0)): division by 0 fails in bash" in text
    assert "command substitution" not in text and "line 0" not in text
    assert not [f for f in t["findings"] if f["code"] == "unknown_value"]  # N is unset, not unknown


@pytest.mark.parametrize("name", ["pin-search-bound-is-said"])
def test_a_pin_beyond_the_search_bound_is_said(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a pin 13 directories up was missed without a note."""
    deep = Path(*[f"d{i}" for i in range(13)])
    root = repo(
        tmp_path, {"requirements.txt": "trl==0.18.0\n", str(deep / "grpo.yaml"): GRPO_NO_BETA}
    )
    code, doc, _ = audit_json(capsys, [str(root / deep / "grpo.yaml")])
    assert code == 0 and trainer(doc)["version_source"] == "newest"
    assert "looked 12 directories up from" in notes(doc)
    assert "without reaching a repository root (.git); pins and vendored copies further up" in (
        notes(doc)
    )
