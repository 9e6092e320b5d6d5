"""The shell reader, followed text: here-documents, bash -c, eval, source, cd, the script-directory
idioms."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit.shell import parse_script


@pytest.mark.parametrize(
    "idiom",
    [
        '"$(cd "$(dirname "$0")" && pwd)"',
        "$(dirname $0)",
        '"$(dirname "${BASH_SOURCE[0]}")"',
        '$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &> /dev/null && pwd)',
    ],
)
def test_script_directory_idioms(idiom: str) -> None:
    script = parse_script(f"here={idiom}\nrun $here/x.yaml\n", script_dir="/scripts")
    assert script.commands[-1].words == ["run", "/scripts/x.yaml"]
    other = parse_script('here=$(date +%s)\nrun "$here"\n', script_dir="/scripts")
    assert other.commands[-1].words == ["run", "$(date +%s)"]


@pytest.mark.parametrize(
    "idiom",
    [
        '"$( cd "$( dirname "${BASH_SOURCE[0]}" )/.." && pwd )"',
        '$(cd "$(dirname "$0")/../.." && pwd)',
    ],
)
def test_script_directory_parent_idioms(idiom: str) -> None:
    """``$(cd "$(dirname X)/.." && pwd)``: a folder above the script's, one per ``/..``."""
    script = parse_script(f"ROOT={idiom}\nrun $ROOT/x.py\n", script_dir="/repo/a/run_scripts")
    up = idiom.count("..")
    assert script.commands[-1].words == ["run", "/repo/a/x.py" if up == 1 else "/repo/x.py"]


def test_here_documents_bash_c_eval_source_and_cd(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "env.sh").write_text("FROM_SOURCE=yes\n")
    (tmp_path / "other.sh").write_text("run other=$EXPORTED local=$LOCAL\n")
    text = (
        "cat > gen.sh <<EOF\nrun generated=$((2 + 3))\nEOF\nbash gen.sh\n"
        "cd sub\nsource ./env.sh\ncd ..\nrun src=$FROM_SOURCE\n"
        "export EXPORTED=e\nLOCAL=l\nbash ./other.sh\n"
        'bash -c "run c=$LOCAL" \n'
        "CMD='run evald'\neval \"$CMD x\"\n"
        "bash <<'EOF'\nrun stdin\nEOF\n"
    )
    script = parse_script(text, script_dir=str(tmp_path), reader=lambda p: Path(p).read_text())
    runs = [c.words for c in script.commands if c.words[0] == "run"]
    assert runs == [
        ["run", "generated=5"],
        ["run", "src=yes"],
        ["run", "other=e", "local="],  # a child bash sees exported variables only
        ["run", "c=l"],  # expanded by the outer shell inside the double quotes
        ["run", "evald", "x"],
        ["run", "stdin"],
    ]
    assert str(tmp_path / "gen.sh") in script.files
    assert not (tmp_path / "gen.sh").exists()  # read, never written
