"""The syntax tree the parser builds and the interpreter walks: simple commands, pipelines,
``&&``/``||`` lists, compound commands (``if``, loops, ``case``, groups, ``((...))``,
``[[...]]``) and function definitions. Data only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kl_patches.audit.shell.lexer import Redir


@dataclass
class Node:
    line: int


@dataclass
class Simple(Node):
    items: list[Any]  # raw word str | ArrayLit
    redirs: list[Redir]
    cut: int = 0


@dataclass
class Pipeline(Node):
    commands: list[Node]
    negated: bool = False


@dataclass
class AndOr(Node):
    first: Node
    rest: list[tuple[str, Node]]


@dataclass
class List(Node):
    items: list[Node]


@dataclass
class If(Node):
    clauses: list[tuple[List, List]]
    otherwise: List | None


@dataclass
class Loop(Node):
    cond: List
    body: List
    until: bool


@dataclass
class For(Node):
    name: str
    words: list[str] | None
    body: List
    select: bool = False


@dataclass
class ArithFor(Node):
    init: str
    cond: str
    step: str
    body: List


@dataclass
class Case(Node):
    word: str
    items: list[tuple[list[str], List]]


@dataclass
class Group(Node):
    body: List
    subshell: bool
    redirs: list[Redir] = field(default_factory=list)


@dataclass
class FuncDef(Node):
    name: str
    body: Node


@dataclass
class ArithCmd(Node):
    expr: str


@dataclass
class CondCmd(Node):
    raw: list[str]
