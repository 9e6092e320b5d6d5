"""Fix one launch file: plan every launch (:mod:`.plan`), edit the text with the writer of the
file's format, re-audit the edited text, and give the unified diff.

Writers: bash (:mod:`.shell_edit`, also the ``run:`` block of a cluster YAML), YAML
(:mod:`.yaml_edit`), Python (``kl_patches.audit.fix.python_edit.apply_python`` where it is
installed; otherwise a Python file is reported as not supported yet). The edited text is
re-audited exactly as the file would be (same path, so configs and pins next to it are read);
a launch whose re-audit is not clean makes the whole file unfixed, with the reason, and nothing
is written.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kl_patches import adapters
from kl_patches.adapters.files import read_file
from kl_patches.audit.fix import validate
from kl_patches.audit.fix.change import Change, ChangeSet
from kl_patches.audit.fix.plan import Plan, blocking, plan_launch, producer
from kl_patches.audit.fix.shell_edit import EditError, apply_list, apply_shell
from kl_patches.audit.fix.yaml_edit import apply_yaml
from kl_patches.audit.inputs import inputs_from_source
from kl_patches.audit.model import AuditEntry, AuditError, InputError
from kl_patches.audit.run import audit_input

__all__ = ["FileFix", "diff", "fix_file", "write_fix"]


@dataclass
class FileFix:
    """The fix of one file."""

    path: str
    """The file."""
    text: str
    """Its text as read."""
    new_text: str
    """The edited text (``text`` when nothing is changed)."""
    plans: list[Plan] = field(default_factory=list)
    """One plan per launch, in the file's order."""
    after: list[AuditEntry] = field(default_factory=list)
    """The re-audit of ``new_text``."""
    problems: list[str] = field(default_factory=list)
    """Why the file is not (fully) fixed; empty when every planned change was verified."""

    @property
    def changed(self) -> bool:
        """True when the fix edits the file."""
        return self.new_text != self.text

    @property
    def left(self) -> list[AuditEntry]:
        """Launches still ``biased`` or ``error`` once the fix is applied (the re-audit of the
        edited text, or the audit as read when nothing is edited): what is left to the user."""
        entries = self.after if self.changed else [p.entry for p in self.plans]
        return [e for e in entries if e.fails_strict]

    @property
    def label(self) -> str:
        """``native`` when every change set is native, else ``with kl-patches``."""
        labels = {p.changes.label for p in self.plans if p.changes is not None}
        return "with kl-patches" if "with kl-patches" in labels else "native"


def diff(fix: FileFix) -> str:
    """The unified diff of ``fix`` (``a/PATH`` -> ``b/PATH``)."""
    return "".join(
        difflib.unified_diff(
            fix.text.splitlines(keepends=True),
            fix.new_text.splitlines(keepends=True),
            f"a/{fix.path.lstrip('/')}",
            f"b/{fix.path.lstrip('/')}",
        )
    )


def _kind(path: Path, text: str) -> str:
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "cluster" if "\nrun:" in "\n" + text else "yaml"
    if suffix == ".py":
        return "python"
    if suffix == ".json":
        return "json"
    return "shell"


def _line_of(origin: str, path: Path) -> int | None:
    """The launch's line in ``path`` from its origin (``path:12``, ``path:12 [if@4=then]``,
    ``path:4 -> script.py:17``); None when the origin is another file or has no line."""
    m = re.match(r"^(.*?):(\d+)(?:\s|$)", origin)
    if m is None:
        return None
    if m.group(1) and Path(m.group(1)).resolve() != path.resolve():
        return None
    return int(m.group(2))


def _cluster_line(origin: str, path: Path, text: str) -> int | None:
    """The file line of a launch in a cluster job file's ``run:`` block (``path:run:N``: line
    N of the block's shell text), found by its text; None when it is not there once."""
    import yaml

    from kl_patches.audit.yaml_inputs import cluster_commands

    m = re.match(r"^(.*):run:(\d+)(?:\s|$)", origin)
    if m is None or Path(m.group(1)).resolve() != path.resolve():
        return None
    try:
        found = cluster_commands(yaml.safe_load(text))
    except yaml.YAMLError:
        return None
    shell = found[0].split("\n") if found else []
    n = int(m.group(2))
    if not 1 <= n <= len(shell) or not shell[n - 1].strip():
        return None
    rows = [r for r, ln in enumerate(text.split("\n")) if ln.strip() == shell[n - 1].strip()]
    return rows[0] + 1 if len(rows) == 1 else None


