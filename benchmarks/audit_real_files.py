"""Score ``kl-patches audit`` on real launch files from public repositories.

Usage::

    python benchmarks/audit_real_files.py MIRROR_ROOT [--library-version-from-pin]
        [--json OUT] [--files benchmarks/audit_real_files/files.yaml] [--only ID ...]
        [--timeout 60] [--audit "kl-patches audit"]

MIRROR_ROOT holds bare git mirrors as the team's fetch tool writes them
(``MIRROR_ROOT/<owner>+<name>/repo``). For every file listed in files.yaml this script writes
the file and its siblings (configs it names, scripts it sources) from the mirror into a
throwaway directory with ``git cat-file blob``, checks each blob id, runs
``kl-patches audit PATH --json`` (a subprocess with a timeout; the variables a user must set,
``env`` in the list, are passed as ``--var``), and compares the audit's trainers with the
expected readings derived without kl-patches (benchmarks/audit_real_files/derive.py).

A file is *read right* when every expected trainer launch is matched one-to-one by an audit
trainer with the same library, the same reward side and loss side (estimator, and coefficient
to 1e-9 relative) and the same off-policy flag, and the audit reports no extra launch. An
expected launch the library itself would refuse (``rejected``) is matched only by an audit
trainer of that library with status ``error`` (an audit that cannot read the file at all is
*unreadable*, not right). *Unreadable*: the audit exited 2, timed out or printed no JSON.

Two expectations are scored: ``newest`` (the releases the audit assumes: verl 0.9.1,
OpenRLHF 0.11.2, TRL 1.16.0) and ``pinned`` (the version the file's repository pins). With
``--library-version-from-pin`` the pinned run passes ``--library-version LIB=VER`` to the audit
when its ``--help`` offers that option; otherwise the pinned expectation is scored against the
same audit output. Not part of the test suite (it needs the mirrors).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "audit_real_files"
sys.path.insert(0, str(HERE))

from mirror import MirrorError, git_dir, materialise  # noqa: E402

LIBRARIES = ("verl", "openrlhf", "trl")


# ----------------------------------------------------------------------------- audit side
def audit_reading(trainer: dict[str, Any]) -> dict[str, Any]:
    """One audit JSON trainer as a reading (reward side, loss side, off-policy)."""
    cfg = trainer.get("config") or {}
    placement = cfg.get("placement", "none")
    est = cfg.get("estimator")
    coef = cfg.get("coef")
    loss_coef = cfg.get("loss_coef")
    reward = loss = None
    if placement in ("reward", "both") and coef:
        reward = {"estimator": est, "coef": float(coef)}
    if placement in ("loss", "both"):
        lc = loss_coef if loss_coef is not None else coef
        if lc:
            loss = {"estimator": est, "coef": float(lc)}
    return {
        "library": trainer.get("library"),
        "trainer": trainer.get("trainer"),
        "origin": trainer.get("origin"),
        "status": trainer.get("status"),
        "reward": reward,
        "loss": loss,
        "off_policy": bool(trainer.get("off_policy")),
    }


def run_audit(
    audit_cmd: list[str],
    path: Path,
    cwd: Path,
    variables: dict[str, str],
    extra: list[str],
    timeout: float,
) -> dict[str, Any]:
    """Run the audit on one file: {"rc", "json" | None, "stderr"}."""
    cmd = [*audit_cmd, str(path), "--json", *extra]
    for k, v in variables.items():
        cmd += ["--var", f"{k}={v}"]
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    except subprocess.TimeoutExpired:
        return {"rc": 124, "json": None, "stderr": f"timed out after {timeout:g}s"}
    doc = None
    if proc.stdout.strip():
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            doc = None
    return {"rc": proc.returncode, "json": doc, "stderr": proc.stderr.strip()}


def supports_library_version(audit_cmd: list[str]) -> bool:
    """True when ``kl-patches audit --help`` offers ``--library-version``."""
    try:
        out = subprocess.run(
            [*audit_cmd, "--help"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--library-version" in out.stdout


def default_audit() -> str:
    """``kl-patches`` of this Python's environment, else the one on PATH."""
    here = Path(sys.executable).parent / "kl-patches"
    if here.exists():
        return str(here)
    found = shutil.which("kl-patches")
    if found is None:
        raise SystemExit("kl-patches is not installed here; pass --audit 'CMD audit'")
    return found


# ----------------------------------------------------------------------------- comparison
def _same_coef(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)


def _side_text(side: dict[str, Any] | None) -> str:
    return "none" if side is None else f"{side['estimator']}@{side['coef']:g}"


