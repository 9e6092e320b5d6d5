"""The audit's launch-script reader splits commands the way bash does."""

from __future__ import annotations

from pathlib import Path

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


# ----------------------------------------------------------------------------- issue 12
def read(text: str, **kw: object) -> list[list[str]]:
    script = parse_script(text, script_dir="/s", partial=True, **kw)  # type: ignore[arg-type]
    return [c.words for c in script.commands if c.words and c.words[0] == "run"]


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


def test_functions_locals_and_prefix_assignments() -> None:
    text = (
        "X=outer\nf() { local X=$1; run in=$X arg2=${2:-none} n=$#; }\n"
        "f one\nf two three\nrun out=$X\nY=only cmd_with_env\nrun y=$Y\n"
    )
    script = parse_script(text)
    runs = [(c.words, c.calls) for c in script.commands if c.words[0] == "run"]
    assert runs == [
        (["run", "in=one", "arg2=none", "n=1"], ("f@3",)),
        (["run", "in=two", "arg2=three", "n=2"], ("f@4",)),
        (["run", "out=outer"], ()),
        (["run", "y="], ()),
    ]
    env = next(c for c in script.commands if c.words == ["cmd_with_env"])
    assert env.assignments == {"Y": "only"}


def test_decidable_tests_take_one_branch() -> None:
    text = (
        'M=grpo\nif [ "$M" = ppo ]; then run a; elif [[ $M == gr* ]]; then run b; '
        "else run c; fi\n"
        "case $M in ppo) run d ;; grpo|rloo) run e ;; *) run f ;; esac\n"
        'N=3; (( N > 2 )) && run g || run h\n[ -n "$M" ] && run i\n'
    )
    script = parse_script(text)
    assert [c.words for c in script.commands if c.words[0] == "run"] == [
        ["run", "b"],
        ["run", "e"],
        ["run", "g"],
        ["run", "i"],
    ]
    assert all(c.branch == () for c in script.commands)


def test_undecidable_tests_read_every_branch_with_labels() -> None:
    text = (
        "if [ -f /etc/cluster ]; then K=a; else K=b; fi\nrun k=$K\n"
        'case "$(hostname)" in node*) run n ;; *) run other ;; esac\nrun after\n'
    )
    script = parse_script(text)
    got = [(c.words, c.branch) for c in script.commands if c.words[0] == "run"]
    assert got == [
        (["run", "k=a"], ("if@1=then",)),
        (["run", "k=b"], ("if@1=else",)),
        (["run", "n"], ("case@3=node*",)),
        (["run", "other"], ("case@3=*",)),
        (["run", "after"], ()),  # the same in every branch: not branch-dependent
    ]


def test_clean_environment_tests_and_guards() -> None:
    # An unset variable decides a test as in `env -i bash`; a branch that only exits with a
    # message (a guard asking for the variable) is read as if the check passed.
    text = (
        'if [ -z "$MODEL" ]; then echo "set MODEL"; exit 1; fi\nrun model=$MODEL\n'
        '[ "$MODE" = fast ] && run fast\nrun end\n'
    )
    script = parse_script(text)
    assert [c.words for c in script.commands if c.words[0] == "run"] == [
        ["run", "model="],
        ["run", "end"],
    ]
    assert any("exits here" in n for n in script.notes)


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


def test_arithmetic_wraps_like_bash() -> None:
    from kl_patches.audit.shell import arith

    assert arith("9**9**9") == pow(9, 9**9, 1 << 64) - (1 << 64)  # wraps to a negative int64
    assert arith("2**63") == -(1 << 63)
    assert arith("-7 / 2") == -3 and arith("-7 % 2") == -1  # C truncation
    assert arith("x = 3, x += 4, x * 2") == 14
    assert arith("1 ? 2 : 3") == 2 and arith("0x10 + 8#17 + 2#101") == 16 + 15 + 5
    with pytest.raises(ValueError, match="division by 0"):
        arith("1 / 0")


def test_brace_expansion_and_unknowns() -> None:
    script = parse_script('run {a,b}.{1..2} "{q,r}"\nrun x=$(date) y=`hostname` $@\n')
    first, second = script.commands
    assert first.words == ["run", "a.1", "a.2", "b.1", "b.2", "{q,r}"]
    assert second.words == ["run", "x=$(date)", "y=`hostname`"]
    assert second.unknown == {1: ["$(date)"], 2: ["`hostname`"]}
    assert second.args_forwarded


def test_partial_reading_stops_where_bash_stops() -> None:
    script = parse_script("run a\necho 'open\nrun b\n", partial=True)
    assert [c.words for c in script.commands] == [["run", "a"]]
    assert "unbalanced single quote" in script.error
    with pytest.raises(ShellParseError):
        parse_script("run a\necho 'open\n")  # without partial=True the error is raised


@pytest.mark.parametrize(
    ("text", "what"),
    [
        (
            "for a in 1 2 3 4 5 6 7 8 9; do for b in 1 2 3 4 5 6 7 8 9; do "
            "for c in 1 2 3 4 5 6 7 8 9; do for d in 1 2 3 4 5 6 7 8 9; do "
            "for e in 1 2 3 4 5 6 7 8 9; do run; done; done; done; done; done\n",
            "unrolls",
        ),
        ("f() { f; }\nf\n", "calls nested too deeply"),
        ("X=" + "$(" * 300 + ")" * 300 + "\n", "nested too deeply"),
        ("{ " * 300 + "run; " + "}; " * 300 + "\n", "nested too deeply"),
        ("echo {1..1000000}\n", "brace expansion"),
        ("A=x; for i in $(seq 1 30); do A=$A$A; done\n", "characters"),
    ],
)
def test_bounds_raise_a_limit_error(text: str, what: str) -> None:
    from kl_patches.audit.shell import ShellLimitError

    with pytest.raises(ShellLimitError, match=what):
        parse_script(text)
