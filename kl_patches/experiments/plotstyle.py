"""One look for every plot of ``bias`` and ``reproduce``: series you can tell apart, zero drawn
one way, integer ticks where the axis counts, one legend per figure.

* Colours: Paul Tol's "muted" palette, nine colours made to stay distinguishable with the
  common colour-vision deficiencies; each series also gets its own marker and line style, so
  series stay apart in grey print and where two colours are close.
* Series that coincide (two configurations with the same expected gradient) are drawn side by
  side: :func:`dodge` shifts each series' x positions by a small, fixed fraction of the spacing
  (multiplicatively on a log axis), so every marker stays visible; the values are not changed.
* Zero on a log axis: a value below :data:`ZERO_FLOOR` is exactly zero up to round-off. It is
  drawn in a shaded band under a dashed line at 1e-12, at a tick labelled ``0``, on every plot
  alike.
* An axis that counts (sequence length) gets integer ticks only.
* One legend per figure, below the panels, when the panels share their series.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

PALETTE = (
    "#332288",  # indigo
    "#CC6677",  # rose
    "#117733",  # green
    "#DDCC77",  # sand
    "#88CCEE",  # cyan
    "#882255",  # wine
    "#44AA99",  # teal
    "#999933",  # olive
    "#AA4499",  # purple
)
"""Paul Tol's colour-blind-safe "muted" qualitative palette (nine series); a tenth series
repeats a colour with another marker and line style."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p")
"""One marker per series, in order."""
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
"""Line styles, cycled (with the markers they make each series distinct)."""
ZERO_FLOOR = 1e-12
"""Values below this are exactly zero up to float round-off."""


def style(index: int, emphasis: bool = False) -> dict[str, Any]:
    """Keyword arguments for ``ax.plot`` of series ``index`` (colour, marker, line style)."""
    return {
        "color": PALETTE[index % len(PALETTE)],
        "marker": MARKERS[index % len(MARKERS)],
        "linestyle": LINESTYLES[index % len(LINESTYLES)],
        "markersize": 5,
        "linewidth": 2.0 if emphasis else 1.4,
        "markerfacecolor": "white" if index % 2 else PALETTE[index % len(PALETTE)],
        "markeredgewidth": 1.2,
    }


def dodge(xs: Sequence[float], index: int, count: int, log: bool = False) -> list[float]:
    """``xs`` shifted so that ``count`` series drawn at the same x do not hide each other.

    Series ``index`` moves by ``(index - (count - 1) / 2)`` times 2.5% of the smallest gap
    between neighbouring x values (a factor on a log axis).
    """
    if count <= 1 or len(xs) == 0:
        return list(xs)
    import math

    values = [math.log(x) for x in xs] if log else list(xs)
    ordered = sorted(set(values))
    gaps = [b - a for a, b in itertools.pairwise(ordered) if b > a]
    step = 0.025 * (min(gaps) if gaps else 1.0)
    shift = (index - (count - 1) / 2) * step
    moved = [v + shift for v in values]
    return [math.exp(v) for v in moved] if log else moved


ZERO_AT = ZERO_FLOOR / 10
"""Where an exact zero is drawn on a log axis (the middle of the zero band)."""


def floor(values: Sequence[float]) -> list[float]:
    """Values below :data:`ZERO_FLOOR` put at :data:`ZERO_AT` (inside the zero band)."""
    return [v if v >= ZERO_FLOOR else ZERO_AT for v in values]


def zero_band(ax: Any) -> None:
    """Shade the region below :data:`ZERO_FLOOR` on a log y axis and label it ``0`` on the
    axis (the values :func:`floor` put there are exactly zero up to round-off)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    _, top = ax.get_ylim()
    top = max(top, ZERO_FLOOR * 10)
    ax.set_ylim(ZERO_AT / 10, top)
    ax.axhspan(ZERO_AT / 10, ZERO_FLOOR, color="0.9", zorder=0, lw=0)
    ax.axhline(ZERO_FLOOR, color="0.55", lw=0.8, ls="--", zorder=1)
    import math

    decades = range(int(math.log10(ZERO_FLOOR)), math.ceil(math.log10(top)) + 1)
    step = max(1, len(decades) // 6)
    ticks = [ZERO_AT, *(10.0**d for d in decades[::step])]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())

    def name(value: float, _: Any) -> str:
        if value < ZERO_FLOOR:
            return "0"
        return f"$10^{{{round(math.log10(value))}}}$"

    ax.yaxis.set_major_formatter(FuncFormatter(name))


def integer_ticks(ax: Any, values: Sequence[int]) -> None:
    """Ticks at exactly the integer ``values`` the x axis counts."""
    ax.set_xticks(sorted(set(values)))


def shared_legend(fig: Any, axes: Any, ncol: int = 3, title: str | None = None) -> None:
    """One legend for the figure, below the panels, from the first panel's series."""
    handles, labels = axes.get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=ncol,
        fontsize=8,
        frameon=False,
        title=title,
        bbox_to_anchor=(0.5, 0.0),
    )


def legend_rows(count: int, ncol: int) -> int:
    """How many rows a legend of ``count`` entries in ``ncol`` columns takes."""
    return -(-count // ncol)
