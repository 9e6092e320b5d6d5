"""The shell reader, the interpreter: branches, loops, functions, clean-environment tests and
bounds."""

from __future__ import annotations

import pytest

from kl_patches.audit.shell import parse_script
from tests.audit.shell.reading import words


def test_if_blocks_are_read_as_straight_code() -> None:
    text = 'if [[ "$1" != "slurm" ]]; then\n    run a=1\nfi\n'
    assert words(text)[-1] == ["run", "a=1"]


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
