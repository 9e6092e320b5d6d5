"""The audit's launch-script reader splits commands the way bash does."""

from __future__ import annotations

import pytest

from kl_patches.audit.shell import ShellParseError, parse_script


def words(text: str, **variables: str) -> list[list[str]]:
    return [c.words for c in parse_script(text, variables).commands]


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


def test_variables_defaults_and_arithmetic() -> None:
    text = (
        "export A=1\n"
        "B=${B:-7}\n"
        "C=$((A * 4 + B))\n"
        "run x=$A y=${B} z=$C w=\"${MISSING:-dflt}\" v='$A'\n"
    )
    assert words(text)[-1] == ["run", "x=1", "y=7", "z=11", "w=dflt", "v=$A"]


def test_caller_variables_and_unresolved() -> None:
    # an unset variable expands to empty, as bash does in a clean environment (issue 12)
    script = parse_script("run a=$KNOWN b=$UNKNOWN\n", {"KNOWN": "3"})
    cmd = script.commands[0]
    assert cmd.words == ["run", "a=3", "b="]
    assert cmd.unresolved == ["UNKNOWN"]


def test_the_environment_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KLP_AUDIT_TEST_VAR", "from-env")
    # read as in `env -i bash`: the variable is unset there, so the word disappears (issue 12)
    assert words("run $KLP_AUDIT_TEST_VAR\n") == [["run"]]


def test_separators_pipes_and_redirections() -> None:
    text = "set -x; run a=1 2>&1 | tee log.txt && echo ok > /dev/null\n"
    assert words(text) == [["set", "-x"], ["run", "a=1"], ["tee", "log.txt"], ["echo", "ok"]]


def test_script_arguments_and_substitutions() -> None:
    script = parse_script('run a=1 name="run_$(date +%s)" $@\n')
    cmd = script.commands[0]
    assert cmd.words == ["run", "a=1", "name=run_$(date +%s)"]
    assert any("command substitution" in n for n in cmd.notes)
    assert any("script arguments" in n for n in cmd.notes)


def test_unquoted_variable_is_word_split() -> None:
    text = 'ARGS="--x 1 --y 2"\nrun $ARGS\nrun "$ARGS"\n'
    assert words(text)[-2:] == [["run", "--x", "1", "--y", "2"], ["run", "--x 1 --y 2"]]


def test_heredoc_read_into_a_variable() -> None:
    text = "read -r -d '' CMD <<EOF\npkg.mod \\\n   --flag $V\nEOF\ndeepspeed --module $CMD\n"
    assert words(text, V="9")[-1] == ["deepspeed", "--module", "pkg.mod", "--flag", "9"]


def test_if_blocks_are_read_as_straight_code() -> None:
    text = 'if [[ "$1" != "slurm" ]]; then\n    run a=1\nfi\n'
    assert words(text)[-1] == ["run", "a=1"]


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


def test_for_loops_are_unrolled_and_while_bodies_read_once() -> None:
    text = (
        'GRID="k1-in-reward k3-in-loss"\n'
        "for name in $GRID; do\n"
        "  for seed in 1 2; do run ${name%%-in-*} ${name##*-in-} $seed; done\n"
        "  cat f | while read -r A; do inner; done\n"
        "done\n"
        "after\n"
    )
    cmds = parse_script(text).commands
    got = [(c.words, c.loop) for c in cmds if c.words[0] in ("run", "inner", "after")]
    assert got == [
        (["run", "k1", "reward", "1"], ("name=k1-in-reward", "seed=1")),
        (["run", "k1", "reward", "2"], ("name=k1-in-reward", "seed=2")),
        (["inner"], ("name=k1-in-reward",)),
        (["run", "k3", "loss", "1"], ("name=k3-in-loss", "seed=1")),
        (["run", "k3", "loss", "2"], ("name=k3-in-loss", "seed=2")),
        (["inner"], ("name=k3-in-loss",)),
        (["after"], ()),
    ]


def test_prefix_and_suffix_trimming() -> None:
    text = "v=a-in-b-in-c\necho ${v#*-in-} ${v##*-in-} ${v%-in-*} ${v%%-in-*} ${#v}\n"
    assert words(text)[-1] == ["echo", "b-in-c", "c", "a-in-b", "a", "11"]


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
