"""The support tables in docs/support.md and the library pages are the adapters' data, rendered."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.adapters import support_table
from kl_patches.adapters.support_table import LIBRARIES, SupportRow, render, rows, sync, targets

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("path", "library"), targets(ROOT), ids=str)
def test_tables_in_the_docs_are_the_generated_ones(path: Path, library: str) -> None:
    assert sync(path, library), (
        f"{path.name}: the {library} support table is stale; run "
        "`python -m kl_patches.adapters.support_table`"
    )


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_tested_release_has_a_ci_row_and_the_ends_are_refused_or_canaried(
    library: str,
) -> None:
    import importlib

    versions = importlib.import_module(support_table.MODULES[library])
    found = rows(library)
    assert all(isinstance(r, SupportRow) and r.native and r.patched for r in found)
    assert found[0].releases.startswith("< ") and found[0].tested == "refused"
    assert found[-1].releases.startswith(">= ") and "canaries" in found[-1].tested
    # tested in CI, or (unsloth: a 3 GB environment) by its own nox session
    ci = " ".join(
        r.releases + " " + r.tested for r in found if "CI" in r.tested or "nox -s" in r.tested
    )
    assert all(v in ci for v in versions.SUPPORT.tested)
    table = render(library)
    assert table.count("\n") == len(found) + 1


def test_sync_rewrites_a_stale_table_and_refuses_a_file_without_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# x\n<!-- support-table:verl -->\nold\n<!-- /support-table:verl -->\ntail\n")
    assert not sync(page, "verl")
    assert sync(page, "verl", write=True) and sync(page, "verl")
    text = page.read_text()
    assert text.startswith("# x\n") and text.endswith("tail\n") and "| 0.7.0 |" in text
    (tmp_path / "bare.md").write_text("nothing")
    with pytest.raises(ValueError, match="markers"):
        sync(tmp_path / "bare.md", "verl")
    with pytest.raises(ValueError, match="library='fake'"):
        support_table.rows("fake")
