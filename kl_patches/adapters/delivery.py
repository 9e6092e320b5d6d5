"""One wire format for a KLConfig that crosses a process boundary (Ray workers, ranks).

Training libraries run their KL code in processes the user's script never touches (verl's and
OpenRLHF's Ray actors re-import everything; accelerate starts one process per rank), so each
adapter carries the configuration in an environment variable, ``KL_PATCHES_<LIBRARY>``, and
applies the patch on arrival. The value is compact JSON: the KLConfig fields that differ from
their defaults (``placement`` always), plus adapter options (e.g. verl's ``kl_outside_std``).
A full ``KLConfig.to_dict()`` decodes the same way, so older senders keep working.

Standard library only: Ray's worker setup hooks import this before anything else.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping

from kl_patches.config import KLConfig

_DEFAULTS = KLConfig(placement="none").to_dict() | {"placement": None}
"""Field values left out of the wire format (placement is always written)."""


def env_var(library: str) -> str:
    """The environment variable carrying a library's configuration: ``KL_PATCHES_VERL``."""
    return f"KL_PATCHES_{library.upper()}"


def encode(config: KLConfig, options: Mapping[str, object] | None = None) -> str:
    """Compact, sorted JSON of ``config`` (non-default fields) and adapter ``options``."""
    payload: dict[str, object] = {
        k: v for k, v in config.to_dict().items() if v != _DEFAULTS.get(k, object())
    }
    for key, value in (options or {}).items():
        if key in payload or key in _DEFAULTS:
            raise ValueError(f"adapter option {key!r} collides with a KLConfig field")
        payload[key] = value
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


def decode(
    text: str, variable: str, options: Collection[str] = ()
) -> tuple[KLConfig, dict[str, object]]:
    """Inverse of :func:`encode`: the KLConfig and the adapter options among ``options``.

    Raises ValueError naming ``variable``, the text and why it is not a configuration.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{variable}={text!r} is not a valid KLConfig: not JSON ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(
            f"{variable}={text!r} is not a valid KLConfig: expected a JSON object of KLConfig "
            "fields"
        )
    extra = {key: data.pop(key) for key in list(data) if key in options}
    try:
        config = KLConfig.from_dict(data)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{variable}={text!r} is not a valid KLConfig: {err}") from err
    return config, extra


def from_environ(
    library: str, options: Collection[str] = ()
) -> tuple[KLConfig, dict[str, object]] | None:
    """The configuration in :func:`env_var`, or None when it is unset or empty."""
    variable = env_var(library)
    text = os.environ.get(variable, "").strip()
    return decode(text, variable, options) if text else None
