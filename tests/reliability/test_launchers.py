"""Bad flags to the library launchers (``kl-patches verl``, ``kl-patches openrlhf``,
``kl-patches trl``): one line on stderr, exit 2, before verl, Ray or TRL starts.

The launchers' argument checks need none of the libraries, so these run in the core session:
:func:`tests.reliability.cli_support.no_work` makes the verl trainer subprocess, Ray and the
import of TRL raise, so a check that came too late shows. The audit of a launch script with
the same flags says which flag the launcher would refuse (not "internal error").
The TRL launcher's checks on TRL's own parser and on two ranks are in
``tests/adapters/trl/test_launch.py`` and ``test_launch_accelerate.py`` (they need TRL).

:data:`CASES` lists every case as ``(category, name)``; the test parameter id is the name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.adapters.openrlhf import patch as openrlhf_patch
from tests.reliability.cli_support import no_work, one_line_error, run

VALID = "valid: --kl NAME, --kl.{clamp,coef,estimator,"

LAUNCHES: list[tuple[str, str, list[str], str]] = [
    # (category, name, argv, a fragment of the one line)
    (
        "launcher-verl",
        "verl-set-unknown-field",
        ["verl", "--kl", "k1-in-reward", "--set", "bogus=1"],
        f"--set bogus=1: unknown flag --kl.bogus; {VALID}",
    ),
    (
        "launcher-verl",
        "verl-set-contradicts-name",
        ["verl", "--kl", "k1-in-reward", "--set", "placement=loss"],
        "--kl k1-in-reward sets placement='reward', but --kl.placement='loss'",
    ),
    (
        "launcher-verl",
        "verl-set-without-equals",
        ["verl", "--kl", "k1-in-reward", "--set", "coef"],
        "--set 'coef': write FIELD=VALUE",
    ),
    (
        "launcher-verl",
        "verl-set-not-a-number",
        ["verl", "--kl", "k1-in-reward", "--set", "coef=abc"],
        "--set coef=abc: --kl.coef='abc' is not a number",
    ),
    (
        "launcher-verl",
        "verl-unknown-short-name",
        ["verl", "--kl", "k1-in-air", "--print"],
        "'k1-in-air' is not a short name",
    ),
    (
        "launcher-verl",
        "verl-field-not-finite",
        ["verl", "--kl", "k1-in-reward", "--kl.coef", "nan"],
        "--kl.coef='nan' is not a finite number",
    ),
    (
        "launcher-verl",
        "verl-field-without-kl",
        ["verl", "--kl.coef", "0.1", "--print"],
        "--kl.FIELD, --coef, --set and --kl.outside_std need --kl",
    ),
    (
        "launcher-verl",
        "verl-unknown-option",
        ["verl", "--kl", "k1-in-reward", "--strct"],
        "unrecognized arguments: --strct; did you mean --strict",
    ),
    (
        "launcher-verl",
        "verl-coef-not-a-number",
        ["verl", "--kl", "k1-in-reward", "--coef", "x"],
        "argument --coef: invalid float value: 'x'",
    ),
    (
        "launcher-verl",
        "verl-key-set-twice",
        ["verl", "--kl", "k1-in-reward", "--", "algorithm.kl_ctrl.kl_coef=0.5"],
        "algorithm.kl_ctrl.kl_coef=0.5 (your overrides) vs algorithm.kl_ctrl.kl_coef=0.001 (--kl)",
    ),
    (
        "launcher-openrlhf",
        "openrlhf-name-contradicts-field",
        ["openrlhf", "--kl", "k1-in-reward", "--kl.estimator", "k3"],
        "--kl k1-in-reward sets estimator='k1', but --kl.estimator='k3' asks for another",
    ),
    (
        "launcher-openrlhf",
        "openrlhf-unknown-field",
        ["openrlhf", "--kl", "k1-in-reward", "--kl.bogus", "3"],
        f"unknown flag --kl.bogus; {VALID}",
    ),
    (
        "launcher-openrlhf",
        "openrlhf-missing-value",
        ["openrlhf", "--rollout.batch_size", "8", "--kl"],
        "--kl needs a value",
    ),
    (
        "launcher-openrlhf",
        "openrlhf-no-kl-flag",
        ["openrlhf", "--rollout.batch_size", "8"],
        "no --kl flag given; pass e.g. --kl k1-in-reward",
    ),
    (
        "launcher-openrlhf",
        "openrlhf-bad-choice",
        ["openrlhf", "--kl", "k3-in-loss", "--kl.loss_aggregation", "mean"],
        "KLConfig.loss_aggregation='mean' is not valid; choose one of",
    ),
    (
        "launcher-openrlhf",
        "openrlhf-conflicting-native-flag",
        ["openrlhf", "--kl", "k1-in-reward", "--algo.kl.estimator", "k3"],
        "conflicts with the KL configuration",
    ),
    (
        "launcher-trl",
        "trl-unknown-trainer",
        ["trl", "ppo"],
        "trainer='ppo' is not valid; choose one of ['grpo', 'rloo']",
    ),
    (
        "launcher-trl",
        "trl-bad-estimator",
        ["trl", "grpo", "--kl.estimator", "k9"],
        "--kl.estimator='k9' is not valid; choose one of ['k1', 'k2', 'k3']",
    ),
    (
        "launcher-trl",
        "trl-deprecated-bad-estimator",
        ["trl", "grpo", "--kl_estimator", "k9"],
        "--kl_estimator='k9' is not valid; choose one of ['k1', 'k2', 'k3']",
    ),
    (
        "launcher-trl",
        "trl-deprecated-inline-bad-placement",
        ["trl", "grpo", "--kl_placement=sideways"],
        "--kl_placement='sideways' is not valid; choose one of ['reward', 'loss', 'both', 'none']",
    ),
    (
        "launcher-trl",
        "trl-deprecated-missing-value",
        ["trl", "grpo", "--kl_coef"],
        "--kl_coef needs a value",
    ),
    (
        "launcher-trl",
        "trl-coef-not-a-number",
        ["trl", "grpo", "--kl.coef", "abc"],
        "--kl.coef='abc' is not a number",
    ),
    (
        "launcher-trl",
        "trl-coef-negative",
        ["trl", "grpo", "--kl", "k1-in-reward", "--kl.coef", "-1"],
        "--kl.coef='-1': KLConfig.coef=-1.0 is not valid; use a finite float >= 0",
    ),
    (
        "launcher-trl",
        "trl-clamp-zero",
        ["trl", "grpo", "--kl.kl_clamp", "0"],
        "--kl.kl_clamp='0': KLConfig.kl_clamp=0.0 is not valid; use None or a finite float > 0",
    ),
    (
        "launcher-trl",
        "trl-unknown-field",
        ["trl", "grpo", "--kl.bogus", "1"],
        f"unknown flag --kl.bogus; {VALID}",
    ),
    (
        "launcher-trl",
        "trl-unknown-short-name",
        ["trl", "grpo", "--kl", "k4-in-loss"],
        "KLConfig.estimator='k4' is not valid",
    ),
]

AUDITED: list[tuple[str, str, str, str]] = [
    # (category, name, launch line, a fragment of the audit's one line)
    (
        "audit-of-launch",
        "audit-verl-set-unknown-field",
        "kl-patches verl --kl k1-in-reward --set bogus=1 -- algorithm.adv_estimator=grpo",
        "kl-patches verl would refuse this launch: --set bogus=1: unknown flag --kl.bogus",
    ),
    (
        "audit-of-launch",
        "audit-verl-set-contradiction",
        "kl-patches verl --kl k1-in-reward --set placement=loss -- algorithm.adv_estimator=grpo",
        "kl-patches verl would refuse this launch: --kl k1-in-reward sets placement='reward'",
    ),
    (
        "audit-of-launch",
        "audit-openrlhf-contradiction",
        "kl-patches openrlhf --kl k1-in-reward --kl.estimator k3",
        "would refuse this launch: --kl k1-in-reward sets estimator='k1'",
    ),
    (
        "audit-of-launch",
        "audit-trl-bad-name",
        "python -m kl_patches.trl grpo --kl k9-in-loss",
        "kl_patches.trl would refuse this launch: KLConfig.estimator='k9' is not valid",
    ),
]

CASES: list[tuple[str, str]] = [
    *((c, n) for c, n, *_ in LAUNCHES),
    ("launcher-openrlhf", "openrlhf-not-installed"),
    *((c, n) for c, n, *_ in AUDITED),
]
"""Every case of this module as (category, name); the test parameter id is the name."""


@pytest.mark.parametrize(
    ("argv", "fragment"), [pytest.param(a, f, id=n) for _, n, a, f in LAUNCHES]
)
def test_launcher_argument_error(
    argv: list[str],
    fragment: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    no_work(monkeypatch)
    monkeypatch.setattr(openrlhf_patch, "installed_version", lambda: "0.11.2")
    code, out, err = run(capsys, argv)
    prog = {"verl": "kl-patches verl", "openrlhf": "kl_patches.openrlhf"}.get(argv[0])
    line = one_line_error(code, out, err, fragment)
    assert line.startswith(f"{prog or 'kl_patches.trl'}: ")


@pytest.mark.parametrize("name", ["openrlhf-not-installed"])
def test_openrlhf_not_installed(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_work(monkeypatch)
    monkeypatch.setattr(openrlhf_patch, "installed_version", lambda: None)
    code, out, err = run(capsys, ["openrlhf", "--kl", "k1-in-reward"])
    one_line_error(code, out, err, "kl_patches.openrlhf: OpenRLHF is not installed")


@pytest.mark.parametrize(
    ("line", "fragment"), [pytest.param(ln, f, id=n) for _, n, ln, f in AUDITED]
)
def test_audit_of_a_refused_launch(
    line: str, fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "run.sh"
    script.write_text(line + "\n")
    code, out, err = run(capsys, ["audit", "--plain", str(script)])
    one_line_error(code, out, err, fragment)
    assert err.startswith(f"kl-patches audit: {script}:1: ")
