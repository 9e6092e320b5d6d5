"""Run a launch script under bash with stub programs, and record what would reach the trainer.

This is how the real-file benchmark decides, independently of kl-patches' shell reader, which
argv each trainer launch gets: bash itself expands the script (arrays, defaults, loops,
``source``, ``cd``, ``$(...)``), and every program a launch script typically calls (python,
torchrun, deepspeed, accelerate, ray, srun, sbatch, uv, trl, pip, nvidia-smi, wget, git, ...)
is replaced by a stub that appends its argv to a log and exits 0.

Isolation: the script runs under ``env -i`` (PATH = the stub directory, then /usr/bin:/bin;
HOME = a throwaway directory), as the unprivileged user ``nobody`` (``setpriv``), with its
working directory inside a throwaway copy of the repository, stdin from /dev/null and a
timeout. Stub behaviour that matters for what runs:

* ``python -c CODE`` / ``python3 -c CODE`` exit 1 with no output (probes such as
  ``python3 -c 'import torch_npu'`` fail, as on a machine without the probed package);
* ``nvidia-smi`` answers as one node with 8 GPUs: ``--query-gpu=...`` and ``-L`` print 8
  lines (correction of 2026-12-07, after the audit had run: an empty answer made code-r1's
  mini-batch size ``8 * 4 * 0 = 0``, a run verl refuses at worker start,
  ``verl/workers/fsdp_workers.py:128`` of its vendored copy, so the expectation described a
  run that cannot happen; code-r1 is the only listed file that calls ``nvidia-smi``);
* every other stub prints nothing and exits 0;
* ``sleep`` is a stub (returns at once); ``sbatch`` records its argv and does not run the job.

The log holds one record per stub call: program name, working directory, argv, and stdin
(here-docs fed to a stub). :func:`trainer_launches` then finds trainer entry points inside
those argvs, through wrappers (``ray job submit -- ...``, ``srun``, ``torchrun``,
``deepspeed --module``, ``accelerate launch``, ``uv run``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

STUBS = (
    "python", "python3", "python3.8", "python3.9", "python3.10", "python3.11", "python3.12",
    "torchrun", "deepspeed", "accelerate", "ray", "srun", "sbatch", "salloc", "scontrol",
    "mpirun", "uv", "trl", "pip", "pip3", "nvidia-smi", "npu-smi", "wget", "curl", "git",
    "huggingface-cli", "hf", "conda", "wandb", "vllm", "docker", "sleep", "pkill", "pgrep",
    "killall", "sudo", "apt", "apt-get", "sky", "modelscope", "aws", "gsutil", "hostname",
    "ifconfig", "ip", "nproc", "lscpu", "ssh", "scp", "rsync", "tensorboard", "open-r1",
)  # fmt: skip
"""Programs replaced by stubs (everything else is the machine's own /usr/bin, /bin)."""

_STUB = r"""#!/bin/bash
# stub written by benchmarks/audit_real_files/shell_trace.py: record argv, exit 0
_f=$(mktemp "{logdir}/rec.XXXXXXXX")
_in=""
if [ ! -t 0 ]; then _in=$(cat); fi
printf '%s\0' "$(date +%s%N)" "{name}" "$PWD" "$_in" "$@" > "$_f"
{extra}
exit 0
"""

_PYTHON_EXTRA = 'if [ "$1" = "-c" ]; then exit 1; fi'

_NVIDIA_SMI_EXTRA = r"""case " $* " in
  *" -L "*) for i in 0 1 2 3 4 5 6 7; do echo "GPU $i: NVIDIA H100 80GB HBM3"; done ;;
  *--query-gpu*) for i in 0 1 2 3 4 5 6 7; do echo "NVIDIA H100 80GB HBM3"; done ;;
esac"""


@dataclass
class StubCall:
    """One call of a stub program."""

    prog: str
    """The stub's name (``python3``, ``ray``, ...)."""
    cwd: str
    """Working directory of the call, relative to the throwaway repository root when inside."""
    argv: list[str]
    """Arguments after the program name."""
    stdin: str = ""
    """What the call read on stdin (a here-doc), empty otherwise."""


@dataclass
class Trace:
    """Result of running one script."""

    calls: list[StubCall]
    """Every stub call, in order."""
    returncode: int
    """bash's exit status (124 = timeout)."""
    stderr_tail: str
    """Last lines of bash's stderr (``set -x`` traces, errors)."""
    notes: list[str] = field(default_factory=list)
    """Anything unusual (timeout, non-zero exit)."""


def write_stubs(stub_dir: Path, log_dir: Path) -> None:
    """Create the stub executables in ``stub_dir`` logging into ``log_dir``."""
    stub_dir.mkdir(parents=True, exist_ok=True)
    for name in STUBS:
        extra = _PYTHON_EXTRA if name.startswith("python") else ""
        if name == "nvidia-smi":
            extra = _NVIDIA_SMI_EXTRA
        text = _STUB.replace("{logdir}", str(log_dir)).replace("{name}", name)
        (stub_dir / name).write_text(text.replace("{extra}", extra))
        (stub_dir / name).chmod(0o755)


def _read_log(log_dir: Path, root: Path) -> list[StubCall]:
    recs: list[tuple[int, StubCall]] = []
    for f in log_dir.glob("rec.*"):
        parts = f.read_bytes().decode("utf-8", "replace").split("\0")
        if parts and parts[-1] == "":
            parts = parts[:-1]
        if len(parts) < 4:
            continue
        stamp, prog, cwd, stdin, *argv = parts
        try:
            rel = os.path.relpath(cwd, root)
            cwd = "." if rel == "." else (rel if not rel.startswith("..") else cwd)
        except ValueError:
            pass
        recs.append((int(stamp or 0), StubCall(prog, cwd, argv, stdin)))
    recs.sort(key=lambda r: r[0])
    return [c for _, c in recs]


def run_script(
    root: Path,
    script: str,
    cwd: str = ".",
    env: dict[str, str] | None = None,
    args: list[str] | None = None,
    timeout: float = 60.0,
    interpreter: str = "bash",
) -> Trace:
    """Run ``root/script`` (relative path) from ``root/cwd`` with stubs; return the trace.

    ``root`` must be a throwaway copy of the repository (the script may write into it).
    ``env`` adds variables a user would export (for scripts that abort without them).
    """
    work = Path(tempfile.mkdtemp(prefix="rf-trace-"))
    try:
        stub_dir, log_dir, home = work / "stubs", work / "log", work / "home"
        log_dir.mkdir(parents=True)
        home.mkdir()
        write_stubs(stub_dir, log_dir)
        for p in (work, log_dir, home, root):
            p.chmod(0o777)
        subprocess.run(["chmod", "-R", "a+rwX", str(root)], check=True)
        full_env = {
            "PATH": f"{stub_dir}:/usr/bin:/bin",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            **(env or {}),
        }
        cmd = [
            "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            "env", "-i", *[f"{k}={v}" for k, v in full_env.items()],
            interpreter, str(root / script), *(args or []),
        ]  # fmt: skip
        notes: list[str] = []
        try:
            proc = subprocess.run(
                cmd,
                cwd=root / cwd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
            rc, err = proc.returncode, proc.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as exc:
            rc = 124
            err = (exc.stderr or b"").decode("utf-8", "replace")
            notes.append(f"timed out after {timeout:g}s")
        if rc not in (0, 124):
            notes.append(f"bash exited {rc}")
        calls = _read_log(log_dir, root)
        tail = "\n".join(err.strip().splitlines()[-15:])
        return Trace(calls, rc, tail, notes)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------------- launches
@dataclass
class Launch:
    """A trainer launch found in a stub call."""

    entry: str
    """The trainer entry: a module (``verl.trainer.main_ppo``) or a script path (``*.py``)."""
    argv: list[str]
    """Arguments the trainer gets (after the module or script)."""
    call: int
    """Index of the stub call in :attr:`Trace.calls`."""
    prog: str
    """The stub program that carried it (python3, ray, torchrun, ...)."""
    cwd: str
    """Working directory of that call."""


def find_entry(words: list[str], patterns: list[str]) -> tuple[str, int] | None:
    """(entry, index of its first argument) of the first trainer entry among ``words``.

    An entry is ``-m``/``--module`` followed by a module matching one of ``patterns``
    (regular expressions), a ``*.py`` word whose path matches one, or ``trl <sub>``.
    """
    regs = [re.compile(p) for p in patterns]
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if w in ("-m", "--module") and any(r.fullmatch(nxt) for r in regs):
            return nxt, i + 2
        if w.startswith("--module=") and any(r.fullmatch(w.split("=", 1)[1]) for r in regs):
            return w.split("=", 1)[1], i + 1
        if w.endswith(".py") and any(r.fullmatch(w) or r.search("/" + w) for r in regs):
            return w, i + 1
        if w == "trl" and nxt in ("grpo", "rloo") and any(r.fullmatch("trl " + nxt) for r in regs):
            return "trl " + nxt, i + 2
    return None


def inline_shell(words: list[str]) -> list[str]:
    """``... bash -c "CMD"`` (as srun/docker run it): CMD split into words, in place.

    The outer bash already expanded CMD's variables (it is double-quoted in the script); the
    inner shell's own syntax (``&&``, ``;``) becomes separate words, which end no search.
    """
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if os.path.basename(w) in ("bash", "sh") and i + 2 < len(words) and words[i + 1] == "-c":
            text = words[i + 2].replace("\\\n", " ")
            try:
                out.extend(shlex.split(text, comments=True))
            except ValueError:
                out.extend(text.split())
            i += 3
            continue
        out.append(w)
        i += 1
    return out


def trainer_launches(trace: Trace, patterns: list[str]) -> list[Launch]:
    """Every stub call that starts a trainer (entries matching ``patterns``), in order."""
    out: list[Launch] = []
    for k, call in enumerate(trace.calls):
        words = inline_shell([call.prog, *call.argv])
        found = find_entry(words, patterns)
        if found is None:
            continue
        entry, start = found
        argv = words[start:]
        for sep in ("&&", ";", "||", "|"):  # the end of an inline shell command
            if sep in argv:
                argv = argv[: argv.index(sep)]
        out.append(Launch(entry, argv, k, call.prog, call.cwd))
    return out


def trace_json(trace: Trace) -> str:
    """The trace as JSON (for inspection and the derivation log)."""
    return json.dumps(
        {
            "returncode": trace.returncode,
            "notes": trace.notes,
            "stderr_tail": trace.stderr_tail,
            "calls": [c.__dict__ for c in trace.calls],
        },
        indent=1,
    )
