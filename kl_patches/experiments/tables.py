"""The text tables of ``demo``, ``bias``, ``reproduce`` and ``smoke``, drawn by rich.

One :class:`Table` (a title, column names, rows of already formatted cells, a caption) and one
:func:`render` to text, so every command's tables look alike and line up however long a cell
is. Rendering goes to a string, never straight to the terminal: no colour codes and no width
guessing, the table takes the width its cells need (commands print it to stdout, which may be a
file). Markdown versions of the same tables stay with each experiment (``format_markdown``).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field


@dataclass
class Table:
    """A table to render: formatted cells, numbers right-aligned."""

    title: str
    """Printed above the table (empty: none)."""
    columns: list[str]
    """Column headers."""
    rows: list[list[str] | None] = field(default_factory=list)
    """Formatted cells per row; None is a section break (a rule between groups)."""
    caption: str = ""
    """Printed under the table: what the columns mean."""
    numeric: set[int] | None = None
    """Columns aligned right (default: every column after the first whose cells read as
    numbers)."""

    def add(self, *cells: str) -> None:
        """Append a row (one cell per column)."""
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns: {cells}")
        self.rows.append([str(c) for c in cells])

    def section(self) -> None:
        """Start a new group of rows (a rule is drawn between groups)."""
        if self.rows and self.rows[-1] is not None:
            self.rows.append(None)


def _numberlike(text: str) -> bool:
    head = text.split("±")[0].strip().lstrip("<>~")
    try:
        float(head)
    except ValueError:
        return head in ("-", "")
    return True


def render(table: Table) -> str:
    """The table as plain text (box-drawing rules, no colour), title and caption included."""
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    rows = [r for r in table.rows if r is not None]
    numeric = table.numeric
    if numeric is None:
        numeric = {
            j for j in range(1, len(table.columns)) if rows and all(_numberlike(r[j]) for r in rows)
        }
    out = RichTable(
        title=Text(table.title) if table.title else None,  # Text: brackets are not markup
        box=box.SIMPLE_HEAD,
        title_justify="left",
        caption_justify="left",
        pad_edge=False,
    )
    for j, name in enumerate(table.columns):
        out.add_column(Text(name), justify="right" if j in numeric else "left", no_wrap=True)
    pending_rule = False
    for row in table.rows:
        if row is None:
            pending_rule = True
            continue
        out.add_row(*(Text(cell) for cell in row), end_section=False)
        if pending_rule and out.row_count > 1:
            out.rows[-2].end_section = True
        pending_rule = False
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=10_000, color_system=None, force_terminal=False, highlight=False
    )
    console.print(out, crop=False)
    text = "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()).strip("\n")
    if table.caption:  # one paragraph under the table, not wrapped to the table's width
        text += "\n" + wrap(table.caption)
    return text


def wrap(text: str, width: int = 100) -> str:
    """A paragraph wrapped at ``width`` columns, never inside a hyphenated name."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False))
