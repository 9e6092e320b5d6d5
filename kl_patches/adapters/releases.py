"""Per-release facts recorded from each release's files, loaded from the adapters' data folders.

``python -m kl_patches.dev record LIB VERSION`` reads one release of a library (without
importing it) and writes ``kl_patches/adapters/<lib>/data/<release>.json``. Each file holds:

* ``name_sets``: for each configuration surface the adapter knows (TRL's config dataclasses,
  verl's composed Hydra configs, OpenRLHF's trainer command lines), every name that release
  accepts with what was read about it: ``default`` (a literal as itself, tuples as lists, an
  expression as ``{"expr": text}``, a ``default_factory`` as ``{"factory": text}``), argparse's
  ``choices`` / ``action`` / ``type`` / ``nargs``, and ``at`` (``path:line`` of the default or
  the ``add_argument`` call). A Hydra mapping is listed as a name without a default. A set
  whose class or file is not in the release is ``null``.
* ``symbols``: for each function or method a patch wraps, where it is defined (``module``,
  ``at``), its ``signature`` (``name(args) -> returns`` as :func:`ast.unparse` writes it), a
  ``body_sha`` (first 12 hex digits of the sha256 of its source lines) and the modules that bind
  it by name (``importers``), read it as an attribute of its module (``attribute_users``) or
  re-export it (``reexports``); ``null`` when the release does not define it.

What a release's change *means* for the gradient is not here: that needs a reading, and stays
in each adapter's reviewed ``history`` / ``compat`` rows, which cite ``file:line``.

This module loads the files (:func:`recording`) and answers the questions the adapters and the
audit ask: the names of a set in a release, the releases that accept a set of names
(:meth:`Recording.releases_accepting`, for inferring a launch's release from its vocabulary), a
symbol as a :class:`~kl_patches.adapters.surface.Symbol`. It also holds the recorder's spec
types (:class:`RecordSpec`), which each adapter fills in its ``recording`` module. Nothing here
imports a training library.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from packaging.version import Version

from .surface import Symbol

FORMAT = 1
"""Version of the data file layout (the ``format`` field)."""

Entry = Mapping[str, Any]
"""What was recorded about one name (``default``, ``at``, ...)."""


@dataclass(frozen=True)
class NameSetSpec:
    """How the recorder reads one configuration surface of a library."""

    name: str
    """The set's name in the data (``"GRPOConfig"``, ``"ppo_trainer"``, ``"train_ppo_ray"``)."""
    kind: str
    """``"dataclass"`` (annotated class fields), ``"argparse"`` (``--options`` of one module)
    or ``"hydra"`` (a config composed from a folder of YAML files)."""
    sources: tuple[tuple[str, tuple[str, ...]], ...]
    """dataclass: ``(class, files)`` pairs, their fields merged in order (the first file of
    ``files`` that defines the class is read); argparse: one ``("", (module file,))``; hydra:
    ``(config name, (config folder,))``."""
    bases: tuple[str, ...] = ()
    """dataclass: base classes whose fields count as the class's own (found anywhere in the
    package), e.g. TRL's ``OnPolicyConfig``."""


@dataclass(frozen=True)
class SymbolSpec:
    """A function (``name``) or method (``Class.name``) the recorder describes per release."""

    qualname: str
    """``func`` or ``Class.method``, defined at module level."""
    modules: tuple[str, ...] = ()
    """Dotted modules to look in, in order; empty: the first module (by path) defining it."""


@dataclass(frozen=True)
class RecordSpec:
    """What ``python -m kl_patches.dev record`` reads for one library."""

    library: str
    """The name on the command line (``trl``, ``verl``, ``openrlhf``, ``transformers``)."""
    distribution: str
    """The distribution on the package index."""
    package: str
    """Its top-level import package."""
    data_package: str
    """The kl_patches package holding the data folder, e.g. ``kl_patches.adapters.trl``."""
    data_folder: str
    """The folder inside it (``data``, or ``data/transformers``)."""
    name_sets: tuple[NameSetSpec, ...]
    """The configuration surfaces recorded."""
    symbols: tuple[SymbolSpec, ...] = ()
    """The functions recorded."""


def _version_key(release: str) -> Version:
    return Version(release)


