"""The shell reader, tokens and grammar: words, quotes, continuations, comments, separators, parse
errors."""

from __future__ import annotations

import pytest

from kl_patches.audit.shell import ShellParseError, parse_script
from tests.audit.shell.reading import words


def test_continuations_quotes_and_comments() -> None:
    text = (
        "# header comment\n"
        "python3 -m pkg.mod \\\n"
        "    a.b=1 \\\n"
        "    c='x y' d=\"q # not a comment\" \\\n"
        "    e=2  # trailing comment\n"
    )
    assert words(text) == [
        ["python3", "-m", "pkg.mod", "a.b=1", "c=x y", "d=q # not a comment", "e=2"]
    ]


def test_separators_pipes_and_redirections() -> None:
    text = "set -x; run a=1 2>&1 | tee log.txt && echo ok > /dev/null\n"
    assert words(text) == [["set", "-x"], ["run", "a=1"], ["tee", "log.txt"], ["echo", "ok"]]


def test_comment_inside_a_continued_command_ends_it() -> None:
    text = "run \\\n  --a 1 \\\n  # --b 2 \\\n  --c 3\n"
    script = parse_script(text)
    # bash runs "--c 3" as a separate command; the reader keeps it as the launch's lost part
    assert [c.words for c in script.commands] == [["run", "--a", "1"]]
    assert script.commands[0].warnings and "line 3" in script.commands[0].warnings[0]
    assert script.commands[0].dropped == ["--c", "3"]


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("run a='unclosed\n", "single quote"),
        ('run a="unclosed\n', "double quote"),
        ("run a=`x\n", "backtick"),
        ("cat <<EOF\nno end\n", "here-document"),
    ],
)
def test_unparsable_lines_raise_with_the_line(text: str, what: str) -> None:
    with pytest.raises(ShellParseError, match=what) as info:
        parse_script("true\n" + text)
    assert info.value.line == 2


def test_partial_reading_stops_where_bash_stops() -> None:
    script = parse_script("run a\necho 'open\nrun b\n", partial=True)
    assert [c.words for c in script.commands] == [["run", "a"]]
    assert "unbalanced single quote" in script.error
    with pytest.raises(ShellParseError):
        parse_script("run a\necho 'open\n")  # without partial=True the error is raised
