"""Round trip of ``kl-patches audit FILE --fix --write`` over the real-file benchmark.

Usage::

    python benchmarks/audit_roundtrip.py MIRROR_ROOT [--only ID ...] [--json OUT] [--no-parser]

For every file of ``benchmarks/audit_real_files/files.yaml`` (written from the mirrors at its
commit with its siblings, as the scorer ``audit_real_files.py`` does): ``kl-patches audit FILE
--fix --write --no-backup`` on that temporary copy, read as the release the repository pins
(``--library-version LIB=PIN``, else the newest tested release), then

1. the re-audit (``--json``) reports no ``biased`` and no ``error`` trainer;
2. the library's own parser accepts the edited file: the repository is exported at the commit,
   the file replaced by the edited one, and the derivation harness (``derive.py``: bash with
   stubs, Hydra compose with the pinned verl's config, the pinned OpenRLHF's argparse, TRL's
   parser in a venv with that trl) reads it; a launch it marks ``rejected`` fails. Where the
   harness has no parser for the release (no venv for that trl, the newest wheels not
   unpacked under ``build/``) the check is reported as not run.

A file round-trips when the fix ran (exit 0), the re-audit is clean and the parser accepted
it (or the file needed no change). The rate per library and format and each exception with
its reason are printed. Not part of the test suite (it needs the mirrors).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "audit_real_files"))

import audit_real_files as scorer  # noqa: E402
import yaml  # noqa: E402

NEWEST = {"verl": "0.9.1", "openrlhf": "0.11.2", "trl": "1.16.0"}


def _run(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )


def _version(item: dict[str, Any]) -> str:
    if "pinned" in item.get("expect", {}) and item.get("pin"):
        return scorer.pinned_version(item)
    return NEWEST[item["library"]]


def parser_check(mirrors: Path, item: dict[str, Any], fixed: str) -> tuple[bool | None, str]:
    """(accepted, why) of the edited file by the library's own parser (None: not run)."""
    import derive

    which = "pinned" if item.get("pin") else "newest"
    if which == "newest" and not (derive.VERL_WHEEL.exists() or item["library"] != "verl"):
        return None, "the newest verl wheel is not unpacked under build/"
    work = Path(tempfile.mkdtemp(prefix="rf-rt-"))
    try:
        derive.materialise_repo(mirrors, item, item["commit"], work)
        rel = str(Path(item.get("mount", "")) / item["path"]) if item.get("mount") else item["path"]
        text = fixed
        for k, v in (item.get("placeholders") or {}).items():
            text = text.replace(k, v)
        (work / rel).write_text(text)
        kind = item["kind"]
        log: list[str] = []
        if kind in ("shell", "slurm"):
            launches = derive.shell_launches(work, item, rel, log)
        elif kind == "cluster-yaml":
            launches = derive.cluster_yaml_launches(work, item, rel, log)
        elif kind == "yaml":
            launches = derive.yaml_launches(work, item)
        else:
            launches = derive.python_file(work, item, log)
        lib = item["library"]
        version = str(item["pin"]["version"]) if which == "pinned" else NEWEST[lib]
        if lib == "trl" and not derive.trl_venv(version).exists():
            return None, f"no venv with trl {version} for TrlParser"
        if not launches and item["expect"].get(which, {}).get("launches"):
            return False, "the parser harness finds no launch in the edited file"
        for launch in launches:
            r = derive.EXPECT[lib](launch, work, item, which, version)
            if r.get("rejected"):
                return False, f"{lib} {version} refuses it: {str(r['rejected'])[:160]}"
        return True, f"{len(launches)} launch(es) accepted by {lib} {version}"
    except Exception as err:  # the harness itself failed: say so, do not count it as accepted
        return None, f"parser harness failed: {type(err).__name__}: {str(err)[:120]}"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def one(
    mirrors: Path, item: dict[str, Any], audit: list[str], timeout: float, parser: bool
) -> dict[str, Any]:
    """The round trip of one listed file."""
    res: dict[str, Any] = {"id": item["id"], "library": item["library"], "kind": item["kind"]}
    with tempfile.TemporaryDirectory(prefix="rf-fix-") as tmp:
        root = Path(tmp)
        path = scorer.materialise_item(mirrors, item, root)
        cwd = root / item.get("mount", "") / item.get("cwd", ".")
        cwd.mkdir(parents=True, exist_ok=True)
        before = path.read_text(errors="replace")
        if "pinned" in item.get("expect", {}) and item.get("pin"):
            scorer.vendored_config(mirrors, item, root)  # the copy's config runs
        extra = ["--library-version", f"{item['library']}={_version(item)}"]
        for k, v in (item.get("env") or {}).items():
            extra += ["--var", f"{k}={v}"]
        try:
            fix = _run([*audit, str(path), "--fix", "--write", "--no-backup", *extra], cwd, timeout)
            again = _run([*audit, str(path), "--json", *extra], cwd, timeout)
        except subprocess.TimeoutExpired:
            return res | {"ok": False, "why": f"timed out after {timeout:g}s"}
        after = path.read_text(errors="replace")
        res["changed"] = after != before
        res["diff"] = fix.stdout[-4000:]
        problems = [ln for ln in fix.stderr.splitlines() if "not fixed" in ln]
        expected = item["expect"][
            "pinned" if "pinned" in item["expect"] and item.get("pin") else "newest"
        ]["launches"]
        no_launch = "launch found" in fix.stderr or "no trainer with a reference KL" in fix.stderr
        if fix.returncode != 0 and no_launch and not expected:
            return res | {"ok": True, "why": "no launch (none expected): nothing to fix"}
        if fix.returncode not in (0, 1):  # 1: written, but a launch is left to the user
            why = (problems or fix.stderr.strip().splitlines() or ["?"])[0]
            return res | {"ok": False, "why": "fix refused: " + why.split("not fixed: ")[-1]}
        try:
            doc = json.loads(again.stdout)
        except json.JSONDecodeError:
            return res | {"ok": False, "why": "re-audit unreadable: " + again.stderr[-200:]}
        bad = [
            f"{t.get('origin')}: {t.get('status')} "
            + ",".join(f["code"] for f in t.get("findings", []) if f["severity"] == "error")
            for t in doc.get("trainers", [])
            if t.get("status") in ("biased", "error")
        ]
        if bad:
            return res | {"ok": False, "why": "re-audit: " + "; ".join(bad)[:200]}
        if not res["changed"]:
            return res | {"ok": True, "why": "nothing to change", "parser": None}
        accepted, why = parser_check(mirrors, item, after) if parser else (None, "not run")
        res["parser"] = accepted
        res["parser_why"] = why
        if accepted is False:
            return res | {"ok": False, "why": "parser: " + why}
        return res | {"ok": True, "why": why}


