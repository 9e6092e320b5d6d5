"""docs/audit.md shows real output: its examples are rerun here and must match (core env:
no library installed, so the versions shown are the adapters' tested ones)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kl_patches.cli.audit import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")


def _block_after(marker: str) -> str:
    """The first fenced block after ``marker`` in docs/audit.md."""
    start = DOCS.index(marker)
    m = re.compile(r"```(?:text|json)\n(.*?)\n```", re.S).search(DOCS, start)
    assert m is not None, marker
    return m.group(1)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out.rstrip("\n")


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_three_launches_example(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [
        "tests/audit_corpus/verl/grpo_k3_loss.sh",
        "tests/audit_corpus/openrlhf/comment_cut.sh",
        "tests/audit_corpus/trl/rloo.yaml",
    ]
    code, out = _run(capsys, "--plain", "--strict", *paths)
    assert code == 1
    assert out == _block_after("`kl-patches audit --plain --strict tests/audit_corpus/verl/")


def test_grid_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "--plain", "recipes/trl/paper_grid.sh")
    table = "\n".join(out.splitlines()[:8])
    assert code == 0
    assert table == _block_after("`kl-patches audit --plain recipes/trl/paper_grid.sh`")


def test_json_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "--json", "--strict", "tests/audit_corpus/trl/grpo_beta.yaml")
    doc = json.loads(out)
    settings = doc["trainers"][0]["settings"]
    doc["trainers"][0]["settings"] = {k: settings[k] for k in list(settings)[:4]} | {"...": "..."}
    assert code == 1
    assert json.dumps(doc, indent=2) == _block_after("Real output of `kl-patches audit --json")
