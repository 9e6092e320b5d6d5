"""``kl-patches audit``: which KL gradient a real verl, OpenRLHF or TRL setup follows, and the fix.

The audit reads a launch (shell script, YAML, override list, argv, a TRL config object, or the
installed libraries' defaults) through the library's adapter reader
(``kl_patches.adapters.<library>.read -> NativeReading``), asks :func:`kl_patches.theory.verdict`
which expected gradient that configuration has, and reports it with the adapter's findings and
the exact native flags that give k1 in the reward at the same coefficient.

It holds no library knowledge itself: flag names, defaults and quirks live in the adapters; the
input side (:mod:`kl_patches.audit_inputs`) only knows where a launch is. The audit adds a few
library-independent findings derived from the KLConfig (clamps, token-mean loss, off-policy
updates, two coefficients, KL off, KL-looking keys the reader ignored).

Status of each trainer (``--strict`` exits 1 on ``biased`` or ``error``):

* ``unbiased``: KL on, the on-policy expected gradient is coef * grad KL(pi || pi_ref);
* ``biased``: KL on, any other expected gradient (theory's verdict names it);
* ``kl_off``: no KL term reaches the gradient, and the adapter raised no error about it;
* ``error``: an adapter finding of severity ``error`` (KL silently dropped, or the objective is
  not what the flags say).

Off-policy updates never make the status ``biased`` by themselves (almost every PPO setup takes
several mini-batch steps per batch); they are reported as a finding and in the JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kl_patches.audit_inputs import (
    LIBRARIES,
    AuditInput,
    InputError,
    inputs_from_argv,
    inputs_from_file,
    inputs_from_mapping,
)
from kl_patches.config import KLConfig
from kl_patches.reading import NativeReading
from kl_patches.theory import Verdict, recommended, verdict

READERS: dict[str, tuple[str, ...]] = {
    lib: (f"kl_patches.adapters.{lib}", f"kl_patches.adapters.{lib}_reader") for lib in LIBRARIES
}
"""Modules tried, in order, for each library's ``read`` (the adapter, then a stand-alone reader)."""

STATUSES = ("unbiased", "biased", "kl_off", "error")
"""Possible :attr:`AuditEntry.status` values."""

_GENERIC_STEMS = {
    "kl_off": ("kl_off", "drops_kl", "kl_dropped", "ignores_kl"),
    "coef_mismatch": ("coef_mismatch", "mismatched_coef"),
    "kl_clamp": ("clamp",),
    "token_mean_loss": ("token_mean",),
    "off_policy": ("off_policy",),
}
"""Audit-level finding codes, and the code fragments of adapter findings that already say it."""


class AuditError(Exception):
    """The audit cannot read an input (exit code 2; the message says why and what to do)."""


@dataclass(frozen=True)
class AuditFinding:
    """A finding in the report: an adapter's, or one the audit derives from the KLConfig."""

    code: str
    """Stable identifier (adapter codes are prefixed by the library, audit codes are not)."""
    severity: str
    """``error``, ``warning`` or ``info`` (see :class:`kl_patches.reading.Finding`)."""
    message: str
    """What is wrong and why it matters."""
    fix: str = ""
    """The native flag(s) that fix it, when there is one."""
    origin: str = "adapter"
    """``adapter`` (library-specific) or ``audit`` (derived from the KLConfig or the input)."""


