"""Python launches edited with libcst: each change lands where the audit's own Python reader
takes the setting from (it reads the new value back), and only the lines it changes differ."""

from __future__ import annotations

import difflib
import sys
from typing import Any

import pytest

from kl_patches.audit.fix.change import Change
from kl_patches.audit.fix.python_edit import PythonEditError, apply_python, libcst_module
from kl_patches.audit.inputs import inputs_from_python
from kl_patches.audit.python import PyLaunch, read_python

HEAD = "from trl import GRPOConfig, GRPOTrainer\n"
TRAIN = "trainer = GRPOTrainer(model='m', reward_funcs=[], args=args)\n"


def _set(key: str, value: str) -> Change:
    return Change("set", "trl", key, value)


def _launch(src: str) -> PyLaunch:
    (launch,) = [x for x in read_python(src, "s.py").launches if x.library == "trl"]
    return launch


def _diff(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines removed, lines added) between the two sources."""
    gone, added = [], []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("- "):
            gone.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return gone, added


def _edit(src: str, *changes: Change, **kw: Any) -> tuple[str, PyLaunch]:
    out = apply_python(src, changes, origin="s.py", **kw)
    compile(out, "s.py", "exec")  # still Python
    return out, _launch(out)


# ---------------------------------------------------------------------- keyword arguments
def test_set_a_keyword_on_one_line_changes_that_line_only() -> None:
    src = HEAD + "args = GRPOConfig(output_dir='o', beta=0.04, loss_type='grpo')\n" + TRAIN
    assert _launch(src).kwargs["beta"] == 0.04
    out, launch = _edit(src, _set("beta", "0.0"))
    assert launch.kwargs["beta"] == 0.0 and launch.kwargs["loss_type"] == "grpo"
    assert _diff(src, out) == (
        ["args = GRPOConfig(output_dir='o', beta=0.04, loss_type='grpo')"],
        ["args = GRPOConfig(output_dir='o', beta=0.0, loss_type='grpo')"],
    )


MULTI = (
    HEAD + "\n"
    "def main():\n"
    "    # the config\n"
    "    args = GRPOConfig(\n"
    "        output_dir='o',\n"
    "        beta=0.04,  # KL weight\n"
    "        loss_type='grpo',  # aggregation\n"
    "    )\n"
    "    " + TRAIN
)


def test_set_a_keyword_one_per_line_keeps_its_comment() -> None:
    out, launch = _edit(MULTI, _set("beta", "0.001"))
    assert launch.kwargs["beta"] == 0.001
    assert _diff(MULTI, out) == (
        ["        beta=0.04,  # KL weight"],
        ["        beta=0.001,  # KL weight"],
    )


def test_add_a_keyword_one_per_line_with_the_trailing_comma() -> None:
    out, launch = _edit(MULTI, _set("scale_rewards", "none"))
    assert launch.kwargs["scale_rewards"] == "none"
    assert _diff(MULTI, out) == ([], ["        scale_rewards='none',"])
    assert out.index("scale_rewards") > out.index("# aggregation")


def test_add_a_keyword_one_per_line_without_a_trailing_comma() -> None:
    src = MULTI.replace("loss_type='grpo',  # aggregation", "loss_type='grpo'  # aggregation")
    out, launch = _edit(src, _set("num_iterations", "2"))
    assert launch.kwargs["num_iterations"] == 2
    assert _diff(src, out) == (
        ["        loss_type='grpo'  # aggregation"],
        ["        loss_type='grpo',  # aggregation", "        num_iterations=2"],
    )


def test_add_a_keyword_on_one_line_and_with_spaces_around_equals() -> None:
    src = HEAD + 'args = GRPOConfig(output_dir = "o")\n' + TRAIN
    out, launch = _edit(src, _set("loss_type", "dr_grpo"))
    assert launch.kwargs["loss_type"] == "dr_grpo"
    assert _diff(src, out)[1] == ['args = GRPOConfig(output_dir = "o", loss_type = "dr_grpo")']


def test_add_to_a_call_without_arguments() -> None:
    src = HEAD + "args = GRPOConfig()\n" + TRAIN
    out, launch = _edit(src, _set("beta", "0.1"))
    assert launch.kwargs == {"beta": 0.1}
    assert "args = GRPOConfig(beta=0.1)" in out


@pytest.mark.parametrize("key", ["output_dir", "beta", "loss_type"])
def test_unset_removes_the_argument_and_keeps_the_others_comments(key: str) -> None:
    out, launch = _edit(MULTI, Change("unset", "trl", key))
    assert key not in launch.kwargs and len(launch.kwargs) == 2
    gone, added = _diff(MULTI, out)
    assert added == [] and len(gone) == 1 and gone[0].strip().startswith(key)
    assert ("# KL weight" in out) == (key != "beta")
    assert ("# aggregation" in out) == (key != "loss_type")


def test_unset_the_last_argument_without_trailing_comma_keeps_its_neighbours_comment() -> None:
    src = MULTI.replace("loss_type='grpo',  # aggregation", "loss_type='grpo'  # aggregation")
    out, launch = _edit(src, Change("unset", "trl", "loss_type"))
    assert "loss_type" not in launch.kwargs
    gone, added = _diff(src, out)
    assert added == ["        beta=0.04  # KL weight"]
    assert gone == ["        beta=0.04,  # KL weight", "        loss_type='grpo'  # aggregation"]


def test_rename_a_keyword() -> None:
    out, launch = _edit(MULTI, Change("rename", "trl", "beta", new_key="kl_coef"))
    assert launch.kwargs["kl_coef"] == 0.04 and "beta" not in launch.kwargs
    assert _diff(MULTI, out)[1] == ["        kl_coef=0.04,  # KL weight"]


def test_several_changes_at_once_are_all_read_back() -> None:
    _, launch = _edit(
        MULTI,
        _set("beta", "0.0"),
        Change("unset", "trl", "loss_type"),
        _set("scale_rewards", "batch"),
    )
    assert launch.kwargs == {"output_dir": "o", "beta": 0.0, "scale_rewards": "batch"}


# ---------------------------------------------------------------------- dicts expanded with **
@pytest.mark.parametrize(
    "cfg",
    [
        "cfg = {\n    'output_dir': 'o',\n    'beta': 0.04,  # KL\n}\n",
        "cfg = dict(output_dir='o', beta=0.04)\n",
    ],
)
def test_set_and_unset_in_a_dict_expanded_into_the_config(cfg: str) -> None:
    src = HEAD + cfg + "args = GRPOConfig(**cfg)\n" + TRAIN
    out, launch = _edit(src, _set("beta", "0"))
    assert launch.kwargs["beta"] == 0.0 and isinstance(launch.kwargs["beta"], float)
    gone, added = _diff(src, out)
    assert len(gone) == len(added) == 1 and "0.0" in added[0] and "0.04" in gone[0]
    out, launch = _edit(src, Change("unset", "trl", "beta"))
    assert launch.kwargs == {"output_dir": "o"}
    compile(out, "s.py", "exec")


def test_a_dict_literal_written_in_the_call_and_a_nested_expansion() -> None:
    src = (
        HEAD + "BASE = {'beta': 0.04}\n"
        "args = GRPOConfig(output_dir='o', **{**BASE, 'loss_type': 'grpo'})\n" + TRAIN
    )
    out, launch = _edit(src, _set("beta", "0.02"), _set("loss_type", "bnpo"))
    assert launch.kwargs["beta"] == 0.02 and launch.kwargs["loss_type"] == "bnpo"
    gone, added = _diff(src, out)
    assert len(gone) == len(added) == 2


def test_a_key_missing_from_a_readable_dict_is_added_to_the_call() -> None:
    src = HEAD + "cfg = {'output_dir': 'o'}\nargs = GRPOConfig(**cfg)\n" + TRAIN
    out, launch = _edit(src, _set("beta", "0.1"))
    assert launch.kwargs["beta"] == 0.1 and "GRPOConfig(**cfg, beta=0.1)" in out


def test_an_expansion_the_reader_cannot_see_into_is_an_error() -> None:
    src = HEAD + "import sys\nargs = GRPOConfig(**vars(sys))\n" + TRAIN
    with pytest.raises(PythonEditError, match=r"may be set inside \*\*vars\(sys\)"):
        apply_python(src, [_set("beta", "0.0")])


@pytest.mark.parametrize(
    "later",
    [
        "cfg['beta'] = 0.1",
        "cfg[name] = 0.1",
        "cfg.update(beta=0.1)",
        "cfg.update({'beta': 0.1})",
        "cfg.update(other)",
        "cfg |= {'beta': 0.1}",
    ],
)
def test_a_dict_changed_after_it_is_built_is_an_error_for_its_keys(later: str) -> None:
    """The reader does not follow a dict's later changes: the key may be set there."""
    src = HEAD + "cfg = {'beta': 0.04}\n" + later + "\nargs = GRPOConfig(**cfg)\n" + TRAIN
    with pytest.raises(PythonEditError, match=r"cfg may get beta here"):
        apply_python(src, [_set("beta", "0.0")])


