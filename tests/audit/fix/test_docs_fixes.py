"""docs/audit.md's Fixes example is the real output of ``kl-patches audit FILE --fix``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kl_patches.cli.audit import main

ROOT = Path(__file__).resolve().parents[3]


def test_the_fixes_example_is_real_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")
    start = docs.index("## Fixes")
    block = re.compile(r"```text\n\$ kl-patches audit (\S+) --fix\n(.*?)\n```", re.S)
    m = block.search(docs, start)
    assert m is not None
    monkeypatch.chdir(ROOT)
    assert main([m.group(1), "--fix"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == m.group(2)
