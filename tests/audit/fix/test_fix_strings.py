"""Every fix string kl-patches prints is a complete command or setting its parser accepts.

Collected from where they are printed: the audit of every launch of the test corpus
(tests/audit_corpus: each finding's fix, the native fix, the kl-patches switch), each
adapter's reader on launches that raise the findings the corpus does not, the verl and
OpenRLHF launchers for every estimator x placement (the findings and native fix they print, the
settings that make the run on-policy), theory's advice (``kl-patches verdict``, the audit's
JSON) for every estimator x placement x weighting, on- and off-policy, and as the launch reports
write it (each launcher's command), and the kl-patches
commands of the docs' and README's bash blocks. Each alternative of each fix goes through its
parser (:mod:`kl_patches.audit.fix.validate`): kl-patches commands, Python expressions and
pip commands here in every session; native settings through the installed library's own parser
in its session (``nox -s verl|trl|openrlhf`` run this file), well-formed in its syntax
everywhere.
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from kl_patches.audit import AuditError, audit
from kl_patches.audit.fix import validate
from kl_patches.cli import audit as cli_audit  # noqa: F401  registers the kl-patches command check
from kl_patches.config import KLConfig
from kl_patches.theory import verdict
from tests import quickstart

LIBRARIES = ("verl", "openrlhf", "trl")
"""The libraries whose own parser checks the native fixes (each in its nox session)."""

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "audit_corpus"
NAMES = [f"{e}-in-{p}" for e in ("k1", "k2", "k3") for p in ("reward", "loss", "both")] + ["none"]
"""Every estimator x placement (and KL off) the launchers and verdict are run with."""


@dataclass(frozen=True)
class Printed:
    """One printed fix: where, for which library, the text, the release it is spelled for."""

    where: str
    library: str
    fix: str
    entry: str | None = None
    release: str | None = None


def _corpus() -> list[Printed]:
    out: list[Printed] = []
    for path in sorted(CORPUS.rglob("*")):
        if not path.is_file() or path.name == "expected.yaml" or "__pycache__" in path.parts:
            continue
        try:
            entries = audit(str(path))
        except AuditError:
            continue
        for e in entries:
            lib, name = e.reading.library, path.relative_to(CORPUS)
            entry, release = validate._entry_of(e), e.library_version or e.reading.version
            fixes = [(f"{name} [{f.code}]", f.fix) for f in e.findings if f.fix]
            fixes += [(f"{name} native fix", " ".join(e.fix_native))] if e.fix_native else []
            fixes += [(f"{name} kl-patches fix", e.fix_switch)] if e.fix_switch else []
            out += [Printed(w, lib, f, entry, release) for w, f in fixes]
    return out


def _verl_launcher() -> list[Printed]:
    from kl_patches.adapters.verl.launch import build, updates_of
    from kl_patches.adapters.verl.read import read
    from kl_patches.adapters.verl.versions import TESTED_VERSIONS

    user = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.ppo_mini_batch_size=256"]
    out: list[Printed] = []
    for name in NAMES:
        overrides = build(KLConfig.parse(name, coef=0.01), list(user))
        reading = read(overrides)
        where = f"kl-patches verl --kl {name}"
        fixes = [f.fix for f in reading.findings if f.fix] + [" ".join(reading.fix)]
        fixes.append(updates_of(overrides).on_policy_how)
        out += [Printed(where, "verl", f, release=TESTED_VERSIONS[-1]) for f in fixes if f]
    return out


def _openrlhf_launcher() -> list[Printed]:
    from kl_patches.adapters.openrlhf.launch import build_argv, updates_of
    from kl_patches.adapters.openrlhf.read import read
    from kl_patches.adapters.openrlhf.versions import TESTED_VERSION

    rest = ["--algo.advantage.estimator", "group_norm", "--rollout.n_samples_per_prompt", "8"]
    rest += ["--rollout.batch_size", "16", "--train.batch_size", "32"]
    out: list[Printed] = []
    for name in NAMES:
        final = build_argv(KLConfig.parse(name, coef=0.01), rest, TESTED_VERSION)
        reading = read(final)
        where = f"kl-patches openrlhf --kl {name}"
        fixes = [f.fix for f in reading.findings if f.fix] + [" ".join(reading.fix)]
        fixes.append(updates_of(reading).on_policy_how)
        out += [Printed(where, "openrlhf", f, release=TESTED_VERSION) for f in fixes if f]
    return out


ACTOR = "actor_rollout_ref.actor."
READER_INPUTS: dict[str, list[object]] = {
    "verl": [
        ["algorithm.adv_estimator=gdpo", "algorithm.use_kl_in_reward=True"],
        ["algorithm.adv_estimator=grpo_vectorized", "algorithm.use_kl_in_reward=True"],
        ["algorithm.use_kl_in_reward=True", "algorithm.kl_ctrl.type=adaptive"],
        ["algorithm.use_kl_in_reward=True", "algorithm.rollout_correction.bypass_mode=True"],
        [
            "algorithm.adv_estimator=grpo",
            "algorithm.use_kl_in_reward=True",
            "actor_rollout_ref.rollout.multi_turn.enable=True",
            "trainer.use_v1=True",
        ],
        [
            "algorithm.use_kl_in_reward=True",
            ACTOR + "use_kl_loss=True",
            ACTOR + "kl_loss_coef=0.1",
            ACTOR + "loss_agg_mode=seq-mean-token-mean",
        ],
        ["algorithm.use_kl_in_reward=False", ACTOR + "use_kl_loss=False"],
    ],
    "openrlhf": [
        ["--algo.kl.init_coef", "0", "--algo.kl.use_loss"],
        ["--algo.kl.init_coef", "0.01", "--algo.kl.target", "0.1"],
        [
            "--algo.kl.init_coef",
            "0.01",
            "--algo.kl.use_loss",
            "--rollout.batch_size",
            "64",
            "--train.batch_size",
            "16",
        ],
        ["--algo.kl.init_coef", "0.01", "--algo.kl.use_loss", "--algo.kl.unbiased_gradient"],
        [
            "--algo.kl.init_coef",
            "0.01",
            "--algo.advantage.estimator",
            "reinforce",
            "--algo.advantage.gamma",
            "0.9",
        ],
        ["--algo.kl.init_coef", "0.01", "--algo.advantage.estimator", "reinforce_baseline"],
    ],
    "trl": [
        {"beta": 0.0},
        {"beta": 0.04, "use_bias_correction_kl": True, "importance_sampling_level": "sequence"},
        {"beta": 0.04, "use_liger_loss": True},
    ],
}
"""Launches that raise the adapters' findings the corpus does not (each reader run on them)."""


