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

Two expectations are scored: ``newest`` (verl 0.9.1, OpenRLHF 0.11.2, TRL 1.16.0) and
``pinned`` (the version the file's repository pins). When the audit's ``--help`` offers
``--library-version``, the newest run passes the newest releases explicitly (so that an
installed library or a pin the audit detects cannot change what "newest" means), and with
``--library-version-from-pin`` the pinned run passes ``--library-version LIB=VER``; a pin read
from a vendored copy's version file in a project's repository (not the library's own) is passed
as ``VER+vendored`` (a PEP 440 local label: a copy of VER that may hold later code, which is what
the audit's own detection reports for such a copy; verl's main branch kept the version file at
0.1 from the v0.1 to the v0.2 release). Without the option the pinned expectation is scored
against the same audit output. Not part of the test suite (it needs the mirrors).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
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

from mirror import MirrorError, git, git_dir, materialise, read_blob  # noqa: E402

LIBRARIES = ("verl", "openrlhf", "trl")
LIBRARY_REPOS = {
    "verl": ("verl-project/verl", "volcengine/verl"),
    "openrlhf": ("OpenRLHF/OpenRLHF",),
    "trl": ("huggingface/trl",),
}
"""Each library's own repository (a pin read there at a release tag is that release)."""
VERSION_FILES = ("version/version", "version.txt", "VERSION", "__init__.py")


def pinned_version(item: dict[str, Any]) -> str:
    """The pin as ``--library-version`` takes it (``VER+vendored`` for a vendored copy's file)."""
    pin = item["pin"]
    version = str(pin["version"])
    where = str(pin.get("where", ""))
    own = item["repo"] in LIBRARY_REPOS.get(item["library"], ())
    vendored = (
        not own
        and where.endswith(VERSION_FILES)
        and (" " not in where or where.startswith("submodule "))
    )
    if vendored and "+" not in version and not version.endswith(("x", "*")):
        return version + "+vendored"
    return version


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
        "refused": bool(trainer.get("refused")),
        "reward": reward,
        "loss": loss,
        "off_policy": bool(trainer.get("off_policy")),
        "notes": list(trainer.get("notes", []))[:6],
        "findings": [f.get("code") for f in trainer.get("findings", [])],
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
    if got.get("refused") and not exp.get("kl_only"):  # the library runs what the audit refuses
        out.append("the library accepts it; the audit read it as refused")
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
        if not expected and audit["rc"] == 2 and "launch found" in first:
            return {"verdict": "right", "reasons": [], "note": "no launch, and none found"}
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


# ----------------------------------------------------------------------------- causes
def cause(item: dict[str, Any], res: dict[str, Any], which: str) -> str:
    """The first matching cause of a file not read right (rules in order; see RESULTS.md)."""
    verdict = res[which]
    audit = res.get("audit", {})
    err = audit.get("stderr", "")
    notes = " ".join(n for t in audit.get("trainers", []) for n in t.get("notes", []))
    reasons = " ".join(verdict["reasons"])
    exp = item["expect"][which.removesuffix("_kl")]["launches"]
    entries = sorted({x["entry"] for x in exp})
    kind = item["kind"]
    feats = " ".join(item.get("features", []))
    if verdict["verdict"] == "unreadable":
        if kind == "python" and "cannot parse shell" in err:
            return "Python file read as a shell script (stops at a backtick)"
        if kind == "python":
            return "Python file not read (no Python reader; the library guess on its text fails)"
        if kind == "cluster-yaml":
            return "cluster YAML (SkyPilot run: block) not read"
        if kind == "yaml" and "cannot tell which library" in err:
            return "config YAML not recognised (nested values / defaults-list only)"
        if "launch found" in err and "srun" in feats:
            return 'launch inside srun ... bash -c "..." not looked into'
        if "launch found" in err and item["library"] == "trl":
            return "TRL project script run as a .py path (torchrun/accelerate) not recognised"
        if "launch found" in err:
            return f"entry point not recognised ({', '.join(entries)})"
        if "[@]" in err:
            return "bash array expansion ${ARR[@]} not followed"
        if "${@" in err or "'$@'" in err:
            return "forwarded script arguments ${@:1} / $@ read as an override"
        if "has no '='" in err or "invalid literal" in err:
            return "a variable the reader does not resolve is read as an override/value"
        return "audit refused: " + (err.splitlines() or [""])[-1][:80]
    if "library rejects it" in reasons:
        return "library refuses the launch under this version; the audit does not check keys"
    if "the audit read it as refused" in reasons:
        return "the audit refuses a launch the library accepts (keys or flags it does not know)"
    if "[@]" in notes and "expansion" in notes:
        return "bash array expansion ${ARR[@]} not followed (read silently as defaults)"
    if "launch(es) expected, audit found" in reasons:
        return "number of launches differs"
    if "use_kl_estimator_k3" in " ".join(item.get("features", [])) or (
        "old_flag" in " ".join(item.get("features", []))
    ):
        return "old flag --use_kl_estimator_k3 ignored"
    flat = (
        item["library"] == "openrlhf"
        and which.startswith("newest")
        and any(
            "--init_kl_coef" in " ".join(x.get("kl_keys_only", {}).get("dropped", [])) for x in exp
        )
    )
    if flat:
        return "audit reads pre-0.10.2 flat flags (--init_kl_coef ...) that 0.11.2 ignores"
    if item["library"] == "verl" and "reward k1" in reasons and "expected, audit none" in reasons:
        return "pre-0.4 verl applies k1 in the reward when use_kl_loss is false (audit: 0.9.1)"
    if "off_policy" in reasons and "reward" not in reasons and "loss" not in reasons:
        return "off-policy flag differs"
    return "KL sides differ: " + reasons[:80]


# ----------------------------------------------------------------------------- files
def materialise_item(mirrors: Path, item: dict[str, Any], dest: Path) -> Path:
    """Write the file and its siblings under ``dest`` (blob ids checked); the file's path.

    ``dest`` gets an empty ``.git`` folder, as the clone a user audits has one: the audit
    bounds two searches by it (a script run by a path relative to a folder the launch never
    ``cd``s into is looked up by its suffix inside the checkout; the pin search stops there).
    Git itself does not take an empty ``.git`` for a repository, so nothing reads it as one."""
    gdir = git_dir(mirrors, item["repo"])
    (dest / ".git").mkdir(parents=True, exist_ok=True)
    mount = Path(item.get("mount", ""))
    target = dest / mount
    path = materialise(gdir, item["commit"], item["path"], item["blob"], target)
    for sib in item.get("siblings", []):
        if sib.get("overlay"):  # a submodule's file a symlinked config points to
            ov = next(o for o in item.get("overlays", []) if o["mount"] == sib["overlay"])
            materialise(git_dir(mirrors, ov["repo"]), ov["ref"], sib["path"], sib["blob"],
                        target / ov["mount"])  # fmt: skip
            continue
        materialise(gdir, item["commit"], sib["path"], sib["blob"], target)
    for extra in vendored_code(item):
        try:
            materialise(gdir, item["commit"], extra, None, target)
        except MirrorError:
            continue  # the copy lacks it: the audit then reads the release's rules
    for extra in vendored_openrlhf_code(item):
        try:
            materialise(gdir, item["commit"], extra, None, target)
        except MirrorError:
            continue  # the copy lacks it: the audit then reads the release's options
    for extra in project_script_code(gdir, item):
        materialise(gdir, item["commit"], extra, None, target)
    for name, mode, sha in entry_configs(gdir, item):
        out = target / name
        if out.exists() or out.is_symlink():
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":  # a symlink (RAGEN's config/ppo_trainer.yaml into its verl copy)
            out.symlink_to(read_blob(gdir, sha).decode())
        else:
            out.write_bytes(read_blob(gdir, sha))
    for repo, commit, src in submodule_code(item):
        sub = target / submodule_mount(item)
        try:
            materialise(git_dir(mirrors, repo), commit, src, None, sub)
        except MirrorError:
            continue
    return path


def entry_configs(gdir: Path, item: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(repository path, mode, blob) of the YAML files of the Hydra config folder of each
    recipe or experimental verl trainer the file launches (``<module's folder>/config/``, the
    ``config_path`` of its ``@hydra.main``), or of a verl config file's own folder (the
    configs its ``defaults`` name), and a trainer script run by path with its ``config/``
    folder (added in issue 38): a user's checkout has them, and the audit composes them to
    know the keys the launch's overrides may name (issue 33). verl's own
    ``verl/trainer/config`` is not written: the audit reads the release's recorded config."""
    if item["library"] != "verl":
        return []
    mount = item.get("mount", "")
    folders: list[str] = []
    if item["kind"] == "yaml":
        folders.append(os.path.dirname(item["path"]) or ".")
    scripts: list[str] = []
    for launch in item.get("launches", []):
        entry = str(launch.get("entry", ""))
        if entry.endswith(".py") and not os.path.isabs(entry):
            # a trainer script run by path (verl 0.2's examples/split_placement/main_ppo_split.py,
            # @hydra.main(config_path="config")): the script and its config/ folder (issue 38)
            script = os.path.normpath(Path(launch.get("cwd") or ".", entry))
            if mount:
                if not script.startswith(mount.rstrip("/") + "/"):
                    continue
                script = os.path.relpath(script, mount)
            scripts.append(script)
            folders.append(os.path.join(os.path.dirname(script), "config"))
            continue
        if not re.fullmatch(r"[A-Za-z_][\w.]*", entry) or entry.startswith("verl.trainer."):
            continue
        rel = os.path.normpath(Path(launch.get("cwd") or ".", *entry.split(".")[:-1], "config"))
        if mount:
            if not (rel + "/").startswith(mount.rstrip("/") + "/"):
                continue
            rel = os.path.relpath(rel, mount)
        folders.append(rel)
    out: list[tuple[str, str, str]] = []
    for script in dict.fromkeys(scripts):
        for line in git(gdir, "ls-tree", item["commit"], "--", script).decode().splitlines():
            meta, name = line.split("\t", 1)
            mode, kind, sha = meta.split()
            if kind == "blob":
                out.append((name, mode, sha))
    for rel in dict.fromkeys(folders):
        listing = git(gdir, "ls-tree", "-r", item["commit"], "--", rel + "/")
        for line in listing.decode().splitlines():
            meta, name = line.split("\t", 1)
            mode, kind, sha = meta.split()
            if kind == "blob" and name.endswith((".yaml", ".yml")):
                out.append((name, mode, sha))
    return out


VENDORED_CODE = (
    "version/version",
    "trainer/ppo/ray_trainer.py",
    "workers/actor/dp_actor.py",
    "trainer/ppo/core_algos.py",
)
"""Files of a vendored verl copy that the audit reads (its version file, the trainer whose
apply_kl_penalty call gates the reward KL, the actor with the KL loss, the ``kl_penalty`` whose
names are the estimators; core_algos.py added on 2026-12-07, issue 38): a user's checkout has
them, so the scorer writes them beside the launch (issue 33)."""


def vendored_code(item: dict[str, Any]) -> list[str]:
    """Repository paths of the vendored verl copy's files the audit reads (empty when the pin
    is not a vendored verl's version file)."""
    where = str((item.get("pin") or {}).get("where", ""))
    own = item["repo"] in LIBRARY_REPOS.get(item["library"], ())
    if item["library"] != "verl" or own or not where.endswith("verl/version/version"):
        return []
    package = where.removesuffix("version/version")
    return [package + rel for rel in VENDORED_CODE]


def vendored_config(mirrors: Path, item: dict[str, Any], dest: Path) -> int:
    """Write a vendored verl copy's own Hydra config folder (``<copy>/trainer/config/``)
    under ``dest``; the number of files written.

    ``python -m verl.trainer.main_ppo`` run in the project imports the copy, and its
    ``@hydra.main(config_path="config")`` composes the copy's ``ppo_trainer.yaml``, whose keys
    (the project's own: Search-R1's ``max_turns``, DeepScaleR's ``n_val``) are the keys the
    launch may override. A user's checkout has that folder; written for the pinned reading
    only (the copy is what runs), not the newest one (read as if verl 0.9.1 ran it, whose
    config the audit takes from its recording). Correction of 2026-12-07 (issue 38): the
    scorer wrote the copy's code but not its config, so every project key read as refused.
    A git submodule (RAGEN's and DeepMath's ``verl``) is such a copy in a recursive clone:
    its repository's ``verl/trainer/config/`` at the gitlink commit is written under the
    submodule's path (issue 38: DeepMath's fork adds ``data.rm_system_prompt`` and others).
    """
    where = str((item.get("pin") or {}).get("where", ""))
    own = item["repo"] in LIBRARY_REPOS.get(item["library"], ())
    if item["library"] != "verl" or own or not where.endswith("verl/version/version"):
        return 0
    target = dest / item.get("mount", "")
    source = submodule_source(item)
    if source is not None:  # the submodule's repository at its gitlink commit
        gdir, commit = git_dir(mirrors, source[0]), source[1]
        folder, target = "verl/trainer/config/", target / submodule_mount(item)
    else:
        gdir, commit = git_dir(mirrors, item["repo"]), item["commit"]
        folder = where.removesuffix("version/version") + "trainer/config/"
    written = 0
    for line in git(gdir, "ls-tree", "-r", commit, "--", folder).decode().splitlines():
        meta, name = line.split("\t", 1)
        mode, kind, sha = meta.split()
        out = target / name
        if kind != "blob" or not name.endswith((".yaml", ".yml")) or out.exists():
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            out.symlink_to(read_blob(gdir, sha).decode())
        else:
            out.write_bytes(read_blob(gdir, sha))
        written += 1
    return written


OPENRLHF_CODE = ("__init__.py", "cli/train_ppo_ray.py", "cli/train_ppo.py")
"""Files of a vendored OpenRLHF copy that the audit reads: the package marker (the copy's
``__version__`` when it states one) and the trainers whose ``add_argument`` calls define the
options a launch of the copy may pass (issue 38: forks add their own)."""


def vendored_openrlhf_code(item: dict[str, Any]) -> list[str]:
    """Repository paths of the vendored OpenRLHF copy's files the audit reads for the pinned
    reading: the package (``openrlhf_package``, else ``openrlhf`` at the root, where the
    derivation's pinned parser reads it) and the pin's version file when it is one. The newest
    reading passes ``--library-version openrlhf=<newest>``, which reads no copy stating another
    version. Empty for a file without a vendored copy or a pinned expectation."""
    if (
        item["library"] != "openrlhf"
        or "vendored_openrlhf" not in item.get("features", [])
        or "pinned" not in item.get("expect", {})
    ):
        return []
    package = str(item.get("openrlhf_package", "openrlhf")).rstrip("/")
    out = [f"{package}/{rel}" for rel in OPENRLHF_CODE]
    where = str((item.get("pin") or {}).get("where", ""))
    if " " not in where and where.endswith(VERSION_FILES):
        out.append(where)
    return out


PROJECT_SCRIPT_FILES = 200
"""Python files of a project script's package written at most (a bound for large trees)."""


def project_script_code(gdir: Path, item: dict[str, Any]) -> list[str]:
    """Repository paths of a TRL project script a launch runs by path (``torchrun
    src/open_r1/grpo_jsonl.py``) and of the Python files of its package (the folder it sits
    in, recursively), for items marked ``project_trainer``.

    A user's checkout has them: the audit reads the script's own dataclasses, and the config
    class it imports from its package (VLM-R1's ``open_r1.trainer.GRPOConfig``), to know the
    options the launch may pass (issue 38). Added on 2026-12-07: before, only the launch and
    its listed siblings were written, so the audit could not open the script and read its
    launch as ``trl grpo`` with TRL's options only."""
    if item["library"] != "trl" or "project_trainer" not in item.get("features", []):
        return []
    mount = item.get("mount", "")
    out: list[str] = []
    for launch in item.get("launches", []):
        entry = str(launch.get("entry", ""))
        if not entry.endswith(".py"):
            continue
        if mount:
            if not entry.startswith(mount.rstrip("/") + "/"):
                continue
            entry = os.path.relpath(entry, mount)
        folder = os.path.dirname(entry)
        listing = git(gdir, "ls-tree", "-r", "--name-only", item["commit"], "--", folder + "/")
        names = [n for n in listing.decode().splitlines() if n.endswith(".py")]
        if entry not in names:
            continue
        out += [entry, *[n for n in names[:PROJECT_SCRIPT_FILES] if n != entry]]
    return list(dict.fromkeys(out))


def submodule_mount(item: dict[str, Any]) -> str:
    """Where a verl submodule sits in the checkout (``submodule verl -> ...``: ``verl``)."""
    where = str((item.get("pin") or {}).get("where", ""))
    return where.removeprefix("submodule ").split(" -> ", 1)[0]


def submodule_code(item: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(repository, commit, path) of a verl git submodule's files the audit reads.

    A pin read from a submodule (RAGEN's ``verl``) stands for code a recursive clone has in the
    checkout, like a vendored copy: its version file, trainer and actor are written under the
    submodule's path (correction of 2026-12-07, after the audit had run: the scorer wrote only
    vendored copies committed in the project's own tree).
    """
    source = submodule_source(item)
    if source is None:
        return []
    return [(source[0], source[1], "verl/" + rel) for rel in VENDORED_CODE]


def submodule_source(item: dict[str, Any]) -> tuple[str, str] | None:
    """(repository, gitlink commit) of a verl git submodule pin
    (``submodule verl -> owner/name@commit:verl/version/version``), else None."""
    pin = item.get("pin") or {}
    where = str(pin.get("where", ""))
    if item["library"] != "verl" or not where.startswith("submodule ") or not pin.get("commit"):
        return None
    return where.split(" -> ", 1)[1].split("@", 1)[0], str(pin["commit"])


def main(argv: list[str] | None = None) -> int:
    """CLI entry (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mirrors", type=Path, help="folder of bare git mirrors (owner+name/repo)")
    p.add_argument("--files", type=Path, default=HERE / "files.yaml")
    p.add_argument("--library-version-from-pin", action="store_true")
    p.add_argument("--json", type=Path, help="write every result here")
    p.add_argument("--markdown", type=Path, help="write the tables and a per-file table here")
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
    supports = supports_library_version(audit_cmd)
    with_version = args.library_version_from_pin and supports
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
            newest = (
                [w for lib, ver in doc["newest"].items() for w in ("--library-version",
                                                                    f"{lib}={ver}")]
                if supports
                else []
            )  # fmt: skip
            plain = run_audit(audit_cmd, path, cwd, variables, newest, args.timeout)
            res["audit"] = _summary(plain)
            res["newest"] = score(item["expect"]["newest"]["launches"], plain)
            res["newest"]["lib_rejects"] = _rejects(item["expect"]["newest"]["launches"])
            res["newest_kl"] = score(_kl_only(item["expect"]["newest"]["launches"]), plain)
            res["newest_kl"]["lib_rejects"] = _rejects(
                _kl_only(item["expect"]["newest"]["launches"])
            )
            if "pinned" in item["expect"]:
                pin_run = plain
                if with_version:
                    if vendored_config(args.mirrors, item, root):
                        res["vendored_config"] = True
                    lib_ver = f"{item['library']}={pinned_version(item)}"
                    pin_run = run_audit(audit_cmd, path, cwd, variables,
                                        ["--library-version", lib_ver], args.timeout)  # fmt: skip
                    res["audit_pinned"] = _summary(pin_run)
                res["pinned"] = score(item["expect"]["pinned"]["launches"], pin_run)
                res["pinned"]["version"] = item["expect"]["pinned"]["version"]
                res["pinned"]["lib_rejects"] = _rejects(item["expect"]["pinned"]["launches"])
                res["pinned_kl"] = score(_kl_only(item["expect"]["pinned"]["launches"]), pin_run)
                res["pinned_kl"]["version"] = res["pinned"]["version"]
                res["pinned_kl"]["lib_rejects"] = _rejects(
                    _kl_only(item["expect"]["pinned"]["launches"])
                )
        for which in ("newest", "newest_kl", "pinned", "pinned_kl"):
            if which in res and res[which]["verdict"] != "right":
                res[which]["cause"] = cause(item, res, which)
        results.append(res)
    report(results)
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=1))
    if args.markdown:
        args.markdown.write_text(markdown(results))
    return 0


TITLES = {
    "newest": "newest (verl 0.9.1 / OpenRLHF 0.11.2 / TRL 1.16.0)",
    "newest_kl": "newest, KL keys only (keys the release refuses left out)",
    "pinned": "pinned (the version each repository pins)",
    "pinned_kl": "pinned, KL keys only",
}
"""The four scored expectations."""


def markdown(results: list[dict[str, Any]]) -> str:
    """The score tables, the causes and one row per file, as Markdown."""
    out = ["<!-- generated by benchmarks/audit_real_files.py --markdown; do not edit -->", ""]
    for which, title in TITLES.items():
        out += [f"### {title}", "", "| library | files | right | wrong | unreadable | "
                "library refuses |", "|---|---|---|---|---|---|"]  # fmt: skip
        total: Counter[str] = Counter()
        for lib in LIBRARIES:
            c: Counter[str] = Counter()
            for r in results:
                if r["library"] == lib and which in r:
                    c["files"] += 1
                    c[r[which]["verdict"]] += 1
                    c["rejected"] += int(r[which].get("lib_rejects", False))
            total.update(c)
            out.append(f"| {lib} | {c['files']} | {c['right']} | {c['wrong']} | "
                       f"{c['unreadable']} | {c['rejected']} |")  # fmt: skip
        out.append(f"| all | {total['files']} | {total['right']} | {total['wrong']} | "
                   f"{total['unreadable']} | {total['rejected']} |")  # fmt: skip
        out.append("")
    out += ["### Per file", "",
            "| file | library | kind | newest | newest KL | pinned | pinned KL | cause (pinned KL, "
            "else newest KL) |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    short = {"right": "right", "wrong": "WRONG", "unreadable": "unread."}
    for r in results:
        cells = [short.get(r[w]["verdict"], "?") if w in r else "-" for w in TITLES]
        why = (r.get("pinned_kl") or r.get("newest_kl") or {}).get("cause", "")
        if not why and r.get("newest_kl", {}).get("verdict") != "right":
            why = r.get("newest_kl", {}).get("cause", "")
        out.append(f"| {r['id']} | {r['library']} | {r['kind']} | " + " | ".join(cells)
                   + f" | {why.replace('|', '/')} |")  # fmt: skip
    return "\n".join(out) + "\n"


def _kl_only(launches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Refused launches replaced by their "KL keys only" reading, where derive.py has one
    (the reading with the overrides/flags this version does not know left out)."""
    return [{**x.get("kl_keys_only", x), "kl_only": True} if x.get("rejected")
            else {**x, "kl_only": True} for x in launches]  # fmt: skip


def _rejects(launches: list[dict[str, Any]]) -> bool:
    return any(x.get("rejected") for x in launches)


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    doc = run["json"]
    trainers = [audit_reading(t) for t in doc.get("trainers", [])] if doc else []
    err = run["stderr"]
    err = err if len(err) <= 700 else err[:350] + " ... " + err[-350:]
    return {"rc": run["rc"], "stderr": err, "trainers": trainers}


def report(results: list[dict[str, Any]]) -> None:
    """Print the per-library tables and the mismatches."""
    titles = TITLES
    for which in titles:
        rows: dict[str, Counter[str]] = defaultdict(Counter)
        for r in results:
            if which in r:
                rows[r["library"]][r[which]["verdict"]] += 1
                rows[r["library"]]["files"] += 1
                rows[r["library"]]["rejected"] += int(r[which].get("lib_rejects", False))
        print(f"== expectation: {titles[which]}")
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
    for which in titles:
        causes: Counter[str] = Counter()
        examples: dict[str, list[str]] = defaultdict(list)
        for r in results:
            if which in r and r[which]["verdict"] != "right":
                why = str(r[which].get("cause", "?"))
                causes[why] += 1
                examples[why].append(r["id"])
        print(f"== causes: {titles[which]}")
        for why, n in causes.most_common():
            print(f"{n:3d}  {why}  (e.g. {', '.join(examples[why][:2])})")
        print()
    for which in titles:
        print(f"== mismatches: {titles[which]}")
        for r in results:
            if which in r and r[which]["verdict"] != "right":
                ver = f", {r[which]['version']}" if "version" in r[which] else ""
                text = " | ".join(r[which]["reasons"])[:300]
                print(f"{r['id']} [{r[which]['verdict']}{ver}]: {text}")
        print()


if __name__ == "__main__":
    raise SystemExit(main())
