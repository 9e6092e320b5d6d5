"""A checkout built from a mapping of file names to texts, shared by the audit tests."""

from __future__ import annotations

from pathlib import Path


def make_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    """``tmp_path/repo``: a ``.git`` directory (the audit's checkout root) and ``files``
    (relative name -> text), their folders created."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
