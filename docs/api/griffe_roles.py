"""Griffe extension for the API pages: turn the docstrings' Sphinx roles into links.

The package's docstrings cross-reference with Sphinx roles (``:func:`loss_term```,
``:class:`~kl_patches.config.KLConfig```), which Markdown would print literally. This rewrites
each role into an *optional* mkdocs-autorefs link: a link where the target is documented on the
site, plain code where it is not (so a reference to an undocumented name never breaks
``mkdocs build --strict``). Names are resolved in the scope of the object whose docstring holds
them, as Python would.

The docstrings also set formulas and tables as indented plain-text blocks after a blank line or
a line ending in a colon, which Markdown would run together into one paragraph; those become
fenced text blocks (indented lists stay lists, and Google-style section headers are left alone).
Loaded by ``mkdocs.yml`` (``extensions: [docs/api/griffe_roles.py]``).
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:mod|func|class|meth|data|attr|obj|exc|const):`(?P<tilde>~?)(?P<name>[^`]+)`"
)


def _resolve(obj: griffe.Object, name: str) -> str:
    """The full path that ``name`` refers to from ``obj``'s docstring (best effort)."""
    if name.startswith("kl_patches"):
        return name
    head, _, rest = name.partition(".")
    scope: griffe.Object | None = obj
    while scope is not None:
        try:
            path = scope.resolve(head)
        except griffe.NameResolutionError:
            scope = scope.parent
            continue
        return f"{path}.{rest}" if rest else path
    return name


def _link(obj: griffe.Object, match: re.Match[str]) -> str:
    name = match["name"]
    title = name.rsplit(".", 1)[-1] if match["tilde"] else name
    identifier = html.escape(_resolve(obj, name), quote=True)
    return (
        f'<autoref identifier="{identifier}" optional><code>{html.escape(title)}</code></autoref>'
    )


LIST_ITEM = re.compile(r"\s*([*+-]|\d+[.)])\s")
SECTION = re.compile(
    r"\s*(Args|Arguments|Parameters|Other Parameters|Returns|Yields|Receives|Raises|Warns|"
    r"Examples?|Notes?|Attributes|Methods|Functions|Classes|Modules|See Also|Deprecated):\s*$"
)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def fence_blocks(text: str) -> str:
    """Fence each indented plain-text block; a blank line before an indented list."""
    lines = text.splitlines()
    out: list[str] = []
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        prev = out[-1] if out else ""
        opens = not prev.strip() or (prev.rstrip().endswith(":") and not SECTION.match(prev))
        if not in_fence and line.strip() and _indent(line) >= 2 and opens:
            j = i
            while j < len(lines) and lines[j].strip() and _indent(lines[j]) >= 2:
                j += 1
            block = lines[i:j]
            if prev.strip():
                out.append("")
            if LIST_ITEM.match(block[0]):
                out.extend(block)
            else:
                cut = min(_indent(b) for b in block)
                out.extend(["```text", *(b[cut:] for b in block), "```"])
            if j < len(lines) and lines[j].strip():
                out.append("")
            i = j
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class SphinxRoles(griffe.Extension):
    """Rewrite roles and plain-text blocks in every docstring once the object tree is complete."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.is_alias or obj.docstring is None:
            return
        text = fence_blocks(obj.docstring.value)
        obj.docstring.value = ROLE.sub(lambda m: _link(obj, m), text)
