"""The shell reader, builtins that change the state: read from a here-document."""

from __future__ import annotations

from tests.audit.shell.reading import words


def test_heredoc_read_into_a_variable() -> None:
    text = "read -r -d '' CMD <<EOF\npkg.mod \\\n   --flag $V\nEOF\ndeepspeed --module $CMD\n"
    assert words(text, V="9")[-1] == ["deepspeed", "--module", "pkg.mod", "--flag", "9"]