def test_a_dict_changed_after_it_is_built_for_other_keys_is_edited() -> None:
    later = "cfg['output_dir'] = 'o'\ncfg.update(seed=1)\ncfg.update({'x': 1})\n"
    src = HEAD + "cfg = {'beta': 0.04}\n" + later + "args = GRPOConfig(**cfg)\n" + TRAIN
    out, launch = _edit(src, _set("beta", "0.0"))
    assert launch.kwargs["beta"] == 0.0 and len(_diff(src, out)[1]) == 1


# ---------------------------------------------------------------------- attributes, subclasses
def test_an_attribute_assigned_after_the_call_is_where_the_value_comes_from() -> None:
    src = HEAD + "args = GRPOConfig(beta=0.04)\nargs.beta = 0.1\n" + TRAIN
    assert _launch(src).kwargs["beta"] == 0.1
    out, launch = _edit(src, _set("beta", "0.0"))
    assert launch.kwargs["beta"] == 0.0
    assert _diff(src, out) == (["args.beta = 0.1"], ["args.beta = 0.0"])
    out, launch = _edit(src, Change("unset", "trl", "beta"))
    assert "beta" not in launch.kwargs  # both the keyword and the assignment are gone
    assert _diff(src, out) == (
        ["args = GRPOConfig(beta=0.04)", "args.beta = 0.1"],
        ["args = GRPOConfig()"],
    )


