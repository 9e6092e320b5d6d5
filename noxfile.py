"""Test sessions: one virtual environment per library, since verl, OpenRLHF and TRL pin
different transformers versions. ``nox`` runs them all; ``nox -s core`` runs one.

Every session installs the CPU build of torch 2.13.0 first (an unpinned torch would pull a
multi-GB CUDA build). Reuse environments locally with ``nox -R`` (or ``-r``).
"""

from __future__ import annotations

import json
import os
import shutil

import nox

nox.options.sessions = ["lint", "docs", "core", "trl", "verl", "openrlhf", "compat"]
"""The e2e tests run inside the trl/verl/openrlhf sessions (same environment: one install saved
per library); ``nox -s e2e`` runs them alone."""
nox.options.error_on_missing_interpreters = True

TORCH = "torch==2.13.0"
ENV = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}


FIX_CHECKS = ("tests/audit/fix/test_validate.py", "tests/audit/fix/test_fix_strings.py")
"""Tests whose native-fix checks need the library's own parser: each library session runs them
too (the core session runs their kl-patches-syntax part)."""


PRUNE = os.environ.get("KL_PATCHES_NOX_PRUNE") == "1"
"""``KL_PATCHES_NOX_PRUNE=1`` (``.ci/run`` sets it): each default session deletes its virtual
environment once it has passed. A clean clone runs each environment once, and the nine of them
together take about 14 GB; a CI run once failed with "No space left on device" while installing
torch. Leave it unset locally to reuse environments with ``nox -R``."""


def _prune(session: nox.Session) -> None:
    """Delete ``session``'s virtual environment when :data:`PRUNE` is set (a failed session
    never gets here, so its environment stays for a look)."""
    location = getattr(session.virtualenv, "location", None)
    if PRUNE and location:
        session.log(f"KL_PATCHES_NOX_PRUNE=1: removing {location}")
        shutil.rmtree(location, ignore_errors=True)