def _edit(path: Path, text: str, kind: str, plans: list[Plan]) -> str:
    todo = [p for p in plans if p.changes is not None]
    if kind == "yaml":
        new = text
        for p in todo:
            assert p.changes is not None
            new = apply_yaml(new, [c for c in p.changes.changes if c.action != "entry_point"])
        return new
    if kind == "python":
        from kl_patches.audit.fix.python_apply import add_apply
        from kl_patches.audit.fix.python_edit import apply_python

        new = text
        for p in todo:
            assert p.changes is not None
            patches = [c for c in p.changes.changes if c.action == "entry_point"]
            edits = [c for c in p.changes.changes if c.action != "entry_point"]
            if patches:
                edits = [c for c in edits if not _patch_sets(c, new, p.entry.origin)]
            try:
                if edits:
                    new = apply_python(new, edits)
                for c in patches:  # the launcher's patch, applied in the script itself
                    assert c.value is not None
                    new = add_apply(new, c.value, p.entry.origin)
            except (ValueError, TypeError) as err:  # the Python writer's refusal, with why
                raise EditError(f"{p.entry.origin}: {err}") from err
            except ImportError as err:  # libcst missing: the message names the extra
                raise EditError(str(err)) from err
        return new
    if kind == "json":
        raise EditError("fixing a JSON config is not supported yet; edit it by hand")
    if all(p.entry.kind == "overrides" for p in todo):
        new = text
        for p in todo:
            assert p.changes is not None
            new = apply_list(new, p.changes.changes)
        return new
    located: list[tuple[int, Plan]] = []
    for p in todo:
        line = _cluster_line(p.entry.origin, path, text) if kind == "cluster" else None
        line = line or _line_of(p.entry.origin, path)
        if line is None:
            raise EditError(
                f"the launch {p.entry.origin} is not written in this file (a sourced script?); "
                "fix it there"
            )
        located.append((line, p))
    by_line: dict[int, tuple[Change, ...]] = {}
    for line, p in located:
        assert p.changes is not None
        if line in by_line and _edits(by_line[line]) != _edits(p.changes.changes):
            raise EditError(
                f"line {line} starts launches that need different changes (branches or loop "
                "iterations of one command): fix them by hand"
            )
        by_line[line] = p.changes.changes
    new = text
    for line in sorted(by_line, reverse=True):
        new = apply_shell(new, line, by_line[line])
    return new


PATCH_SETS = frozenset({"beta"})
"""TRL config fields the kl-patches patch sets itself on every trainer it takes over: the
patched ``__init__`` sets ``beta`` to what runs the KL config (0.14-0.26,
``kl_patches/adapters/trl/legacy.py`` module docstring) or runs the KL through its hooks
whatever ``beta`` is (``kl_patches/adapters/trl/patch.py`` module docstring)."""


def _patch_sets(change: Change, text: str, origin: str) -> bool:
    """True for a change the patch written into the script makes anyway and that the script
    cannot hold: a field of :data:`PATCH_SETS` of a config every trainer reads from the
    command line (``TrlParser``) with no assignment of it in the file. The patch then holds
    whatever the launch passes for it."""
    from kl_patches.audit.python import read_python

    if change.namespace != "trl" or change.key not in PATCH_SETS:
        return False
    launches = [x for x in read_python(text, origin).launches if x.library == "trl"]
    return bool(launches) and all(
        x.from_argv and change.key not in x.kwargs and change.key not in x.unresolved
        for x in launches
    )


def _edits(changes: tuple[Change, ...]) -> set[tuple[str, str, str | None, str | None]]:
    """What a change set edits (the reasons aside)."""
    return {(c.action, c.key, c.value, c.new_key) for c in changes}


