"""One error path for every ``kl-patches`` command and launcher.

Each command's ``main(argv) -> int`` goes through :func:`command`. Whatever stops a command ends
the same way: one line on stderr, ``<prog>: <message>``, naming the field, the value and the
valid choices; exit code 2; no traceback unless the command's own ``--debug`` flag is given or
``KL_PATCHES_DEBUG=1`` is set (the launchers whose command line belongs to the library, TRL's
and OpenRLHF's, take only the variable). With ``--json`` (the commands that print JSON on
stdout) a JSON document with the error in it is printed on stdout too, so a consumer always
reads one document.

What is the user's to fix, and said in the message alone: :class:`UsageError` (bad flags, from
:class:`ArgumentParser` too), ``ValueError`` (KLConfig's and the adapters' validation name the
field and the choices), ``OSError`` (a file that cannot be read or written: path and reason),
``ImportError`` of an optional dependency (with the extra that installs it). Anything else is
an internal error: the line says so and asks for ``--debug``'s traceback in a report.

Code of the library that a launcher hands over to (TRL's training script, OpenRLHF's entry
point) runs inside :func:`library_code`: its exceptions pass through with their own traceback,
as when the library runs alone.

Exit codes: 2 the command could not do its job (the line says why), 130 interrupted (Ctrl-C),
141 stdout closed by its reader (``kl-patches --help | head -1``: the shell's code for SIGPIPE).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, TypeVar

EXIT_ERROR = 2
"""Exit code of every error this module reports."""
EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT, as the shell reports it)."""
EXIT_BROKEN_PIPE = 141
"""Exit code when stdout's reader went away (128 + SIGPIPE, as the shell reports it)."""
DEBUG_ENV = "KL_PATCHES_DEBUG"
"""Environment variable that turns on tracebacks for every command (``1``, ``true``, ``yes``)."""
SCHEMA = "kl-patches.error/1"
"""Identifier of the JSON error document's layout (fields are only ever added)."""

EXTRAS = {
    "matplotlib": "plot",
    "yaml": "audit",
    "rich": "audit",
    "trl": "trl",
    "accelerate": "trl",
    "verl": "verl",
    "hydra": "verl",
    "omegaconf": "verl",
    "openrlhf": "openrlhf",
    "ray": "openrlhf",
}
"""Optional top-level package -> the kl-patches extra that installs it."""

_PASSTHROUGH = "_kl_patches_library_error"
_Parser = TypeVar("_Parser", bound=argparse.ArgumentParser)
_NAMED_KINDS = {
    "InputError": "input",
    "AuditError": "input",
    "UnsupportedVersionError": "unsupported_version",
}
"""kl-patches' own error classes that are the user's to fix -> their kind (matched by class
name, so this module imports nothing of the package: every layer can use it)."""


class UsageError(ValueError):
    """A bad command-line value or combination; the message names the field, value and choices."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        value: object = None,
        choices: Sequence[object] | str | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        """The flag or field at fault (``--steps``, ``KLConfig.estimator``), when known."""
        self.value = value
        """The value given, when known."""
        self.choices = choices
        """The valid values (a list, or a sentence such as ``an integer >= 1``), when known."""


def invalid(field: str, value: object, valid: Sequence[object] | str) -> UsageError:
    """``FIELD=VALUE is not valid; VALID`` as a :class:`UsageError`.

    ``valid`` is a list of choices (printed as ``choose one of [...]``) or a phrase starting
    with a verb (``use an integer >= 1``).
    """
    text = valid if isinstance(valid, str) else f"choose one of {list(valid)}"
    return UsageError(
        f"{field}={value!r} is not valid; {text}", field=field, value=value, choices=valid
    )


# ----------------------------------------------------------------------------- argparse
_UNRECOGNIZED = "unrecognized arguments: "


def suggestions(unknown: Sequence[str], options: Sequence[str]) -> str:
    """`` valid --kl.* options: ...`` / `` did you mean --x?`` for unrecognized option words."""
    import difflib

    notes = []
    for word in unknown:
        if not word.startswith("-"):
            continue
        flag = word.split("=", 1)[0]
        prefix = flag[: flag.index(".") + 1] if "." in flag else ""
        family = sorted(o for o in options if prefix and o.startswith(prefix))
        if family:
            notes.append(f"valid {prefix}* options: {', '.join(family)}")
            continue
        close = difflib.get_close_matches(flag, list(options), n=3, cutoff=0.6)
        if close:
            notes.append(f"did you mean {' or '.join(close)}?")
    return "".join(f"; {n}" for n in dict.fromkeys(notes))


def _parser_error(parser: argparse.ArgumentParser) -> Callable[[str], NoReturn]:
    def error(message: str) -> NoReturn:
        hint = ""
        if message.startswith(_UNRECOGNIZED):
            words = message[len(_UNRECOGNIZED) :].split()
            shown = [  # hidden options (old spellings) are not suggested
                o for o, a in parser._option_string_actions.items() if a.help != argparse.SUPPRESS
            ]
            hint = suggestions(words, shown)
        raise UsageError(f"{message}{hint} (see {parser.prog} --help)")

    return error


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are :class:`UsageError` (one line, no usage)."""

    def error(self, message: str) -> NoReturn:
        """Raise instead of printing the usage and exiting (the wrapper prints one line)."""
        _parser_error(self)(message)


