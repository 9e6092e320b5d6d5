"""Reading the files users hand kl-patches (launch scripts, YAML/JSON configs), never running them.

One place for the rules every reader shares: text is UTF-8, YAML is loaded with
``yaml.safe_load`` (no tags that construct objects), JSON with :mod:`json`, and every failure is
an :class:`InputError` whose message names the file and says what to do. pyyaml is optional
(``pip install kl-patches[audit]``); without it only shell and JSON inputs are read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class InputError(ValueError):
    """Input that cannot be read (the CLI turns it into one line and exit code 2)."""


def yaml_module() -> Any:
    """pyyaml, or an InputError saying how to get it (the core install has only torch)."""
    try:
        import yaml
    except ImportError as err:
        raise InputError(
            "reading YAML configs and TRL flags needs pyyaml: pip install 'kl-patches[audit]'"
        ) from err
    return yaml


def read_text(path: Path) -> str:
    """The file's text; InputError for a missing file, a directory or non-UTF-8 bytes."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise InputError(f"{path}: no such file") from err
    except IsADirectoryError as err:
        raise InputError(
            f"{path}: is a directory; pass its launch scripts and configs (e.g. {path}/*.sh)"
        ) from err
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not a text file (not UTF-8)") from err
    except OSError as err:
        raise InputError(f"{path}: cannot be read ({err.strerror or err})") from err


def load_mapping_text(
    text: str, origin: str, json_format: bool = False, what: str = "config"
) -> dict[str, Any]:
    """A YAML (or JSON) document that must be a mapping; empty text is ``{}``."""
    yaml: Any = None if json_format else yaml_module()
    try:
        data = json.loads(text) if json_format else yaml.safe_load(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{origin}: not valid JSON ({str(err).splitlines()[0]})") from err
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
