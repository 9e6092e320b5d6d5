"""Reading the files users hand kl-patches (launch scripts, YAML/JSON configs, the dependency files
and vendored version files the audit consults), never running them.

One place for the rules every reader shares (:func:`read_file`): only regular files are read (a
FIFO, a device such as ``/dev/zero`` or ``/dev/stdin``, a socket, or a symlink to one of them is
refused before it is opened, so reading cannot block), at most a byte cap of them
(:data:`MAX_INPUT_BYTES` unless the caller asks for less); text is UTF-8, with or without a
byte-order mark, or UTF-16/UTF-32 with one (what PowerShell's ``pip freeze > file`` writes); a
file holding NUL bytes without such a mark is not text; a few bytes that are not UTF-8 (one
latin-1 byte in a comment) are replaced and said in :attr:`TextFile.note`, never dropped
silently. Standard input is read through :func:`read_stdin` under the same cap. YAML is loaded
with pyyaml's safe loader (no tags that construct objects), with a bound on alias expansion
(:data:`MAX_YAML_NODES`) so a small alias bomb cannot exhaust memory, and integers no float can
hold (more than :data:`MAX_INT_DIGITS` digits, or beyond float's range) are an error naming the
key, not Python's own overflow; JSON with :mod:`json`; nesting deeper than Python's recursion
allows is "nested too deeply". Every failure is an :class:`InputError` whose message names the
file and says what to do. pyyaml is a base dependency; if an environment lacks it anyway, only
shell and JSON inputs are read and a YAML file is an InputError saying ``pip install pyyaml``.
"""

from __future__ import annotations

import codecs
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_INPUT_BYTES = 4 * 1024 * 1024
"""Largest input file the audit reads (4 MiB: real launch scripts and configs are far smaller)."""

MAX_YAML_NODES = 200_000
"""Largest number of YAML nodes a document may expand to once its aliases are followed."""


class InputError(ValueError):
    """Input that cannot be read (the CLI turns it into one line and exit code 2)."""


class NotALaunchError(InputError):
    """Input that reads fine but launches no trainer (a file found by walking a folder that only
    imports a library, say): ``kl-patches audit DIR`` counts it instead of failing on it."""


def yaml_module() -> Any:
    """pyyaml, or an InputError saying how to get it (a base dependency an env may still lack)."""
    try:
        import yaml
    except ImportError as err:
        raise InputError(
            "reading YAML configs and TRL flags needs pyyaml, which this environment lacks: "
            "pip install 'pyyaml>=6'"
        ) from err
    return yaml


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_regular(path: Path, limit: int = MAX_INPUT_BYTES) -> int:
    """The size of ``path``; InputError unless it is a regular file of at most ``limit`` bytes
    (a symlink is followed: one to ``/dev/zero`` or to a FIFO is refused like its target)."""
    try:
        info = os.stat(path)
    except FileNotFoundError as err:
        raise InputError(f"{path}: no such file") from err
    except OSError as err:
        raise InputError(f"{path}: cannot be read ({err.strerror or err})") from err
    if stat.S_ISDIR(info.st_mode):
        raise InputError(
            f"{path}: is a directory; pass its launch scripts and configs (e.g. {path}/*.sh)"
        )
    if not stat.S_ISREG(info.st_mode):
        raise InputError(
            f"{path}: {_kind(info.st_mode)}, not a regular file; the audit reads only regular "
            "files (save the input to a file first)"
        )
    if info.st_size > limit:
        raise InputError(
            f"{path}: {info.st_size} bytes, over the audit's limit of {limit} bytes for this "
            "file (launch scripts, configs and dependency files are far smaller; is it the "
            "right file?)"
        )
    return info.st_size


@dataclass(frozen=True)
class TextFile:
    """A file's text as :func:`read_file` decoded it."""

    text: str
    """The text (without a byte-order mark)."""
    encoding: str
    """``utf-8``, ``utf-8-sig`` (UTF-8 with a byte-order mark), ``utf-16`` or ``utf-32``."""
    note: str = ""
    """Empty, or one line saying which bytes were not UTF-8 and were replaced."""


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
"""Byte-order marks, longest first (UTF-32-LE's starts with UTF-16-LE's)."""