def side_diff(name: str, exp: dict[str, Any] | None, got: dict[str, Any] | None) -> str:
    """Empty when two sides agree, else a short description."""
    if exp is None and got is None:
        return ""
    if exp is None or got is None:
        return f"{name} {_side_text(exp)} expected, audit {_side_text(got)}"
    if exp["estimator"] != got["estimator"] or not _same_coef(exp["coef"], got["coef"]):
        return f"{name} {_side_text(exp)} expected, audit {_side_text(got)}"
    return ""


def launch_diff(exp: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Differences between an expected launch and an audit trainer ([] when they match)."""
    if exp.get("rejected"):
        if got["library"] == exp["library"] and got["status"] == "error":
            return []
        return [f"library rejects it ({exp['rejected'][:90]}); audit read it as "
                f"{got['library']} reward {_side_text(got['reward'])} loss "
                f"{_side_text(got['loss'])}"]  # fmt: skip
    out = []
    if got["library"] != exp["library"]:
        out.append(f"library {exp['library']} expected, audit {got['library']}")
    out += [d for d in (side_diff("reward", exp["reward"], got["reward"]),
                        side_diff("loss", exp["loss"], got["loss"])) if d]  # fmt: skip
    if bool(exp["off_policy"]) != got["off_policy"]:
        out.append(f"off_policy {exp['off_policy']} expected ({exp['off_policy_reason'][:60]}), "
                   f"audit {got['off_policy']}")  # fmt: skip
    return out


def score(expected: list[dict[str, Any]], audit: dict[str, Any]) -> dict[str, Any]:
    """Verdict for one file and one expectation: right / wrong / unreadable, with reasons."""
    if audit["json"] is None:
        first = (audit["stderr"].splitlines() or [""])[-1][:200]
        return {"verdict": "unreadable", "reasons": [f"audit rc={audit['rc']}: {first}"]}
    got = [audit_reading(t) for t in audit["json"].get("trainers", [])]
    if not expected:
        if not got:
            return {"verdict": "right", "reasons": []}
        return {"verdict": "wrong", "reasons": [f"no launch expected, audit found {len(got)}"]}
    if not got:
        return {"verdict": "wrong", "reasons": [f"{len(expected)} launch(es) expected, audit "
                                                "found none"]}  # fmt: skip
    unused = list(range(len(got)))
    reasons: list[str] = []
    for k, exp in enumerate(expected):
        match = next((j for j in unused if not launch_diff(exp, got[j])), None)
        if match is not None:
            unused.remove(match)
            continue
        # report against the closest candidate: same position if unused, else the first unused
        cand = k if k in unused else (unused[0] if unused else None)
        if cand is None:
            reasons.append(f"launch {k + 1} ({exp['entry']}): not found by the audit")
            continue
        unused.remove(cand)
        reasons.append(
            f"launch {k + 1} ({exp['entry']}): " + "; ".join(launch_diff(exp, got[cand]))
        )
    if unused:
        reasons.append(f"audit found {len(unused)} launch(es) not expected")
    if len(got) != len(expected):
        reasons.insert(0, f"{len(expected)} launch(es) expected, audit found {len(got)}")
    return {"verdict": "wrong" if reasons else "right", "reasons": reasons}


# ----------------------------------------------------------------------------- files
def materialise_item(mirrors: Path, item: dict[str, Any], dest: Path) -> Path:
    """Write the file and its siblings under ``dest`` (blob ids checked); the file's path."""
    gdir = git_dir(mirrors, item["repo"])
    mount = Path(item.get("mount", ""))
    target = dest / mount
    path = materialise(gdir, item["commit"], item["path"], item["blob"], target)
    for sib in item.get("siblings", []):
        materialise(gdir, item["commit"], sib["path"], sib["blob"], target)
    return path


def main(argv: list[str] | None = None) -> int:
    """CLI entry (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mirrors", type=Path, help="folder of bare git mirrors (owner+name/repo)")
    p.add_argument("--files", type=Path, default=HERE / "files.yaml")
    p.add_argument("--library-version-from-pin", action="store_true")
    p.add_argument("--json", type=Path, help="write every result here")
    p.add_argument("--only", nargs="*")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument(
        "--audit",
        default=None,
        help="the audit command (default: kl-patches next to this Python, or on PATH)",
    )
    args = p.parse_args(argv)
    import yaml

    doc = yaml.safe_load(args.files.read_text())
    items = [x for x in doc["files"] if not args.only or x["id"] in args.only]
    audit_cmd = shlex.split(args.audit) if args.audit else [default_audit(), "audit"]
    with_version = args.library_version_from_pin and supports_library_version(audit_cmd)
    if args.library_version_from_pin and not with_version:
        print("note: the audit has no --library-version option; the pinned expectation is "
              "scored against the same audit output as the newest one\n")  # fmt: skip
    results: list[dict[str, Any]] = []
    for item in items:
        res: dict[str, Any] = {"id": item["id"], "library": item["library"],
                               "kind": item["kind"], "features": item.get("features", []),
                               "repo": item["repo"], "path": item["path"]}  # fmt: skip
        if "expect" not in item:
            res["error"] = item.get("derive_error", "no expectation")
            results.append(res)
            continue
        with tempfile.TemporaryDirectory(prefix="rf-audit-") as tmp:
            root = Path(tmp)
            try:
                path = materialise_item(args.mirrors, item, root)
            except MirrorError as exc:
                res["error"] = str(exc)
                results.append(res)
                continue
            cwd = root / item.get("mount", "") / item.get("cwd", ".")
            cwd.mkdir(parents=True, exist_ok=True)
            variables = {str(k): str(v) for k, v in (item.get("env") or {}).items()}
            plain = run_audit(audit_cmd, path, cwd, variables, [], args.timeout)
            res["audit"] = _summary(plain)
            res["newest"] = score(item["expect"]["newest"]["launches"], plain)
            res["newest"]["lib_rejects"] = _rejects(item["expect"]["newest"]["launches"])
            if "pinned" in item["expect"]:
                pin_run = plain
                if with_version:
                    lib_ver = f"{item['library']}={item['pin']['version']}"
                    pin_run = run_audit(audit_cmd, path, cwd, variables,
                                        ["--library-version", lib_ver], args.timeout)  # fmt: skip
                    res["audit_pinned"] = _summary(pin_run)
                res["pinned"] = score(item["expect"]["pinned"]["launches"], pin_run)
                res["pinned"]["version"] = item["expect"]["pinned"]["version"]
                res["pinned"]["lib_rejects"] = _rejects(item["expect"]["pinned"]["launches"])
        results.append(res)
    report(results)
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=1))
    return 0


def _rejects(launches: list[dict[str, Any]]) -> bool:
    return any(x.get("rejected") for x in launches)


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    doc = run["json"]
    trainers = [audit_reading(t) for t in doc.get("trainers", [])] if doc else []
    return {"rc": run["rc"], "stderr": run["stderr"][-400:], "trainers": trainers}


def report(results: list[dict[str, Any]]) -> None:
    """Print the per-library tables and the mismatches."""
    for which in ("newest", "pinned"):
        rows: dict[str, Counter[str]] = defaultdict(Counter)
        for r in results:
            if which in r:
                rows[r["library"]][r[which]["verdict"]] += 1
                rows[r["library"]]["files"] += 1
                rows[r["library"]]["rejected"] += int(r[which].get("lib_rejects", False))
        print(f"== expectation: {which} "
              + ("(verl 0.9.1 / OpenRLHF 0.11.2 / TRL 1.16.0)" if which == "newest"
                 else "(the version each repository pins)"))  # fmt: skip
        print(f"{'library':10} {'files':>5} {'right':>5} {'wrong':>5} {'unreadable':>10} "
              f"{'(lib rejects)':>13}")  # fmt: skip
        total: Counter[str] = Counter()
        for lib in LIBRARIES:
            c = rows.get(lib, Counter())
            total.update(c)
            print(f"{lib:10} {c['files']:5d} {c['right']:5d} {c['wrong']:5d} {c['unreadable']:10d} "
                  f"{c['rejected']:13d}")  # fmt: skip
        print(f"{'all':10} {total['files']:5d} {total['right']:5d} {total['wrong']:5d} "
              f"{total['unreadable']:10d} {total['rejected']:13d}\n")  # fmt: skip
    print(
        "(lib rejects: files with at least one launch the library itself refuses under that "
        "version)\n"
    )
    errors = [r for r in results if "error" in r]
    for r in errors:
        print(f"not scored: {r['id']}: {r['error']}")
    print("== mismatches (newest expectation)")
    for r in results:
        if "newest" in r and r["newest"]["verdict"] != "right":
            print(
                f"{r['id']} [{r['newest']['verdict']}]: {' | '.join(r['newest']['reasons'])[:300]}"
            )
    print("\n== mismatches (pinned expectation)")
    for r in results:
        if "pinned" in r and r["pinned"]["verdict"] != "right":
            print(
                f"{r['id']} [{r['pinned']['verdict']}, {r['pinned']['version']}]: "
                f"{' | '.join(r['pinned']['reasons'])[:300]}"
            )


if __name__ == "__main__":
    raise SystemExit(main())
