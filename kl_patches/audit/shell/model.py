"""What the shell reader returns and how it fails: :class:`Command`, :class:`ShellScript`,
:class:`ShellParseError`, :class:`ShellLimitError` and the reader's bounds (:data:`LIMITS`).
Records only; no deviation."""

from __future__ import annotations

from dataclasses import dataclass, field

LIMITS: dict[str, int] = {
    "nesting": 100,
    "commands": 20_000,
    "worlds": 16,
    "call_depth": 48,
    "string": 1_000_000,
    "brace": 2_000,
    "loop_iterations": 1_000,
    "arith_depth": 200,
    "array": 100_000,
}
"""Bounds of the reader: parser nesting, simple commands interpreted, branch combinations
followed at once, function/source/``bash -c`` call depth, characters of any value, words of a
brace expansion, iterations of a ``for ((...))`` loop, arithmetic nesting, array elements."""


class ShellParseError(ValueError):
    """A script line the reader cannot split into words (unbalanced quote, bad here-doc)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class ShellLimitError(ValueError):
    """The script exceeds one of the reader's bounds (:data:`LIMITS`)."""


@dataclass
class Command:
    """One simple command of a script, after expansion and quote removal."""

    words: list[str]
    """The command's words (assignments and redirections removed)."""
    line: int
    """1-based line where the command starts (in :attr:`file` when it was followed)."""
    assignments: dict[str, str] = field(default_factory=dict)
    """``NAME=value`` words in front of the command (its environment only)."""
    unresolved: list[str] = field(default_factory=list)
    """Variables the command used that the script never set (expanded to empty)."""
    notes: list[str] = field(default_factory=list)
    """What the reader could not follow exactly (command substitution, ``$@``...)."""
    warnings: list[str] = field(default_factory=list)
    """Script mistakes that change what runs (a comment that cuts a continued command)."""
    dropped: list[str] = field(default_factory=list)
    """Arguments on the lines after such a comment: bash runs them as a separate command."""
    heredoc: str | None = None
    """Body of a here-document fed to this command, if any (expanded unless quoted)."""
    keyword: str = ""
    """Kept for compatibility; always empty (loops are interpreted, not flattened)."""
    loop: tuple[str, ...] = ()
    """``NAME=value`` of each enclosing unrolled loop in this iteration (outermost first)."""
    unknown: dict[int, list[str]] = field(default_factory=dict)
    """Word index -> the command substitutions (never run) whose unknown value is in it."""
    unset_in: dict[int, list[str]] = field(default_factory=dict)
    """Word index -> the never-set variables that expanded to empty inside it."""
    branch: tuple[str, ...] = ()
    """``if@L=then``-style labels of undecidable branches this command depends on."""
    file: str | None = None
    """The followed file (``source``, ``bash FILE``) the command is in; None: the script."""
    cwd: str | None = None
    """The working directory after ``cd`` when the script set it; None when unknown."""
    python: str | None = None
    """Python source fed to ``python -c`` or ``python - <<EOF`` (read by the AST reader)."""
    args_forwarded: bool = False
    """True when the command forwards the script's own arguments (``$@``, ``$*``, ``$1``)."""
    vanished: list[str] = field(default_factory=list)
    """Never-set variables whose whole word expanded to nothing (bash drops the word)."""
    calls: tuple[str, ...] = ()
    """``NAME@LINE`` of each enclosing function call (outermost first)."""
    via: tuple[str, ...] = ()
    """``FILE:LINE`` (or ``:LINE`` in the script itself) of each ``source``/``bash FILE`` that
    led to the followed file this command is in (outermost first)."""
    assumed: tuple[str, ...] = ()
    """Machine facts the reading of this command rests on: accelerator probes read as failing
    (:mod:`.probes`), each naming the other run."""


@dataclass
class ShellScript:
    """Every simple command a script runs, in order, and the state it ends with."""

    commands: list[Command]
    """The simple commands, deduplicated across branches."""
    variables: dict[str, str]
    """Scalar variables at the end of the script (first surviving branch)."""
    notes: list[str]
    """Script-level notes (bounds, a parse error after which bash stops too)."""
    files: dict[str, str] = field(default_factory=dict)
    """Files the script writes with a here-document (``cat > PATH <<EOF``): path -> text."""
    error: str = ""
    """The parse error that stopped the reading (bash stops there too); empty when none."""


def short(text: str, width: int = 60) -> str:
    """``text`` cut to ``width`` characters (with ``...``) for a note."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."