def one_line(parser: _Parser) -> _Parser:
    """Make a library's own parser (e.g. TRL's ``TrlParser``) raise :class:`UsageError` too."""
    setattr(parser, "error", _parser_error(parser))  # noqa: B010  (an instance override)
    return parser


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``minimum``; the error names the value and the bound."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer; use an integer >= {minimum}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is too small; use an integer >= {minimum}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def positive_float(text: str) -> float:
    """An argparse ``type``: a finite float > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; use a number > 0") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not valid; use a finite number > 0")
    return value


def add_debug_option(parser: argparse.ArgumentParser) -> None:
    """``--debug``: show the traceback of an error instead of the one-line message."""
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error (for a bug report)"
    )


# ----------------------------------------------------------------------------- checks
def need_module(module: str, option: str) -> None:
    """Raise a :class:`UsageError` naming the extra to install when ``module`` cannot import.

    Called before a long run whose last step needs an optional package (``--plot``).
    """
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        extra = EXTRAS.get(module.split(".")[0], module)
        raise UsageError(
            f"{option} needs {module}, which is not installed here: pip install "
            f"'kl-patches[{extra}]' (or leave out {option})",
            field=option,
        ) from None


def writable_file(option: str, path: str) -> None:
    """Raise a :class:`UsageError` unless ``path`` can be written as a file (nothing created)."""
    target = os.path.abspath(path)
    if os.path.isdir(target):
        raise UsageError(f"{option} {path!r} is a directory; give a file name", field=option)
    if os.path.exists(target):
        if not os.access(target, os.W_OK):
            raise UsageError(f"{option} {path!r}: permission denied", field=option, value=path)
        return
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise UsageError(
            f"{option} {path!r}: folder {parent!r} does not exist", field=option, value=path
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(
            f"{option} {path!r}: cannot write in folder {parent!r}", field=option, value=path
        )


def writable_dir(option: str, path: str) -> None:
    """Raise unless ``path`` is, or can be created as, a writable folder (nothing created)."""
    target = os.path.abspath(path)
    probe = target
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise UsageError(f"{option} {path!r}: {probe!r} is not a folder", field=option, value=path)
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(
            f"{option} {path!r}: cannot write in folder {probe!r}", field=option, value=path
        )


# ----------------------------------------------------------------------------- failures
@dataclass(frozen=True)
class Failure:
    """What stopped a command, as the one line and the JSON document report it."""

    prog: str
    """The command (``kl-patches audit``, ``kl_patches.trl``)."""
    kind: str
    """``usage``, ``input`` (a file), ``missing_dependency``, ``unsupported_version``,
    ``internal`` or ``interrupted``."""
    message: str
    """One line, without the ``prog:`` prefix."""
    exit_code: int = EXIT_ERROR
    """The command's exit code."""
    field: str | None = None
    """The flag or field at fault, when known."""
    value: object = None
    """The value given, when known."""
    choices: object = None
    """The valid values, when known."""

    @property
    def line(self) -> str:
        """``prog: message``."""
        return f"{self.prog}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The ``error`` object of the JSON document."""
        out: dict[str, Any] = {"kind": self.kind, "message": self.message}
        for key in ("field", "value", "choices"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value if isinstance(value, (str, int, float, bool)) else repr(value)
        if isinstance(self.choices, (list, tuple)):
            out["choices"] = [str(c) for c in self.choices]
        return out

    def document(self) -> dict[str, Any]:
        """The JSON document printed with ``--json`` (schema :data:`SCHEMA`)."""
        return {
            "schema": SCHEMA,
            "command": self.prog,
            "exit_code": self.exit_code,
            "error": self.to_dict(),
        }


def _flat(text: str) -> str:
    """One line: newlines and runs of blanks become single spaces; a ``kl_patches:`` prefix of
    the package's own messages goes (the line starts with the command's name)."""
    line = " ".join(text.split()) or "(no message)"
    return line.removeprefix("kl_patches: ")


def failure_of(prog: str, exc: BaseException) -> Failure:
    """Classify an exception that escaped a command (see the module docstring)."""
    if isinstance(exc, KeyboardInterrupt):
        return Failure(prog, "interrupted", "interrupted", EXIT_INTERRUPTED)
    if isinstance(exc, UsageError):
        return Failure(
            prog, "usage", _flat(str(exc)), EXIT_ERROR, exc.field, exc.value, exc.choices
        )
    if isinstance(exc, ImportError):
        name = (exc.name or "").split(".")[0]
        if name and name != "kl_patches":
            extra = EXTRAS.get(name)
            hint = f"pip install 'kl-patches[{extra}]'" if extra else f"pip install {name}"
            return Failure(
                prog,
                "missing_dependency",
                f"needs the {name!r} package, which is not installed here ({hint})",
                field=name,
            )
    if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
        where = exc.filename if exc.filename is not None else ""
        reason = exc.strerror or _flat(str(exc))
        text = f"{where}: {reason}" if where else reason
        return Failure(prog, "input", _flat(text), field=None, value=where or None)
    for cls in type(exc).__mro__:
        if cls.__name__ in _NAMED_KINDS:
            return Failure(prog, _NAMED_KINDS[cls.__name__], _flat(str(exc)))
    if isinstance(exc, ValueError):
        return Failure(prog, "usage", _flat(str(exc)))
    return Failure(
        prog,
        "internal",
        f"internal error ({type(exc).__name__}: {_flat(str(exc))}); rerun with --debug "
        f"(or {DEBUG_ENV}=1) for the traceback and report it",
    )


def say(line: str) -> None:
    """One line on stderr in a single write (ranks of a launcher may share the stream)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    try:
        os.write(sys.stderr.fileno(), (line + "\n").encode(errors="replace"))
    except (OSError, ValueError, AttributeError):  # no real fd (pytest's capture): plain write
        with contextlib.suppress(OSError, ValueError):
            print(line, file=sys.stderr)


def quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def debug_requested(own_argv: Sequence[str], debug_option: bool) -> bool:
    """True when ``KL_PATCHES_DEBUG`` is set, or ``--debug`` is among the command's own flags."""
    if os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    return debug_option and "--debug" in own_argv


def json_requested(own_argv: Sequence[str]) -> bool:
    """True when ``--json`` is among the command's own flags."""
    return any(a == "--json" or a.startswith("--json=") for a in own_argv)


def _pass_through(exc: BaseException) -> None:
    with contextlib.suppress(AttributeError, TypeError):
        setattr(exc, _PASSTHROUGH, True)


@contextlib.contextmanager
def library_code() -> Iterator[None]:
    """Run a library's own code: its exceptions pass :func:`command` untouched."""
    try:
        yield
    except BaseException as exc:
        _pass_through(exc)
        raise


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    say(str(code))
    return 1


class Main(Protocol):
    """A command's entry point: ``main(argv)`` (``sys.argv[1:]`` when None) -> exit code."""

    def __call__(self, argv: list[str] | None = None) -> int:
        """Run the command."""
        ...


def command(
    prog: str,
    *,
    debug_option: bool = False,
    json_output: bool = False,
    json_document: Callable[[Failure, list[str]], dict[str, Any]] | None = None,
) -> Callable[[Callable[..., int]], Main]:
    """Decorate a command's ``main(argv) -> int`` with the one error path of this module.

    ``debug_option``: the command declares ``--debug`` among its own flags (those before a
    ``--``). ``json_output``: with ``--json`` the command prints JSON on stdout, so an error
    prints :meth:`Failure.document` (or ``json_document(failure, argv)``) there too.
    """

    def wrap(func: Callable[..., int]) -> Main:
        @functools.wraps(func)
        def main(argv: list[str] | None = None) -> int:
            args = [str(a) for a in (sys.argv[1:] if argv is None else argv)]
            own = args[: args.index("--")] if "--" in args else args
            try:
                try:
                    code = func(args)
                    sys.stdout.flush()
                    return code
                except SystemExit as exc:
                    sys.stdout.flush()
                    return _exit_code(exc)
            except BrokenPipeError:
                quiet_stdout()
                return EXIT_BROKEN_PIPE
            except BaseException as exc:
                if not isinstance(exc, Exception | KeyboardInterrupt):
                    raise
                if getattr(exc, _PASSTHROUGH, False) or debug_requested(own, debug_option):
                    _pass_through(exc)  # an enclosing command (the dispatcher) lets it go too
                    raise
                failure = failure_of(prog, exc)
                if json_output and json_requested(own):
                    doc = (json_document or (lambda f, _: f.document()))(failure, args)
                    try:
                        print(json.dumps(doc, indent=2))
                        sys.stdout.flush()
                    except BrokenPipeError:
                        quiet_stdout()
                say(failure.line)
                return failure.exit_code

        return main

    return wrap
