"""The interpreter: it walks the syntax tree on worlds (:mod:`.state`), takes the branch a test
decides and reads every branch of an undecidable one (each in its own world, its commands
labelled), unrolls ``for`` loops, reads ``while``/``until`` bodies once, calls functions, and
emits each simple command after expansion (:class:`Command`). Builtins are in
:mod:`.builtins`, followed text in :mod:`.follow`. Bounded by ``LIMITS["commands"]``,
``LIMITS["worlds"]`` and ``LIMITS["call_depth"]``."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from kl_patches.audit.shell.arith import Arith, ArithAbort, ArithError
from kl_patches.audit.shell.brace import brace_expand
from kl_patches.audit.shell.builtins import assign, declare, printf_v, run_builtin
from kl_patches.audit.shell.conditions import CondEval, Undecidable
from kl_patches.audit.shell.expansions import Expander
from kl_patches.audit.shell.follow import follow
from kl_patches.audit.shell.lexer import ArrayLit
from kl_patches.audit.shell.model import LIMITS, Command, ShellLimitError, short
from kl_patches.audit.shell.nodes import (
    AndOr,
    ArithCmd,
    ArithFor,
    Case,
    CondCmd,
    For,
    FuncDef,
    Group,
    If,
    List,
    Loop,
    Node,
    Pipeline,
    Simple,
)
from kl_patches.audit.shell.patterns import glob_match
from kl_patches.audit.shell.probes import assumption, probed_package
from kl_patches.audit.shell.state import Field, Taint, World, collapse
from kl_patches.audit.shell.vocabulary import (
    ASSIGN,
    BUILTINS,
    DECLARE,
    NAME,
    ORPHAN,
    scheduler_variable,
)


class Interpreter:
    """Interprets parsed commands on worlds, emitting :class:`Command` records."""

    def __init__(
        self,
        variables: dict[str, str],
        script_dir: str | None,
        script_path: str | None,
        reader: Callable[[str], str | None] | None,
    ) -> None:
        self.script_dir = script_dir
        self.script_path = script_path or ""
        self.reader = reader
        self.emitted: list[tuple[Command, tuple[tuple[int, str], ...]]] = []
        self.notes: list[str] = []
        self.files: dict[str, str] = {}
        self.steps = 0
        self.construct = 0
        self.outcomes: dict[int, int] = {}
        self.call_depth = 0
        self.initial = dict(variables)
        self.at = 0
        """Line of the node being interpreted (for notes raised inside expansions)."""

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    @staticmethod
    def where(w: World, line: int) -> str:
        """``line N`` in the script, ``FILE:N`` in a followed file."""
        return f"{w.file}:{line}" if w.file else f"line {line}"

    def _step(self, line: int) -> None:
        self.steps += 1
        if self.steps > LIMITS["commands"]:
            raise ShellLimitError(
                f"line {line}: the script unrolls into more than {LIMITS['commands']} commands "
                "(loops nested too deeply, or a function calling itself); the audit stops"
            )

    # ---------------------------------------------------------------- lists
    def run_list(self, nodes: list[Node], worlds: list[World]) -> list[World]:
        for node in nodes:
            out: list[World] = []
            for w in worlds:
                if w.stopped:
                    out.append(w)
                else:
                    out.extend(self.run(node, w)[0])
            worlds = self.cap(out, node.line)
        return worlds

    def cap(self, worlds: list[World], line: int) -> list[World]:
        if len(worlds) > 1:
            worlds = collapse(worlds)
        if len(worlds) > LIMITS["worlds"]:
            self.note(
                f"line {line}: more than {LIMITS['worlds']} combinations of undecidable branches; "
                f"only the first {LIMITS['worlds']} are followed"
            )
            return worlds[: LIMITS["worlds"]]
        return worlds

    def run(self, node: Node, w: World) -> tuple[list[World], list[Any]]:
        """Interpret ``node`` in ``w``: the resulting worlds and their exit statuses.

        A status is 0 (true), 1 (false), ``"test"`` (an undecidable test) or ``"ext"`` (an
        external command: unknown, assumed to succeed outside conditions). An arithmetic
        expansion bash refuses abandons the rest of the top-level command, as bash does."""
        line = node.line + w.line_offset
        self.at = line
        try:
            return self._run_node(node, w)
        except ArithAbort as err:
            self.note(
                f"{self.where(w, line)}: arithmetic expansion {err} fails in bash, which "
                "abandons this command and the rest of the top-level command it is in"
            )
            w.aborted = True
            return [w], [1]

    def _run_node(self, node: Node, w: World) -> tuple[list[World], list[Any]]:
        if self.call_depth > LIMITS["call_depth"]:
            raise ShellLimitError(
                f"line {node.line}: calls nested too deeply (more than "
                f"{LIMITS['call_depth']} functions, sourced files or bash -c levels)"
            )
        if isinstance(node, Simple):
            return self._simple(node, w)
        if isinstance(node, AndOr):
            return self._and_or(node, w)
        if isinstance(node, Pipeline):
            results: list[Any] = []
            worlds = [w]
            for cmd in node.commands:
                nxt: list[World] = []
                results = []
                for x in worlds:
                    ws, sts = self.run(cmd, x)
                    nxt.extend(ws)
                    results.extend(sts)
                worlds = nxt
            if node.negated:
                results = [1 - s if isinstance(s, int) else s for s in results]
            return worlds, results
        if isinstance(node, List):
            worlds = self.run_list(node.items, [w])
            return worlds, ["ext"] * len(worlds)
        if isinstance(node, If):
            return self._if(node, w)
        if isinstance(node, Case):
            return self._case(node, w)
        if isinstance(node, For):
            return self._for(node, w)
        if isinstance(node, ArithFor):
            return self._arith_for(node, w)
        if isinstance(node, Loop):
            return self._loop(node, w)
        if isinstance(node, Group):
            if node.subshell:
                inner = self.run_list(node.body.items, [w.copy()])
                for x in inner:
                    x.done = False
                return [w], ["ext"]
            worlds = self.run_list(node.body.items, [w])
            return worlds, ["ext"] * len(worlds)
        if isinstance(node, FuncDef):
            w.funcs[node.name] = node.body
            return [w], [0]
        if isinstance(node, ArithCmd):
            return [w], [self.arith_status(node.expr, w, node.line)]
        if isinstance(node, CondCmd):
            return [w], [self._cond(node.raw, w, node.line)]
        raise TypeError(f"unknown node {type(node).__name__}")

    # ---------------------------------------------------------------- branches
    def _label(self, worlds: list[World], cid: int, text: str) -> None:
        for x in worlds:
            x.labels = (*x.labels, (cid, text))

    def _finish_construct(self, cid: int, groups: list[list[World]]) -> None:
        alive = sum(1 for g in groups if any(not x.done for x in g))
        self.outcomes[cid] = alive

    def _decide(
        self,
        line: int,
        labels: tuple[str, str],
        status: Any,
        yes: Callable[[World], list[tuple[World, Any]]],
        no: Callable[[World], list[tuple[World, Any]]],
        w: World,
    ) -> list[tuple[World, Any]]:
        """Take the branch a test decides, or read both branches when it is undecidable.

        A test decided only in a clean environment (``("env", 0|1)``: it looks at a variable
        the script never sets, or at a script argument) is taken as bash would take it, except
        when that branch only prints a message and exits: a guard that asks for the variable,
        read as if the check passed (noted). A test on the value of a script argument
        (``("args", 0|1, ["$1"])``, e.g. ``NODE_RANK=$1`` then ``[ "$NODE_RANK" = 0 ]``) is the
        same guard check, else read both ways, as for a scheduler's variable (noted, naming
        the argument): the caller chooses the value, the audit does not know it."""
        if status == 0:
            return yes(w)
        if status == 1:
            return no(w)
        if isinstance(status, tuple) and status[0] == "args":
            primary, secondary = (yes, no) if status[1] == 0 else (no, yes)
            guard = False
            if status[1] in (0, 1):  # decided in a run without arguments: a usage guard?
                mark = len(self.emitted)
                trial = primary(w.copy())
                guard = bool(trial) and all(x.done for x, _ in trial) and self._only_messages(mark)
                del self.emitted[mark:]
            if guard:
                self.note(
                    f"line {line}: in a clean environment the script exits here (it checks a "
                    "variable or argument it never sets); read as if the check passed"
                )
                return secondary(w)
            self.note(
                f"line {line}: the test depends on the script's argument "
                f"{', '.join(status[2])}, which the audit does not know (empty in a run "
                "without arguments); both branches are read"
            )
            status = "test"
        if isinstance(status, tuple):
            primary, secondary = (yes, no) if status[1] == 0 else (no, yes)
            mark = len(self.emitted)
            trial = primary(w.copy())
            if trial and all(x.done for x, _ in trial) and self._only_messages(mark):
                del self.emitted[mark:]
                self.note(
                    f"line {line}: in a clean environment the script exits here (it checks a "
                    "variable or argument it never sets); read as if the check passed"
                )
                return secondary(w)
            self.note(
                f"line {line}: a test on a variable or script argument the script never sets is "
                "read as in a clean environment (unset, no arguments); --var NAME=VALUE sets it"
            )
            return trial
        cid = self._new_construct()
        other = w.copy()
        self._label([w], cid, labels[0])
        self._label([other], cid, labels[1])
        a = yes(w)
        b = no(other)
        self._finish_construct(cid, [[x for x, _ in a], [x for x, _ in b]])
        return a + b

    def _only_messages(self, mark: int) -> bool:
        quiet = BUILTINS | {"echo", "printf", "cat", "logger"}
        return all(os.path.basename(c.words[0]) in quiet for c, _ in self.emitted[mark:])

    def _and_or(self, node: AndOr, w: World) -> tuple[list[World], list[Any]]:
        worlds, statuses = self.run(node.first, w)
        pairs = list(zip(worlds, statuses, strict=True))
        for op, part in node.rest:
            nxt: list[tuple[World, Any]] = []
            for x, st in pairs:
                if x.stopped:
                    nxt.append((x, st))
                    continue
                if st == "ext":
                    st = 0  # an external command: assumed to succeed

                def run_part(y: World, part: Node = part) -> list[tuple[World, Any]]:
                    ws, sts = self.run(part, y)
                    return list(zip(ws, sts, strict=True))

                def skip(y: World, value: int) -> list[tuple[World, Any]]:
                    return [(y, value)]

                def skip_false(y: World) -> list[tuple[World, Any]]:
                    return skip(y, 1)

                def skip_true(y: World) -> list[tuple[World, Any]]:
                    return skip(y, 0)

                yes: Callable[[World], list[tuple[World, Any]]]
                no: Callable[[World], list[tuple[World, Any]]]
                if op == "&&":
                    yes, no = run_part, skip_false
                else:
                    yes, no = skip_true, run_part
                labels = (f"test@{node.line}=true", f"test@{node.line}=false")
                nxt.extend(self._decide(node.line, labels, st, yes, no, x))
            pairs = nxt
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def _new_construct(self) -> int:
        self.construct += 1
        return self.construct

    def _if(self, node: If, w: World) -> tuple[list[World], list[Any]]:
        worlds = [x for x, _ in self._if_from(node, 0, w)]
        return worlds, ["ext"] * len(worlds)

    def _if_from(self, node: If, k: int, w: World) -> list[tuple[World, Any]]:
        if k == len(node.clauses):
            rest = self.run_list(node.otherwise.items, [w]) if node.otherwise else [w]
            return [(x, "ext") for x in rest]
        cond, body = node.clauses[k]
        out: list[tuple[World, Any]] = []
        ws = self.run_list(cond.items[:-1], [w]) if len(cond.items) > 1 else [w]
        name = "then" if k == 0 else f"elif{k}"
        last = k == len(node.clauses) - 1
        labels = (
            f"if@{node.line}={name}",
            f"if@{node.line}=" + ("else" if last else f"not-{name}"),
        )

        def yes(x: World) -> list[tuple[World, Any]]:
            return [(y, "ext") for y in self.run_list(body.items, [x])]

        def no(x: World) -> list[tuple[World, Any]]:
            return self._if_from(node, k + 1, x)

        for y in ws:
            if y.stopped:
                out.append((y, "ext"))
                continue
            zs, sts = self.run(cond.items[-1], y) if cond.items else ([y], [0])
            for z, st in zip(zs, sts, strict=True):
                if z.stopped:
                    out.append((z, "ext"))
                    continue
                out.extend(self._decide(node.line, labels, st, yes, no, z))
        return out

    def _case(self, node: Case, w: World) -> tuple[list[World], list[Any]]:
        fields = self.expand(node.word, w, split=False)
        word = fields[0] if fields else Field("", Taint())
        taint = word.taint
        chosen: int | None = None
        decidable = not taint.unknown and not any(scheduler_variable(n) for n in taint.unset)
        if taint.positional:
            decidable = False
            self.note(
                f"line {node.line}: the case word depends on the script's argument "
                f"{', '.join(taint.positional)}, which the audit does not know (empty in a run "
                "without arguments); every branch is read"
            )
        if decidable:
            for idx, (patterns, _) in enumerate(node.items):
                for pat in patterns:
                    p, pt = self.expand_string(pat, w)
                    if pt.unknown:
                        decidable = False
                        break
                    if glob_match(word.text, p):
                        chosen = idx
                        break
                if chosen is not None or not decidable:
                    break
        if decidable and not (taint.unset or taint.args):
            if chosen is None:
                return [w], [0]
            ws = self.run_list(node.items[chosen][1].items, [w])
            return ws, ["ext"] * len(ws)
        skip: set[int] = set()
        if decidable:  # decided in a clean environment only
            mark = len(self.emitted)
            if chosen is None:
                return [w], [0]
            trial = self.run_list(node.items[chosen][1].items, [w.copy()])
            if not (all(x.done for x in trial) and self._only_messages(mark)):
                return trial, ["ext"] * len(trial)
            del self.emitted[mark:]
            self.note(
                f"line {node.line}: in a clean environment the script exits here (its case word "
                "is a variable or argument it never sets); every other branch is read"
            )
            skip.add(chosen)
        cid = self._new_construct()
        out: list[World] = []
        groups: list[list[World]] = []
        for idx, (patterns, body) in enumerate(node.items):
            if idx in skip:
                continue
            x = w.copy()
            self._label([x], cid, f"case@{node.line}={'|'.join(patterns)}")
            taken = self.run_list(body.items, [x])
            out.extend(taken)
            groups.append(taken)
        if not skip and not any(p == "*" for patterns, _ in node.items for p in patterns):
            x = w.copy()
            self._label([x], cid, f"case@{node.line}=no-match")
            out.append(x)
            groups.append([x])
        self._finish_construct(cid, groups)
        return self.cap(out, node.line), ["ext"] * len(out)

    def _for(self, node: For, w: World) -> tuple[list[World], list[Any]]:
        if node.words is None:
            values = list(w.pos)
        else:
            values = [f.text for raw in node.words for f in self.expand(raw, w)]
        if node.select:
            values = values[:1]
        worlds = [w]
        outer = w.loop
        for value in values:
            nxt: list[World] = []
            for x in worlds:
                if x.done or x.returning:
                    nxt.append(x)
                    continue
                x.set(node.name, value)
                x.loop = (*outer, f"{node.name}={value}")
                nxt.extend(self.run_list(node.body.items, [x]))
            worlds = []
            stop = False
            for x in nxt:
                x.continuing = max(0, x.continuing - 1)
                if x.breaking:
                    x.breaking -= 1
                    stop = True
                worlds.append(x)
            if stop and all(not x.stopped for x in worlds):
                break
        for x in worlds:
            x.loop = outer
        return worlds, [0] * len(worlds)

    def _arith_for(self, node: ArithFor, w: World) -> tuple[list[World], list[Any]]:
        try:
            self.arith_value(node.init, w, node.line)
            count = 0
            worlds = [w]
            outer = w.loop
            while True:
                cond = self.arith_value(node.cond, w, node.line) if node.cond.strip() else 1
                if cond is None:
                    raise ArithError("undecidable")
                if not cond:
                    break
                count += 1
                if count > LIMITS["loop_iterations"]:
                    raise ShellLimitError(
                        f"line {node.line}: a for ((...)) loop of more than "
                        f"{LIMITS['loop_iterations']} iterations"
                    )
                label = ", ".join(
                    f"{n}={w.get(n)}"
                    for n in dict.fromkeys(NAME.findall(node.init))
                    if w.get(n) is not None
                )
                w.loop = (*outer, label) if label else outer
                worlds = self.run_list(node.body.items, [w])
                if len(worlds) != 1 or worlds[0].stopped:
                    break
                w = worlds[0]
                self.arith_value(node.step, w, node.line)
            for x in worlds:
                x.loop = outer
                x.breaking = x.continuing = 0
            return worlds, [0] * len(worlds)
        except ArithError:
            self.note(f"line {node.line}: for ((...)) loop not decidable; its body is read once")
            worlds = self.run_list(node.body.items, [w])
            for x in worlds:
                x.breaking = x.continuing = 0
            return worlds, [0] * len(worlds)

    def _loop(self, node: Loop, w: World) -> tuple[list[World], list[Any]]:
        worlds = self.run_list(node.cond.items[:-1], [w]) if node.cond.items else [w]
        out: list[World] = []
        for x in worlds:
            if x.stopped:
                out.append(x)
                continue
            zs, sts = self.run(node.cond.items[-1], x) if node.cond.items else ([x], [0])
            for z, st in zip(zs, sts, strict=True):
                if z.stopped:
                    out.append(z)
                    continue
                first = (1 - st) if node.until and isinstance(st, int) else st
                if first == 1:
                    out.append(z)
                    continue
                kind = "until" if node.until else "while"
                if (
                    isinstance(first, tuple)
                    and first[0] in ("env", "args")
                    and isinstance(first[1], int)
                ):
                    clean = (1 - first[1]) if node.until else first[1]
                    if clean == 1:  # e.g. while [[ $# -gt 0 ]]: no arguments in a clean run
                        self.note(
                            f"line {node.line}: the {kind} loop's test is false in a clean "
                            "environment (it looks at script arguments or variables the script "
                            "never sets), so its body does not run, as in bash; --var sets them"
                        )
                        out.append(z)
                        continue
                self.note(f"line {node.line}: {kind} loop body read once")
                for y in self.run_list(node.body.items, [z]):
                    y.breaking = y.continuing = 0
                    out.append(y)
        return out, [0] * len(out)

    # ---------------------------------------------------------------- conditions
    def arith_value(self, expr: str, w: World, line: int, expansion: bool = False) -> int | None:
        """The value of arithmetic ``expr`` (None when unknown); an error bash reports is a
        note, or with ``expansion`` (``$((...))``) an :class:`ArithAbort`."""
        line = line or self.at
        text, taint = self.expand_string(expr, w, in_arith=True)
        if taint.unknown:
            return None
        names = [n for n in NAME.findall(text) if not w.is_set(n)]

        def get(name: str) -> str | None:
            base = name.split("[", 1)[0]
            if "[" in name:
                sub = name[len(base) + 1 : -1]
                if base in w.assoc:
                    return w.assoc[base].get(sub)
                idx = self.arith_value(sub, w, line) or 0
                return w.arrays.get(base, {}).get(idx)
            value = w.get(base)
            if base in w.taint and w.taint[base].unknown:
                raise ArithError("unknown")
            return value

        def put(name: str, value: int) -> None:
            w.set(name.split("[", 1)[0], str(value))

        try:
            value = Arith(text, get, put).run()
        except ArithError as err:
            if str(err) != "unknown":
                if expansion:
                    raise ArithAbort(f"$(({short(expr.strip())})): {err}") from err
                self.note(
                    f"{self.where(w, line)}: arithmetic {short(expr.strip())} fails in bash ({err})"
                )
            return None
        if names and any(n not in self.initial for n in names):
            return value
        return value

    def arith_status(self, expr: str, w: World, line: int) -> Any:
        value = self.arith_value(expr, w, line)
        if value is None:
            return "test"
        unset = [n for n in NAME.findall(expr) if not w.is_set(n)]
        status = 0 if value else 1
        if any(scheduler_variable(n) for n in unset):
            return "test"
        return ("env", status) if unset else status

    def _cond(self, raw: list[str], w: World, line: int) -> Any:
        """``[[ ... ]]``: 0/1 when decidable, ``("env", 0|1)`` in a clean environment only,
        else ``"test"``."""
        ev = CondEval(raw, self, w, double=True)
        try:
            result = ev.run()
        except Undecidable:
            return "test"
        status = 0 if result else 1
        if ev.scheduler:
            return "test"
        if ev.positional:
            return ("args", status, ev.positional)
        return ("env", status) if ev.env else status

    def test(self, fields: list[Field], w: World) -> Any:
        if any(f.taint.unknown for f in fields):
            return "test"
        ev = CondEval([f.text for f in fields], self, w, double=False)
        try:
            result = ev.run()
        except Undecidable:
            return "test"
        status = 0 if result else 1
        if any(scheduler_variable(n) for f in fields for n in f.taint.unset):
            return "test"
        positional = list(dict.fromkeys(p for f in fields for p in f.taint.positional))
        if positional:
            return ("args", status, positional)
        env = any(f.taint.unset or f.taint.args for f in fields)
        return ("env", status) if env else status

    # ---------------------------------------------------------------- simple commands
    def _simple(self, node: Simple, w: World) -> tuple[list[World], list[Any]]:
        self._step(node.line)
        items = node.items
        if w.pending_cut is not None:
            first = items[0] if items else None
            if isinstance(first, str) and ORPHAN.match(first.lstrip("\"'")):
                cut = w.pending_cut
                for raw in items:
                    if isinstance(raw, str):
                        cut.dropped.extend(f.text for f in self.expand(raw, w))
                return [w], [0]
        w.pending_cut = None
        # split leading assignments from the words
        assigns: list[Any] = []
        k = 0
        while k < len(items):
            item = items[k]
            if isinstance(item, ArrayLit) or (isinstance(item, str) and ASSIGN.match(item)):
                assigns.append(item)
                k += 1
            else:
                break
        words: list[Field] = []
        vanished: list[str] = []
        dropped = Taint()
        rest = items[k:]
        for item in rest:
            if isinstance(item, ArrayLit):
                words.append(Field(item.name + ("+=" if item.append else "="), Taint()))
                words[-1].array = item  # type: ignore[attr-defined]
                continue
            words.extend(self.expand(item, w, vanished=vanished, dropped=dropped))
        if not words:
            status: Any = 0
            for a in assigns:
                st = assign(self, a, w, node.line)
                if st is not None:
                    status = st
            return [w], [status]
        name = words[0].text
        if name in DECLARE and not getattr(words[0], "array", None):
            return declare(self, name, rest[1:], w, node.line)
        prefix: dict[str, str] = {}
        for a in assigns:
            if isinstance(a, str):
                m = ASSIGN.match(a)
                assert m is not None
                prefix[m.group(1)] = self.expand_string(m.group(4), w)[0]
        if name == "printf" and len(words) > 1 and words[1].text.startswith("-v"):
            return printf_v(self, words, node, w)
        if name in w.funcs and not getattr(words[0], "array", None):
            return self._call(
                w.funcs[name], [f.text for f in words[1:]], w, node.line + w.line_offset, name
            )
        if name in BUILTINS:
            self._emit(words, prefix, node, w)
            builtin = run_builtin(self, name, words, prefix, node, w)
            if builtin is not None and name in ("[", "test") and dropped.positional:
                # [ $NODE_RANK -eq 0 ] with NODE_RANK=$1: the argument's word vanished
                worlds, statuses = builtin
                return worlds, [("args", s, dropped.positional) for s in statuses]
            if builtin is not None:
                return builtin
        cmd = self._emit(words, prefix, node, w, vanished)
        package = probed_package([f.text for f in words])
        if package is not None and not any(f.taint.undecidable for f in words):
            # an accelerator probe: read as failing (the vendor package absent), see .probes
            written = " ".join(x for x in node.items if isinstance(x, str))
            w.assumed = (*w.assumed, assumption(package, written))
            return [w], [1]
        worlds = follow(self, cmd, words, prefix, node, w)
        return worlds, ["ext"] * len(worlds)

    def _emit(
        self,
        words: list[Field],
        prefix: dict[str, str],
        node: Simple,
        w: World,
        vanished: list[str] | None = None,
    ) -> Command:
        cmd = Command(
            words=[f.text for f in words], line=node.line + w.line_offset, assignments=prefix
        )
        cmd.calls = w.calls
        cmd.via = w.via
        cmd.assumed = w.assumed
        for v in vanished or ():
            cmd.vanished.append(v)
            if v not in cmd.unresolved:
                cmd.unresolved.append(v)
        cmd.loop = w.loop
        cmd.file = w.file
        cmd.cwd = w.cwd
        for i, f in enumerate(words):
            if f.taint.unknown:
                cmd.unknown[i] = list(f.taint.unknown)
                for u in f.taint.unknown:
                    if u.startswith(("$(", "`", "<(")):
                        text = f"command substitution {u} is not run; its value is unknown"
                    else:
                        text = f"{u}: its value is unknown to the audit"
                    self._note_cmd(cmd, text)
            if f.taint.unset:
                cmd.unset_in[i] = list(f.taint.unset)
                for u in f.taint.unset:
                    if u not in cmd.unresolved:
                        cmd.unresolved.append(u)
            if f.taint.args:
                cmd.args_forwarded = True
        for raw in node.items:
            if (
                not w.pos_known
                and isinstance(raw, str)
                and re.search(r"\$(?:@|\*|\{[@*]\}|\d|\{\d+\})", raw)
            ):
                cmd.args_forwarded = True
                self._note_cmd(
                    cmd, "script arguments ($1, $@, ...) are unknown to the audit; read as empty"
                )
        for r in node.redirs:
            if r.heredoc is not None:
                body = r.heredoc.body or ""
                if not r.heredoc.quoted:
                    body = self.expand_heredoc(body, w)
                if cmd.heredoc is None:
                    cmd.heredoc = body
        if node.cut:
            cmd.warnings.append(
                f"line {node.cut}: a comment inside the continued command ends it "
                "(bash ignores the '\\' inside a comment); the lines after it are separate "
                "commands, not arguments"
            )
            w.pending_cut = cmd
        self.emitted.append((cmd, w.labels))
        return cmd

    @staticmethod
    def _note_cmd(cmd: Command, text: str) -> None:
        if text not in cmd.notes:
            cmd.notes.append(text)

    def _call(
        self, body: Node, args: list[str], w: World, line: int, name: str = ""
    ) -> tuple[list[World], list[Any]]:
        saved = (w.pos, w.pos_known)
        saved_calls = w.calls
        w.pos, w.pos_known = list(args), True
        w.calls = (*w.calls, f"{name}@{line}")
        w.locals.append({})
        w.ref_frames.append({})
        self.call_depth += 1
        try:
            worlds, statuses = self.run(body, w)
        finally:
            self.call_depth -= 1
        for x in worlds:
            refs = x.ref_frames.pop() if x.ref_frames else {}
            for n, old_ref in refs.items():
                if old_ref is None:
                    x.refs.pop(n, None)
                else:
                    x.refs[n] = old_ref
            frame = x.locals.pop() if x.locals else {}
            for n, (old, taint) in frame.items():
                if old is None:
                    x.unset(n)
                else:
                    x.set(n, old, taint)
            x.pos, x.pos_known = saved
            x.calls = saved_calls
            x.returning = False
        return worlds, statuses

    # ---------------------------------------------------------------- expansion
    def expand(
        self,
        raw: str,
        w: World,
        split: bool = True,
        vanished: list[str] | None = None,
        dropped: Taint | None = None,
    ) -> list[Field]:
        """The fields of one raw word: brace expansion, parameter/arithmetic expansion, word
        splitting of unquoted results (when ``split``) and quote removal. Never-set variables
        whose word expanded to nothing are appended to ``vanished``, script arguments
        (``$1``) whose word did to ``dropped``."""
        out: list[Field] = []
        for word in brace_expand(raw):
            exp = Expander(self, w, word, split)
            out.extend(exp.fields())
            if vanished is not None:
                vanished.extend(v for v in exp.vanished if v not in vanished)
            if dropped is not None:
                dropped.add(exp.dropped)
        return out

    def expand_string(
        self, raw: str, w: World, in_arith: bool = False, assignment: bool = False
    ) -> tuple[str, Taint]:
        """One word expanded without splitting (assignments, patterns, ``$((...))``)."""
        exp = Expander(self, w, raw, False, in_arith=in_arith, assignment=assignment)
        fields = exp.fields()
        taint = Taint()
        for f in fields:
            taint.add(f.taint)
        return " ".join(f.text for f in fields), taint

    def expand_heredoc(self, body: str, w: World) -> str:
        exp = Expander(self, w, body, False, heredoc=True)
        return "".join(f.text for f in exp.fields())