SUB = (
    "from dataclasses import dataclass, field\n" + HEAD + "\n\n@dataclass\n"
    "class MyConfig(GRPOConfig):\n"
    "    beta: float = 0.04  # ours\n"
    "    loss_type: str = field(default='grpo', metadata={'help': 'x'})\n\n\n"
    "args = MyConfig(output_dir='o')\n" + TRAIN
)


def test_a_subclass_default_is_edited_where_it_is_declared() -> None:
    assert _launch(SUB).kwargs["beta"] == 0.04
    out, launch = _edit(SUB, _set("beta", "0.0"), _set("loss_type", "dr_grpo"))
    assert launch.kwargs["beta"] == 0.0 and launch.kwargs["loss_type"] == "dr_grpo"
    assert _diff(SUB, out)[1] == [
        "    beta: float = 0.0  # ours",
        "    loss_type: str = field(default='dr_grpo', metadata={'help': 'x'})",
    ]


def test_unset_a_subclass_default_leaves_a_valid_class() -> None:
    out, launch = _edit(SUB, Change("unset", "trl", "beta"), Change("unset", "trl", "loss_type"))
    assert "beta" not in launch.kwargs and "loss_type" not in launch.kwargs
    assert "class MyConfig(GRPOConfig):\n    pass\n" in out


def test_a_keyword_of_the_subclass_call_wins_over_its_default() -> None:
    src = SUB.replace("MyConfig(output_dir='o')", "MyConfig(output_dir='o', beta=0.2)")
    out, launch = _edit(src, _set("beta", "0.0"))
    assert launch.kwargs["beta"] == 0.0 and "beta: float = 0.04" in out


def test_a_config_built_by_a_helper_function_through_an_alias() -> None:
    src = (
        "from trl import GRPOConfig as GC, GRPOTrainer\n"
        "def make():\n    c = GC(output_dir='o')\n    c.beta = 0.3\n    return c\n"
        "def main():\n    args = make()\n    " + TRAIN + "main()\n"
    )
    _, launch = _edit(src, _set("beta", "0.0"), _set("loss_type", "grpo"))
    assert launch.kwargs == {"output_dir": "o", "beta": 0.0, "loss_type": "grpo"}


