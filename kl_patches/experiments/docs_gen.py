"""Regenerate the generated parts of the docs: ``python -m kl_patches.docs_gen``.

Replaces the text between ``<!-- table1:start -->`` and ``<!-- table1:end -->`` in
``docs/index.md`` with :func:`kl_patches.theory.table1_markdown`, so the docs cannot drift from
the theory (a test checks it).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from kl_patches.theory import table1_markdown

START, END = "<!-- table1:start -->", "<!-- table1:end -->"


def render(text: str) -> str:
    """``text`` with the Table 1 block replaced by the current table."""
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"markers {START} ... {END} not found")
    return pattern.sub(lambda _m: f"{START}\n{table1_markdown()}\n{END}", text)


def main(argv: list[str] | None = None) -> int:
    """Rewrite docs/index.md in place (path may be given as the first argument)."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else Path("docs/index.md")
    path.write_text(render(path.read_text()))
    print(f"updated {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
