"""Inputs that ended in a traceback or an "internal error" (issue 32): each is now a correct reading
with a note, or one line naming the cause and the file at fault.

Each runs ``kl-patches audit --json`` in-process (the helper asserts that stderr holds neither a
traceback nor "internal error").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.reliability3 import (
    GRPO_NO_BETA,
    VERL_LAUNCH,
    audit_json,
    notes,
    nothing_installed,
    repo,
    trainer,
)

CASES: list[tuple[str, str]] = [
    ("traceback", "setup-cfg-percent-in-a-url"),
    ("traceback", "poetry-tilde-alone"),
    ("traceback", "poetry-constraint-grammar"),
    ("traceback", "pyproject-nested-too-deeply"),
    ("traceback", "python-5000-digit-literal"),
    ("traceback", "yaml-5000-digit-integer"),
    ("traceback", "yaml-kl-coef-4000-digits"),
    ("traceback", "json-5000-digit-integer"),
    ("traceback", "shell-5000-digit-arithmetic"),
    ("traceback", "trl-flag-5000-digits"),
    ("traceback", "trl-flag-400-digits"),
    ("traceback", "verl-override-400-digits"),
    ("traceback", "python-literal-400-digits"),
]
"""Every case of this module as (category, name); the test parameter id is the name."""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    nothing_installed(monkeypatch)


@pytest.mark.parametrize("name", ["setup-cfg-percent-in-a-url"])
def test_a_percent_in_setup_cfg_is_text(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ConfigParser's interpolation raised on ``%20`` and failed the audit of every
    launch in the repository."""
    cfg = (
        "[metadata]\nurl = https://example.org/a%20b\n"
        "[options]\ninstall_requires =\n    numpy\n    trl==0.18.0\n"
    )
    root = repo(tmp_path, {"setup.cfg": cfg, "grpo.yaml": GRPO_NO_BETA})
    code, doc, _ = audit_json(capsys, [str(root / "grpo.yaml")])
    t = trainer(doc)
    assert code == 0 and (t["library_version"], t["version_where"]) == (
        "0.18.0",
        f"{root / 'setup.cfg'}:6",
    )