# ---------------------------------------------------------------------- the command line
PARSED = (
    "from trl import GRPOConfig, GRPOTrainer, ModelConfig, ScriptArguments, TrlParser\n"
    "def main():\n"
    "    parser = TrlParser((ScriptArguments, GRPOConfig, ModelConfig))\n"
    "    script_args, training_args, model_args = parser.parse_args_and_config()\n"
    "    training_args.beta = 0.04\n"
    "    trainer = GRPOTrainer(model='m', reward_funcs=[], args=training_args)\n"
)


def test_a_parsed_config_with_an_assignment_is_edited_there() -> None:
    out, launch = _edit(PARSED, _set("beta", "0.0"))
    assert launch.from_argv and launch.kwargs == {"beta": 0.0}
    assert _diff(PARSED, out) == (
        ["    training_args.beta = 0.04"],
        ["    training_args.beta = 0.0"],
    )


def test_a_parsed_config_without_the_key_sends_the_change_to_the_command() -> None:
    with pytest.raises(PythonEditError, match=r"read from the command line.*--loss_type"):
        apply_python(PARSED, [_set("loss_type", "dr_grpo")])
    with pytest.raises(PythonEditError, match=r"nothing to unset.*command line"):
        apply_python(PARSED, [Change("unset", "trl", "loss_type")])


# ---------------------------------------------------------------------- values and their types
@pytest.mark.parametrize(
    ("key", "value", "written", "read"),
    [
        ("beta", "0", "beta=0.0", 0.0),  # GRPOConfig.beta is a float
        ("beta", "1e-3", "beta=1e-3", 1e-3),
        ("use_vllm", "true", "use_vllm=True", True),
        ("num_iterations", "2", "num_iterations=2", 2),
        ("loss_type", "dr_grpo", "loss_type='dr_grpo'", "dr_grpo"),
        ("steps_per_generation", "None", "steps_per_generation=None", None),
        ("my_field", "k1", "my_field='k1'", "k1"),  # unknown field: told from the value
        ("my_flag", "False", "my_flag=False", False),
        ("temperature", "inf", 'temperature=float("inf")', float("inf")),
    ],
)
def test_values_are_written_as_literals_of_the_fields_type(
    key: str, value: str, written: str, read: object
) -> None:
    src = HEAD + "args = GRPOConfig(output_dir='o')\n" + TRAIN
    out, launch = _edit(src, _set(key, value))
    assert written in out and launch.kwargs[key] == read
    assert type(launch.kwargs[key]) is type(read)


def test_a_value_not_of_the_fields_type_is_an_error() -> None:
    src = HEAD + "args = GRPOConfig(output_dir='o')\n" + TRAIN
    with pytest.raises(PythonEditError, match="not an integer"):
        apply_python(src, [_set("num_iterations", "two")])
    with pytest.raises(PythonEditError, match="not a number"):
        apply_python(src, [_set("beta", "big")])


def test_the_audit_reads_the_edited_script_as_a_launch_with_the_new_value() -> None:
    out = apply_python(MULTI, [_set("beta", "0.0"), _set("loss_type", "dr_grpo")])
    (found,) = inputs_from_python(out, "s.py")
    assert found.payload["beta"] == 0.0 and found.payload["loss_type"] == "dr_grpo"


# ---------------------------------------------------------------------- what cannot be placed
@pytest.mark.parametrize(
    ("src", "change", "match"),
    [
        (HEAD + "B = 0.02\nargs = GRPOConfig(beta=B * 2)\n" + TRAIN, _set("beta", "0"),
         r"computed from `B \* 2`"),
        (HEAD + "args = GRPOConfig()\nargs = GRPOConfig(beta=1.0)\n" + TRAIN, _set("beta", "0"),
         "assigned at lines 2, 3"),
        (HEAD + "def f(args):\n    " + TRAIN, _set("beta", "0"),
         r"parameter of f\(\), called 0 times"),
        (HEAD + "def f(args):\n    " + TRAIN + "f(GRPOConfig())\nf(GRPOConfig(beta=1.0))\n",
         _set("beta", "0"), r"parameter of f\(\), called 2 times"),
        (HEAD + "trainer = GRPOTrainer(model='m', reward_funcs=[])\n", _set("beta", "0"),
         "built without a config"),
        (HEAD + "args = GRPOConfig()\n" + TRAIN, Change("unset", "trl", "beta"),
         "nothing to unset"),
        (HEAD + "args = GRPOConfig()\n" + TRAIN, Change("rename", "trl", "beta", new_key="x"),
         "nothing to rename"),
        (HEAD + "args = GRPOConfig(beta=1.0, kl_coef=2.0)\n" + TRAIN,
         Change("rename", "trl", "beta", new_key="kl_coef"), "kl_coef is already set"),
        ("import os\n", _set("beta", "0"), "no TRL trainer"),
        (HEAD + "args = GRPOConfig()\n" + TRAIN, Change("set", "hydra", "a.b", "1"),
         "reads only TRL config fields"),
        (HEAD + "args = GRPOConfig()\n" + TRAIN, Change("entry_point", "trl", "x", "kl-patches"),
         "not an edit of a Python config"),
    ],
)  # fmt: skip
def test_a_change_that_cannot_be_placed_is_an_error_naming_why(
    src: str, change: Change, match: str
) -> None:
    with pytest.raises(PythonEditError, match=match):
        apply_python(src, [change])


