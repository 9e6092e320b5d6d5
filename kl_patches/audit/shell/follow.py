"""Shell text the script runs but does not contain: ``source``/``.`` of a file beside the
script, ``eval``, ``bash -c``, ``bash FILE``, ``bash <<EOF``, files written with
``cat > FILE <<EOF`` (kept for later reads), and the pure command-substitution idioms whose
value is known (``$(dirname "$0")``, ``$(cat <<EOF ...)``, ``$(echo ...)``, ``$(seq ...)``).
Files are read, never run; a file that cannot be found is noted, not guessed."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from kl_patches.audit.shell.lexer import Lexer
from kl_patches.audit.shell.model import LIMITS, Command, ShellLimitError, ShellParseError
from kl_patches.audit.shell.nodes import AndOr, Node, Simple
from kl_patches.audit.shell.parser import Parser
from kl_patches.audit.shell.printf import printf
from kl_patches.audit.shell.probes import assumption, probed_package
from kl_patches.audit.shell.state import Field, Taint, World
from kl_patches.audit.shell.vocabulary import NOT_FOLLOWED, SHELLS

if TYPE_CHECKING:
    from kl_patches.audit.shell.interpreter import Interpreter


_SCRIPT_DIR_IDIOM = re.compile(
    r"^\s*(?:dirname\s+(?:--\s+)?(?P<a>\S+)"
    r"|cd\s+(?:--\s+)?\"?\$\(\s*dirname\s+(?:--\s+)?(?P<b>\S+?)\s*\)(?P<up>(?:/\.\.)*)/?\"?"
    r"(?:\s*&>\s*/dev/null|\s*>\s*/dev/null(?:\s*2>&1)?)?\s*(?:&&|;)\s*pwd(?:\s+-P)?)\s*$"
)
"""``$(dirname X)``, ``$(cd "$(dirname X)" && pwd)`` and ``$(cd "$(dirname X)/.." && pwd)``
(``up``: the ``/..`` parts, each one folder up from X's folder: the repository root of a
script kept in a subfolder, VLM-R1's ``run_scripts/``)."""
_SELF = re.compile(r'^"?\$(?:0|\{0\}|\{BASH_SOURCE(?:\[0\])?\}|BASH_SOURCE)"?$')


def resolve(interp: Interpreter, path: str, w: World) -> str | None:
    """A path the script names, as the reader can find it: known virtual files first, then
    the working directory, the script's directory and its parents. None if not found."""
    if not path or "$(" in path or path.startswith("~"):
        return None
    candidates: list[str] = []
    if os.path.isabs(path):
        candidates.append(os.path.normpath(path))
    else:
        bases = [b for b in (w.cwd, interp.script_dir) if b]
        d = interp.script_dir
        while d:
            parent = os.path.dirname(d)
            if parent == d:
                break
            bases.append(parent)
            d = parent
        candidates += [os.path.normpath(os.path.join(b, path)) for b in dict.fromkeys(bases)]
    for c in candidates:
        if c in interp.files:
            return c
    for c in candidates:
        if os.path.isfile(c):
            return c
    return None


def read_file(interp: Interpreter, path: str) -> str | None:
    if path in interp.files:
        return interp.files[path]
    if interp.reader is None:
        return None
    return interp.reader(path)


def source(
    interp: Interpreter, args: list[str], w: World, node: Simple
) -> tuple[list[World], list[Any]]:
    if not args:
        return [w], [1]
    found = resolve(interp, args[0], w)
    text = read_file(interp, found) if found else None
    if text is None:
        interp.note(
            f"line {node.line}: source {args[0]}: not found beside the script, not followed "
            "(variables it would set are unset here)"
        )
        return [w], ["ext"]
    saved = (w.pos, w.pos_known)
    if len(args) > 1:
        w.pos, w.pos_known = args[1:], True
    worlds, sts = run_text(interp, text, w, node.line + w.line_offset, found, keep_state=True)
    for x in worlds:
        if len(args) > 1:
            x.pos, x.pos_known = saved
        x.returning = False
    return worlds, sts


def run_text(
    interp: Interpreter, text: str, w: World, line: int, file: str | None, keep_state: bool
) -> tuple[list[World], list[Any]]:
    """Read ``text`` as shell in ``w`` (``source``, ``eval``, ``bash -c`` with a copy)."""
    interp.call_depth += 1
    saved = (w.file, w.via, w.line_offset)
    if file is not None:
        here = f"{w.file}:{line}" if w.file else f":{line}"
        w.via = (*w.via, here)
        w.file = file
        w.line_offset = 0
    else:
        w.line_offset = line - 1
    try:
        lexer = Lexer(text)
        parser = Parser(lexer)
        worlds = [w]
        while True:
            try:
                node = parser.complete_command()
            except ShellParseError as err:
                where = file or f"{interp.script_path or 'script'}:{line}"
                interp.note(f"{where}: cannot parse: {err}; not read further")
                break
            if node is None:
                break
            out: list[World] = []
            for x in worlds:
                out.extend([x] if x.stopped else interp.run(node, x)[0])
            worlds = interp.cap(out, line)
    finally:
        interp.call_depth -= 1
    for x in worlds:
        x.file, x.via, x.line_offset = saved
    return worlds, ["ext"] * len(worlds)


# ---------------------------------------------------------------- following
def follow(
    interp: Interpreter,
    cmd: Command,
    words: list[Field],
    prefix: dict[str, str],
    node: Simple,
    w: World,
) -> list[World]:
    """Commands that run shell text: ``bash -c``, ``bash FILE``, ``bash <<EOF``, here-docs
    written to files, Python fed on stdin or with ``-c``."""
    texts = [f.text for f in words]
    for r in node.redirs:
        if r.op in (">", ">|") and cmd.heredoc is not None and texts[0] in ("cat", "tee"):
            target = interp.expand_string(r.target, w)[0]
            path = path_for_write(interp, target, w)
            if path:
                interp.files[path] = cmd.heredoc
    if texts[0] == "tee" and cmd.heredoc is not None and len(texts) > 1:
        path = path_for_write(interp, texts[-1], w)
        if path:
            interp.files[path] = cmd.heredoc
    if os.path.basename(texts[0]) in NOT_FOLLOWED:
        return [w]
    for i, t in enumerate(texts):
        base = os.path.basename(t)
        if base.startswith("python") and re.fullmatch(r"python[\d.]*", base):
            rest = texts[i + 1 :]
            if "-c" in rest and rest.index("-c") + 1 < len(rest):
                cmd.python = rest[rest.index("-c") + 1]
            elif (not rest or rest[0] == "-") and cmd.heredoc is not None:
                cmd.python = cmd.heredoc
            return [w]
        if base not in SHELLS:
            continue
        rest = texts[i + 1 :]
        opts = []
        while rest and rest[0].startswith("-") and rest[0] not in ("-", "--"):
            opts.append(rest.pop(0))
        if rest and rest[0] == "--":
            rest.pop(0)
        child = child_world(interp, w, prefix)
        if any("c" in o.lstrip("-") for o in opts if not o.startswith("--")):
            if not rest:
                return [w]
            child.pos = rest[2:]
            child.pos_known = True
            run_text(interp, rest[0], child, node.line + w.line_offset, None, keep_state=False)
            return [w]
        if rest:
            found = resolve(interp, rest[0], w)
            text = read_file(interp, found) if found else None
            if text is None:
                interp.note(
                    f"line {node.line}: {base} {rest[0]}: not found beside the script, not followed"
                )
                return [w]
            child.pos = rest[1:]
            child.pos_known = True
            run_text(interp, text, child, node.line + w.line_offset, found, keep_state=False)
            return [w]
        if cmd.heredoc is not None:
            run_text(
                interp, cmd.heredoc, child, node.line + w.line_offset + 1, None, keep_state=False
            )
        return [w]
    return [w]


def child_world(interp: Interpreter, w: World, prefix: dict[str, str]) -> World:
    """A new shell's state: exported variables (and the command's own assignments)."""
    child = World()
    for n in w.exported:
        if n in w.vars:
            child.vars[n] = w.vars[n]
            if n in w.taint:
                child.taint[n] = w.taint[n]
    child.vars.update(prefix)
    child.exported = set(child.vars)
    child.cwd = w.cwd
    child.labels = w.labels
    child.loop = w.loop
    child.file = w.file
    child.calls = w.calls
    child.via = w.via
    child.line_offset = w.line_offset
    return child


def path_for_write(interp: Interpreter, target: str, w: World) -> str | None:
    if not target or "$(" in target or target.startswith("~"):
        return None
    if os.path.isabs(target):
        return os.path.normpath(target)
    base = w.cwd or interp.script_dir
    return os.path.normpath(os.path.join(base, target)) if base else None


def _up(folder: str, levels: int) -> str:
    """``folder`` followed by ``levels`` ``/..`` parts, normalised (``cd`` resolves ``..``)."""
    return os.path.normpath(os.path.join(folder, *[".."] * levels)) if levels else folder


def substitution(
    interp: Interpreter, inner: str, w: World, literal: str
) -> tuple[str | None, Taint]:
    """The value of ``$(inner)`` when it is a pure idiom, else None (never run)."""
    text = inner.strip()
    m = _SCRIPT_DIR_IDIOM.match(text)
    if m:
        target = (m.group("a") or m.group("b") or "").strip()
        up = (m.group("up") or "").count("..")
        if _SELF.match(target) and interp.script_dir is not None:
            return _up(interp.script_dir, up), Taint()
        value, taint = interp.expand_string(target, w)
        if not taint.undecidable and value and "$(" not in value:
            return _up(os.path.dirname(value) or ".", up), Taint()
        return None, taint
    m = re.fullmatch(r"(basename|realpath|readlink\s+-f)\s+(?:--\s+)?(\S+)", text)
    if m and _SELF.match(m.group(2)) and interp.script_path:
        path = interp.script_path
        if m.group(1) == "basename":
            return os.path.basename(path), Taint()
        return path, Taint()
    if text == "pwd" and w.cwd is not None:
        return w.cwd, Taint()
    try:
        lexer = Lexer(text)
        parser = Parser(lexer)
        node = parser.complete_command()
        extra = parser.complete_command()
    except (ShellParseError, ShellLimitError):
        return None, Taint()
    if extra is None and isinstance(node, AndOr):
        return _probe_choice(interp, node, w, text), Taint()
    if extra is not None or not isinstance(node, Simple):
        return None, Taint()
    if not node.items or not isinstance(node.items[0], str):
        return None, Taint()
    head = node.items[0]
    if head == "cat" and len(node.items) == 1 and node.redirs and node.redirs[0].heredoc:
        doc = node.redirs[0].heredoc
        body = doc.body or ""
        if not doc.quoted:
            body = interp.expand_heredoc(body, w)
        return body.rstrip("\n"), Taint()
    if head == "seq" and not node.redirs:
        nums: list[int] = []
        for raw in node.items[1:]:
            if not isinstance(raw, str):
                return None, Taint()
            value, taint = interp.expand_string(raw, w)
            if taint.undecidable or not re.fullmatch(r"-?\d+", value):
                return None, Taint()
            nums.append(int(value))
        if not 1 <= len(nums) <= 3:
            return None, Taint()
        first, step, last = (
            (1, 1, nums[0])
            if len(nums) == 1
            else (nums[0], 1, nums[1])
            if len(nums) == 2
            else (nums[0], nums[1], nums[2])
        )
        if step == 0 or abs(last - first) // abs(step) > LIMITS["brace"]:
            return None, Taint()
        seq = range(first, last + (1 if step > 0 else -1), step)
        return "\n".join(str(x) for x in seq), Taint()
    if head in ("echo", "printf") and not node.redirs:
        taint = Taint()
        parts: list[str] = []
        for raw in node.items[1:]:
            if not isinstance(raw, str):
                return None, Taint()
            for f in interp.expand(raw, w):
                parts.append(f.text)
                taint.add(f.taint)
        if head == "echo":
            parts = [p for p in parts if p not in ("-n", "-e", "-E")] if parts else parts
            return " ".join(parts), taint
        if parts and not parts[0].startswith("-") and not taint.unknown:
            printed = printf(parts[0], parts[1:])
            if printed is not None:
                return printed.rstrip("\n"), taint
        return None, Taint()
    return None, Taint()


def _probe_choice(interp: Interpreter, node: AndOr, w: World, written: str) -> str | None:
    """The output of ``$(PROBE && echo A || echo B)`` with PROBE an accelerator probe
    (:mod:`.probes`) read as failing, the assumption recorded on ``w``; None for any other
    ``&&``/``||`` list (never run). Its parts may only be the probe (output silenced or not)
    and ``echo``/``printf`` of known words."""
    parts: list[tuple[str, Node]] = [("", node.first), *node.rest]
    probe: str | None = None
    steps: list[tuple[str, str | None]] = []  # (op, None for the probe | the echoed text)
    for op, part in parts:
        if not isinstance(part, Simple) or not all(isinstance(x, str) for x in part.items):
            return None
        words: list[str] = []
        for raw in part.items:
            for f in interp.expand(raw, w):
                if f.taint.undecidable:
                    return None
                words.append(f.text)
        package = probed_package(words)
        if package is not None and probe is None:
            if not all(
                r.heredoc is None and (r.target == "/dev/null" or r.op == ">&") for r in part.redirs
            ):
                return None
            probe = package
            steps.append((op, None))
            continue
        if part.redirs or not words or words[0] != "echo":
            return None
        steps.append((op, " ".join(x for x in words[1:] if x not in ("-n", "-e", "-E"))))
    if probe is None:
        return None
    absent, present = (_run_steps(steps, ok) for ok in (False, True))
    w.assumed = (*w.assumed, assumption(probe, f"$({written})", absent, present))
    return absent


def _run_steps(steps: list[tuple[str, str | None]], probe_ok: bool) -> str:
    """What a ``&&``/``||`` list of echoes and one probe prints, the probe succeeding or not."""
    out: list[str] = []
    status = 0
    for op, echoed in steps:
        if (op == "&&" and status != 0) or (op == "||" and status == 0):
            continue
        if echoed is None:
            status = 0 if probe_ok else 1
        else:
            out.append(echoed)
            status = 0
    return "\n".join(out)