def _pytest(session: nox.Session, *paths: str, library: str = "") -> None:
    """pytest on ``paths``; ``library``: the session's library, whose ``library(NAME)`` tests
    must then run (tests/conftest.py fails them if it is missing instead of deselecting)."""
    env = {**ENV, "KL_PATCHES_TEST_LIBRARY": library}
    session.run("pytest", "-q", "-p", "no:cacheprovider", *paths, *session.posargs, env=env)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format) on the tree, mypy on the package (strict on the core modules)."""
    session.install(TORCH)
    session.install("-e", ".[dev,fix]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "kl_patches")
    _prune(session)


@nox.session
def docs(session: nox.Session) -> None:
    """The docs site: ``mkdocs build --strict`` (a missing page or broken link fails)."""
    session.install(TORCH)
    session.install("-e", ".[docs]")
    site = os.path.join(session.create_tmp(), "site")
    env = {**ENV, "NO_MKDOCS_2_WARNING": "1"}  # silences Material's end-of-life banner
    session.run("mkdocs", "build", "--strict", "--site-dir", site, env=env)
    _prune(session)


@nox.session
def core(session: nox.Session) -> None:
    """The core: kernel, shared adapter machinery, audit, experiments, CLI (torch, pyyaml, rich;
    libcst for the audit's Python fixes).

    Everything but the per-library folders under tests/adapters/, which need their library.
    """
    session.install(TORCH)
    session.install("-e", ".[dev,audit,fix]")
    _pytest(
        session,
        "tests",
        "--ignore=tests/e2e",
        *(f"--ignore={_tests(lib)}" for lib in LIBRARIES),
    )
    _prune(session)


@nox.session
def trl(session: nox.Session) -> None:
    """TRL adapter against real TRL 1.16.0 on CPU (the extra is the supported range; the
    session pins the release the bit-for-bit tests were written against)."""
    _install_trl(session)
    # the wheel checks: nox -s record_check; the end-to-end runs: here and in nox -s e2e
    # (the 0.14-0.26 tests run in the compat steps of those releases)
    _pytest(
        session,
        _tests("trl"),
        _e2e("trl"),
        *FIX_CHECKS,
        "-m",
        "not wheels and not legacy_trl",
        library="trl",
    )
    _prune(session)


def _install_trl(session: nox.Session) -> None:
    session.install(TORCH)
    session.install("-e", ".[trl,dev]", "trl==1.16.0")


VERL_CPU_DEPS = (
    "tensordict>=0.8,<=0.10.0,!=0.9.0",
    "ray>=2.41",
    "transformers>=5.5.3,<5.11,!=5.6.0",
    "omegaconf",
    "hydra-core",
    "numpy",
    "packaging",
    "codetiming",
    "datasets",
    "pillow",
    "torchdata",
    "uvicorn",
    "fastapi",
    "peft",
    "cachetools",
    "TransferQueue>=0.1.10",
    "pyyaml",
    "aiohttp",  # verl's reward loop (used by the trainer in tests/e2e, not by the unit tests)
)


@nox.session
def verl(session: nox.Session) -> None:
    """verl adapter against real verl 0.9.1 on CPU (about 2.5 min to install, 1.7 GB).

    verl --no-deps plus only what its trainer, loss and worker modules import: its full
    requirements pull GPU-only extras and, through tensordict, a CUDA torch. kl-patches is
    installed in editable mode so the ``verl.plugins`` entry point is registered (the Ray test
    needs it).
    """
    _install_verl(session)
    _pytest(session, _tests("verl"), _e2e("verl"), *FIX_CHECKS, library="verl")
    _prune(session)


def _install_verl(session: nox.Session) -> None:
    session.install(TORCH)
    session.install("--no-deps", "verl==0.9.1")
    session.install(*VERL_CPU_DEPS, "pytest>=8")
    session.install("--no-deps", "-e", ".")


OPENRLHF_CPU_DEPS = (
    "transformers==5.15.0",
    "peft",
    "ray==2.55.0",
    "pylatexenc",
    "torchdata",
    "aiohttp",
    "pillow",
    "datasets",
    "einops",
)


@nox.session
def openrlhf(session: nox.Session) -> None:
    """OpenRLHF adapter against real OpenRLHF 0.11.2 on CPU.

    OpenRLHF's own requirements do not install on a CPU machine (flash-attn and vllm need CUDA),
    so: openrlhf --no-deps, deepspeed built as pure Python, the libraries OpenRLHF imports, and
    this package --no-deps. The tests put import-only stand-ins for vllm and flash_attn (under
    tests/adapters/openrlhf_support/stubs) on the path.
    """
    _install_openrlhf(session)
    _pytest(session, _tests("openrlhf"), _e2e("openrlhf"), *FIX_CHECKS, library="openrlhf")
    _prune(session)


def _install_openrlhf(session: nox.Session) -> None:
    session.install(TORCH)
    session.install("--no-deps", "openrlhf==0.11.2")
    session.install("deepspeed==0.19.6", env={"DS_BUILD_OPS": "0"})
    session.install(*OPENRLHF_CPU_DEPS, "pytest>=8")
    session.install("--no-deps", "-e", ".")


@nox.session
@nox.parametrize("library", ["trl", "verl", "openrlhf"])
def e2e(session: nox.Session, library: str) -> None:
    """Each library's own trainer run end to end on CPU through the user's launch path
    (``tests/e2e/``): a tiny model built in the test, 3 steps per configuration, the values
    the workers used recomputed in the test. Same environment as the library's session."""
    {"trl": _install_trl, "verl": _install_verl, "openrlhf": _install_openrlhf}[library](session)
    _pytest(session, _e2e(library))


@nox.session
@nox.parametrize("library", ["trl", "verl", "openrlhf"])
def compat(session: nox.Session, library: str) -> None:
    """Each adapter's regression and equivalence tests against every release of its compat
    matrix (the oldest, each release where something the adapter touches changed, the newest).

    One venv per library: the plan (``kl_patches.adapters.<library>.versions.COMPAT_PLAN``) gives
    the dependencies, then each release is installed in place (``pip install --no-deps`` of the
    library, plus the pins a release needs; with ``pip`` run directly, so ``-R`` still switches)
    and its tests run. A test written against the newest release whose assertion does not hold
    on an older one because the library differs there is deselected for it (each plan records
    why, and the compat tests assert the difference).
    """
    _run_plan(session, library, "COMPAT_PLAN")


@nox.session
@nox.parametrize("library", ["trl", "verl", "openrlhf"])
def compat_sweep(session: nox.Session, library: str) -> None:
    """The compat tests against EVERY release of the tested range (``SWEEP_PLAN``: 23 TRL
    releases, 10 verl, 37 OpenRLHF), not only the matrix; not in the default sessions (``.ci/run``
    runs ``compat``). Run it when a release's data changes: ``nox -s compat_sweep``."""
    _run_plan(session, library, "SWEEP_PLAN")


def _run_plan(session: nox.Session, library: str, name: str) -> None:
    session.install(TORCH, "packaging")  # kl_patches' guard needs packaging to read the plan
    session.install("--no-deps", "-e", ".")
    module = f"kl_patches.adapters.{library}.versions"
    code = f"from {module} import {name}; print({name}.to_json())"
    plan = json.loads(session.run("python", "-c", code, silent=True).strip().splitlines()[-1])
    env = dict(plan["install_env"])
    session.install(*plan["base"], env=env)
    for step in plan["steps"]:
        session.log(f"{library} {step['version']}: {step['reason']}")
        for command in step["install"]:  # also with -R: the switch is the test
            session.run("python", "-m", "pip", "install", "-q", *command, env=env)
        deselect = [f"--deselect={test}" for test in step["deselect"]]
        select = ["-k", step["select"]] if step["select"] else []
        tests = step.get("tests") or plan["tests"]
        session.run("pytest", "-q", "-p", "no:cacheprovider", *tests, *deselect,
                    *select, *session.posargs, env=ENV)  # fmt: skip
    _prune(session)


UNSLOTH_UNPACK = """
import pathlib, subprocess, sys, zipfile
from kl_patches.adapters.trl.unsloth_facts import wheels
root = pathlib.Path(sys.argv[1])
for package, release in wheels():
    target = root / f"{package}-{release}"
    if target.is_dir():
        continue
    cache = root / "_wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    f"{package}=={release}", "-d", str(cache)], check=True)
    (wheel,) = cache.glob(f"{package}-{release}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target, [n for n in archive.namelist() if n.endswith(".py")])
"""


@nox.session
def unsloth(session: nox.Session) -> None:
    """The unsloth patch and unsloth's facts against real unsloth 2026.10.9 on CPU: not in the
    default sessions (a 3 GB venv; about 2 min of tests after the install).

    unsloth's own requirements resolve to a CUDA torch unless torch 2.13.0 is pinned in the same
    install; the torchvision wheel that comes with it is a CUDA build whose operators do not
    load on a CPU torch, which ``import unsloth`` refuses, so it is removed (transformers runs
    without it). The facts of ``data/unsloth/history.json`` are re-read from the released
    wheels (about 20, 60 MB, downloaded once into the session's tmp folder).
    """
    session.install(TORCH)
    session.install(
        "-e", ".[dev]", TORCH, "unsloth==2026.10.9", "unsloth_zoo==2026.10.9", "trl==1.15.0"
    )
    session.run("python", "-m", "pip", "uninstall", "-y", "-q", "torchvision")
    wheels = os.path.join(session.create_tmp(), "unsloth-wheels")
    session.run("python", "-c", UNSLOTH_UNPACK, wheels, env=ENV)
    session.run("pytest", "-q", "-p", "no:cacheprovider", "tests/adapters/trl/test_unsloth.py",
                "tests/adapters/trl/test_unsloth_facts.py", *session.posargs,
                env={**ENV, "KL_PATCHES_UNSLOTH_WHEELS": wheels})  # fmt: skip


RECORDER_DEPS = ("packaging", "pyyaml", "rich", "hydra-core==1.3.8", "omegaconf", "pytest>=8")
"""What ``python -m kl_patches.dev`` needs besides torch (hydra composes verl's configs)."""


@nox.session
def record_check(session: nox.Session) -> None:
    """``record --check`` for every recorded release of every library, and the TRL history's
    reviewed rows against the same files; not in the default sessions.

    Reads each release's wheel (downloaded once into the recorder's cache,
    ``$KL_PATCHES_CACHE`` or ``~/.cache/kl-patches``: about 150 wheels, 60 MB, the first time;
    about 10 min of extraction on 2 cores). Run it when a data file or the recorder changes.
    """
    session.install(TORCH)
    session.install(*RECORDER_DEPS)
    session.install("--no-deps", "-e", ".")
    for library in ("trl", "transformers", "verl", "openrlhf"):
        session.run("python", "-m", "kl_patches.dev", "record", "--check", library, env=ENV)
    farm = os.path.join(session.create_tmp(), "trl-releases")
    session.run("python", "-m", "kl_patches.dev", "unpack", "trl", farm, env=ENV)
    session.run("pytest", "-q", "-p", "no:cacheprovider", "tests/adapters/trl/test_history.py",
                "tests/adapters/trl/test_compat_data.py", "-m", "wheels",
                env={**ENV, "KL_PATCHES_TRL_WHEELS": farm})  # fmt: skip


@nox.session
@nox.parametrize("library", ["trl", "verl", "openrlhf"])
def newest(session: nox.Session, library: str) -> None:
    """The newest release of a library on the index against the adapter: not in the defaults.

    Installs what the library's own session installs, then the newest release (``pip install
    -U``, past the supported range if one is out), and says what it is: ``record --check
    --installed`` (exit 1 and ``not recorded`` for a new release), ``changes --installed``
    (what it changes against the newest recorded release: names, defaults, choices, the
    patched functions), then runs the adapter's compat tests (the canaries at ``apply()``, the
    regression and equivalence tests of ``COMPAT_PLAN``): a final release above the supported
    range is let through when its canaries pass (one warning), refused when one fails. A new
    release is then recorded with one command (CONTRIBUTING.md).
    """
    session.install(TORCH)
    session.install(*RECORDER_DEPS)
    if library == "trl":
        session.install("-e", ".[trl,dev]")
        session.install("-U", "trl")
    elif library == "verl":
        session.install(*VERL_CPU_DEPS)
        session.install("--no-deps", "-U", "verl")
        session.install("--no-deps", "-e", ".")
    else:
        session.install("deepspeed==0.19.6", env={"DS_BUILD_OPS": "0"})
        session.install(*OPENRLHF_CPU_DEPS)
        session.install("--no-deps", "-U", "openrlhf")
        session.install("--no-deps", "-e", ".")
    dev = ("python", "-m", "kl_patches.dev")
    session.run(*dev, "record", "--check", library, "--installed", "--offline", env=ENV,
                success_codes=[0, 1])  # fmt: skip
    session.run(*dev, "changes", library, "--installed", env=ENV)
    module = f"kl_patches.adapters.{library}.versions"
    code = f"from {module} import COMPAT_PLAN; print(' '.join(COMPAT_PLAN.tests))"
    tests = session.run("python", "-c", code, silent=True).strip().splitlines()[-1].split()
    _pytest(session, *tests)


LIBRARIES = ("trl", "verl", "openrlhf")
"""Libraries whose tests live in tests/adapters/<library>/ and run in their own session."""


def _e2e(library: str) -> str:
    return os.path.join("tests", "e2e", f"test_{library}.py")


def _tests(library: str) -> str:
    folder = os.path.join("tests", "adapters", library)
    if not any(f.startswith("test_") for f in os.listdir(folder)):
        raise RuntimeError(f"no tests found for {library} under {folder}")
    return folder
