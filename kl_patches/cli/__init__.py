"""The ``kl-patches`` command: a thin dispatcher; every command is a Python function too.

Each entry of :data:`COMMANDS` maps a subcommand to ``"module:function"``; the function takes
the remaining argv and returns an exit code. Modules are imported only when their command runs,
so a command for one library never imports another. This package holds one module per command
(argument parsing and what the command prints); the library launchers (``trl``, ``verl``,
``openrlhf``) are their adapters' ``launch`` modules, whose arguments are partly the library's.
Every command's ``main`` goes through :func:`kl_patches.cli.errors.command`: one error path (one
line on stderr naming the field, the value and the valid choices, exit 2).
"""

from __future__ import annotations

import importlib

from kl_patches.cli import errors

COMMANDS: dict[str, str] = {
    "audit": "kl_patches.cli.audit:main",
    "bias": "kl_patches.cli.bias:main",
    "demo": "kl_patches.cli.demo:main",
    "reproduce": "kl_patches.cli.reproduce:main",
    "smoke": "kl_patches.cli.smoke:main",
    "openrlhf": "kl_patches.openrlhf:main",
    "trl": "kl_patches.adapters.trl.launch:main",
    "verdict": "kl_patches.cli.verdict:main",
    "verl": "kl_patches.adapters.verl.launch:main",
}


SUMMARIES: dict[str, str] = {
    "audit": "which gradient a launch file, a folder of them or an install follows, and the fix",
    "bias": "exact and Monte-Carlo bias of each KL configuration on an enumerable policy",
    "demo": "the built-in example (about a minute on two cores)",
    "reproduce": "the paper's comparison in miniature, trained and measured exactly",
    "smoke": "a few real training steps of trl, verl or openrlhf on the CPU (a tiny model)",
    "openrlhf": "run OpenRLHF's train_ppo_ray with a KL configuration",
    "trl": "run TRL's GRPO or RLOO script with a KL configuration",
    "verdict": "which gradient one KL configuration follows, and the fix",
    "verl": "run verl's PPO/GRPO trainer with a KL configuration",
}
"""What each command does, in plain words, for ``kl-patches --help``."""

LIBRARIES = ("trl", "verl", "openrlhf")
"""The libraries ``--version`` reports on (their adapters' supported ranges)."""


POSITIONS = {
    "inside": "supported",
    "above": "newer than the supported range (runs when its behaviour canaries pass)",
    "below": "older than the supported range (refused)",
    "prerelease": "a pre-release outside the supported range (refused)",
    "invalid": "not a readable version",
}
"""What :meth:`~kl_patches.adapters.support.VersionSupport.position` means for a user."""


def version_lines() -> list[str]:
    """``kl-patches X.Y.Z``, then each library: its installed release and the supported range.

    Reads installed distributions' metadata only (no library is imported).
    """
    from importlib import metadata

    from kl_patches import __version__

    try:
        own = metadata.version("kl-patches")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        own = __version__
    lines = [f"kl-patches {own}"]
    for library in LIBRARIES:
        support = importlib.import_module(f"kl_patches.adapters.{library}.versions").SUPPORT
        found = support.installed()
        state = (
            "not installed"
            if found is None
            else f"{found} installed, {POSITIONS[support.position(found)]}"
        )
        lines.append(f"  {library:9} {state} (range {support.supported})")
    return lines


@errors.command("kl-patches")
def main(argv: list[str]) -> int:
    """Run ``kl-patches <command> ...`` (``--version``, ``--help``)."""
    args = list(argv)
    if args and args[0] in ("-V", "--version"):
        print("\n".join(version_lines()))
        return 0
    if not args or args[0] in ("-h", "--help"):
        print("usage: kl-patches [--version] <command> [options]\n\ncommands:")
        for name in COMMANDS:
            print(f"  {name:12} {SUMMARIES[name]}")
        print("\nkl-patches <command> --help: the command's options")
        return 0
    name = args[0]
    if name not in COMMANDS:
        raise errors.UsageError(
            f"unknown command {name!r}; valid commands: {sorted(COMMANDS)}",
            field="command",
            value=name,
            choices=sorted(COMMANDS),
        )
    module, func = COMMANDS[name].split(":")
    result: int = getattr(importlib.import_module(module), func)(args[1:])
    return result


if __name__ == "__main__":
    raise SystemExit(main())
