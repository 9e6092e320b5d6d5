"""The shell's state as the reader models it (a "world"): variables, arrays, exported names,
functions, positional parameters, working directory, and the branch labels that led there;
:class:`Taint` records what in a value is unknown (command substitutions, never-set variables,
script arguments). Worlds that end in the same state are collapsed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kl_patches.audit.shell.model import LIMITS, Command, ShellLimitError
from kl_patches.audit.shell.nodes import Node
from kl_patches.audit.shell.vocabulary import NAME


@dataclass
class Taint:
    """What in a value the reader does not know."""

    unknown: list[str] = field(default_factory=list)
    """Command substitutions and other values never computed, as written."""
    unset: list[str] = field(default_factory=list)
    """Variables the script never set (empty here, as in a clean environment)."""
    args: bool = False
    """The value uses the script's arguments (``$1``, ``$#``, ``$@``), unknown to the audit."""
    positional: list[str] = field(default_factory=list)
    """The script arguments read as plain ``$N``/``${N}`` (empty here): a test on one is read
    both ways, as the value is the caller's choice (``NODE_RANK=$1``)."""

    def add(self, other: Taint) -> None:
        for u in other.unknown:
            if u not in self.unknown:
                self.unknown.append(u)
        for u in other.unset:
            if u not in self.unset:
                self.unset.append(u)
        self.args = self.args or other.args
        for u in other.positional:
            if u not in self.positional:
                self.positional.append(u)

    @property
    def undecidable(self) -> bool:
        return bool(self.unknown or self.unset or self.args)


@dataclass
class Field:
    text: str
    taint: Taint


class World:
    """One possible state of the shell (a branch combination)."""

    def __init__(self) -> None:
        self.vars: dict[str, str] = {}
        self.arrays: dict[str, dict[int, str]] = {}
        self.assoc: dict[str, dict[str, str]] = {}
        self.taint: dict[str, Taint] = {}
        self.element_taint: dict[str, tuple[tuple[str, ...], tuple[Taint, ...]]] = {}
        """Per-element taints of an array assigned from a literal (``A=( ... )``), with the
        values they were taken for: ``"${A[@]}"`` gives each field its own element's taint
        while the array still holds those values (else the array's joint taint applies)."""
        self.exported: set[str] = set()
        self.funcs: dict[str, Node] = {}
        self.pos: list[str] = []
        self.pos_known = False
        self.cwd: str | None = None
        self.dirstack: list[str | None] = []
        self.labels: tuple[tuple[int, str], ...] = ()
        self.loop: tuple[str, ...] = ()
        self.done = False
        self.aborted = False
        self.returning = False
        self.breaking = 0
        self.continuing = 0
        self.pending_cut: Command | None = None
        self.locals: list[dict[str, tuple[str | None, Taint | None]]] = []
        self.file: str | None = None
        self.script: str = ""
        self.calls: tuple[str, ...] = ()
        self.via: tuple[str, ...] = ()
        self.line_offset = 0
        self.refs: dict[str, str] = {}
        """Namerefs (``declare -n NAME=TARGET``): NAME -> TARGET."""
        self.ref_frames: list[dict[str, str | None]] = []
        """Per function call: the namerefs ``local -n`` shadowed (None: none before)."""
        self.assumed: tuple[str, ...] = ()
        """Machine facts this world was read under: accelerator probes read as failing
        (:mod:`.probes`)."""

    def copy(self) -> World:
        w = World()
        w.vars = dict(self.vars)
        w.arrays = {k: dict(v) for k, v in self.arrays.items()}
        w.assoc = {k: dict(v) for k, v in self.assoc.items()}
        w.taint = dict(self.taint)
        w.element_taint = dict(self.element_taint)
        w.exported = set(self.exported)
        w.funcs = dict(self.funcs)
        w.pos = list(self.pos)
        w.pos_known = self.pos_known
        w.cwd = self.cwd
        w.dirstack = list(self.dirstack)
        w.labels = self.labels
        w.loop = self.loop
        w.done = self.done
        w.aborted = self.aborted
        w.returning = self.returning
        w.breaking = self.breaking
        w.continuing = self.continuing
        w.pending_cut = self.pending_cut
        w.locals = [dict(x) for x in self.locals]
        w.file = self.file
        w.script = self.script
        w.calls = self.calls
        w.via = self.via
        w.line_offset = self.line_offset
        w.refs = dict(self.refs)
        w.ref_frames = [dict(x) for x in self.ref_frames]
        w.assumed = self.assumed
        return w

    @property
    def stopped(self) -> bool:
        return (
            self.done
            or self.aborted
            or self.returning
            or bool(self.breaking)
            or bool(self.continuing)
        )

    def deref(self, name: str) -> str:
        """The variable ``name`` stands for: its nameref target (followed, at most 8 hops, as
        far as the target is a plain name), else ``name`` itself."""
        for _ in range(8):
            target = self.refs.get(name)
            if target is None or not NAME.fullmatch(target):
                return name
            name = target
        return name

    def is_set(self, name: str) -> bool:
        name = self.deref(name) if self.refs else name
        return name in self.vars or name in self.arrays or name in self.assoc

    def get(self, name: str) -> str | None:
        name = self.deref(name) if self.refs else name
        if name in self.vars:
            return self.vars[name]
        if name in self.arrays:
            return self.arrays[name].get(0)
        if name in self.assoc:
            return self.assoc[name].get("0")
        return None

    def set(self, name: str, value: str, taint: Taint | None = None) -> None:
        name = self.deref(name) if self.refs else name
        if len(value) > LIMITS["string"]:
            raise ShellLimitError(
                f"the value of ${name} grows beyond {LIMITS['string']} characters"
            )
        if name in self.arrays:
            self.arrays[name][0] = value
        elif name in self.assoc:
            self.assoc[name]["0"] = value
        else:
            self.vars[name] = value
        if taint is not None and (taint.unknown or taint.unset or taint.args):
            self.taint[name] = taint
        else:
            self.taint.pop(name, None)

    def unset(self, name: str) -> None:
        name = self.deref(name) if self.refs else name
        self.vars.pop(name, None)
        self.arrays.pop(name, None)
        self.assoc.pop(name, None)
        self.taint.pop(name, None)


def _state_key(w: World) -> tuple[Any, ...]:
    return (
        tuple(sorted(w.vars.items())),
        tuple(sorted((k, tuple(sorted(v.items()))) for k, v in w.arrays.items())),
        tuple(sorted((k, tuple(sorted(v.items()))) for k, v in w.assoc.items())),
        tuple(sorted(w.exported)),
        tuple(sorted((k, id(v)) for k, v in w.funcs.items())),
        tuple(w.pos),
        w.pos_known,
        w.cwd,
        w.loop,
        w.done,
        w.aborted,
        w.returning,
        w.breaking,
        w.continuing,
        id(w.pending_cut),
        w.file,
        len(w.locals),
        tuple(sorted(w.refs.items())),
    )


def collapse(worlds: list[World]) -> list[World]:
    """Worlds in the same state are one: the branch labels they do not share are dropped."""
    groups: dict[tuple[Any, ...], list[World]] = {}
    for w in worlds:
        groups.setdefault(_state_key(w), []).append(w)
    out = []
    for members in groups.values():
        first = members[0]
        if len(members) > 1:
            first.labels = tuple(
                lab for lab in first.labels if all(lab in m.labels for m in members[1:])
            )
        out.append(first)
    return out