@dataclass(frozen=True)
class AuditEntry:
    """The audit of one trainer launch."""

    origin: str
    """Where the launch came from (``path:line``, ``path``, ``argv``, ``installed``)."""
    kind: str
    """Input kind: ``shell``, ``yaml``, ``overrides``, ``argv``, ``installed`` or ``object``."""
    reading: NativeReading
    """What the adapter read: the KLConfig the library runs, settings, off-policy flag."""
    verdict: Verdict
    """Theory's verdict on-policy: the expected gradient of this estimator x placement."""
    status: str
    """One of :data:`STATUSES`."""
    findings: tuple[AuditFinding, ...]
    """Adapter findings first, then the audit's own."""
    fix_native: tuple[str, ...]
    """Native flags/overrides giving k1 in the reward at the same coefficient (the adapter's)."""
    fix_switch: str
    """The kl-patches switch for the same fix (empty when the setup is already unbiased)."""
    ignored_keys: tuple[str, ...] = ()
    """Keys/flags of the input that the reader did not use (not KL-relevant, or unknown)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """What the audit could not follow exactly (shell substitutions, unresolved variables)."""

    @property
    def kl_on(self) -> bool:
        """True when some KL term reaches the gradient."""
        return self.reading.config.has_reward or self.reading.config.has_loss

    @property
    def fails_strict(self) -> bool:
        """True when ``--strict`` should fail for this trainer."""
        return self.status in ("biased", "error")


# ----------------------------------------------------------------------------- readers
def reader_for(library: str) -> Callable[[Any], NativeReading]:
    """The ``read`` function of a library's adapter (without importing the library)."""
    if library not in READERS:
        raise AuditError(f"unknown library {library!r}; choose one of {list(LIBRARIES)}")
    module = _reader_module(library)
    read: Callable[[Any], NativeReading] = module.read
    return read


def _reader_module(library: str) -> Any:
    tried = []
    for name in READERS[library]:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name is not None and name.startswith(err.name):
                tried.append(name)
                continue
            raise AuditError(f"the {library} adapter ({name}) cannot be imported: {err}") from err
        except Exception as err:
            raise AuditError(
                f"the {library} adapter ({name}) cannot be imported: {type(err).__name__}: {err}"
            ) from err
        if callable(getattr(module, "read", None)):
            return module
        tried.append(f"{name} (no read())")
    raise AuditError(
        f"no reader for {library} in this kl-patches (tried {', '.join(tried)}); the {library} "
        "adapter does not provide read() yet"
    )


def _read(inp: AuditInput) -> NativeReading:
    read = reader_for(inp.library)
    try:
        return read(inp.payload)
    except (ValueError, KeyError, TypeError) as err:
        msg = str(err).strip("'\"")
        hint = ""
        if inp.unresolved:
            names = ", ".join("$" + u for u in inp.unresolved)
            hint = (
                f" (the script uses {names}, which it never sets; pass "
                f"--var {inp.unresolved[0]}=VALUE)"
            )
        raise AuditError(
            f"{inp.origin}: the {inp.library} reader cannot read it: {msg}{hint}"
        ) from err


def _safe_read(read: Callable[[Any], NativeReading], payload: Any) -> NativeReading | None:
    try:
        return read(payload)
    except Exception:
        return None


# ----------------------------------------------------------------------------- ignored keys
def _argv_items(argv: list[str]) -> list[tuple[str, int, int]]:
    """(key, start, end) of each flag or override: ``--flag v1 v2`` or ``key=value``."""
    items: list[tuple[str, int, int]] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--"):
            j = i + 1
            if "=" not in tok:
                while j < len(argv) and not argv[j].startswith("--") and "=" not in argv[j]:
                    j += 1
            items.append((tok[2:].split("=", 1)[0], i, j))
            i = j
        elif "=" in tok:
            items.append((tok.split("=", 1)[0].lstrip("+~"), i, i + 1))
            i += 1
        else:
            i += 1
    return items


def _leaves(data: dict[str, Any], prefix: str = "") -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for k, v in data.items():
        if isinstance(v, dict) and v:
            out.extend((str(k), *rest) for rest in _leaves(v))
        else:
            out.append((str(k),))
    return out


