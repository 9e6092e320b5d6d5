"""How the experiment commands present their numbers: rich tables rendered to text, progress
that never redraws into a redirected log, plots whose series stay apart, and a closing sentence
computed from the numbers (not written in advance)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from kl_patches.config import KLConfig
from kl_patches.experiments import bias, plotstyle, progress, reproduce_report
from kl_patches.experiments.reproduce_report import Row, Stat
from kl_patches.experiments.tables import Table, render


def test_tables_keep_brackets_align_numbers_and_put_the_caption_under() -> None:
    table = Table("title [x]", ["configuration", "bias"], caption="what E[g] means " * 12)
    table.add("k1-in-reward [reward_to_go]", "1.5")
    table.section()
    table.add("k3-in-loss", "<1e-12")
    text = render(table)
    lines = text.splitlines()
    assert lines[0] == "title [x]" and "k1-in-reward [reward_to_go]" in text  # no markup eaten
    row = next(line for line in lines if "k3-in-loss" in line)
    assert row.rstrip().endswith("<1e-12")
    assert "E[g]" in text and all(len(line) <= 100 for line in text.split("bias")[-1].splitlines())
    with pytest.raises(ValueError, match="2 columns"):
        table.add("only one")


def test_progress_in_a_redirected_log_is_two_plain_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert list(progress.progress(iter(range(5)), 5, "work")) == [0, 1, 2, 3, 4]
    err = capsys.readouterr().err
    assert "\r" not in err and err.splitlines()[0] == "work: 5 to do"
    assert err.splitlines()[1].startswith("work: 5/5 done in ")
    assert list(progress.progress(range(3), 3, "quiet", enabled=False)) == [0, 1, 2]
    assert capsys.readouterr().err == ""


def test_progress_on_a_terminal_draws_a_rich_bar(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(progress, "_terminal", lambda: True)
    assert list(progress.progress(range(4), 4, "bar")) == [0, 1, 2, 3]
    assert "bar" in capsys.readouterr().err


def test_nine_series_look_different_in_colour_marker_and_line() -> None:
    looks = [plotstyle.style(i) for i in range(9)]
    assert len({look["color"] for look in looks}) == 9
    assert len({(look["marker"], str(look["linestyle"])) for look in looks}) == 9
    xs = plotstyle.dodge([1.0, 2.0, 3.0], 0, 3)
    assert xs[0] < 1.0 and plotstyle.dodge([1.0, 2.0], 1, 3) == [1.0, 2.0]  # centred
    assert plotstyle.floor([0.0, 1e-15, 0.5]) == [plotstyle.ZERO_AT, plotstyle.ZERO_AT, 0.5]


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures the plot functions save (kept open for inspection)."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    saved: list[Any] = []
    real = Figure.savefig

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        saved.append(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return saved


def _series(ax: Any) -> list[Any]:
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")]


def test_the_bias_plot_shows_every_series_and_zero_one_way(
    figures: list[Any], tmp_path: Path
) -> None:
    reports = bias.run_sweep(lengths=(1, 2, 3), num_batches=5, show_progress=False)
    bias.plot_sweep(reports, str(tmp_path / "b.png"))
    fig = figures[-1]
    ax_b, ax_v = fig.axes
    assert len(fig.legends) == 1 and ax_b.get_legend() is None and ax_v.get_legend() is None
    for ax in (ax_b, ax_v):
        assert list(ax.get_xticks()) == [1, 2, 3]  # integer lengths only
        lines = _series(ax)
        assert len(lines) == len(bias.paper_grid())
        looks = {(line.get_color(), line.get_marker(), str(line.get_linestyle())) for line in lines}
        assert len(looks) == len(lines)
        xs = [tuple(line.get_xdata()) for line in lines]
        assert len(set(xs)) == len(xs)  # side by side: no series drawn over another
    zeros = [y for line in _series(ax_b) for y in line.get_ydata() if y < plotstyle.ZERO_FLOOR]
    assert zeros and set(zeros) == {plotstyle.ZERO_AT}  # every exact zero at the same place
    assert "0" in [t.get_text() for t in ax_b.get_yticklabels()]


def _row(name: str, beta: float, objective: float, std: float = 0.0) -> Row:
    stat = Stat(0.0, 0.0)
    return Row(name, beta, 2, stat, stat, Stat(objective, std), Stat(objective, std), stat, 1.0)


def test_the_reproduce_summary_is_computed_from_its_rows() -> None:
    rows = [
        _row("k1-in-reward", 0.1, 0.99),
        _row("k3-in-loss", 0.1, 0.90),
        _row("k1-in-reward", 1.0, 0.95, std=0.02),
        _row("k3-in-loss", 1.0, 0.96, std=0.02),
    ]
    text = reproduce_report.summary_sentence(rows)
    assert text.startswith("In short: k1-in-reward ends closest to the exact optimum")
    assert "0.03 below it on average over the 2 betas, and ends best at 1 of them" in text
    assert "best per beta: 0.1: k1-in-reward; 1: k3-in-loss" in text
    assert "tied at beta=1 (k3-in-loss and k1-in-reward)" in text
    rows[0] = dataclasses.replace(rows[0], objective=Stat(0.5, 0.0))
    assert reproduce_report.summary_sentence(rows).startswith("In short: k3-in-loss ends closest")


def test_the_bias_summary_is_computed_from_its_reports() -> None:
    reports = bias.run_table(length=2, num_batches=20, show_progress=False)
    text = bias.summary(reports)
    unbiased = [r for r in reports if r.exact_relative_bias < bias.EXACT_ZERO]
    assert text.startswith(f"In short: {len(unbiased)} of {len(reports)} configurations")
    fake = [dataclasses.replace(r, exact_relative_bias=0.5) for r in reports]
    assert bias.summary(fake).startswith(f"In short: 0 of {len(reports)} configurations")
    assert KLConfig.parse("k1-in-reward") == reports[0].config.replace(coef=0.05)
