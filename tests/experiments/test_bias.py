"""``kl-patches bias`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kl_patches import cli


def test_bias_table_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bias", "--json", "--quiet", "--length", "4"]) == 0
    rows = {r["label"]: r for r in json.loads(capsys.readouterr().out)}
    k1r, k3l = rows["k1-in-reward"], rows["k3-in-loss"]
    assert k1r["gradient"] == "reverse_kl" and k3l["gradient"] == "forward_kl_token"
    # k1-in-reward: exact bias is zero, far below the MC standard error; MC agrees within 3 s.e.
    assert k1r["exact_relative_bias"] < 1e-10 < k1r["mc_standard_error"]
    assert k1r["mc_relative_bias"] < 3 * k1r["mc_standard_error"]
    # k3-in-loss: bias well above the standard error, exactly and by MC
    assert k3l["exact_relative_bias"] > 4 * k3l["mc_standard_error"]
    assert k3l["mc_relative_bias"] > 4 * k3l["mc_standard_error"]
    assert rows["k1-in-loss"]["exact_relative_bias"] == pytest.approx(1.0)


def test_bias_table_text_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bias.png"
    assert (
        cli.main(["bias", "--quiet", "--length", "3", "--num-batches", "50", "--plot", str(out)])
        == 0
    )
    text = capsys.readouterr().out
    assert "k1-in-reward" in text and "exact bias" in text
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bias_rejects_huge_enumeration(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as err:
        cli.main(["bias", "--vocab", "10", "--length", "9"])
    assert err.value.code == 2


def test_cli_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["frobnicate"]) == 2
    assert "valid commands" in capsys.readouterr().err


def test_cli_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    assert "bias" in capsys.readouterr().out


def test_verdict_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["verdict", "k3-in-loss"]) == 0
    assert "forward_kl_token" in capsys.readouterr().out
    assert cli.main(["verdict", "k9-in-loss"]) == 2


def _rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def _close(doc: str, now: str, rel: float) -> bool:
    """Same marker ("-", "<1e-12") or numbers within ``rel`` (round-off of another machine)."""
    if doc == now:
        return True
    try:
        a, b = float(doc), float(now)
    except ValueError:
        return False
    return abs(a - b) <= rel * max(abs(a), abs(b))


def test_results_page_shows_todays_bias_table(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/results.md carries the output of `kl-patches bias --markdown` (regenerate it there).

    Compared by structure, exactly for the text columns and the round-off markers, and within
    1% (exact columns) or 10% (Monte-Carlo columns) for the numbers, so that another machine's
    floating-point round-off cannot fail it while a changed configuration or result does.
    """
    assert cli.main(["bias", "--markdown", "--quiet"]) == 0
    table = capsys.readouterr().out.strip()
    assert table.startswith("| configuration | expected gradient |")
    assert len({line.count("|") for line in table.splitlines()}) == 1  # every row has every cell
    results = Path(__file__).resolve().parents[2] / "docs" / "results.md"
    text = results.read_text()
    header = table.splitlines()[0]
    assert header in text
    lines = text[text.index(header) :].splitlines()
    doc = "\n".join(lines[: next(i for i, ln in enumerate(lines) if not ln.startswith("|"))])
    doc_rows, now_rows = _rows(doc), _rows(table)
    assert [r[:2] for r in doc_rows] == [r[:2] for r in now_rows]  # configurations, gradients
    for d, n in zip(doc_rows, now_rows, strict=True):
        assert all(_close(a, b, 0.01) for a, b in zip(d[2:4], n[2:4], strict=True)), (d, n)
        assert all(_close(a, b, 0.1) for a, b in zip(d[4:], n[4:], strict=True)), (d, n)
    assert _close("0.028", "0.117", 0.1) is False and _close("-", "0.117", 0.1) is False
