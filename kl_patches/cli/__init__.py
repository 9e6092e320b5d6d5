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
    "openrlhf": "kl_patches.openrlhf:main",
    "trl": "kl_patches.adapters.trl.launch:main",
    "verdict": "kl_patches.cli.verdict:main",
    "verl": "kl_patches.adapters.verl.launch:main",
}


@errors.command("kl-patches")
def main(argv: list[str]) -> int:
    """Run ``kl-patches <command> ...``."""
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: kl-patches <command> [options]\n\ncommands:")
        for name, target in COMMANDS.items():
            doc = (importlib.import_module(target.split(":")[0]).__doc__ or "").strip()
            print(f"  {name:12} {doc.splitlines()[0] if doc else ''}")
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
