"""The entry point: :func:`parse_script` reads a script one complete command at a time on the
interpreter, then merges the commands of every branch combination (deduplicated, labelled with
the branches they depend on)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kl_patches.audit.shell.interpreter import Interpreter
from kl_patches.audit.shell.lexer import Lexer
from kl_patches.audit.shell.model import Command, ShellParseError, ShellScript
from kl_patches.audit.shell.parser import Parser
from kl_patches.audit.shell.state import World


def parse_script(
    text: str,
    variables: dict[str, str] | None = None,
    script_dir: str | None = None,
    *,
    script_path: str | None = None,
    reader: Callable[[str], str | None] | None = None,
    partial: bool = False,
) -> ShellScript:
    """Every simple command a launch script runs, read as bash would, running nothing.

    ``variables`` are known before the script runs (the caller's ``--var NAME=VALUE``; they are
    not exported); the script's own assignments override them. ``script_dir`` is the script's
    directory (for ``$(dirname "$0")``, ``$(cd "$(dirname "$0")" && pwd)`` and relative paths);
    ``script_path`` its path (``$0``); ``reader(path)`` returns the text of a file the script
    sources or runs (``source``, ``bash FILE``), or None when it cannot be read: it must only
    read, never run.

    A parse error raises :class:`ShellParseError`; with ``partial=True`` it stops the reading
    where bash stops too: the commands before it are kept and :attr:`ShellScript.error` says
    why (it still raises when no command came before it). :class:`ShellLimitError` when a
    bound of :data:`LIMITS` is hit.
    """
    interp = Interpreter(dict(variables or {}), script_dir, script_path or "", reader)
    world = World()
    world.vars.update(variables or {})
    world.exported.update(variables or {})
    world.script = script_path or ""
    worlds = [world]
    parser = Parser(Lexer(text))
    error = ""
    while True:
        try:
            node = parser.complete_command()
        except ShellParseError as err:
            if not partial or not interp.emitted:
                raise
            error = str(err)
            interp.note(f"{err}: bash stops here too; the rest of the script is not read")
            break
        if node is None:
            break
        out: list[World] = []
        for w in worlds:
            out.extend([w] if w.stopped else interp.run(node, w)[0])
        for w in out:
            w.returning = w.aborted = False
            w.breaking = w.continuing = 0
        worlds = interp.cap(out, node.line)
        if all(w.done for w in worlds):
            break
    commands = _merge(interp)
    first = next((w for w in worlds if not w.done), worlds[0])
    return ShellScript(
        commands=commands,
        variables=dict(first.vars),
        notes=list(interp.notes),
        files=dict(interp.files),
        error=error,
    )


def _merge(interp: Interpreter) -> list[Command]:
    """Commands of every branch combination, deduplicated: a command met identically in
    several branches keeps only the branch labels they share (with two or more outcomes)."""
    valid = {cid for cid, alive in interp.outcomes.items() if alive >= 2}
    seen: dict[tuple[Any, ...], tuple[Command, set[str] | None]] = {}
    order: list[tuple[Any, ...]] = []
    for cmd, labels in interp.emitted:
        texts = {text for cid, text in labels if cid in valid}
        key = (cmd.file, cmd.line, cmd.loop, cmd.calls, tuple(cmd.words), tuple(cmd.dropped))
        if key in seen:
            first, common = seen[key]
            seen[key] = (first, (common or set()) & texts)
            continue
        seen[key] = (cmd, texts)
        order.append(key)
    out = []
    for key in order:
        cmd, common = seen[key]
        cmd.branch = tuple(sorted(common or ()))
        out.append(cmd)
    return out
