"""A non-editable install carries the per-release data files the adapters load.

The wheel is built from a copy of this checkout's package (``pip wheel --no-deps
--no-build-isolation``: no network, no ``build/`` left in the tree) and must hold every
``kl_patches/adapters/<lib>/data/**.json`` of the tree, so that ``pip install kl-patches`` (not
only ``-e``) can read the name sets and surfaces.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_holds_every_data_file(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT / "kl_patches", source / "kl_patches",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
               "-q", "-w", str(tmp_path), str(source)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("kl_patches-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if name.endswith(".json")}
    tree = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "kl_patches" / "adapters").glob("*/data/**/*.json")
    }
    assert len(tree) > 100  # 150 releases of four libraries
    assert tree <= shipped, sorted(tree - shipped)[:5]