def _readers() -> list[Printed]:
    from kl_patches import adapters

    out: list[Printed] = []
    for library, inputs in READER_INPUTS.items():
        for given in inputs:
            r = adapters.get(library).read(given)
            fixes = [(f.code, f.fix) for f in r.findings if f.fix]
            fixes += [("native fix", " ".join(r.fix))] if r.fix else []
            out += [Printed(f"{library} {w}", library, f, release=r.version) for w, f in fixes]
    return out


_PARSE = re.compile(r"KLConfig\.parse\([^()]*\)")


def _advice() -> list[Printed]:
    """Theory's advice (verdict, audit JSON, launch reports): its KLConfig.parse(...) calls."""
    out: list[Printed] = []
    for name in NAMES:
        for extra in ({}, {"importance_weighting": "sequence"}, {"loss_coef": 0.2}):
            try:
                config = KLConfig.parse(name, coef=0.1, **extra)
            except ValueError:  # not a valid combination (sequence weights on the loss alone)
                continue
            for off in (False, True):
                advice = verdict(config, off_policy=off).advice
                where = f"verdict {name} {extra} off_policy={off}"
                out += [Printed(where, "", call) for call in _PARSE.findall(advice)]
    return out


def _launch_reports() -> list[Printed]:
    """The launch report's advice: theory's KLConfig.parse(...) as each launcher's command."""
    from kl_patches.adapters.launch_report import LaunchReport, Updates, in_launcher_terms

    out: list[Printed] = []
    calls = sorted({p.fix for p in _advice()})
    for library, route in (("verl", ""), ("OpenRLHF", ""), ("TRL", "TRL's RLOOTrainer")):
        report = LaunchReport("x", library, KLConfig(), Updates("on-policy"), route=route)
        for call in calls:
            command = in_launcher_terms(call, report)
            assert command != call, (library, call)  # every call is rewritten
            out.append(Printed(f"kl-patches {library.lower()} advice", library.lower(), command))
    return out


_FENCE = re.compile(r"```(?:bash|sh|shell|console)\n(.*?)```", re.S)
_COMMANDS = ("verl", "openrlhf", "trl", "verdict", "audit")