def decode(data: bytes, origin: str) -> TextFile:
    """``data`` as text: UTF-8 (a byte-order mark is dropped), UTF-16 or UTF-32 with a
    byte-order mark; InputError for NUL bytes without a mark (binary, or UTF-16 without a
    mark) and for a mark the rest does not match; other bytes that are not UTF-8 are replaced
    (U+FFFD) and :attr:`TextFile.note` says where the first is."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return TextFile(data.decode(encoding), encoding)
            except UnicodeDecodeError as err:
                raise InputError(
                    f"{origin}: starts with a {encoding.upper().replace('-SIG', '')} byte-order "
                    f"mark but is not valid {encoding.upper().replace('-SIG', '')} (byte "
                    f"{err.start}), and is not UTF-8 either; save it as UTF-8"
                ) from err
    try:
        return TextFile(data.decode("utf-8"), "utf-8")
    except UnicodeDecodeError as err:
        first = err.start
    if b"\x00" in data:
        raise InputError(
            f"{origin}: not a text file (not UTF-8: it holds NUL bytes; a UTF-16 file needs its "
            "byte-order mark)"
        )
    text = data.decode("utf-8", errors="replace")
    line = data.count(b"\n", 0, first) + 1
    note = (
        f"{origin}: holds bytes that are not UTF-8 (the first, 0x{data[first]:02X}, on line "
        f"{line}); read with them replaced by U+FFFD"
    )
    return TextFile(text, "utf-8", note)


def read_file(path: Path | str, limit: int = MAX_INPUT_BYTES) -> TextFile:
    """The one guarded reader: the text of a regular file of at most ``limit`` bytes.

    InputError for a missing file, a directory, a FIFO, device or socket (refused before it
    is opened, and again on the opened descriptor), a file over ``limit``, or bytes that are
    not text (:func:`decode`)."""
    path = Path(path)
    check_regular(path, limit)
    try:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        fd = os.open(path, flags)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # replaced since the stat
                raise InputError(f"{path}: not a regular file; the audit reads only regular files")
            data = handle.read(limit + 1)
    except InputError:
        raise
    except OSError as err:
        raise InputError(f"{path}: cannot be read ({err.strerror or err})") from err
    if len(data) > limit:
        raise InputError(f"{path}: over the audit's limit of {limit} bytes for this file")
    return decode(data, str(path))


def read_text(path: Path | str, limit: int = MAX_INPUT_BYTES) -> str:
    """:func:`read_file`'s text (InputError as there; replaced bytes are not reported: use
    :func:`read_file` where the note matters)."""
    return read_file(path, limit).text


def try_read_text(path: str | Path, limit: int = MAX_INPUT_BYTES) -> str | None:
    """:func:`read_text`, or None when the file cannot be read (for files a script sources)."""
    try:
        return read_text(Path(path), limit)
    except InputError:
        return None


MAX_VERSION_FILE_BYTES = 64 * 1024
"""Largest version file (``VERSION``, ``version.txt``, ``verl/version/version``) read."""
MAX_SOURCE_FILE_BYTES = 1024 * 1024
"""Largest library source file (a vendored ``__init__.py``, ``dp_actor.py``) read."""


def read_optional(path: Path | str, limit: int = MAX_VERSION_FILE_BYTES) -> str | None:
    """:func:`read_file`'s text, None when there is no such file (nor a dangling link); any
    other refusal (a FIFO, a device, a file over ``limit``, not text) is the InputError, so a
    caller can say it instead of waiting on it or reading gigabytes."""
    try:
        return read_file(path, limit).text
    except InputError:
        if not os.path.exists(path):
            return None
        raise


STDIN = "-"
"""The path that means standard input on the audit's command line."""


def read_stdin(stream: Any = None, limit: int = MAX_INPUT_BYTES) -> TextFile:
    """Standard input's text under the same cap and decoding as :func:`read_file` (InputError
    for a terminal: nothing was piped in)."""
    stream = sys.stdin if stream is None else stream
    if stream is None:
        raise InputError("-: no standard input to read")
    isatty = getattr(stream, "isatty", None)
    if callable(isatty) and isatty():
        raise InputError(
            "-: standard input is a terminal; pipe the launch in (cat run.sh | kl-patches "
            "audit -) or pass its path"
        )
    raw = getattr(stream, "buffer", stream)
    try:
        data = raw.read(limit + 1)
    except OSError as err:
        raise InputError(f"-: standard input cannot be read ({err.strerror or err})") from err
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > limit:
        raise InputError(f"-: standard input is over the audit's limit of {limit} bytes")
    return decode(data, "<stdin>")