def test_several_trainers_need_a_line_unless_they_share_the_config() -> None:
    two = (
        HEAD + "a = GRPOConfig(beta=0.1)\nb = GRPOConfig(beta=0.2)\n"
        "t1 = GRPOTrainer(model='m', reward_funcs=[], args=a)\n"
        "t2 = GRPOTrainer(model='m', reward_funcs=[], args=b)\n"
    )
    with pytest.raises(PythonEditError, match="lines 4, 5 use different configs; pass line="):
        apply_python(two, [_set("beta", "0.0")])
    out = apply_python(two, [_set("beta", "0.0")], line=5)
    assert [x.kwargs["beta"] for x in read_python(out, "s.py").launches] == [0.1, 0.0]
    shared = (
        HEAD
        + "import sys\nargs = GRPOConfig(beta=0.1)\nif sys.argv:\n    "
        + TRAIN
        + "else:\n    "
        + TRAIN
    )
    out = apply_python(shared, [_set("beta", "0.0")])
    assert [x.kwargs["beta"] for x in read_python(out, "s.py").launches] == [0.0, 0.0]


def test_without_libcst_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    libcst_module()  # installed here (the core session installs the 'fix' extra)
    monkeypatch.setitem(sys.modules, "libcst", None)
    with pytest.raises(ImportError, match=r"kl-patches\[fix\]"):
        apply_python(MULTI, [_set("beta", "0.0")])


def test_a_parsed_config_passed_to_main_is_edited_in_main() -> None:
    src = (
        "from trl import GRPOConfig, GRPOTrainer, TrlParser\n"
        "def main(script_args, training_args):\n"
        "    training_args.beta = 0.04\n"
        "    trainer = GRPOTrainer(model='m', reward_funcs=[], args=training_args)\n"
        "if __name__ == '__main__':\n"
        "    parser = TrlParser((dict, GRPOConfig))\n"
        "    script_args, training_args = parser.parse_args_and_config()\n"
        "    main(script_args, training_args)\n"
    )
    out, launch = _edit(src, _set("beta", "0.0"))
    assert launch.from_argv and launch.kwargs == {"beta": 0.0}
    assert _diff(src, out) == (["    training_args.beta = 0.04"], ["    training_args.beta = 0.0"])
    with pytest.raises(PythonEditError, match=r"read from the command line.*--loss_type"):
        apply_python(src, [_set("loss_type", "dr_grpo")])


