"""The shell reader, expansions: parameters in every form, arrays, word splitting, braces, unset
and unknown values."""

from __future__ import annotations

import pytest

from kl_patches.audit.shell import parse_script
from tests.audit.shell.reading import read, words


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


def test_script_arguments_and_substitutions() -> None:
    script = parse_script('run a=1 name="run_$(date +%s)" $@\n')
    cmd = script.commands[0]
    assert cmd.words == ["run", "a=1", "name=run_$(date +%s)"]
    assert any("command substitution" in n for n in cmd.notes)
    assert any("script arguments" in n for n in cmd.notes)


def test_unquoted_variable_is_word_split() -> None:
    text = 'ARGS="--x 1 --y 2"\nrun $ARGS\nrun "$ARGS"\n'
    assert words(text)[-2:] == [["run", "--x", "1", "--y", "2"], ["run", "--x 1 --y 2"]]


def test_prefix_and_suffix_trimming() -> None:
    text = "v=a-in-b-in-c\necho ${v#*-in-} ${v##*-in-} ${v%-in-*} ${v%%-in-*} ${#v}\n"
    assert words(text)[-1] == ["echo", "b-in-c", "c", "a-in-b", "a", "11"]


def test_indexed_arrays() -> None:
    text = (
        "A=(\n  a=1   # comment inside\n\n  'b=2 3'\n)\n"
        "A+=( c=4 )\ndeclare -a B=(x y)\nA[5]=z\n"
        'run "${A[@]}"\nrun ${A[*]}\nrun "${A[*]}"\nrun ${#A[@]} ${A[1]} ${B[-1]} "${!A[@]}"\n'
    )
    assert read(text) == [
        ["run", "a=1", "b=2 3", "c=4", "z"],
        ["run", "a=1", "b=2", "3", "c=4", "z"],
        ["run", "a=1 b=2 3 c=4 z"],
        ["run", "4", "b=2", "3", "y", "0", "1", "2", "5"],  # unquoted ${A[1]} is split
    ]


def test_every_parameter_expansion_form() -> None:
    text = (
        "E=\n"
        "run ${U:-d} ${U-d} ${E:-d} ${E-d}x ${U:+p}x ${E:+p}x ${E+p}\n"
        ": ${V:=v}\nrun $V ${W=w} $W\n"
        "S=abc_def.yaml\nrun ${S%.yaml} ${S#*_} ${S/_/-} ${S//[a-c]/X} ${S^^} ${S:4:3} ${#S}\n"
    )
    assert read(text) == [
        ["run", "d", "d", "d", "x", "x", "x", "p"],
        ["run", "v", "w", "w"],
        ["run", "abc_def", "def.yaml", "abc-def.yaml", "XXX_def.yXml", "ABC_DEF.YAML", "def", "12"],
    ]


def test_unset_variables_are_empty_and_listed() -> None:
    script = parse_script("run a=$NOPE $GONE\n")
    (cmd,) = script.commands
    assert cmd.words == ["run", "a="]
    assert cmd.unresolved == ["GONE", "NOPE"] or set(cmd.unresolved) == {"GONE", "NOPE"}
    assert cmd.unset_in == {1: ["NOPE"]} and cmd.vanished == ["GONE"]


def test_brace_expansion_and_unknowns() -> None:
    script = parse_script('run {a,b}.{1..2} "{q,r}"\nrun x=$(date) y=`hostname` $@\n')
    first, second = script.commands
    assert first.words == ["run", "a.1", "a.2", "b.1", "b.2", "{q,r}"]
    assert second.words == ["run", "x=$(date)", "y=`hostname`"]
    assert second.unknown == {1: ["$(date)"], 2: ["`hostname`"]}
    assert second.args_forwarded