def _without(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out = dict(data)
    if len(path) == 1:
        out.pop(path[0], None)
    else:
        out[path[0]] = _without(out[path[0]], path[1:])
    return out


def _matches_setting(key: str, settings: Iterable[str]) -> bool:
    key = key.lstrip("-+~")
    return any(key == s or s.endswith("." + key) or key.endswith("." + s) for s in settings)


_PROBE = "__kl_patches_probe__"
"""A value no reader accepts as a real setting: a key whose probe changes nothing is not read."""


def _unchanged(read: Callable[[Any], NativeReading], payload: Any, reading: NativeReading) -> bool:
    other = _safe_read(read, payload)
    return other is not None and other == reading


def ignored_keys(inp: AuditInput, reading: NativeReading) -> tuple[str, ...]:
    """Keys of the input the reader did not use.

    A key is used when it names one of the reading's settings, or when removing it or giving it
    a nonsense value changes the reading (or makes the reader refuse it); otherwise the reader
    ignored it (not KL-relevant, or unknown to the library: a typo). Keys are tested in groups
    (halved while a group changes the reading), so a config of a thousand keys takes a few
    hundred reads, not two thousand.
    """
    read = reader_for(inp.library)
    settings = [str(s) for s in reading.settings]
    payload = inp.payload
    if isinstance(payload, list):
        argv = list(payload)
        items = [it for it in _argv_items(argv) if not _matches_setting(it[0], settings)]

        def removed(group: list[Any]) -> Any:
            drop = {k for _, a, b in group for k in range(a, b)}
            return [t for k, t in enumerate(argv) if k not in drop]

        def probed(group: list[Any]) -> Any:
            out = list(argv)
            for _, a, b in group:
                if "=" in argv[a]:
                    out[a] = argv[a].split("=", 1)[0] + "=" + _PROBE
                else:
                    out[a + 1 : b] = [_PROBE] * (b - a - 1)
            return out

        unused = _unused_groups(read, reading, items, removed, probed)
        return tuple(dict.fromkeys(key for key, _, _ in unused))
    if isinstance(payload, dict):
        data = payload
        paths = [p for p in _leaves(data) if not _matches_setting(".".join(p), settings)]

        def removed_d(group: list[Any]) -> Any:
            out = data
            for path in group:
                out = _without(out, path)
            return out

        def probed_d(group: list[Any]) -> Any:
            out = data
            for path in group:
                out = _with(out, path, _PROBE)
            return out

        unused = _unused_groups(read, reading, paths, removed_d, probed_d)
        return tuple(dict.fromkeys(".".join(p) for p in unused))
    return ()


def _unused_groups(
    read: Callable[[Any], NativeReading],
    reading: NativeReading,
    items: list[Any],
    removed: Callable[[list[Any]], Any],
    probed: Callable[[list[Any]], Any],
) -> list[Any]:
    """The items whose removal and probing (as a group) leave the reading unchanged."""
    if not items:
        return []
    if _unchanged(read, removed(items), reading) and _unchanged(read, probed(items), reading):
        return items
    if len(items) == 1:
        return []
    half = len(items) // 2
    return _unused_groups(read, reading, items[:half], removed, probed) + _unused_groups(
        read, reading, items[half:], removed, probed
    )


def _with(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = dict(data)
    out[path[0]] = value if len(path) == 1 else _with(out[path[0]], path[1:], value)
    return out


# ----------------------------------------------------------------------------- findings
def _already(code: str, adapter_codes: list[str]) -> bool:
    return any(stem in c for c in adapter_codes for stem in _GENERIC_STEMS.get(code, (code,)))


def audit_findings(reading: NativeReading, as_run: Verdict) -> list[AuditFinding]:
    """The audit's own, library-independent findings for a reading (not repeating the adapter).

    ``as_run`` is theory's verdict with the reading's off-policy flag (its caveats are reused).
    """
    config = reading.config
    codes = [f.code for f in reading.findings]
    out: list[AuditFinding] = []

    def add(code: str, severity: str, message: str, fix: str = "") -> None:
        if not _already(code, codes):
            out.append(AuditFinding(code, severity, message, fix, "audit"))

    kl_on = config.has_reward or config.has_loss
    if not kl_on:
        add(
            "kl_off",
            "info",
            "No KL term reaches the gradient (placement none or coefficient 0): the policy is "
            "not held near the reference.",
        )
    if config.placement == "both" and abs(config.loss_coef_value - config.coef) > 1e-12:
        add(
            "coef_mismatch",
            "warning",
            f"Both placements are on with different coefficients (reward {config.coef:g}, loss "
            f"{config.loss_coef_value:g}): the two sides only combine into the reverse-KL "
            "gradient with one shared coefficient and a token sum.",
        )
    caveats = {c.split(" ")[0]: c for c in as_run.caveats}
    if kl_on and (config.kl_clamp is not None or config.log_ratio_clamp is not None):
        add("kl_clamp", "info", caveats.get("Clamps", "Clamps bias the estimator where they fire."))
    if config.has_loss and config.loss_aggregation != "sum":
        text = next((c for c in as_run.caveats if c.startswith("loss_aggregation=")), "")
        add("token_mean_loss", "info", text or "The loss-side KL is length-normalised.")
    if kl_on and reading.off_policy:
        unweighted_loss = config.has_loss and config.importance_weighting == "none"
        add(
            "off_policy",
            "warning" if unweighted_loss else "info",
            (
                "Updates reuse samples from an older policy"
                + (" and the KL loss has no importance weight. " if unweighted_loss else ". ")
                + caveats.get("Off-policy", "")
            ).strip(),
        )
    return out


def _status(reading: NativeReading, on_policy: Verdict, findings: Iterable[AuditFinding]) -> str:
    if any(f.severity == "error" for f in findings):
        return "error"
    if not (reading.config.has_reward or reading.config.has_loss):
        return "kl_off"
    return "unbiased" if on_policy.unbiased else "biased"


def switch_fix(config: KLConfig) -> str:
    """The kl-patches switch giving k1 in the reward at the configuration's coefficient."""
    if config.has_reward:
        coef = config.coef
    elif config.has_loss:
        coef = config.loss_coef_value
    else:
        coef = recommended().coef
    return f"KLConfig.parse('k1-in-reward', coef={coef:g})"


def audit_reading(
    reading: NativeReading,
    origin: str = "object",
    kind: str = "object",
    notes: Iterable[str] = (),
    extra: Iterable[AuditFinding] = (),
    ignored: Iterable[str] = (),
) -> AuditEntry:
    """Audit a reading an adapter already produced (``extra``: findings about the input)."""
    on_policy = verdict(reading.config, off_policy=False)
    as_run = verdict(reading.config, off_policy=reading.off_policy)
    findings = [
        AuditFinding(f.code, f.severity, f.message, f.fix, "adapter") for f in reading.findings
    ]
    findings += extra
    findings += audit_findings(reading, as_run)
    ignored = tuple(ignored)
    kl_like = [
        k
        for k in ignored
        if "kl" in k.lower().replace(".", "_").split("_")
        or "kl_" in k.lower()
        or "_kl" in k.lower()
    ]
    if kl_like:
        findings.append(
            AuditFinding(
                "ignored_kl_key",
                "warning",
                f"{', '.join(kl_like)} look KL-related but the {reading.library} reader does "
                "not read them: a typo, or a key this library version does not have.",
                "",
                "audit",
            )
        )
    status = _status(reading, on_policy, findings)
    fix_switch = "" if status == "unbiased" else switch_fix(reading.config)
    fix_native = () if status == "unbiased" else tuple(reading.fix)
    return AuditEntry(
        origin=origin,
        kind=kind,
        reading=reading,
        verdict=on_policy,
        status=status,
        findings=tuple(findings),
        fix_native=fix_native,
        fix_switch=fix_switch,
        ignored_keys=ignored,
        notes=tuple(notes),
    )


def launched_reading(native: NativeReading, config: KLConfig) -> NativeReading:
    """A launch through a kl-patches launcher: the library's reading with the patched KL.

    The adapter's findings and fix describe the library's own KL code, which the patch
    replaces, so they are dropped; the audit's own findings (from the KLConfig) still apply.
    """
    return dataclasses.replace(
        native,
        trainer=f"{native.trainer} (kl-patches)",
        config=config,
        findings=(),
        fix=(),
    )


def audit_input(inp: AuditInput, check_keys: bool = True) -> AuditEntry:
    """Read one launch through its adapter and audit it."""
    reading = _read(inp)
    ignored = ignored_keys(inp, reading) if check_keys else ()
    notes = list(inp.notes)
    if inp.kl_config is not None:
        reading = launched_reading(reading, inp.kl_config)
        notes.append(
            "launched through kl-patches: the KL is kl-patches' core maths for this KLConfig; "
            f"the library's own KL settings were read only for the rest ({reading.library} "
            "findings about its native KL code do not apply)"
        )
    if ignored:
        notes.append(
            f"{len(ignored)} key(s) not read by the {inp.library} reader (not KL-relevant, or "
            f"unknown): {', '.join(ignored[:8])}{' ...' if len(ignored) > 8 else ''}"
        )
    return audit_reading(reading, inp.origin, inp.kind, notes, input_findings(inp), ignored)


def input_findings(inp: AuditInput) -> list[AuditFinding]:
    """Findings about the launch itself: a comment that cut it short, unset variables."""
    out: list[AuditFinding] = []
    for w in inp.warnings:
        dropped = " ".join(inp.dropped)
        kl_lost = "kl" in dropped.lower()
        out.append(
            AuditFinding(
                "script_comment_ends_command",
                "error" if kl_lost else "warning",
                w
                + (f"; never passed to the trainer: {dropped}" if dropped else "")
                + (" (KL settings among them)" if kl_lost else ""),
                "delete the commented line, or move it below the command",
                "audit",
            )
        )
    if inp.unresolved:
        names = ", ".join("$" + u for u in inp.unresolved)
        out.append(
            AuditFinding(
                "unresolved_variables",
                "warning",
                f"The launch uses {names}, which the script never sets (the audit does not read "
                "the environment): they were read as literal text, so flags they carry are "
                "missing.",
                f"kl-patches audit --var {inp.unresolved[0]}=VALUE ...",
                "audit",
            )
        )
    return out


def _library_of_object(obj: object) -> str | None:
    for cls in type(obj).__mro__:
        root = cls.__module__.split(".")[0]
        if root in LIBRARIES:
            return root
    return None


def audit(
    source: Any, library: str | None = None, variables: dict[str, str] | None = None
) -> list[AuditEntry]:
    """Audit a file path, an argv list, a config mapping, a NativeReading or a config object.

    Raises :class:`AuditError` for input it cannot read (the CLI turns that into exit code 2).
    """
    try:
        if isinstance(source, NativeReading):
            return [audit_reading(source)]
        if isinstance(source, (str, Path)):
            inputs = inputs_from_file(source, library, variables)
        elif isinstance(source, (list, tuple)):
            inputs = inputs_from_argv([str(s) for s in source], library)
        elif isinstance(source, dict):
            inputs = inputs_from_mapping(source, library, "mapping")
        else:
            lib = library or _library_of_object(source)
            if lib is None:
                raise AuditError(
                    f"cannot tell which library a {type(source).__name__} belongs to; pass "
                    f"library= one of {list(LIBRARIES)}"
                )
            reading = _read(AuditInput(lib, source, type(source).__name__, "object"))
            return [audit_reading(reading, type(source).__name__, "object")]
    except InputError as err:
        raise AuditError(str(err)) from err
    return [audit_input(inp) for inp in inputs]


def audit_installed() -> tuple[list[AuditEntry], list[str]]:
    """The defaults of each installed library's trainers, read through its adapter.

    Libraries that are not installed are skipped with a note. An adapter's
    ``installed_defaults()`` (reads the installed code) is used when it has one: it may return
    readings, or ``{trainer: settings}`` mappings that are given to ``read`` with
    ``trainer=<name>``; without it the adapter's recorded defaults (empty input) are shown.
    """
    entries: list[AuditEntry] = []
    notes: list[str] = []
    for lib in LIBRARIES:
        if importlib.util.find_spec(lib) is None:
            notes.append(f"{lib}: not installed in this environment; skipped")
            continue
        try:
            module = _reader_module(lib)
        except AuditError as err:
            notes.append(f"{lib}: installed, but {err}")
            continue
        getter = getattr(module, "installed_defaults", None)
        origin = f"installed {lib}"
        try:
            if getter is None:
                reading = module.read([])
                entries.append(
                    audit_reading(
                        reading,
                        origin,
                        "installed",
                        [
                            f"the {lib} adapter has no installed_defaults(): these are the "
                            f"defaults written down in the adapter (version {reading.version})"
                        ],
                    )
                )
                continue
            defaults = getter()
            for reading in _readings_from_defaults(module.read, defaults):
                entries.append(audit_reading(reading, origin, "installed"))
        except Exception as err:
            notes.append(
                f"{lib}: installed, but its defaults could not be read: {type(err).__name__}: {err}"
            )
    return entries, notes


def _readings_from_defaults(
    read: Callable[[Any], NativeReading], defaults: Any
) -> list[NativeReading]:
    if isinstance(defaults, NativeReading):
        return [defaults]
    if isinstance(defaults, (list, tuple)) and all(isinstance(r, NativeReading) for r in defaults):
        return list(defaults)
    if isinstance(defaults, dict) and all(isinstance(v, dict) for v in defaults.values()):
        return [read({**values, "trainer": str(name).lower()}) for name, values in defaults.items()]
    return [read(defaults)]


# ----------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kl-patches audit",
        usage="kl-patches audit [options] [PATH ...] [-- ARGV ...]",
        description="Which KL gradient a verl, OpenRLHF or TRL setup follows, and the fix.",
        epilog=(
            "Examples: kl-patches audit run_grpo.sh | kl-patches audit config.yaml "
            "--library trl | kl-patches audit --library openrlhf -- --algo.kl.use_loss ... | "
            "kl-patches audit --installed. Exit codes: 0 read (and, with --strict, no biased "
            "setup); 1 --strict and a biased or KL-dropping setup; 2 unreadable input."
        ),
    )
    p.add_argument("paths", nargs="*", help="launch scripts, YAML/JSON configs, override files")
    p.add_argument("--library", choices=LIBRARIES, help="read every input as this library's")
    p.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a shell variable the scripts use but do not set (the environment is not read)",
    )
    p.add_argument("--installed", action="store_true", help="audit installed libraries' defaults")
    p.add_argument("--json", action="store_true", help="machine-readable report (schema: docs)")
    p.add_argument("--strict", action="store_true", help="exit 1 if any setup is biased/drops KL")
    p.add_argument("--plain", action="store_true", help="plain text even if rich is installed")
    p.add_argument("--debug", action="store_true", help="show tracebacks of reader failures")
    return p


