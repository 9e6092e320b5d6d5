"""Reading user files: clear one-line errors, YAML loaded safely, JSON by suffix."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.adapters.files import InputError, load_mapping, load_mapping_text, read_text


def test_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_text(tmp_path / "missing.sh")
    with pytest.raises(InputError, match="is a directory"):
        read_text(tmp_path)
    binary = tmp_path / "b.sh"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8"):
        read_text(binary)


def test_mappings(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    (tmp_path / "a.yaml").write_text("beta: 0.1\n")
    (tmp_path / "a.json").write_text('{"beta": 0.2}')
    (tmp_path / "list.yaml").write_text("- 1\n")
    assert load_mapping(tmp_path / "a.yaml") == {"beta": 0.1}
    assert load_mapping(tmp_path / "a.json") == {"beta": 0.2}
    assert load_mapping_text("", "empty") == {}
    with pytest.raises(InputError, match="must be a mapping"):
        load_mapping(tmp_path / "list.yaml")
    with pytest.raises(InputError, match="not valid YAML"):
        load_mapping_text("a: [", "bad")
    with pytest.raises(InputError, match="not valid JSON"):
        load_mapping_text("{", "bad", json_format=True)
    marker = tmp_path / "ran"
    with pytest.raises(InputError, match="not valid YAML"):  # no tags that construct objects
        load_mapping_text(f"x: !!python/object/apply:os.system ['touch {marker}']", "tag")
    assert not marker.exists()
