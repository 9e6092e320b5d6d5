"""The shell's vocabulary as the reader needs it: name and assignment patterns, reserved words,
the builtins it models, shells it follows, commands it never follows, and the variables a
cluster scheduler sets on each node. Data only; no deviation from bash beyond the choice of
which builtins are modelled."""

from __future__ import annotations

import re

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_SCHEDULER = re.compile(
    r"(SKYPILOT|SLURM|PBS|LSB|OMPI_COMM_WORLD|PMI|PMIX|KUBERNETES|PET|TORCHELASTIC)_\w+|"
    r"NODE_RANK|GROUP_RANK|LOCAL_RANK|RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT"
)
"""Variables a cluster scheduler or launcher sets on each node (SkyPilot, SLURM, PBS, LSF, Open
MPI, PMI, Kubernetes, torchrun/torchelastic): a test on one of them, when the script does not
set it, depends on the node the script runs on, so every branch is read (not the clean
environment's)."""


def scheduler_variable(name: str) -> bool:
    """True when ``name`` is set per node by a cluster scheduler or launcher."""
    return _SCHEDULER.fullmatch(name) is not None


ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?=)(.*)$", re.S)
ORPHAN = re.compile(r"^(-|\+{0,2}[A-Za-z_][\w.]*\.[\w.]*=)")
"""A command that is really arguments: a flag, or a dotted ``key.sub=value`` override."""
PLACEHOLDER = re.compile(r"<[A-Za-z_][^\s<>'\"`$;&|()\\]*>")
"""A template's placeholder, ``<PATH_TO_MODEL>``: read after ``=`` (``VAR=<...>``,
``key=<...>``) as a value the audit does not know, where bash sees redirections (a syntax error
when the line ends there)."""
PLACEHOLDER_LABEL = "a template placeholder"
"""How a placeholder's unknown value is labelled (``<X> (a template placeholder, line N)``)."""
CUT_NEXT = re.compile(r"^(--|\+{0,2}[A-Za-z_][\w.]*=)")
_RESERVED = {
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "do",
    "done",
    "case",
    "esac",
    "while",
    "until",
    "for",
    "select",
    "function",
    "{",
    "}",
    "!",
    "in",
    "time",
    "[[",
}
DECLARE = {"export", "declare", "local", "readonly", "typeset"}
BUILTINS = {
    "true",
    ":",
    "false",
    "[",
    "test",
    "exit",
    "return",
    "break",
    "continue",
    "unset",
    "shift",
    "set",
    "let",
    "cd",
    "pushd",
    "popd",
    "source",
    ".",
    "eval",
    "read",
    "mapfile",
    "readarray",
    "shopt",
    "alias",
    "unalias",
    "trap",
    "umask",
    "wait",
    "hash",
    "ulimit",
}
SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
NOT_FOLLOWED = {"echo", "printf", "cat", "grep", "sed", "awk", "tee", "ls", "test", "["}
UNKNOWN_SPECIAL = {"$", "!", "RANDOM", "SECONDS", "EPOCHSECONDS", "EPOCHREALTIME", "BASHPID"}

ACCELERATOR_PACKAGES = {
    "torch_npu": "Ascend NPUs",
    "torch_mlu": "Cambricon MLUs",
    "torch_musa": "Moore Threads GPUs",
    "habana_frameworks": "Intel Gaudi HPUs",
    "intel_extension_for_pytorch": "Intel XPUs",
}
"""Vendor accelerator packages a launch script probes for (``python3 -c 'import torch_npu'``)
to pick a device, and the hardware each stands for. Such a probe is read as failing: the
audit reads a launch as run on an NVIDIA GPU machine without the vendor package, which is
what the libraries fall back to when the probe fails (verl v0.9.0
``verl/utils/device.py:36-57``: ``is_torch_npu_available`` is False without ``torch.npu``;
its examples, e.g. ``examples/grpo_trainer/run_qwen3_8b_fsdp.sh:19``, then pick ``gpu``).
The reading names the other run (an ``accelerator_assumed`` finding)."""