def fix_file(
    path: str | Path,
    library: str | None = None,
    variables: dict[str, str] | None = None,
    versions: dict[str, str] | None = None,
) -> FileFix:
    """Plan, edit and re-audit one file (nothing is written; see :func:`write_fix`)."""
    p = Path(path)
    try:
        text = read_file(p).text
        inputs = [
            dataclasses.replace(i, path=str(p))
            for i in inputs_from_source(text, str(p), p, library, variables)
        ]
    except (InputError, ValueError) as err:
        raise AuditError(str(err)) from err
    plans: list[Plan] = []
    for inp in inputs:
        if inp.kind == "unreadable":
            continue
        entry = audit_input(inp, versions=versions)
        plans.append(plan_launch(inp, entry, versions))
    fix = FileFix(str(path), text, text, plans)
    for plan in plans:
        if plan.changes is None and plan.why and not plan.why.startswith(("nothing", "no KL")):
            fix.problems.append(f"{plan.entry.origin}: {plan.why}")
    if not any(pl.changes for pl in plans):
        return fix
    try:
        new = _edit(p, text, _kind(p, text), plans)
    except EditError as err:
        fix.problems.append(str(err))
        return fix
    try:
        after = [
            audit_input(dataclasses.replace(i, path=str(p)), versions=versions)
            for i in inputs_from_source(new, str(p), p, library, variables)
            if i.kind != "unreadable"
        ]
    except (AuditError, InputError, ValueError) as err:
        fix.problems.append(f"the edited file cannot be read: {err}")
        return fix
    if len(after) != len(plans):
        fix.problems.append(
            f"the edited file has {len(after)} launch(es), the file {len(plans)}: not written"
        )
        return fix
    for plan, entry in zip(plans, after, strict=True):
        if plan.changes is None:
            if entry.reading.config != plan.entry.reading.config:
                fix.problems.append(
                    f"{plan.entry.origin}: the edit also changes this launch's KL, which needs "
                    "no change (a value shared with another launch): not written"
                )
            continue
        allowed = plan.allowed | frozenset(producer(entry.reading.library).user_choices(entry))
        left = blocking(entry, allowed)
        if left:
            fix.problems.append(
                f"{plan.entry.origin}: after the edit the audit still reports "
                + "; ".join(f"{f.code} ({f.severity})" for f in left)
                + ": not written"
            )
    fix.after = after
    if not fix.problems or all(not _ours(x) for x in fix.problems):
        fix.new_text = new
    return fix


def _ours(problem: str) -> bool:
    """True for a problem found after the edit (the edit is then not written)."""
    return problem.endswith(": not written") or "edited file" in problem


def write_fix(fix: FileFix, backup: bool = True) -> str | None:
    """Write ``fix.new_text`` to the file (``FILE.orig`` first unless ``backup`` is False);
    the backup's path, or None."""
    if not fix.changed:
        return None
    saved = None
    if backup:
        saved = fix.path + ".orig"
        shutil.copy2(fix.path, saved)
    mode = os.stat(fix.path).st_mode
    Path(fix.path).write_text(fix.new_text, encoding="utf-8")
    os.chmod(fix.path, mode)
    return saved


def _said(c: Change, by_patch: bool) -> str:
    """One change as the summary says it: a module switch, or the action on the key with its
    value, new name and the release fact behind it; ``by_patch``: the patch makes it at run
    time (a field of a config the script reads from the command line), not the file."""
    if c.module_switch:
        return f"switch {c.key} -> {c.value}"
    return (
        f"{c.action} {c.key}"
        + (f"={c.value}" if c.value is not None else "")
        + (f" -> {c.new_key}" if c.new_key else "")
        + (f" ({c.reason.split(': ', 1)[1]})" if ": " in c.reason else "")
        + (" (by the patch at run time: the script reads it from the command line)" if by_patch
           else "")
    )  # fmt: skip


def summary(fix: FileFix) -> list[str]:
    """One line per launch: its label and changes, or why it is left as it is."""
    out = []
    for plan in fix.plans:
        cs: ChangeSet | None = plan.changes
        if cs is None:
            out.append(f"{plan.entry.origin}: unchanged ({plan.why})")
            continue
        patched = _kind(Path(fix.path), fix.text) == "python" and any(
            c.action == "entry_point" for c in cs.changes
        )
        words = ", ".join(
            _said(c, patched and _patch_sets(c, fix.text, plan.entry.origin)) for c in cs.changes
        )
        out.append(f"{plan.entry.origin}: {cs.label}: {words}")
        checked = validate.change_set_check(plan.entry, cs)
        if checked:
            out.append(f"  parser: {checked}")
        out += [f"  your choice: {u}" for u in cs.user_choices]
        if cs.label == "with kl-patches" and not any(c.action == "entry_point" for c in cs.changes):
            launcher = adapters.get(plan.entry.reading.library).launchers[0]
            subs = launcher.subcommands
            sub = next((w for w in subs if w in plan.entry.reading.trainer.lower()), subs[0:1])
            words = " ".join(["kl-patches", launcher.command, *([sub] if isinstance(sub, str)
                              else sub), "--config", fix.path])  # fmt: skip
            out.append(f"  run it with the kl-patches launcher: {words}")
            if plan.entry.reading.library == "trl":  # the launcher runs TRL's own script
                out.append(
                    "  (that runs TRL's own script; a project script that reads this config "
                    "needs `import kl_patches.trl; kl_patches.trl.apply(...)` before it builds "
                    "its trainer, with the kl block's values: run without either, TRL before "
                    "0.19 drops the kl block without a word)"
                )
    return out
