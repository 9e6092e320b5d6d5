"""Reading the files users hand kl-patches (launch scripts, YAML/JSON configs), never running them.

One place for the rules every reader shares: only regular files are read (a FIFO, a device such
as ``/dev/zero`` or ``/dev/stdin``, or a socket is refused before it is opened, so reading cannot
block), at most :data:`MAX_INPUT_BYTES` of them; text is UTF-8; YAML is loaded with pyyaml's safe
loader (no tags that construct objects), with a bound on alias expansion (:data:`MAX_YAML_NODES`)
so a small alias bomb cannot exhaust memory; JSON with :mod:`json`; nesting deeper than Python's
recursion allows is "nested too deeply". Every failure is an :class:`InputError` whose message
names the file and says what to do. pyyaml is a base dependency; if an
environment lacks it anyway, only shell and JSON inputs are read and a YAML file is an
InputError saying ``pip install pyyaml``.
"""

from __future__ import annotations

import json
import os
import stat
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


def check_regular(path: Path) -> int:
    """The size of ``path``; InputError unless it is a regular file under the size cap."""
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
    if info.st_size > MAX_INPUT_BYTES:
        raise InputError(
            f"{path}: {info.st_size} bytes, over the audit's limit of {MAX_INPUT_BYTES} bytes "
            "for one input (launch scripts and configs are far smaller; is it the right file?)"
        )
    return info.st_size


def read_text(path: Path) -> str:
    """The file's text; InputError for a missing file, a directory, a FIFO or device, a file
    over :data:`MAX_INPUT_BYTES`, or non-UTF-8 bytes."""
    path = Path(path)
    check_regular(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # replaced since the stat
                raise InputError(f"{path}: not a regular file; the audit reads only regular files")
            data = handle.read(MAX_INPUT_BYTES + 1)
    except InputError:
        raise
    except OSError as err:
        raise InputError(f"{path}: cannot be read ({err.strerror or err})") from err
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f"{path}: over the audit's limit of {MAX_INPUT_BYTES} bytes per input")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not a text file (not UTF-8)") from err


def try_read_text(path: str | Path) -> str | None:
    """:func:`read_text`, or None when the file cannot be read (for files a script sources)."""
    try:
        return read_text(Path(path))
    except InputError:
        return None


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


def safe_yaml(text: str, origin: str) -> Any:
    """``yaml.safe_load`` with bounds: aliases may expand to at most :data:`MAX_YAML_NODES`
    nodes, and nesting too deep for the parser is an InputError, not a crash."""
    yaml = yaml_module()
    loader = yaml.SafeLoader(text)
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


def load_mapping_text(
    text: str, origin: str, json_format: bool = False, what: str = "config"
) -> dict[str, Any]:
    """A YAML (or JSON) document that must be a mapping; empty text is ``{}``."""
    yaml: Any = None if json_format else yaml_module()
    try:
        data = json.loads(text) if json_format else safe_yaml(text, origin)
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
