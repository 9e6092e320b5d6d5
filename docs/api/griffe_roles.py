"""Griffe extension for the API pages: turn the docstrings' Sphinx roles into links.

The package's docstrings cross-reference with Sphinx roles (``:func:`loss_term```,
``:class:`~kl_patches.config.KLConfig```), which Markdown would print literally. This rewrites
each role into an *optional* mkdocs-autorefs link: a link where the target is documented on the
site, plain code where it is not (so a reference to an undocumented name never breaks
``mkdocs build --strict``). Names are resolved in the scope of the object whose docstring holds
them, as Python would. Loaded by ``mkdocs.yml`` (``extensions: [docs/api/griffe_roles.py]``).
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


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring once the object tree is complete."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.is_alias or obj.docstring is None or ":`" not in obj.docstring.value:
            return
        obj.docstring.value = ROLE.sub(lambda m: _link(obj, m), obj.docstring.value)