def main(argv: list[str]) -> int:
    """``kl-patches audit ...``; returns the exit code (see the module docstring)."""
    from kl_patches import audit_report

    args_in = list(argv)
    extra: list[str] | None = None
    if "--" in args_in:
        k = args_in.index("--")
        args_in, extra = args_in[:k], args_in[k + 1 :]
    parser = _parser()
    try:
        args = parser.parse_args(args_in)
    except SystemExit as exc:  # argparse already printed the usage and the reason
        return int(exc.code) if isinstance(exc.code, int) else 2
    if not args.paths and not extra and not args.installed:
        parser.print_usage(sys.stderr)
        print(
            "kl-patches audit: give a launch script, a config file, an argv after --, or "
            "--installed",
            file=sys.stderr,
        )
        return 2
    variables: dict[str, str] = {}
    for item in args.var:
        name, eq, value = item.partition("=")
        if not eq or not name:
            print(f"kl-patches audit: --var expects NAME=VALUE, got {item!r}", file=sys.stderr)
            return 2
        variables[name] = value
    entries: list[AuditEntry] = []
    notes: list[str] = []
    try:
        for path in args.paths:
            entries += audit(path, args.library, variables)
        if extra:
            entries += [audit_input(i) for i in inputs_from_argv(extra, args.library)]
        if args.installed:
            found, skipped = audit_installed()
            entries += found
            notes += skipped
    except (AuditError, InputError) as err:
        print(f"kl-patches audit: {err}", file=sys.stderr)
        return 2
    except Exception as err:
        if args.debug:
            raise
        print(
            f"kl-patches audit: internal error while reading ({type(err).__name__}: {err}); "
            "rerun with --debug for the traceback and report it",
            file=sys.stderr,
        )
        return 2
    code = 1 if args.strict and any(e.fails_strict for e in entries) else 0
    if args.json:
        text = audit_report.to_json(entries, notes, strict=args.strict, exit_code=code)
    else:
        text = audit_report.render(entries, notes, strict=args.strict, rich=not args.plain)
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `kl-patches audit ... | head`: the reader left, keep the code
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (stop the flush at exit failing)
    return code
