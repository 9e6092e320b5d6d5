"""What an OpenRLHF command line means in one release: the reader's per-version semantics.

:func:`semantics` folds :data:`~.history.HISTORY` (flag spellings, defaults and choices per
release, and what ``compute_approx_kl``, the experience maker and the actor do with the KL,
each row with the ``file:line`` of its release) and :mod:`.flagsets` (every ``--option`` of
each release) into one :class:`OpenRLHFSemantics`. The reader (:mod:`.read`) parses a launch
with it: an option the release does not define is refused by argparse (an error finding; the
reading leaves it out), flat names before 0.10.2, dotted after, ``--use_kl_estimator_k3`` until
0.6.0, ``--use_kl_loss`` from 0.6.0, ``--algo.kl.unbiased_gradient`` from 0.11.1; the value clamp
at +-10 from 0.8.6; the loss KL a per-sequence mean until 0.7.1, a token mean after; the reward
KL added after the group baseline from 0.5.3.

A version that is not a recorded release is read with the newest recorded release not after it
(:func:`resolve`); one older than 0.5.0 with 0.5.0's semantics and without option checks (its
options are not recorded).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from packaging.version import InvalidVersion, Version

from kl_patches.adapters.files import MAX_SOURCE_FILE_BYTES, read_optional
from kl_patches.adapters.history import resolve_release

from .flagsets import options as release_options
from .fork import copy_options, nearest_release
from .history import HISTORY, RELEASES
from .translate import FLAGS
from .versions import TESTED_VERSION

__all__ = [
    "RELEASES",
    "OpenRLHFSemantics",
    "releases",
    "resolve",
    "semantics",
    "source_of",
    "vendored_version",
]


@dataclass(frozen=True)
class OpenRLHFSemantics:
    """OpenRLHF's KL behaviour in one release, as the reader needs it."""

    version: str
    """The version asked for (as written)."""
    release: str
    """The recorded release whose rows apply (see :func:`resolve`)."""
    older_than_recorded: bool
    """True when :attr:`version` predates every recorded release (options are not checked)."""
    spelling: dict[str, str | None]
    """Dotted flag (:data:`~.translate.FLAGS`) -> its name in this release (None: absent)."""
    defaults: dict[str, object]
    """Dotted flag -> its default in this release."""
    choices: dict[str, tuple[str, ...]]
    """Dotted flag -> the values argparse accepts in this release (where it restricts them)."""
    estimator_switch: bool
    """True before 0.6.0.post1: ``--use_kl_estimator_k3`` (k3 if given, else k1)."""
    kl_loss: bool
    """Whether the release has a KL loss (``--use_kl_loss``; from 0.6.0)."""
    value_clamp: float | None
    """The clamp of every estimator value (10 from 0.8.6; none before)."""
    unbiased_gradient: bool
    """Whether ``--algo.kl.unbiased_gradient`` exists (0.11.1 on)."""
    ref_model: str
    """When a reference model (and so any KL) exists: ``always`` (0.5.x), ``coef != 0``
    (0.6.0-0.7.1.post0: a negative coefficient maximises the KL), ``coef > 0``."""
    loss_aggregation: str
    """The loss KL's aggregation as a KLConfig value (``seq_mean_token_mean`` 0.6.0-0.7.1,
    ``token_mean`` after)."""
    whitened: tuple[str, ...]
    """Advantage estimators whose advantages (KL part included) are whitened over the batch."""
    kl_after_baseline: bool
    """True from 0.5.3: the reward KL is added after the group baseline of the scalar reward."""
    modules: dict[str, frozenset[str] | None] = field(default_factory=dict)
    """Trainer module -> every ``--option`` it defines in this release (None: not shipped);
    empty when the options are not recorded (:attr:`older_than_recorded`)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Field -> ``file:line`` of the release row it was folded from."""

    @property
    def exact(self) -> bool:
        """True when :attr:`version` is a recorded release (a local label such as
        ``+vendored`` aside)."""
        try:
            return self.version == self.release or Version(self.version).public == self.release
        except InvalidVersion:
            return False


def releases() -> tuple[str, ...]:
    """Every recorded OpenRLHF release, ascending."""
    return RELEASES


def resolve(version: str) -> str:
    """The recorded release whose semantics ``version`` has (itself, else the newest not after
    it, else the oldest). ValueError for text that is not a PEP 440 version."""
    return resolve_release(RELEASES, version, "OpenRLHF", "0.7.5")


def source_of(key: str, release: str) -> str:
    """``file:line (OpenRLHF SINCE)`` of the row giving ``key`` its value in ``release``."""
    change = HISTORY.latest(key, release)
    return f"{change.source} (OpenRLHF {change.since})" if change is not None else ""


def _whitened(value: object, estimators: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, tuple):
        return tuple(str(v) for v in value)
    text = str(value)
    if text == "all estimators":
        return estimators
    if text.startswith("all but "):
        left = {w.strip() for w in text.removeprefix("all but ").split(",")}
        return tuple(e for e in estimators if e not in left)
    return ()