def _docs() -> list[tuple[str, str | list[str]]]:
    """(where, shell words) of the docs' and README's kl-patches commands; bash expands them
    (a ``$(...)`` of the README's verl quickstart reads the recipe); ``<...>`` placeholders
    stay words."""
    out: list[tuple[str, str | list[str]]] = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for code in _FENCE.findall(page.read_text(encoding="utf-8")):
            for command in quickstart.commands(code):
                for part in quickstart.parts(command):
                    if not part.startswith(("kl-patches ", "python -m kl_patches.")):
                        continue
                    words = validate.command_words(part)
                    if not words or words[0] not in _COMMANDS:
                        continue
                    shell: str | list[str] = part
                    if "$" in part:  # bash expands it (its <...> would be redirections)
                        done = subprocess.run(
                            ["bash", "-c", f"printf '%s\\0' {part}"],
                            cwd=ROOT,
                            capture_output=True,
                            text=True,
                            check=True,
                        )
                        shell = done.stdout.split("\0")[:-1]
                    out.append((f"{page.name}: {part}", shell))
    return out


@functools.cache
def printed() -> tuple[Printed, ...]:
    """Every printed fix this file checks."""
    return (
        *_corpus(),
        *_readers(),
        *_verl_launcher(),
        *_openrlhf_launcher(),
        *_advice(),
        *_launch_reports(),
    )


def test_the_collection_covers_each_place_and_kind() -> None:
    wheres = {p.where.split(" ")[0] for p in printed()}
    assert {"kl-patches", "verdict"} <= wheres
    libraries = {p.library for p in printed()}
    assert {"verl", "openrlhf", "trl"} <= libraries
    kinds = {validate.kind_of(a) for p in printed() for a in validate.alternatives(p.fix)}
    assert kinds == {"kl-patches", "python", "pip", "native"} - (
        set() if any("pip install" in p.fix for p in printed()) else {"pip"}
    )
    assert len(_docs()) >= 10


def test_every_kl_patches_command_and_expression_is_accepted() -> None:
    """kl-patches commands through kl-patches' own parsing, Python expressions built; native
    settings well formed in their library's syntax (the parsers: the library sessions)."""
    refused = []
    for p in printed():
        for alternative in validate.alternatives(p.fix):
            kind = validate.kind_of(alternative)
            if kind == "native":
                found = validate.check_syntax(p.library, alternative)
            else:
                (found,) = validate.check_fix(p.library, alternative)
            if found.accepted is not True:
                refused.append((p.where, alternative, found.message))
    assert refused == []


def test_the_docs_kl_patches_commands_are_accepted() -> None:
    refused = [
        (w, r.message) for w, words in _docs() if not (r := validate.check_command(words)).accepted
    ]
    assert refused == []


@pytest.mark.parametrize(
    "library", [pytest.param(lib, marks=pytest.mark.library(lib)) for lib in LIBRARIES]
)
def test_native_fixes_pass_the_installed_librarys_parser(library: str) -> None:
    """Native settings through the library's own parser, for the fixes spelled for the
    installed release (the others are spelled for the release their launch is read as)."""
    here = validate.installed_version(library)
    checked, refused = 0, []
    for p in printed():
        if p.library != library or p.release not in (None, here):
            continue
        for alternative in validate.alternatives(p.fix):
            if validate.kind_of(alternative) != "native":
                continue
            (found,) = validate.check_fix(library, alternative, entry=p.entry)
            if found.accepted is None and "has no ppo script" in found.message:
                continue  # TRL's PPO is gone from the installed release: nothing parses it
            checked += 1
            if found.accepted is not True:
                refused.append((p.where, alternative, found.message))
    assert refused == []
    assert checked >= 5


@pytest.mark.library("trl")
def test_trl_launchers_on_policy_settings_pass_trls_parser() -> None:
    """The TRL launcher's "make the run on-policy" settings (its launch report) parse as TRL's
    fields, and with them the run is on-policy."""
    from kl_patches.adapters.trl.launch import parse

    argv = ["--use_cpu", "True", "--bf16", "False", "--num_iterations", "2"]
    updates = parse("grpo", [*argv, "--kl", "k1-in-reward"]).updates()
    assert updates.state == "off-policy" and updates.on_policy_how
    (found,) = validate.check_fix("trl", updates.on_policy_how, entry="grpo")
    assert found.accepted is True, found.message
    fixed = [f"--{w.replace('=', ' ')}" for w in updates.on_policy_how.split()]
    fixed_argv = [*argv, *(" ".join(fixed).split()), "--kl", "k1-in-reward"]
    assert parse("grpo", fixed_argv).updates().state == "on-policy"
