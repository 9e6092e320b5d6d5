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


def test_results_page_shows_todays_bias_table(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/results.md carries the output of `kl-patches bias --markdown` (regenerate it there)."""
    assert cli.main(["bias", "--markdown", "--quiet"]) == 0
    table = capsys.readouterr().out.strip()
    assert table.startswith("| configuration | expected gradient |")
    assert len({line.count("|") for line in table.splitlines()}) == 1  # every row has every cell
    results = Path(__file__).resolve().parents[1] / "docs" / "results.md"
    assert table in results.read_text()