@cache
def semantics(version: str | None = None) -> OpenRLHFSemantics:
    """The semantics of ``version`` (default: the newest tested release)."""
    asked = version or TESTED_VERSION
    release = resolve(asked)
    older = Version(asked) < Version(RELEASES[0])
    rows = HISTORY.at(release)
    ray = release_options(release, "train_ppo_ray") or frozenset()
    modules = (
        {} if older else {m: release_options(release, m) for m in ("train_ppo_ray", "train_ppo")}
    )
    spelling: dict[str, str | None] = {}
    defaults: dict[str, object] = {}
    choices: dict[str, tuple[str, ...]] = {}
    for flag in FLAGS:
        row = f"flag.{flag.dotted}"
        if row in rows:
            spelling[flag.dotted] = None if rows[row] is None else str(rows[row])
        elif flag.dotted in ray:
            spelling[flag.dotted] = flag.dotted
        elif flag.flat is not None and flag.flat in ray:
            spelling[flag.dotted] = flag.flat
        else:
            spelling[flag.dotted] = None
        defaults[flag.dotted] = rows.get(f"default.{flag.dotted}", flag.default)
        found = rows.get(f"choices.{flag.dotted}")
        if isinstance(found, tuple):
            choices[flag.dotted] = tuple(str(c) for c in found)
        elif flag.choices:
            choices[flag.dotted] = flag.choices
    estimators = choices.get("algo.advantage.estimator", ("gae",))
    if spelling["algo.advantage.estimator"] is None:
        estimators = ("gae",)
    switch = spelling["algo.kl.estimator"] == "use_kl_estimator_k3"
    return OpenRLHFSemantics(
        version=asked,
        release=release,
        older_than_recorded=older,
        spelling=spelling,
        defaults=defaults,
        choices=choices,
        estimator_switch=switch,
        kl_loss=spelling["algo.kl.use_loss"] is not None,
        value_clamp=None if rows.get("estimator.value_clamp") is None else 10.0,
        unbiased_gradient=spelling["algo.kl.unbiased_gradient"] is not None,
        ref_model=str(rows["reward.ref_model"]).replace("init_kl_coef", "coef"),
        loss_aggregation=(
            "seq_mean_token_mean"
            if str(rows.get("loss.aggregation", "")).startswith("per-sequence")
            else "token_mean"
        ),
        whitened=_whitened(rows.get("reward.whitened_with_advantages"), estimators),
        kl_after_baseline=rows.get("reward.kl_vs_group_baseline") == "after",
        modules=modules,
        sources={
            "estimator_switch": source_of("flag.algo.kl.estimator", release),
            "kl_loss": source_of("flag.algo.kl.use_loss", release),
            "value_clamp": source_of("estimator.value_clamp", release),
            "ref_model": source_of("reward.ref_model", release),
            "loss_aggregation": source_of("loss.aggregation", release),
            "whitened": source_of("reward.whitened_with_advantages", release),
            "kl_after_baseline": source_of("reward.kl_vs_group_baseline", release),
        },
    )


_VERSION = re.compile(r"""__version__\s*=\s*["']([^"']+)["']""")


def vendored_version(directory: Path) -> tuple[str, str] | None:
    """(version, file) of an OpenRLHF copy inside ``directory``: ``openrlhf/__init__.py``'s
    ``__version__``, else the ``version.txt`` beside an ``openrlhf`` package (OpenRLHF's own
    layout), also one folder deeper in a checkout named after it; None when there is none.
    A copy that states no version (LIMR's empty ``__init__.py``) is found by its
    ``openrlhf/cli/train_ppo_ray.py``: its version is the recorded release whose options it
    shares most of (:func:`.fork.nearest_release`) with the local label ``+vendored``, and the
    file is that module. Read through the audit's guarded reader: a file there that is a FIFO,
    a device or too big is an InputError."""
    bases = [directory]
    with contextlib.suppress(OSError):
        bases += sorted(
            p for p in directory.iterdir() if "openrlhf" in p.name.lower() and p.is_dir()
        )[:16]
    for base in bases:
        package = base / "openrlhf"
        if not (package / "__init__.py").is_file():
            continue
        found = _VERSION.search(read_optional(package / "__init__.py", MAX_SOURCE_FILE_BYTES) or "")
        if found:
            return found.group(1), str(package / "__init__.py")
        for name in ("version.txt", "VERSION"):
            path = base / name
            text = (read_optional(path) or "").strip()
            if re.fullmatch(r"[0-9][0-9A-Za-z.+\-]*", text):
                return text, str(path)
    for base in bases:
        cli = base / "openrlhf" / "cli" / "train_ppo_ray.py"
        options = copy_options(cli.parent.parent) if (base / "openrlhf").is_dir() else None
        if options is not None:
            return nearest_release(frozenset(options)) + "+vendored", str(cli)
    return None
