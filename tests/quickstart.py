"""The shell commands of README.md and of the docs' Quickstart sections, and how each is run.

Shared by ``tests/test_readme.py`` (core session) and ``tests/adapters/trl/test_quickstart.py``
(TRL session). A command is run as written, in the repository root, through ``bash -c`` with this
environment's ``bin`` first on the PATH (so ``kl-patches`` and ``python`` are the ones under
test), except:

* ``pip install ...``: a dry run (``pip install --dry-run``) with this interpreter's pip. These
  install torch, TRL or verl (gigabytes) into the user's own environment; the dry run resolves
  the same requirements against the package index and fails when they do not resolve, without
  changing the environment the tests run in.
* ``python3 -m venv DIR``: run for real, in a temporary folder (DIR is made there).
* ``nox``: ``nox --list``: running the whole suite from inside the suite would run it twice.
* ``kl-patches demo``: with ``--out`` in the temporary folder (its plots would land in the
  checkout's ``out/``).
* commands that need TRL (:data:`NEEDS_TRL`) run in the TRL session only.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS_WITH_QUICKSTART = ("docs/trl.md", "docs/verl.md", "docs/openrlhf.md")
"""Docs pages whose ``## Quickstart`` section's commands are tested too."""
NEEDS_TRL = ("smoke trl", "kl_patches.trl")
"""A command containing one of these needs TRL installed (the TRL session runs it)."""

_FENCE = re.compile(r"```bash\n(.*?)```", re.S)


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


def blocks() -> list[tuple[str, str]]:
    """``(where, code)`` for every bash block of README.md and of the docs' quickstarts."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = [("README.md", code) for code in _FENCE.findall(readme)]
    for page in DOCS_WITH_QUICKSTART:
        text = _section((ROOT / page).read_text(encoding="utf-8"), "## Quickstart")
        found += [(f"{page} Quickstart", code) for code in _FENCE.findall(text)]
    return found


def commands(code: str) -> list[str]:
    """The commands of a bash block: one per line (continuations joined), comments dropped."""
    out: list[str] = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append(line.split(" #", 1)[0].strip())
    return out


def all_commands() -> list[tuple[str, str]]:
    """``(where, command)`` for every command, README first; each command once."""
    seen: dict[str, str] = {}
    for where, code in blocks():
        for command in commands(code):
            seen.setdefault(command, where)
    return [(where, command) for command, where in seen.items()]


def needs_trl(command: str) -> bool:
    """True when the command needs TRL installed."""
    return any(word in command for word in NEEDS_TRL)


def parts(command: str) -> list[str]:
    """A ``a && b && c`` chain as its commands."""
    return [p.strip() for p in command.split("&&")]


def rewrite(part: str, venvs: dict[str, Path], out: Path) -> str:
    """One part of a command as the tests run it (see the module docstring)."""
    words = shlex.split(part)
    if words[:3] == ["python3", "-m", "venv"]:
        return f"{shlex.quote(sys.executable)} -m venv {shlex.quote(str(venvs[words[3]]))}"
    head = words[0]
    for name in venvs:
        if head.startswith(f"{name}/bin/"):
            head = head[len(f"{name}/bin/") :]
    if head in ("pip", "pip3") and words[1] == "install":
        rest = " ".join(shlex.quote(w) for w in words[2:])
        return f"{shlex.quote(sys.executable)} -m pip install --dry-run --quiet {rest}"
    if head == "nox":
        return f"{shlex.quote(sys.executable)} -m nox --list"
    if head == "kl-patches" and words[1:] == ["demo"]:
        return f"kl-patches demo --out {shlex.quote(str(out))}"
    if head == words[0]:
        return part  # as written: its quoting and command substitutions are the user's
    return " ".join(shlex.quote(w) for w in [head, *words[1:]])


def run(command: str, cwd: Path, tmp: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """Run ``command`` as the module docstring says; ``tmp`` holds the venvs it creates."""
    venvs: dict[str, Path] = {}
    for part in parts(command):
        words = shlex.split(part)
        if words[:3] == ["python3", "-m", "venv"]:
            venvs[words[3]] = tmp / words[3].strip("./")
    script = " && ".join(rewrite(p, venvs, tmp / "out") for p in parts(command))
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "HF_HUB_OFFLINE": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
