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
    assert cli.main(["bias", "--vocab", "10", "--length", "9"]) == 2
    assert "(vocab**length) must be <= 20000" in capsys.readouterr().err


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


# ------------------------------------------------------------------ --off-policy
_OFF = ["bias", "--off-policy", "--quiet", "--length", "3", "--num-batches", "100"]


def _off_json(capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict]:
    assert cli.main([*_OFF, "--json", "--levels", "0.02,0.1", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_off_policy_table_structure_and_facts(capsys: pytest.CaptureFixture[str]) -> None:
    from kl_patches.experiments.bias import off_policy_grid

    rows = _off_json(capsys)
    grid = off_policy_grid()
    assert len(rows) == 2 * len(grid)
    assert {r["weighting"] for r in rows} == {
        "none",
        "token",
        "sequence",
        "sequence c=1",
        "sequence c=2",
        "sequence c=5",
    }
    levels = sorted({round(r["kl_behaviour"] / r["length"], 9) for r in rows})
    assert levels == pytest.approx([0.02, 0.1], rel=1e-6)
    assert all(r["trainer_ratio"] for r in rows)  # PPO-ratio form by default
    for r in rows:
        if r["weighting"] == "sequence":  # unbiased: zero up to round-off; MC agrees
            assert r["exact_relative_bias"] < 1e-10 < r["mc_standard_error"]
            assert r["mc_relative_bias"] < 4 * r["mc_standard_error"]
            assert r["cosine"] == pytest.approx(1.0, abs=1e-9)
        elif r["weighting"] in ("none", "token"):
            assert r["exact_relative_bias"] > 1e-3, r["label"]
        elif r["max_weight"] > r["config"]["is_clip"]:  # a clip that binds somewhere: biased
            assert r["exact_relative_bias"] > 1e-6, r["label"]
        else:  # a clip above every prefix weight changes nothing
            assert r["exact_relative_bias"] < 1e-10, r["label"]
    binding = [r for r in rows if r["weighting"].startswith("sequence c=")]
    assert sum(r["max_weight"] > r["config"]["is_clip"] for r in binding) >= 4


def test_off_policy_clipped_bias_is_the_derived_expression(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The table's clipped bias equals the sum over prefixes with min(pi, c * mu)."""
    from kl_patches.config import KLConfig
    from kl_patches.oracle import behaviour_at_level, make_problem

    rows = [r for r in _off_json(capsys) if r["weighting"].startswith("sequence c=")]
    enum, logits, ref = make_problem(3, 3, 0)
    target = enum.basis_gradient("reverse_kl", logits, ref)
    for r in rows:
        cfg = KLConfig.from_dict(r["config"])
        mu, _ = behaviour_at_level(enum, logits, r["kl_behaviour"] / 3, seed=1)
        derived = enum.prefix_weighted_gradient(cfg, logits, ref, mu)
        want = float((derived - cfg.coef * target).norm() / (cfg.coef * target).norm())
        assert r["exact_relative_bias"] == pytest.approx(want, rel=1e-6)


def test_off_policy_is_deterministic_and_forms_agree_for_prefix_weights(
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = _off_json(capsys), _off_json(capsys)
    assert a == b
    rf = _off_json(capsys, "--trainer", "reinforce")
    assert not any(r["trainer_ratio"] for r in rf)
    for ppo, plain in zip(a, rf, strict=True):
        assert ppo["label"] == plain["label"]
        if ppo["weighting"].startswith("sequence"):
            # the PPO penalty is the REINFORCE one divided by the ratio the trainer multiplies
            # back: the same single-sample gradient, so the same bias and variance
            assert ppo["variance"] == pytest.approx(plain["variance"], rel=1e-9)
            assert ppo["mc_relative_bias"] == pytest.approx(plain["mc_relative_bias"], rel=1e-9)
        elif ppo["weighting"] == "none" and ppo["config"]["placement"] == "reward":
            assert ppo["exact_relative_bias"] != pytest.approx(plain["exact_relative_bias"])


def test_off_policy_text_markdown_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "off.png"
    args = [*_OFF, "--vocab", "2", "--levels", "0.05", "--clips", "2"]
    assert cli.main([*args, "--plot", str(out)]) == 0
    text = capsys.readouterr().out
    assert "KL(mu||pi)" in text and "PPO-ratio trainer" in text and "<1e-12" in text
    assert "sequence c=2" in text and "sequence c=1 " not in text
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main([*args, "--markdown"]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0].startswith("| KL(mu&#124;&#124;pi) per token |")  # no escaped pipes
    assert len({line.count("|") for line in table}) == 1


@pytest.mark.parametrize("bad", ["0", "-0.1", "a", "nan"])
def test_off_policy_rejects_bad_levels(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*_OFF, "--levels", bad]) == 2
    assert "argument --levels" in capsys.readouterr().err


def test_round_off_is_not_printed() -> None:
    from kl_patches.experiments.bias import _bias, _cosine

    assert _bias(6.4e-16) == "<1e-12" and _bias(2.5e-3) == "2.50e-03"
    assert _cosine(float("nan")) == "-" and _cosine(0.9996) == "1.000"


def test_results_page_shows_todays_off_policy_table(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/results.md carries `kl-patches bias --off-policy --markdown`, compared as above."""
    assert cli.main(["bias", "--off-policy", "--markdown", "--quiet"]) == 0
    table = capsys.readouterr().out.strip()
    text = (Path(__file__).resolve().parents[2] / "docs" / "results.md").read_text()
    header = table.splitlines()[0]
    assert header.startswith("| KL(mu") and header in text
    lines = text[text.index(header) :].splitlines()
    doc = "\n".join(lines[: next(i for i, ln in enumerate(lines) if not ln.startswith("|"))])
    doc_rows, now_rows = _rows(doc), _rows(table)
    assert [r[:3] for r in doc_rows] == [r[:3] for r in now_rows]  # level, config, weighting
    for d, n in zip(doc_rows, now_rows, strict=True):
        assert all(_close(a, b, 0.01) for a, b in zip(d[3:5], n[3:5], strict=True)), (d, n)
        assert all(_close(a, b, 0.1) for a, b in zip(d[5:], n[5:], strict=True)), (d, n)