@pytest.mark.parametrize(
    ("config", "change", "expected"),
    [
        # the last entry goes; the comment line before the brace stays
        ("cfg = {\n    'output_dir': 'o',  # out\n    'beta': 0.04,  # kl\n    # end\n}\n"
         "args = GRPOConfig(**cfg)\n", Change("unset", "trl", "beta"),
         "cfg = {\n    'output_dir': 'o',  # out\n    # end\n}\nargs = GRPOConfig(**cfg)\n"),
        # no trailing comma: the previous entry's comment stays, the brace keeps its line
        ("cfg = {\n    'output_dir': 'o',  # out\n    'beta': 0.04  # kl\n}\n"
         "args = GRPOConfig(**cfg)\n", Change("unset", "trl", "beta"),
         "cfg = {\n    'output_dir': 'o'  # out\n}\nargs = GRPOConfig(**cfg)\n"),
        # aligned continuation lines: added aligned, and the bracket stays on the last line
        ("args = GRPOConfig(output_dir='o',\n                  beta=0.04)\n",
         _set("loss_type", "grpo"),
         "args = GRPOConfig(output_dir='o',\n                  beta=0.04,\n"
         "                  loss_type='grpo')\n"),
        ("args = GRPOConfig(output_dir='o',\n                  beta=0.04)\n",
         Change("unset", "trl", "beta"), "args = GRPOConfig(output_dir='o')\n"),
        # tabs, and a trailing comma on one line
        ("args = GRPOConfig(\n\toutput_dir='o',\n\tbeta=0.04\n)\n", _set("loss_type", "grpo"),
         "args = GRPOConfig(\n\toutput_dir='o',\n\tbeta=0.04,\n\tloss_type='grpo'\n)\n"),
        ("args = GRPOConfig(output_dir='o', beta=0.04,)\n", _set("loss_type", "grpo"),
         "args = GRPOConfig(output_dir='o', beta=0.04, loss_type='grpo',)\n"),
        ("args = GRPOConfig(\n    beta=0.04,\n)\n", Change("unset", "trl", "beta"),
         "args = GRPOConfig()\n"),
    ],
)  # fmt: skip
def test_layouts(config: str, change: Change, expected: str) -> None:
    out = apply_python(HEAD + config + TRAIN, [change])
    assert out == HEAD + expected + TRAIN


def test_a_config_passed_to_the_function_that_builds_the_trainer() -> None:
    src = (
        HEAD + "def main(name, args):\n    args.beta = 0.04\n    " + TRAIN + "\n\n"
        "if __name__ == '__main__':\n"
        "    cfg = GRPOConfig(output_dir='o')\n"
        "    main('x', args=cfg)\n"
    )
    assert _launch(src).kwargs == {"output_dir": "o", "beta": 0.04}
    out, launch = _edit(src, _set("beta", "0.0"), _set("loss_type", "grpo"))
    assert launch.kwargs == {"output_dir": "o", "beta": 0.0, "loss_type": "grpo"}
    assert _diff(src, out) == (
        ["    args.beta = 0.04", "    cfg = GRPOConfig(output_dir='o')"],
        ["    args.beta = 0.0", "    cfg = GRPOConfig(output_dir='o', loss_type='grpo')"],
    )


def test_an_edit_the_reader_would_not_read_back_is_an_error() -> None:
    """The reader skips a branch whose test it computes as false; an assignment there is not
    where its value comes from, and the check after the edit says so."""
    src = HEAD + "args = GRPOConfig(beta=0.04)\nif 1 > 2:\n    args.beta = 0.5\n" + TRAIN
    assert _launch(src).kwargs["beta"] == 0.04
    with pytest.raises(PythonEditError, match=r"the audit reads 0\.04 for beta"):
        apply_python(src, [_set("beta", "0.0")])


def test_not_a_number_is_written_and_read_back() -> None:
    src = HEAD + "args = GRPOConfig(temperature=1.0)\n" + TRAIN
    out, launch = _edit(src, _set("temperature", "nan"))
    assert 'temperature=float("nan")' in out and launch.kwargs["temperature"] != 1.0


@pytest.mark.parametrize(
    "src",
    [
        MULTI,
        MULTI.replace("loss_type='grpo',  # aggregation", "loss_type='grpo'  # aggregation"),
        SUB,
        HEAD + "args = GRPOConfig(output_dir='o',\n                  beta=0.04)\n" + TRAIN,
        HEAD + "args = GRPOConfig(\n\toutput_dir='o',\n\tbeta=0.04\n)\n" + TRAIN,
        HEAD + "args = GRPOConfig(output_dir = 'o', beta = 0.04,)\n" + TRAIN,
        HEAD + "cfg = dict(output_dir='o')\nargs = GRPOConfig(**cfg)\n" + TRAIN,
    ],
)
def test_add_rename_then_remove_gives_back_the_file_byte_for_byte(src: str) -> None:
    out = apply_python(src, [_set("scale_rewards", "batch")])
    assert _launch(out).kwargs["scale_rewards"] == "batch"
    out = apply_python(out, [Change("rename", "trl", "scale_rewards", new_key="zz")])
    assert apply_python(out, [Change("unset", "trl", "zz")]) == src
