"""Bad input to every ``kl-patches`` command: one line on stderr, exit 2, before any work.

Each case of :data:`ONE_LINE` runs ``kl-patches ARGV`` in-process with every long run replaced
by one that raises (:func:`tests.reliability.cli_support.no_work`) and asserts the error path
of :mod:`kl_patches.cli.errors`: exit code 2, exactly one line on stderr that names the field
and the value (and the valid choices where there are some), nothing on stdout, no traceback.
The other tests cover ``--json`` on an error, an unreadable file among several audited ones,
a closed stdout (``| head``), Ctrl-C, an internal error and ``--debug``, and inputs that used to
hang (run in a subprocess with a timeout: the timeout is the failure).

:data:`CASES` lists every case as ``(category, name)``; each runs as a test whose parameter id
is its name (``benchmarks/reliability_counts.py`` counts them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kl_patches.cli import errors
from tests.reliability.cli_support import no_work, one_line_error, run

ROOT = Path(__file__).resolve().parents[2]
RECIPE = str(ROOT / "recipes" / "trl" / "grpo_k1_in_reward.yaml")
MISSING = "/nonexistent-kl-patches-dir/out"

ONE_LINE: list[tuple[str, str, list[str], str]] = [
    # (category, name, argv, a fragment of the one line)
    ("dispatch", "unknown-command", ["frobnicate"], "unknown command 'frobnicate'; valid"),
    ("verdict", "unknown-short-name", ["verdict", "k1-in-air"], "'k1-in-air' is not a short"),
    ("verdict", "unknown-estimator", ["verdict", "k9-in-loss"], "estimator='k9' is not valid"),
    (
        "verdict",
        "bad-choice",
        ["verdict", "k2-in-loss", "--kl.granularity", "words"],
        "KLConfig.granularity='words' is not valid; choose one of ['token', 'sequence']",
    ),
    (
        "verdict",
        "name-contradicts-field",
        ["verdict", "k1-in-reward", "--kl.estimator", "k3"],
        "--kl k1-in-reward sets estimator='k1', but --kl.estimator='k3'",
    ),
    (
        "verdict",
        "not-a-number",
        ["verdict", "k1-in-reward", "--kl.coef", "abc"],
        "--kl.coef='abc' is not a number",
    ),
    (
        "verdict",
        "not-finite",
        ["verdict", "k1-in-reward", "--kl.coef", "inf"],
        "--kl.coef='inf' is not a finite number",
    ),
    (
        "verdict",
        "negative-coef",
        ["verdict", "k1-in-reward", "--kl.coef", "-1"],
        "KLConfig.coef=-1.0 is not valid; use a finite float >= 0",
    ),
    (
        "verdict",
        "unknown-field",
        ["verdict", "k1-in-reward", "--kl.coeff", "1"],
        "unrecognized arguments: --kl.coeff 1; valid --kl.* options: --kl.clamp, --kl.coef,",
    ),
    (
        "verdict",
        "kl-flag-instead-of-name",
        ["verdict", "k1-in-reward", "--kl", "k3-in-loss"],
        "--kl k3-in-loss: give the configuration as the positional NAME",
    ),
    (
        "verdict",
        "deprecated-flag-bad-choice",
        ["verdict", "k2-in-loss", "--granularity", "words"],
        "argument --granularity: invalid choice: 'words' (choose from 'token', 'sequence')",
    ),
    (
        "verdict",
        "conflicting-fields",
        ["verdict", "k1-in-reward", "--kl.importance_weighting", "token"],
        "importance_weighting='token' weights the loss-side term",
    ),
    ("bias", "vocab-below-2", ["bias", "--vocab", "1"], "argument --vocab: 1 is too small"),
    ("bias", "length-not-int", ["bias", "--length", "x"], "argument --length: 'x' is not an"),
    (
        "bias",
        "enumeration-too-large",
        ["bias", "--vocab", "10", "--length", "9"],
        "(vocab**length) must be <= 20000",
    ),
    ("bias", "one-batch", ["bias", "--num-batches", "1"], "use an integer >= 2"),
    ("bias", "zero-batch-size", ["bias", "--batch-size", "0"], "argument --batch-size: 0 is"),
    ("bias", "level-zero", ["bias", "--off-policy", "--levels", "0"], "argument --levels"),
    ("bias", "level-nan", ["bias", "--off-policy", "--levels", "nan"], "argument --levels"),
    ("bias", "clip-negative", ["bias", "--off-policy", "--clips", "-1"], "argument --clips"),
    (
        "bias",
        "unknown-trainer",
        ["bias", "--off-policy", "--trainer", "sgd"],
        "invalid choice: 'sgd' (choose from 'ppo', 'reinforce')",
    ),
    (
        "bias",
        "plot-folder-missing",
        ["bias", "--plot", f"{MISSING}/bias.png"],
        "--plot '/nonexistent-kl-patches-dir/out/bias.png': folder",
    ),
    ("bias", "unknown-option", ["bias", "--lenght", "3"], "did you mean --length?"),
    ("reproduce", "steps-zero", ["reproduce", "--steps", "0"], "argument --steps: 0 is too"),
    ("reproduce", "seeds-negative", ["reproduce", "--seeds", "-2"], "argument --seeds: -2 is"),
    ("reproduce", "batch-of-one", ["reproduce", "--batch-size", "1"], "use an integer >= 2"),
    ("reproduce", "workers-zero", ["reproduce", "--workers", "0"], "argument --workers: 0"),
    ("reproduce", "beta-negative", ["reproduce", "--betas", "0.1,-1"], "argument --betas"),
    ("reproduce", "beta-nan", ["reproduce", "--betas", "nan"], "non-negative numbers"),
    ("reproduce", "beta-words", ["reproduce", "--betas", "a,b"], "expected numbers like"),
    ("reproduce", "lr-zero", ["reproduce", "--lr", "0"], "argument --lr: '0' is not valid"),
    ("reproduce", "lr-nan", ["reproduce", "--lr", "nan"], "argument --lr: 'nan' is not valid"),
    (
        "reproduce",
        "unknown-model",
        ["reproduce", "--model", "gpt"],
        "invalid choice: 'gpt' (choose from 'tabular', 'transformer')",
    ),
    ("reproduce", "vocab-one", ["reproduce", "--vocab", "1"], "argument --vocab: 1 is too"),
    (
        "reproduce",
        "too-large",
        ["reproduce", "--vocab", "200", "--length", "2"],
        "(vocab**length) must be <= 20000",
    ),
    (
        "reproduce",
        "json-folder-missing",
        ["reproduce", "--json", f"{MISSING}/runs.json"],
        "--json '/nonexistent-kl-patches-dir/out/runs.json': folder",
    ),
    (
        "reproduce",
        "markdown-folder-missing",
        ["reproduce", "--markdown", f"{MISSING}/t.md"],
        "--markdown '/nonexistent-kl-patches-dir/out/t.md': folder",
    ),
    ("demo", "steps-negative", ["demo", "--steps", "-1"], "argument --steps: -1 is too small"),
    ("demo", "seeds-zero", ["demo", "--seeds", "0"], "argument --seeds: 0 is too small"),
    ("audit", "no-input", ["audit"], "give a launch script, a config file"),
    ("audit", "bad-var", ["audit", "--var", "BETA", "x.sh"], "--var expects NAME=VALUE"),
    (
        "audit",
        "unknown-library",
        ["audit", "--library", "nemo", "x.sh"],
        "invalid choice: 'nemo' (choose from 'verl', 'openrlhf', 'trl')",
    ),
    ("audit", "missing-file", ["audit", f"{MISSING}/run.sh"], "no such file"),
]

PATH_CASES: list[tuple[str, str, str]] = [
    # (category, name, what stands at the output path): the path is made in tmp_path
    ("reproduce", "json-is-a-folder", "json"),
    ("reproduce", "plot-is-a-file", "plot"),
    ("demo", "out-is-a-file", "out"),
    ("bias", "plot-is-a-folder", "bias-plot"),
]

JSON_CASES: list[tuple[str, str, list[str], str]] = [
    ("json", "bias-bad-option", ["bias", "--json", "--vocab", "1"], "argument --vocab"),
    ("json", "bias-unknown-option", ["bias", "--json", "--frob"], "unrecognized arguments"),
    ("json", "audit-bad-option", ["audit", "--json", "--library", "nemo", "x"], "invalid choice"),
    ("json", "audit-no-input", ["audit", "--json"], "give a launch script"),
    ("json", "audit-missing-file", ["audit", "--json", f"{MISSING}/a.sh"], "no such file"),
]

OTHER_CASES: list[tuple[str, str]] = [
    ("audit", "one-unreadable-among-several"),
    ("audit", "one-unreadable-among-several-json"),
    ("audit", "internal-error-in-one-file"),
    ("missing-dependency", "bias-plot-without-matplotlib"),
    ("missing-dependency", "reproduce-plot-without-matplotlib"),
    ("internal", "internal-error-one-line"),
    ("internal", "debug-flag-shows-traceback"),
    ("internal", "debug-env-shows-traceback"),
    ("signals", "keyboard-interrupt"),
    ("pipes", "help-into-closed-pipe"),
    ("pipes", "verdict-into-closed-pipe"),
    ("pipes", "audit-into-closed-pipe"),
    ("hangs", "bias-huge-length"),
    ("hangs", "reproduce-huge-length"),
    ("hangs", "demo-negative-steps"),
]

CASES: list[tuple[str, str]] = [
    *((c, n) for c, n, *_ in ONE_LINE),
    *((c, n) for c, n, _ in PATH_CASES),
    *((c, n) for c, n, *_ in JSON_CASES),
    *OTHER_CASES,
]
"""Every case of this module as (category, name); the test parameter id is the name."""


def _ids(table: list[tuple[str, str, list[str], str]]) -> list[object]:
    return [pytest.param(argv, fragment, id=name) for _, name, argv, fragment in table]


@pytest.mark.parametrize(("argv", "fragment"), _ids(ONE_LINE))
def test_one_line_error(
    argv: list[str],
    fragment: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    no_work(monkeypatch)
    code, out, err = run(capsys, argv)
    line = one_line_error(code, out, err, fragment)
    assert line.startswith(f"kl-patches{' ' + argv[0] if argv[0] != 'frobnicate' else ''}: ")


@pytest.mark.parametrize("kind", [pytest.param(k, id=n) for _, n, k in PATH_CASES])
def test_output_path_checked_before_the_run(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_work(monkeypatch)
    folder = tmp_path / "a-folder"
    folder.mkdir()
    file = tmp_path / "a-file"
    file.write_text("x")
    argv, fragment = {
        "json": (["reproduce", "--json", str(folder)], "is a directory; give a file name"),
        "plot": (["reproduce", "--plot", str(file)], "is not a folder"),
        "out": (["demo", "--out", str(file)], "is not a folder"),
        "bias-plot": (["bias", "--plot", str(folder)], "is a directory; give a file name"),
    }[kind]
    one_line_error(*run(capsys, argv), fragment)
    assert file.read_text() == "x" and list(folder.iterdir()) == []  # nothing written


@pytest.mark.parametrize(("argv", "fragment"), _ids(JSON_CASES))
def test_json_error_document(
    argv: list[str],
    fragment: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    no_work(monkeypatch)
    code, out, err = run(capsys, argv)
    one_line_error(code, out, err, fragment, stdout=True)
    doc = json.loads(out)
    assert doc["exit_code"] == 2
    if argv[0] == "audit":  # the audit's own schema, with the error in `errors`
        assert doc["schema"] == "kl-patches.audit/1" and doc["trainers"] == []
        (item,) = doc["errors"]
        assert fragment in item["message"] and item["origin"] in ("argv", argv[-1])
    else:
        assert doc["schema"] == errors.SCHEMA and fragment in doc["error"]["message"]


def _two_inputs(tmp_path: Path) -> tuple[str, str]:
    good = tmp_path / "good.sh"
    good.write_text("python3 -m openrlhf.cli.train_ppo_ray --algo.kl.init_coef 0.02\n")
    return str(good), str(tmp_path / "missing.sh")


@pytest.mark.parametrize("name", ["one-unreadable-among-several"])
def test_unreadable_file_among_several(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, missing = _two_inputs(tmp_path)
    code, out, err = run(capsys, ["audit", "--plain", missing, good])
    assert code == 2
    assert err.strip().splitlines() == [f"kl-patches audit: {missing}: no such file"]
    assert "1 trainer(s)" in out and "coef=0.02" in out  # the readable one is still audited


@pytest.mark.parametrize("name", ["one-unreadable-among-several-json"])
def test_unreadable_file_among_several_json(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, missing = _two_inputs(tmp_path)
    code, out, err = run(capsys, ["audit", "--json", good, missing])
    doc = json.loads(out)
    assert code == 2 and doc["exit_code"] == 2 and len(err.strip().splitlines()) == 1
    assert [t["origin"] for t in doc["trainers"]] == [f"{good}:1"]
    assert doc["trainers"][0]["config"]["coef"] == 0.02
    (item,) = doc["errors"]
    assert item["origin"] == missing and item["kind"] == "input"
    assert "no such file" in item["message"]


@pytest.mark.parametrize("name", ["internal-error-in-one-file"])
def test_internal_error_in_one_file_keeps_the_others(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kl_patches.cli import audit as audit_cli

    good, _ = _two_inputs(tmp_path)
    bad = tmp_path / "bad.sh"
    bad.write_text("python3 -m openrlhf.cli.train_ppo_ray\n")
    real = audit_cli.audit

    def audit(path: str, *args: object) -> object:
        if path == str(bad):
            raise RuntimeError("planted bug")
        return real(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(audit_cli, "audit", audit)
    code, out, err = run(capsys, ["audit", "--plain", str(bad), good])
    assert code == 2 and "1 trainer(s)" in out
    (line,) = err.strip().splitlines()
    assert line.startswith(f"kl-patches audit: {bad}: internal error (RuntimeError: planted bug)")
    assert "--debug" in line and "report it" in line
    with pytest.raises(RuntimeError, match="planted bug"):
        run(capsys, ["audit", "--debug", str(bad), good])


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["bias", "--plot", "x.png"], id="bias-plot-without-matplotlib"),
        pytest.param(["reproduce", "--plot", "plots"], id="reproduce-plot-without-matplotlib"),
    ],
)
def test_plot_without_matplotlib_is_refused_before_the_run(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    no_work(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # importing matplotlib now fails
    code, out, err = run(capsys, argv)
    one_line_error(code, out, err, "--plot needs matplotlib, which is not installed here")
    assert "pip install 'kl-patches[plot]'" in err


def _boom(argv: list[str]) -> int:
    raise RuntimeError("planted bug")


@pytest.mark.parametrize("name", ["internal-error-one-line"])
def test_internal_error_is_one_line(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    main = errors.command("kl-patches test", debug_option=True)(_boom)
    assert main(["x"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "kl-patches test: internal error (RuntimeError: planted bug); rerun with --debug "
        "(or KL_PATCHES_DEBUG=1) for the traceback and report it"
    )


@pytest.mark.parametrize("name", ["debug-flag-shows-traceback"])
def test_debug_flag_raises(name: str) -> None:
    main = errors.command("kl-patches test", debug_option=True)(_boom)
    with pytest.raises(RuntimeError, match="planted bug"):
        main(["--debug"])
    quiet = errors.command("kl-patches test")(_boom)  # --debug is not this command's flag
    assert quiet(["--debug"]) == 2


@pytest.mark.parametrize("name", ["debug-env-shows-traceback"])
def test_debug_env_raises(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(errors.DEBUG_ENV, "1")
    main = errors.command("kl_patches.trl")(_boom)
    with pytest.raises(RuntimeError, match="planted bug"):
        main([])


@pytest.mark.parametrize("name", ["keyboard-interrupt"])
def test_keyboard_interrupt(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(argv: list[str]) -> int:
        raise KeyboardInterrupt

    assert errors.command("kl-patches test")(interrupted)([]) == errors.EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "kl-patches test: interrupted"


def _env() -> dict[str, str]:
    return dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        pytest.param(["--help"], errors.EXIT_BROKEN_PIPE, id="help-into-closed-pipe"),
        pytest.param(
            ["verdict", "k3-in-loss"], errors.EXIT_BROKEN_PIPE, id="verdict-into-closed-pipe"
        ),
        pytest.param(["audit", "--plain", RECIPE], 0, id="audit-into-closed-pipe"),
    ],
)
def test_closed_stdout(argv: list[str], code: int) -> None:
    """``kl-patches ... | head`` where the reader has gone: no traceback; the audit keeps its
    code. The pipe's read end is closed before the command writes, so the write always fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kl_patches", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == code and done.stderr == "", done.stderr


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(
            ["bias", "--length", "1000000000"],
            "(vocab**length) must be <= 20000",
            id="bias-huge-length",
        ),
        pytest.param(
            ["reproduce", "--length", "1000000000"],
            "(vocab**length) must be <= 20000",
            id="reproduce-huge-length",
        ),
        pytest.param(
            ["demo", "--steps", "-1"], "--steps: -1 is too small", id="demo-negative-steps"
        ),
    ],
)
def test_inputs_that_used_to_hang(argv: list[str], fragment: str, tmp_path: Path) -> None:
    """Each answers within seconds in a real process (the timeout is the failure)."""
    done = subprocess.run(
        [sys.executable, "-m", "kl_patches", *argv],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=60,
    )
    one_line_error(done.returncode, done.stdout, done.stderr, fragment)


def test_the_counting_script_reads_every_module_and_counts_passes_only() -> None:
    """``benchmarks/reliability_counts.py``: every module has unique CASES, and a case counts as
    handled only when all its tests passed (a skip or a failure does not count)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "reliability_counts", ROOT / "benchmarks" / "reliability_counts.py"
    )
    assert spec is not None and spec.loader is not None
    counts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(counts)
    cases = counts.load_cases()
    assert ("dispatch", "unknown-command") in cases["test_cli_errors"]
    collector = counts.Collector()
    collector.outcomes[("m", "a")] = ["passed", "passed"]
    collector.outcomes[("m", "cat-b")] = ["passed"]
    collector.outcomes[("m", "c")] = ["passed", "skipped"]
    collector.outcomes[("m", "d")] = ["failed"]
    assert counts.handled(collector, "m", "cat", "a") and counts.handled(collector, "m", "cat", "b")
    assert not counts.handled(collector, "m", "cat", "c")
    assert not counts.handled(collector, "m", "cat", "d")
    assert not counts.handled(collector, "m", "cat", "e")  # not found
    assert not counts.handled(collector, "other", "cat", "a")