@pytest.mark.parametrize("name", ["poetry-tilde-alone"])
def test_poetry_tilde_alone_is_a_note(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``trl = "~"`` was an IndexError."""
    text = '[tool.poetry.dependencies]\npython = "^3.10"\ntrl = "~"\n'
    root = repo(tmp_path, {"pyproject.toml": text, "grpo.yaml": GRPO_NO_BETA})
    code, doc, _ = audit_json(capsys, [str(root / "grpo.yaml")])
    assert code == 0 and trainer(doc)["version_source"] == "newest"
    assert "pyproject.toml:3: trl = '~': '~' is not a Poetry version constraint" in notes(doc)


@pytest.mark.parametrize(
    ("constraint", "spec"),
    [
        pytest.param("~0.18", ">=0.18,<0.19", id="poetry-constraint-grammar"),
    ],
)
def test_poetry_constraints_follow_poetrys_grammar(constraint: str, spec: str) -> None:
    """Poetry's caret, tilde, wildcard, ranges and alternatives as PEP 440."""
    from kl_patches.audit.pins import poetry_spec

    assert poetry_spec(constraint) == spec
    table = {
        "^0.18.0": ">=0.18.0,<0.19",
        "^1.2.3": ">=1.2.3,<2",
        "^0.0.3": ">=0.0.3,<0.0.4",
        "~1.2.3": ">=1.2.3,<1.3",
        "~1": ">=1,<2",
        "*": "",
        "0.18.*": "==0.18.*",
        "0.18.0": "==0.18.0",
        ">=0.18,<0.20": ">=0.18,<0.20",
        ">=0.18 <0.20": ">=0.18,<0.20",
        "^0.18 || ^0.20": ">=0.18,<0.19||>=0.20,<0.21",
    }
    assert {k: poetry_spec(k) for k in table} == table
    for bad in ("~", "^", "banana", ">=", "~=x"):
        with pytest.raises(ValueError, match="is not a Poetry version constraint"):
            poetry_spec(bad)


@pytest.mark.parametrize("name", ["pyproject-nested-too-deeply"])
def test_a_deeply_nested_pyproject_is_a_note_about_it(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the audit failed as "run.sh: nested too deeply", blaming the launch file."""
    text = '[project]\ndependencies = ["trl==0.18.0"]\nx = ' + "[" * 5000 + "]" * 5000 + "\n"
    root = repo(tmp_path, {"pyproject.toml": text, "grpo.yaml": GRPO_NO_BETA})
    code, doc, _ = audit_json(capsys, [str(root / "grpo.yaml")])
    assert code == 0 and trainer(doc)["version_source"] == "newest"
    assert "pyproject.toml: TOML nested too deeply to read; its pins are not read" in notes(doc)


DIGITS = "9" * 5000


@pytest.mark.parametrize(
    ("file", "text", "fragment"),
    [
        pytest.param(
            "train.py",
            f"import trl\nX = {DIGITS}\n",
            "train.py: line 2: an integer literal longer than Python compiles (4300 digits)",
            id="python-5000-digit-literal",
        ),
        pytest.param(
            "grpo.yaml",
            f"beta: {DIGITS}\n",
            "grpo.yaml: line 1: an integer too large for any float (5000 digits",
            id="yaml-5000-digit-integer",
        ),
        pytest.param(
            "ppo.yaml",
            "algorithm:\n  kl_ctrl:\n    kl_coef: " + "9" * 4000 + "\n",
            "ppo.yaml: line 3: an integer too large for any float (4000 digits",
            id="yaml-kl-coef-4000-digits",
        ),
        pytest.param(
            "grpo.json",
            '{"beta": ' + DIGITS + "}",
            "grpo.json: an integer too large for any float (5000 digits",
            id="json-5000-digit-integer",
        ),
    ],
)
def test_huge_integers_are_one_line_naming_the_file(
    file: str, text: str, fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: Python's int-string limit message leaked ("use sys.set_int_max_str_digits()"),
    and ``kl_coef: <4000 digits>`` was an OverflowError ("internal error")."""
    root = repo(tmp_path, {file: text})
    library = ["--library", "verl"] if file == "ppo.yaml" else ["--library", "trl"]
    code, doc, err = audit_json(capsys, [*library, str(root / file)])
    (line,) = err.strip().splitlines()
    assert code == 2 and doc["trainers"] == [] and fragment in line, line
    assert "set_int_max_str_digits" not in line and "OverflowError" not in line


@pytest.mark.parametrize("name", ["shell-5000-digit-arithmetic"])
def test_a_5000_digit_number_in_shell_arithmetic_wraps_as_in_bash(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bash reads a long number digit by digit, wrapping at 64 bits: 10**5000 - 1 + 1 is 0."""
    from kl_patches.audit.shell import arith

    assert arith(DIGITS + "+1") == 0
    assert arith("99999999999999999999999999999999999999+1") == 687399551400673280
    script = f"N=$(({DIGITS}+1))\n{VERL_LAUNCH.strip()} trainer.total_epochs=$N\n"
    root = repo(tmp_path, {"run.sh": script})
    code, doc, _ = audit_json(capsys, [str(root / "run.sh")])
    assert code == 0 and trainer(doc)["config"]["placement"] == "reward"


@pytest.mark.parametrize(
    ("script", "fragment"),
    [
        pytest.param(
            f"trl grpo --model_name_or_path m --beta {DIGITS}\n",
            "run.sh: --beta: line 1: an integer too large for any float (5000 digits",
            id="trl-flag-5000-digits",
        ),
        pytest.param(
            "trl grpo --model_name_or_path m --beta " + "9" * 400 + "\n",
            "run.sh: --beta: line 1: an integer too large for any float (400 digits",
            id="trl-flag-400-digits",
        ),
        pytest.param(
            "python -m verl.trainer.main_ppo algorithm.kl_ctrl.kl_coef=" + "9" * 400 + "\n",
            "algorithm.kl_ctrl.kl_coef=999999999999...: an integer of 400 digits, too large",
            id="verl-override-400-digits",
        ),
    ],
)
def test_huge_integers_in_a_launch_are_one_line(
    script: str, fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found while fixing the cases above: a TRL flag leaked Python's int-string limit
    message (5000 digits) or was an OverflowError (400 digits), a verl override of 400
    digits an OverflowError ("internal error")."""
    root = repo(tmp_path, {"run.sh": script})
    code, doc, err = audit_json(capsys, [str(root / "run.sh")])
    (line,) = err.strip().splitlines()
    assert code == 2 and doc["trainers"] == [] and fragment in line, line


@pytest.mark.parametrize("name", ["python-literal-400-digits"])
def test_a_python_literal_beyond_float_is_an_unresolved_setting(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``beta=<400 digits>`` is valid Python but no float: the reader does not compute with it
    (it was an OverflowError, "internal error"); the setting is unresolved and said."""
    text = (
        "import trl\nargs = trl.GRPOConfig(output_dir='o', beta=" + "9" * 400 + ")\n"
        "trainer = trl.GRPOTrainer(model='m', args=args)\n"
    )
    root = repo(tmp_path, {"train.py": text})
    code, doc, _ = audit_json(capsys, [str(root / "train.py")])
    t = trainer(doc)
    assert code == 0
    (found,) = [f for f in t["findings"] if f["code"] == "trl.unresolved_settings"]
    assert found["message"].startswith("beta: set from values the audit cannot compute")
