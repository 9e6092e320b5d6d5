"""Wrong answers given without a note (issue 32): pins written the way tools write them, pins that
contradict each other, and shell forms that set or hide a KL flag.

The pin cases audit a TRL GRPO config without ``beta`` next to a pin file: pinned to 0.18.0 it
runs k3 in the loss at 0.04; falling back to the newest release (1.16.0) reads "no KL", which is
what every one of these cases read before. Each runs ``kl-patches audit --json`` in-process.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.reliability3 import (
    GRPO_NO_BETA,
    audit_json,
    notes,
    nothing_installed,
    repo,
    trainer,
)

PIN_CASES: list[tuple[str, dict[str, str | bytes], str]] = [
    # (name, files beside grpo.yaml, where the pin is read)
    (
        "pip-compile-hash-lines",
        {
            "requirements.txt": "numpy==2.0.0 \\\n    --hash=sha256:00ff\ntrl==0.18.0 \\\n"
            "    --hash=sha256:abcd \\\n    --hash=sha256:ef01\n    # via -r requirements.in\n"
        },
        "requirements.txt:3",
    ),
    (
        "marker-ending-in-a-quote",
        {"requirements.txt": 'trl==0.18.0; python_version >= "3.8"\n'},
        "requirements.txt:1",
    ),
    (
        "utf8-byte-order-mark",
        {"requirements.txt": codecs.BOM_UTF8 + b"trl==0.18.0\n"},
        "requirements.txt:1",
    ),
    (
        "utf16-powershell-freeze",
        {"requirements.txt": "torch==2.13.0\r\ntrl==0.18.0\r\n".encode("utf-16")},
        "requirements.txt:2",
    ),
    (
        "include-dash-r",
        {"requirements.txt": "-r base.txt\n", "base.txt": "trl==0.18.0\n"},
        "base.txt:1",
    ),
    (
        "include-dash-c",
        {
            "requirements.txt": "trl\n--constraint constraints.txt\n",
            "constraints.txt": "trl==0.18.0\n",
        },
        "constraints.txt:1",
    ),
    (
        "pyproject-pep621-extras",
        {
            "pyproject.toml": '[project]\nname = "x"\n[project.optional-dependencies]\n'
            'rl = ["trl==0.18.0"]\n'
        },
        "pyproject.toml:4",
    ),
    (
        "poetry-caret",
        {"pyproject.toml": '[tool.poetry.dependencies]\npython = "^3.10"\ntrl = "^0.18.0"\n'},
        "pyproject.toml:3",
    ),
]

CASES: list[tuple[str, str]] = [
    *(("no-note", f"pin-{name}") for name, _, _ in PIN_CASES),
    ("no-note", "pin-latin1-byte"),
    ("no-note", "pin-file-over-the-size-cap"),
    ("no-note", "pin-invalid-version"),
    ("no-note", "two-pins-in-one-file"),
    ("no-note", "repeated-library-version"),
    ("no-note", "setup-py-string-constant-is-not-a-pin"),
    ("no-note", "launch-file-latin1-byte"),
    ("no-note", "launch-config-utf16"),
    ("no-note", "shell-printf-v"),
    ("no-note", "shell-declare-n"),
    ("no-note", "shell-local-n-in-a-function"),
    ("no-note", "shell-mapfile-here-string"),
    ("no-note", "shell-readarray-process-substitution"),
    ("no-note", "shell-mapfile-unknown-input"),
]
"""Every case of this module as (category, name); the test parameter id is the name."""

K3_LOSS_004 = ("k3", "loss", 0.04)
"""What a GRPO config without beta runs on TRL 0.18.0."""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    nothing_installed(monkeypatch)


def _kl(t: dict[str, Any]) -> tuple[str, str, float]:
    c = t["config"]
    return (c["estimator"], c["placement"], c["coef"])


@pytest.mark.parametrize(
    ("files", "where"), [pytest.param(f, w, id=f"pin-{n}") for n, f, w in PIN_CASES]
)
def test_the_pin_is_read(
    files: dict[str, str | bytes], where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, {**files, "grpo.yaml": GRPO_NO_BETA})
    code, doc, _ = audit_json(capsys, [str(root / "grpo.yaml")])
    t = trainer(doc)
    assert code == 0 and t["version_source"] == "pin", t["version_source"]
    assert t["library_version"] in ("0.18.0", "0.18.2") and _kl(t) == K3_LOSS_004
    assert t["version_where"].split(" ")[0] == f"{root / where}"


@pytest.mark.parametrize("name", ["pin-latin1-byte"])
def test_a_latin1_byte_is_a_note_and_the_pin_is_read(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(
        tmp_path, {"requirements.txt": b"# Jos\xe9\ntrl==0.18.0\n", "grpo.yaml": GRPO_NO_BETA}
    )
    code, doc, _ = audit_json(capsys, [str(root / "grpo.yaml")])
    assert code == 0 and trainer(doc)["library_version"] == "0.18.0"
    assert "requirements.txt: holds bytes that are not UTF-8 (the first, 0xE9, on line 1)" in notes(
        doc
    )


@pytest.mark.parametrize("name", ["pin-file-over-the-size-cap"])
def test_a_pin_file_over_its_cap_is_a_note(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = "trl==0.18.0\n" + "# padding line of a generated file\n" * 40_000
    root = repo(tmp_path, {"requirements.txt": big, "grpo.yaml": GRPO_NO_BETA})
    code, doc, _ = audit_json(capsys, [str(root / "grpo.yaml")])
    assert code == 0 and trainer(doc)["version_source"] == "newest"
    text = notes(doc)
    assert "requirements.txt: 1400012 bytes, over the audit's limit of 1048576 bytes" in text
    assert "its pins are not read" in text


@pytest.mark.parametrize("name", ["pin-invalid-version"])
def test_an_invalid_version_is_a_note(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``trl==banana`` read as "nothing pins it"."""
    root = repo(tmp_path, {"requirements.txt": "trl==banana\n", "grpo.yaml": GRPO_NO_BETA})
    code, doc, _ = audit_json(capsys, [str(root / "grpo.yaml")])
    assert code == 0 and trainer(doc)["version_source"] == "newest"
    assert "requirements.txt:1: 'trl==banana' is not a valid requirement" in notes(doc)
    assert "not used as a pin" in notes(doc)