@dataclass(frozen=True)
class ReleaseRecord:
    """The recorded facts of one release (one data file)."""

    library: str
    """The library (as in the file)."""
    release: str
    """The release (PEP 440 text, as published)."""
    name_sets: Mapping[str, Mapping[str, Entry] | None]
    """Set name -> name -> entry (None: the set is not in this release)."""
    symbols: Mapping[str, Mapping[str, Any] | None]
    """Qualified name -> record (None: not defined in this release)."""

    def names(self, name_set: str) -> frozenset[str] | None:
        """The names of ``name_set`` (None when the set is absent or empty in this release).
        KeyError for a set that was never recorded."""
        entries = self.name_sets[name_set]
        return frozenset(entries) if entries else None

    def entry(self, name_set: str, name: str) -> Entry | None:
        """What was recorded about ``name`` in ``name_set`` (None when it is not there)."""
        entries = self.name_sets.get(name_set) or {}
        return entries.get(name)

    def symbol(self, qualname: str) -> Symbol | None:
        """``qualname`` as a :class:`Symbol` (None when this release does not define it).
        KeyError for a symbol that was never recorded."""
        record = self.symbols[qualname]
        if record is None:
            return None
        return Symbol(
            name=qualname,
            module=str(record["module"]),
            line=int(str(record["at"]).rpartition(":")[2]),
            signature=str(record["signature"]),
            body_sha=str(record["body_sha"]),
            importers=tuple(record["importers"]),
            attribute_users=tuple(record["attribute_users"]),
            reexports=tuple(record["reexports"]),
        )


@dataclass(frozen=True)
class Recording:
    """Every recorded release of one library, ascending."""

    library: str
    """The library."""
    records: tuple[ReleaseRecord, ...]
    """One per release, ascending (PEP 440)."""

    @property
    def releases(self) -> tuple[str, ...]:
        """The recorded releases, ascending."""
        return tuple(r.release for r in self.records)

    def at(self, release: str) -> ReleaseRecord:
        """The record of ``release``; ValueError naming the recorded releases otherwise."""
        for record in self.records:
            if record.release == release:
                return record
        raise ValueError(
            f"{self.library} release {release!r} is not recorded; "
            f"choose one of {list(self.releases)}"
        )

    def names(self, release: str, name_set: str) -> frozenset[str] | None:
        """The names of ``name_set`` in ``release`` (None when the set is not in it)."""
        return self.at(release).names(name_set)

    def every_name(self, name_set: str) -> frozenset[str]:
        """Every name ``name_set`` had in any recorded release."""
        out: set[str] = set()
        for record in self.records:
            out |= record.names(name_set) or set()
        return frozenset(out)

    def releases_accepting(
        self, names: Iterable[str], name_sets: Iterable[str] | None = None
    ) -> tuple[str, ...]:
        """The releases (ascending) in which every one of ``names`` is accepted by at least one
        of ``name_sets`` (default: all recorded sets). An empty ``names`` gives every release.

        E.g. the TRL releases whose GRPOConfig accepts ``use_bias_correction_kl`` and
        ``importance_sampling_level``, or the OpenRLHF releases whose ``train_ppo_ray`` parses
        every flag of a launch line."""
        wanted = set(names)
        out = []
        for record in self.records:
            sets = record.name_sets if name_sets is None else list(name_sets)
            accepted: set[str] = set()
            for name_set in sets:
                accepted |= record.names(name_set) or set()
            if wanted <= accepted:
                out.append(record.release)
        return tuple(out)


def parse(text: str) -> ReleaseRecord:
    """A data file's text as a :class:`ReleaseRecord`; ValueError for another format."""
    data = json.loads(text)
    if data.get("format") != FORMAT:
        raise ValueError(f"release data format {data.get('format')!r}, expected {FORMAT}")
    return ReleaseRecord(
        library=str(data["library"]),
        release=str(data["release"]),
        name_sets=data["name_sets"],
        symbols=data["symbols"],
    )


@cache
def recording(data_package: str, folder: str = "data") -> Recording:
    """Every ``<release>.json`` of ``data_package``'s ``folder`` (package data, read with
    :mod:`importlib.resources`). RuntimeError when there is none."""
    base = resources.files(data_package).joinpath(folder)
    records = [
        parse(item.read_text(encoding="utf-8"))
        for item in base.iterdir()
        if item.name.endswith(".json") and item.is_file()
    ]
    if not records:
        raise RuntimeError(f"no release data in {data_package}/{folder}")
    records.sort(key=lambda r: _version_key(r.release))
    return Recording(records[0].library, tuple(records))