CAUSES = (
    (
        "_rejected",
        "refused by its release before any fix (names or config the audit reads it with)",
    ),
    ("_not_in_version", "refused by its release before any fix (entry point not in that release)"),
    ("kl_loss_sign_bug", "vendored copy with the KL-loss sign bug: reported whatever the switches"),
    (
        "project's own trainer class",
        "the project's own trainer class (a copy of TRL's code): no TRL option or patch reaches it",
    ),
    ("drops_kl", "the trainer drops the KL itself: the user's choice of algorithm"),
    ("entry_drops", "the trainer drops the KL itself: the user's choice of algorithm"),
    ("not supported yet", "Python or JSON file: no writer here"),
    ("entry point", "a project script as entry point: the kl-patches launcher cannot wrap it"),
    ("no kl-patches route", "no native fix and the kl-patches patch refuses that release"),
    ("not written in this file", "the launch is written in another file"),
    (
        "read from the command line",
        "a script that takes its KL settings from its command line: they belong to the launch",
    ),
    ("comment_ends_command", "a comment cuts the launch's KL flags off (bash drops them)"),
    ("no trainer with a reference KL", "the audit finds no trainer in it (one is expected)"),
)
"""(text in the reason, cause) for the exceptions, first match wins."""


def cause(why: str) -> str:
    """The cause of an exception, from its reason."""
    return next((c for text, c in CAUSES if text in why), "other")


def summarise(results: list[dict[str, Any]]) -> None:
    """Print the rate per library and format, and the exceptions grouped by cause."""
    rows: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in results:
        c = rows[(r["library"], r["kind"])]
        c["files"] += 1
        c["ok"] += int(r["ok"])
        c["changed"] += int(bool(r.get("changed")) and r["ok"])
        c["parser"] += int(r.get("parser") is True)
    print("\n| library | format | files | round-trip | edited | parser accepted the edit |")
    print("|---|---|---|---|---|---|")
    total: Counter[str] = Counter()
    for (lib, kind), c in sorted(rows.items()):
        total.update(c)
        print(f"| {lib} | {kind} | {c['files']} | {c['ok']} | {c['changed']} | {c['parser']} |")
    n = total["files"] or 1
    print(f"| all | | {total['files']} | {total['ok']} ({100 * total['ok'] / n:.1f}%) | "
          f"{total['changed']} | {total['parser']} |")  # fmt: skip
    groups: dict[str, list[str]] = defaultdict(list)
    for r in results:
        if not r["ok"]:
            groups[cause(r["why"])].append(r["id"])
    refused = [r for r in results if not r["ok"] and cause(r["why"]).startswith("refused")]
    written = sum(1 for r in refused if r.get("changed"))
    print(f"\nrefused by their release: {len(refused)}; the KL fix written anyway: {written}")
    print("\nexceptions by cause:")
    for why, ids in sorted(groups.items(), key=lambda x: -len(x[1])):
        print(f"- {len(ids)}: {why}: {', '.join(ids)}")
    print("\nexceptions:")
    for r in results:
        if not r["ok"]:
            print(f"- {r['id']} ({r['library']} {r['kind']}): {r['why'][:300]}")


def main(argv: list[str] | None = None) -> int:
    """CLI entry (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mirrors", type=Path)
    p.add_argument("--files", type=Path, default=HERE / "audit_real_files" / "files.yaml")
    p.add_argument("--only", nargs="*")
    p.add_argument("--json", type=Path)
    p.add_argument("--timeout", type=float, default=180.0)
    p.add_argument("--no-parser", action="store_true")
    p.add_argument("--shard", default="1/1", help="K/N: every N-th file from the K-th")
    p.add_argument("--audit", default=None, help="the audit command (default: kl-patches here)")
    p.add_argument("--summarise", nargs="*", type=Path, help="only summarise these --json outputs")
    args = p.parse_args(argv)
    if args.summarise:
        summarise([r for f in args.summarise for r in json.loads(f.read_text())])
        return 0
    doc = yaml.safe_load(args.files.read_text())
    items = [x for x in doc["files"] if not args.only or x["id"] in args.only]
    k, n = (int(x) for x in args.shard.split("/"))
    items = items[k - 1 :: n]
    audit = args.audit.split() if args.audit else [sys.executable, "-m", "kl_patches", "audit"]
    results = []
    for item in items:
        if "expect" not in item:
            continue
        r = one(args.mirrors, item, audit, args.timeout, not args.no_parser)
        print(f"{r['id']}: {'ok' if r['ok'] else 'FAIL'} ({r['why']})", flush=True)
        results.append(r)
    summarise(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