@pytest.mark.parametrize("name", ["two-pins-in-one-file"])
def test_two_pins_that_contradict_are_a_finding_naming_both(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the first of two ``trl==`` pins won silently."""
    root = repo(
        tmp_path,
        {"requirements.txt": "trl==0.18.0\nnumpy\ntrl==0.19.0\n", "grpo.yaml": GRPO_NO_BETA},
    )
    code, doc, _ = audit_json(capsys, [str(root / "grpo.yaml")])
    t = trainer(doc)
    assert code == 0 and t["library_version"] == "0.18.0"
    (found,) = [f for f in t["findings"] if f["code"] == "version_pin_conflict"]
    assert "requirements.txt:1 (trl==0.18.0) and" in found["message"]
    assert "requirements.txt:3 (trl==0.19.0)" in found["message"]


@pytest.mark.parametrize("name", ["repeated-library-version"])
def test_two_library_versions_for_one_library_are_refused_naming_both(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the last of two ``--library-version trl=...`` won silently. Two values for one
    library cannot both be read: a one-line error names both (a value for every library and
    one for trl are not a conflict: the specific one wins)."""
    from kl_patches import cli

    root = repo(tmp_path, {"grpo.yaml": GRPO_NO_BETA})
    argv = ["audit", "--library-version", "trl=0.18.0", "--library-version", "trl==0.19.0"]
    assert cli.main([*argv, str(root / "grpo.yaml")]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.strip() == (
        "kl-patches audit: --library-version given twice for trl: 'trl=0.18.0' and "
        "'trl==0.19.0'; give one"
    )
    both = ["--library-version", "1.0.0", "--library-version", "trl=0.18.0"]
    code, doc, _ = audit_json(capsys, [*both, str(root / "grpo.yaml")])
    assert code == 0 and trainer(doc)["library_version"] == "0.18.0"


@pytest.mark.parametrize("name", ["setup-py-string-constant-is-not-a-pin"])
def test_only_requirement_arguments_of_setup_py_are_pins(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: any string constant of setup.py that parsed as a requirement was a pin."""
    setup = (
        "from setuptools import setup\n"
        "NOTE = 'trl==0.19.0'  # a comment-like constant, not a requirement\n"
        "BASE = ['numpy']\n"
        "setup(name='x', install_requires=BASE + ['trl==0.18.0'],\n"
        "      extras_require={'dev': ['ruff']})\n"
    )
    root = repo(tmp_path, {"setup.py": setup, "grpo.yaml": GRPO_NO_BETA})
    code, doc, _ = audit_json(capsys, [str(root / "grpo.yaml")])
    t = trainer(doc)
    assert code == 0 and (t["library_version"], t["version_where"]) == (
        "0.18.0",
        f"{root / 'setup.py'}:4",
    )
    assert not [f for f in t["findings"] if f["code"] == "version_pin_conflict"]


@pytest.mark.parametrize("name", ["launch-file-latin1-byte"])
def test_a_launch_script_with_a_latin1_byte_is_read_with_a_note(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: one latin-1 byte in a comment refused the whole script ("not UTF-8")."""
    script = b"# auteur: Jos\xe9\npython -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True\n"
    root = repo(tmp_path, {"run.sh": script})
    code, doc, _ = audit_json(capsys, [str(root / "run.sh")])
    assert code == 0 and trainer(doc)["config"]["placement"] == "reward"
    assert "run.sh: holds bytes that are not UTF-8 (the first, 0xE9, on line 1)" in notes(doc)


@pytest.mark.parametrize("name", ["launch-config-utf16"])
def test_a_utf16_config_is_read(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, {"grpo.yaml": "beta: 0.1\n".encode("utf-16")})
    code, doc, _ = audit_json(capsys, [str(root / "grpo.yaml")])
    assert code == 0 and trainer(doc)["config"]["coef"] == 0.1


# ----------------------------------------------------------------------------- shell
ON = "python -m verl.trainer.main_ppo algorithm.use_kl_in_reward=True"
SHELL_CASES: list[tuple[str, str]] = [
    ("shell-printf-v", f"printf -v C '%s' 'algorithm.use_kl_in_reward=False'\n{ON} $C\n"),
    ("shell-declare-n", f"X=algorithm.use_kl_in_reward=False\ndeclare -n R=X\n{ON} $R\n"),
    (
        "shell-local-n-in-a-function",
        f"off() {{ local -n out=$1; out=algorithm.use_kl_in_reward=False; }}\noff F\n{ON} $F\n",
    ),
    (
        "shell-mapfile-here-string",
        f'mapfile -t A <<< "algorithm.use_kl_in_reward=False"\n{ON} "${{A[@]}}"\n',
    ),
    (
        "shell-readarray-process-substitution",
        f'readarray -t A < <(printf "%s\\n" algorithm.use_kl_in_reward=False)\n{ON} "${{A[@]}}"\n',
    ),
]
"""Scripts in which bash turns the reward KL off after it was turned on."""


@pytest.mark.parametrize("script", [pytest.param(t, id=n) for n, t in SHELL_CASES])
def test_bash_turns_the_kl_off_and_so_does_the_reading(
    script: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: printf -v and mapfile left the variable empty (KL read as on, unbiased),
    ``declare -n`` was a refusal."""
    root = repo(tmp_path, {"run.sh": script})
    code, doc, err = audit_json(capsys, [str(root / "run.sh")])
    t = trainer(doc)
    assert code == 0, err
    assert t["config"]["placement"] == "none" and t["status"] == "kl_off"


@pytest.mark.parametrize("name", ["shell-mapfile-unknown-input"])
def test_mapfile_of_unknown_input_is_said(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Input the audit cannot know (a command it does not run) leaves the array unknown, said
    in a note and a finding, never silently empty."""
    script = f'mapfile -t A < <(cat extra_overrides.txt)\n{ON} "${{A[@]}}"\n'
    root = repo(tmp_path, {"run.sh": script})
    code, doc, _ = audit_json(capsys, [str(root / "run.sh")])
    t = trainer(doc)
    assert code == 0
    (found,) = [f for f in t["findings"] if f["code"] == "unknown_value"]
    assert (
        "an argument (any option, KL ones too) comes from `mapfile -t A` reading"
        in found["message"]
    )
    assert "line 1: `mapfile -t A` reading the output of <(cat extra_overrides.txt)" in notes(doc)
