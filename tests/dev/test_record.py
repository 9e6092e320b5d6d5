"""record / record --check on a synthetic library: the file written, its loading, and the diff.

A fake release (a few modules in a temporary folder) stands for a library release; the spec
says what to read, as each adapter's ``recording`` module does for its library.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from kl_patches.adapters.releases import NameSetSpec, RecordSpec, SymbolSpec, parse, recording
from kl_patches.dev import record as rec
from kl_patches.dev.__main__ import main
from kl_patches.dev.source import Release

SPEC = RecordSpec(
    library="fakelib",
    distribution="fakelib",
    package="fakelib",
    data_package="kl_patches.adapters.trl",  # not used: the tests pass their own folder
    data_folder="unused",
    name_sets=(
        NameSetSpec("Config", "dataclass", (("Config", ("fakelib/config.py",)),)),
        NameSetSpec("cli", "argparse", (("", ("fakelib/cli.py",)),)),
        NameSetSpec("Gone", "dataclass", (("Gone", ("fakelib/gone.py",)),)),
    ),
    symbols=(SymbolSpec("kl"), SymbolSpec("missing")),
)

FILES = {
    "fakelib/__init__.py": "",
    "fakelib/config.py": """
    from dataclasses import dataclass

    @dataclass
    class Config:
        beta: float = 0.04
        loss_type: str = "bnpo"
    """,
    "fakelib/cli.py": """
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--kl_coef", type=float, default=0.01)
    """,
    "fakelib/core.py": """
    def kl(logp, ref):
        return logp - ref
    """,
}


def _release(root: Path, version: str = "1.0", **changes: str) -> Release:
    for relative, text in {**FILES, **changes}.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return Release("fakelib", version, root, "test")


def test_record_writes_a_file_the_loader_reads(tmp_path: Path) -> None:
    path = rec.write(SPEC, _release(tmp_path / "src"), tmp_path / "data")
    assert path.name == "1.0.json"
    text = path.read_text(encoding="utf-8")
    assert '      "beta": {"default": 0.04, "at": "fakelib/config.py:5"},' in text.splitlines()
    record = parse(text)
    assert record.names("Config") == {"beta", "loss_type"}
    assert record.names("cli") == {"kl_coef"}
    assert record.names("Gone") is None  # the class is not in this release: null
    assert record.symbols["missing"] is None
    symbol = record.symbol("kl")
    assert symbol is not None and symbol.module == "fakelib.core" and symbol.line == 1
    assert json.loads(text) == json.loads(rec.render(json.loads(text)))  # stable layout


def test_check_finds_no_difference_on_the_same_files(tmp_path: Path) -> None:
    release = _release(tmp_path / "src")
    rec.write(SPEC, release, tmp_path / "data")
    assert rec.compare(SPEC, release, tmp_path / "data") == []


def test_check_lists_every_difference_readably(tmp_path: Path) -> None:
    rec.write(SPEC, _release(tmp_path / "old"), tmp_path / "data")
    changed = _release(
        tmp_path / "new",
        **{
            "fakelib/config.py": """
            from dataclasses import dataclass

            @dataclass
            class Config:
                beta: float = 0.0
                scale: bool = True
            """,
            "fakelib/core.py": """
            def kl(logp, ref, kind="k1"):
                return logp - ref
            """,
        },
    )
    found = rec.compare(SPEC, changed, tmp_path / "data")
    assert "fakelib 1.0: Config: + scale " in "\n".join(found)
    assert "fakelib 1.0: Config: - loss_type" in found
    assert "fakelib 1.0: Config.beta: default 0.04 -> 0.0" in found
    assert 'fakelib 1.0: kl: signature "kl(logp, ref)" -> "kl(logp, ref, kind=\'k1\')"' in found
    assert any(line.startswith("fakelib 1.0: kl: body_sha ") for line in found)


def test_check_reports_an_unrecorded_release(tmp_path: Path) -> None:
    found = rec.compare(SPEC, _release(tmp_path / "src", "2.0"), tmp_path / "data")
    assert found == ["fakelib 2.0: not recorded (python -m kl_patches.dev record fakelib 2.0)"]


def test_every_adapter_spec_is_recorded_in_its_data_folder() -> None:
    specs = rec.specs()
    assert set(specs) == {"trl", "transformers", "verl", "openrlhf"}
    for spec in specs.values():
        releases = rec.recorded_releases(spec)
        assert releases, spec.library
        loaded = recording(spec.data_package, spec.data_folder)
        assert loaded.releases == tuple(releases)
        for record in loaded.records:
            assert set(record.name_sets) == {s.name for s in spec.name_sets}
            assert set(record.symbols) == {s.qualname for s in spec.symbols}


def test_the_command_line_names_the_libraries_and_needs_a_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["record", "--check", "nosuchlib", "1.0"]) == 2
    assert "cannot record 'nosuchlib'; choose one of ['openrlhf', 'transformers'" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        main(["record", "trl"])
    assert main(["releases", "verl"]) == 0
    assert capsys.readouterr().out.split()[:2] == ["0.1", "0.2"]