def _expanded_size(node: Any, limit: int) -> int:
    """How many nodes ``node`` expands to with its aliases followed (iterative, memoised);
    ``limit + 1`` for a recursive document (an alias inside itself expands without end)."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[Any, bool]] = [(node, False)]
    while stack:
        current, done = stack.pop()
        key = id(current)
        if key in sizes:
            continue
        value = current.value
        children: list[Any] = []
        if isinstance(value, list):
            for item in value:
                children.extend(item if isinstance(item, tuple) else (item,))
        if not done:
            if key in visiting:
                continue
            visiting.add(key)
            stack.append((current, True))
            for child in children:
                if id(child) in visiting and id(child) not in sizes:
                    return limit + 1
                if id(child) not in sizes:
                    stack.append((child, False))
            continue
        total = 1 + sum(sizes.get(id(c), 1) for c in children)
        sizes[key] = min(total, limit + 1)
    return sizes.get(id(node), 1)


MAX_INT_DIGITS = 309
"""Most digits of an integer in a YAML/JSON config: more cannot be a float (float's largest
finite value has 309), and Python itself refuses to read more than 4300."""


def _big_int(origin: str, where: str, digits: int) -> InputError:
    return InputError(
        f"{origin}{where}: an integer too large for any float ({digits} digits; a training "
        "library cannot use it as a number); write a value below 1.8e308"
    )


def checked_int(text: str, origin: str, where: str = "", base: int = 10) -> int:
    """``int(text, base)`` for a config value, InputError naming ``origin`` and ``where`` when
    it has more than :data:`MAX_INT_DIGITS` digits or exceeds float's range (never Python's
    own int-string limit message, nor an OverflowError later)."""
    digits = sum(c.isalnum() for c in text)
    if base == 10 and digits > MAX_INT_DIGITS:
        raise _big_int(origin, where, digits)
    value = int(text, base)
    if abs(value) > _FLOAT_MAX:
        raise _big_int(origin, where, len(str(abs(value))) if digits <= 4000 else digits)
    return value


_FLOAT_MAX = int(sys.float_info.max)
_LOADERS: dict[str, Any] = {}


def _safe_loader() -> Any:
    """pyyaml's SafeLoader whose integers go through :func:`checked_int` (cached class)."""
    cls = _LOADERS.get("safe")
    if cls is None:
        yaml = yaml_module()

        class _Loader(yaml.SafeLoader):  # type: ignore[misc,name-defined]
            origin = ""

            def construct_yaml_int(self, node: Any) -> int:
                raw = str(self.construct_scalar(node)).replace("_", "")
                sign = -1 if raw.startswith("-") else 1
                digits = raw.lstrip("+-")
                where = f": line {node.start_mark.line + 1}"
                if digits.startswith(("0b", "0x")) or ":" in digits or digits == "0":
                    value = super().construct_yaml_int(node)
                    if abs(value) > _FLOAT_MAX:
                        raise _big_int(self.origin, where, len(digits))
                    return value  # type: ignore[no-any-return]
                base = 8 if digits.startswith("0") else 10
                return sign * checked_int(digits, self.origin, where, base)

        _Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
        _LOADERS["safe"] = cls = _Loader
    return cls


def safe_yaml(text: str, origin: str) -> Any:
    """``yaml.safe_load`` with bounds: aliases may expand to at most :data:`MAX_YAML_NODES`
    nodes, integers beyond float's range are an InputError naming their line
    (:func:`checked_int`), and nesting too deep for the parser is an InputError, not a crash."""
    loader = _safe_loader()(text)
    loader.origin = origin
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, MAX_YAML_NODES)
        if size > MAX_YAML_NODES:
            raise InputError(
                f"{origin}: its YAML aliases expand to more than {MAX_YAML_NODES} nodes (an "
                "alias bomb?); the audit does not read it"
            )
        return loader.construct_document(node)
    except RecursionError as err:
        raise InputError(f"{origin}: YAML nested too deeply to read") from err
    finally:
        loader.dispose()


def json_loads(text: str, origin: str) -> Any:
    """``json.loads`` whose integers go through :func:`checked_int`."""
    return json.loads(text, parse_int=lambda raw: checked_int(raw, origin))


def load_mapping_text(
    text: str, origin: str, json_format: bool = False, what: str = "config"
) -> dict[str, Any]:
    """A YAML (or JSON) document that must be a mapping; empty text is ``{}``."""
    yaml: Any = None if json_format else yaml_module()
    try:
        data = json_loads(text, origin) if json_format else safe_yaml(text, origin)
    except json.JSONDecodeError as err:
        raise InputError(f"{origin}: not valid JSON ({str(err).splitlines()[0]})") from err
    except RecursionError as err:
        raise InputError(f"{origin}: nested too deeply to read") from err
    except InputError:
        raise
    except Exception as err:
        if yaml is not None and isinstance(err, yaml.YAMLError):
            raise InputError(f"{origin}: not valid YAML ({str(err).splitlines()[0]})") from err
        raise
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(
            f"{origin}: a {what} must be a mapping of keys to values, got a {type(data).__name__}"
        )
    return data


def load_mapping(path: Path, what: str = "config") -> dict[str, Any]:
    """A YAML/JSON file that must hold a mapping (JSON by the ``.json`` suffix)."""
    return load_mapping_text(read_text(path), str(path), path.suffix == ".json", what)
