"""Derive the expected KL reading of every listed real launch file, without kl-patches.

Usage (from the repository root; see METHOD.md for the set-up of the venvs and wheels)::

    .venv/bin/python benchmarks/audit_real_files/derive.py /work/.mirror \
        [--only ID ...] [--out benchmarks/audit_real_files/files.yaml] [--log DIR]

Input: ``list.yaml`` (hand-written: repository, ref, path, kind, and what a user must set).
Output: ``files.yaml``: each item with its commit (40 hex), blob id, pin and siblings, and
``expect.newest`` / ``expect.pinned`` (one reading per trainer launch, see semantics.py).

Steps per file, none of which imports kl-patches:

1. the repository tree at the commit is written to a throwaway directory (``mirror.py``);
2. what reaches the trainer: shell scripts run under bash with stubs (``shell_trace.py``);
   cluster YAML runs its ``run:`` block the same way; a YAML config is one launch of its
   entry with that config; a Python file's config construction is read with ``ast``;
3. what the library makes of it: verl overrides composed by hydra with that version's config
   (``verl_compose.py``), OpenRLHF argv parsed by that version's argparse
   (``openrlhf_args.py``), TRL configs built by TrlParser / the dataclass in a venv with that
   trl (``trl_config.py``);
4. the reading, from our own table of library semantics (``semantics.py``).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import hydra_siblings  # noqa: E402
import openrlhf_args  # noqa: E402
import semantics  # noqa: E402
import shell_trace  # noqa: E402
import verl_compose  # noqa: E402
from mirror import blob_of, export_tree, git, git_dir  # noqa: E402

ROOT = HERE.parent.parent
BUILD = ROOT / "build"
CACHE = BUILD / "cache"

NEWEST = {"verl": "0.9.1", "openrlhf": "0.11.2", "trl": "1.16.0"}
"""The newest releases kl-patches is tested against (the audit assumes them)."""

VERL_WHEEL = CACHE / "verl"
OPENRLHF_WHEEL = CACHE / "openrlhf" / "openrlhf-0.11.2.data" / "purelib"

ENTRY_PATTERNS = {
    "verl": [
        r"verl\.trainer\.main_ppo\w*",
        r"recipe\.[\w.]+\.main_\w+",
        r"recipe\.[\w.]+\.fully_async_main",
        r"verl\.experimental\.[\w.]+\.main_ppo",
        r"verl\.experimental\.[\w.]+\.fully_async_main",
        r"(.*/)?verl/trainer/main_ppo\.py",
        r"verl_tool\.trainer\.main_ppo",
    ],
    "openrlhf": [
        r"openrlhf\.cli\.train_ppo_ray",
        r"openrlhf\.cli\.train_ppo",
        r"(.*/)?openrlhf/cli/train_ppo(_ray)?\.py",
    ],
    "trl": [r"trl grpo", r"trl rloo", r"trl\.scripts\.(grpo|rloo)"],
}
"""Trainer entry points recognised in recorded argvs (per file, list.yaml can add more)."""


# ----------------------------------------------------------------------------- helpers
def rev(gdir: Path, ref: str) -> str:
    """40-hex commit of a ref."""
    return git(gdir, "rev-parse", f"{ref}^{{commit}}").decode().strip()


def show(gdir: Path, commit: str, path: str) -> str | None:
    """File text at a commit, or None."""
    try:
        return git(gdir, "show", f"{commit}:{path}").decode("utf-8", "replace")
    except Exception:
        return None


def find_pin(mirrors: Path, gdir: Path, commit: str, item: dict[str, Any]) -> dict[str, Any] | None:
    """The library version the repository pins: {version, where, raw} or None.

    list.yaml ``pin`` forms: ``{file}``, ``{file, regex}``, ``{file, regex, version_from}``,
    ``{submodule, version_from}``, ``{vendored, version, evidence}`` (see list.yaml).
    """
    spec = item.get("pin")
    if spec is None:
        return None
    if "vendored" in spec:
        return {"version": spec["version"], "where": f"vendored {spec['vendored']}",
                "raw": spec.get("evidence", "")}  # fmt: skip
    if "submodule" in spec:
        line = git(gdir, "ls-tree", commit, "--", spec["submodule"]).decode().split()
        raw = line[2] if len(line) > 2 else ""
        out = {"version": raw, "where": f"submodule {spec['submodule']}", "raw": raw}
    else:
        text = show(gdir, commit, spec["file"])
        if text is None:
            return None
        if "regex" in spec:
            m = re.search(spec["regex"], text)
            if not m:
                return None
            raw, version = m.group(0), m.group(1)
        else:
            raw = version = text.strip()
        out = {"version": version, "where": spec["file"], "raw": raw}
    if "version_from" in spec:
        vf = spec["version_from"]
        vg = git_dir(mirrors, vf["repo"])
        text = show(vg, out["version"], vf["file"])
        out["commit"] = out["version"]
        out["version"] = (text or "").strip() or out["version"]
        out["where"] += f" -> {vf['repo']}@{out['commit'][:12]}:{vf['file']}"
    return out


def materialise_repo(mirrors: Path, item: dict[str, Any], commit: str, dest: Path) -> None:
    """The repository at the commit (and any overlay repos) under ``dest``."""
    gdir = git_dir(mirrors, item["repo"])
    mount = item.get("mount", "")
    target = dest / mount if mount else dest
    target.mkdir(parents=True, exist_ok=True)
    export_tree(gdir, commit, target, item.get("export", ["."]))
    for ov in item.get("overlays", []):
        og = git_dir(mirrors, ov["repo"])
        odest = dest / ov["mount"]
        odest.mkdir(parents=True, exist_ok=True)
        export_tree(og, rev(og, ov["ref"]), odest, ov.get("export", ["."]))


# ----------------------------------------------------------------------------- launches
def shell_launches(
    root: Path, item: dict[str, Any], script: str, log: list[str]
) -> list[shell_trace.Launch]:
    """Run the script with stubs; the trainer launches it makes."""
    cwd = item.get("cwd", ".")
    trace = shell_trace.run_script(
        root, script, cwd=cwd, env=item.get("env", {}), args=item.get("args", [])
    )
    log.append(shell_trace.trace_json(trace))
    item.setdefault("_traces", []).append(
        {
            "script": script,
            "returncode": trace.returncode,
            "notes": trace.notes,
            "error": _bash_error(trace),
            "stub_calls": len(trace.calls),
        }
    )
    lib = item["library"]
    patterns = ENTRY_PATTERNS[lib] + item.get("entry_patterns", [])
    launches = shell_trace.trainer_launches(trace, patterns)
    if lib == "trl" or item.get("python_entries"):
        launches += python_script_launches(root, trace, item, {id(x.call) for x in launches})
        launches.sort(key=lambda x: x.call)
    return launches


def _bash_error(trace: shell_trace.Trace) -> str:
    """bash's last error line when the script failed ('' otherwise; `set -x` lines skipped)."""
    if trace.returncode == 0:
        return ""
    lines = [ln for ln in trace.stderr_tail.splitlines() if ln and not ln.startswith("+")]
    text = lines[-1] if lines else ""
    return re.sub(r"/tmp/[\w.-]+/", "", text)[:160]


_TRAINER_CLASS = re.compile(r"\b(GRPOTrainer|RLOOTrainer|GRPOConfig|RLOOConfig)\b")


def python_script_launches(
    root: Path, trace: shell_trace.Trace, item: dict[str, Any], seen: set[int]
) -> list[shell_trace.Launch]:
    """Calls that run a ``.py`` file which builds a TRL trainer (``GRPOTrainer`` ...)."""
    out: list[shell_trace.Launch] = []
    taken = {x for x in seen}
    for k, call in enumerate(trace.calls):
        words = shell_trace.inline_shell([call.prog, *call.argv])
        for i, w in enumerate(words):
            if not w.endswith(".py"):
                continue
            base = root / call.cwd if not Path(call.cwd).is_absolute() else Path(call.cwd)
            p = (base / w) if not Path(w).is_absolute() else Path(w)
            if not p.is_file():
                continue
            text = p.read_text(encoding="utf-8", errors="replace")
            if _TRAINER_CLASS.search(text) and k not in taken:
                rel = str(p.resolve().relative_to(root.resolve()))
                out.append(shell_trace.Launch(rel, words[i + 1 :], k, call.prog, call.cwd))
                taken.add(k)
            break
    return out


def cluster_yaml_launches(
    root: Path, item: dict[str, Any], path: str, log: list[str]
) -> list[shell_trace.Launch]:
    """A cluster YAML (SkyPilot): its ``run:`` block as a script, with its ``envs:``."""
    data = yaml.safe_load((root / path).read_text())
    run = data.get("run") or ""
    envs = {str(k): str(v) for k, v in (data.get("envs") or {}).items()}
    script = Path(path).with_suffix(".run.sh")
    (root / script).write_text("#!/bin/bash\n" + run)
    sub = dict(item)
    sub["env"] = {**envs, **item.get("env", {})}
    return shell_launches(root, sub, str(script), log)


# ----------------------------------------------------------------------------- verl
def verl_source(item: dict[str, Any], which: str, root: Path) -> dict[str, Path]:
    """Where the verl package of a version lives: config dir, core_algos, trainer dir."""
    pkg = VERL_WHEEL / "verl" if which == "newest" else root / item.get("verl_package", "verl")
    return {"pkg": pkg, "config": pkg / "trainer" / "config"}


def verl_trainer_rule(
    entry: str, pkg: Path, root: Path, version: str, values: dict[str, Any], item: dict[str, Any]
) -> tuple[semantics.VerlTrainer, str]:
    """How the trainer behind ``entry`` applies the reward KL, read from its source."""
    vt = semantics.version_tuple(version)
    candidates: list[Path] = [root / f for f in item.get("trainer_files", [])]
    if candidates:
        pass
    elif entry.startswith(("recipe.", "verl.experimental.", "verl_tool.")) or entry.endswith(".py"):
        mod_dir = _module_file(entry, root, pkg)
        if mod_dir is not None:
            candidates += sorted(mod_dir.parent.glob("*.py"))
    own_fit = [] if any(_calls_apply_kl(p) for p in candidates) else _fit_methods(candidates)
    if own_fit:
        # The recipe's trainer class defines its own fit() and nothing in the recipe calls
        # apply_kl_penalty: the generic trainer's call never runs (correction of 2026-12-07,
        # after the audit had run: PRIME's RayPRIMETrainer.fit, recipe/prime/
        # prime_ray_trainer.py, computes advantages from the RM scores alone).
        cite = ", ".join(f"{_cite_path(p, root, pkg)}:{line}" for p, line in own_fit)
        trainer = semantics.VerlTrainer(
            reward_rule="never",
            cite=f"own fit() without apply_kl_penalty: {cite}",
            async_trainer="one_step_off" in entry or "fully_async" in entry,
            drops_reward_for=("gdpo",) if vt >= (0, 9) else (),
            v1_multi_turn_drops=vt >= (0, 9),
        )
        return trainer, trainer.cite
    if not candidates or not any(_calls_apply_kl(p) for p in candidates):
        v1 = pkg / "trainer" / "ppo" / "v1" / "trainer_base.py"
        use_v1 = semantics._truthy(values.get("trainer.use_v1", False))
        candidates = (
            [v1] if (v1.exists() and use_v1) else [pkg / "trainer" / "ppo" / "ray_trainer.py"]
        )
    rules: list[tuple[str, str]] = []
    for p in candidates:
        for rule, line in _apply_kl_rules(p):
            rules.append((rule, f"{_cite_path(p, root, pkg)}:{line}"))
    if not rules:
        rule, cite = "never", f"no apply_kl_penalty call in {[c.name for c in candidates]}"
    else:
        kinds = {r for r, _ in rules}
        rule = rules[0][0] if len(kinds) == 1 else sorted(kinds)[0]
        cite = ", ".join(c for _, c in rules)
    is_async = "one_step_off" in entry or "fully_async" in entry
    trainer = semantics.VerlTrainer(
        reward_rule=rule,
        cite=cite,
        async_trainer=is_async,
        drops_reward_for=("gdpo",) if vt >= (0, 9) else (),
        v1_multi_turn_drops=vt >= (0, 9),
    )
    return trainer, cite


def _cite_path(p: Path, root: Path, pkg: Path) -> str:
    """A trainer file named relative to the repository, or as verl-<wheel>/... for the wheel."""
    for base, label in ((root, ""), (pkg.parent, "")):
        try:
            rel = p.resolve().relative_to(base.resolve())
            return f"{label}{rel}"
        except ValueError:
            continue
    try:
        return "verl-0.9.1-wheel/" + str(p.resolve().relative_to(VERL_WHEEL.resolve()))
    except ValueError:
        return p.name


def _module_file(entry: str, root: Path, pkg: Path) -> Path | None:
    if entry.endswith(".py"):
        p = root / entry
        return p if p.exists() else None
    rel = Path(*entry.split(".")).with_suffix(".py")
    for base in (root, pkg.parent):
        if (base / rel).exists():
            return base / rel
    return None


def _fit_methods(paths: list[Path]) -> list[tuple[Path, int]]:
    """(file, line) of each ``def fit`` inside a class of the given files."""
    out: list[tuple[Path, int]] = []
    for path in paths:
        try:
            tree = ast.parse(path.read_text())
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "fit":
                        out.append((path, item.lineno))
    return out


def _calls_apply_kl(path: Path) -> bool:
    return bool(_apply_kl_rules(path))


def _apply_kl_rules(path: Path) -> list[tuple[str, int]]:
    """(rule, line) of each live ``apply_kl_penalty(...)`` call in a trainer file."""
    try:
        src = path.read_text(encoding="utf-8")
        tree = ast.parse(src)
    except (OSError, SyntaxError):
        return []
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
        if name != "apply_kl_penalty":
            continue
        cur: ast.AST | None = node
        rule = "always"
        while cur is not None:
            par = parents.get(id(cur))
            if isinstance(par, ast.If):
                test = ast.get_source_segment(src, par.test) or ""
                in_body = any(cur is s for s in par.body)
                if "use_kl_in_reward" in test:
                    rule = "use_kl_in_reward" if in_body else "not_use_kl_in_reward"
                    break
                if "use_kl_loss" in test:
                    negated = test.strip().startswith("not ")
                    rule = "not_use_kl_loss" if negated == in_body else "use_kl_loss"
                    break
            if isinstance(par, (ast.FunctionDef, ast.AsyncFunctionDef)):
                break
            cur = par
        out.append((rule, node.lineno))
    return out


def verl_expect(
    launch: shell_trace.Launch, root: Path, item: dict[str, Any], which: str, version: str
) -> dict[str, Any]:
    """Compose and read one verl launch under the newest or the pinned verl."""
    src = verl_source(item, which, root)
    pkg = src["pkg"]
    compose_root = root / launch.cwd if launch.cwd and not Path(launch.cwd).is_absolute() else root
    entry = launch.entry
    module_file = _module_file(entry, compose_root, pkg) or _module_file(entry, root, pkg)
    if module_file is None:
        return _rejected("verl", entry, f"entry module {entry} not found")
    # file:// search paths name verl/trainer/config relative to the working directory, and a
    # project may symlink into its vendored verl: for the newest release, that path is the
    # wheel's (list.yaml ``newest_verl_mount``: the vendored package directory to replace)
    mount = item.get("newest_verl_mount")
    link = compose_root / mount if mount else compose_root / "verl" / "trainer" / "config"
    target = (VERL_WHEEL / "verl") if mount else src["config"]
    restore = None
    if which == "newest":
        if link.exists() and not link.is_symlink():
            restore = link.with_name(link.name + ".rf_orig")
            link.rename(restore)
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(target.resolve(), target_is_directory=True)
    lenient = None
    try:
        composed = verl_compose.compose(compose_root, module_file, launch.argv, src["config"])
        if composed.rejected:
            lenient = verl_compose.compose_lenient(
                compose_root, module_file, launch.argv, src["config"]
            )
    finally:
        if which == "newest":
            if link.is_symlink():
                link.unlink()
            if restore is not None:
                restore.rename(link)
    if composed.rejected:
        out = _rejected("verl", entry, f"Hydra: {composed.rejected}")
        if lenient is not None and lenient[0].rejected is None:
            kl = _verl_read(lenient[0], pkg, compose_root, entry, version, item)
            kl["dropped"] = lenient[1]
            out["kl_keys_only"] = kl
        return out
    return _verl_read(composed, pkg, compose_root, entry, version, item) | {
        "config": {"config_dir": _rel(composed.config_dir, root), "name": composed.config_name}
    }


def _verl_read(
    composed: verl_compose.Composed,
    pkg: Path,
    compose_root: Path,
    entry: str,
    version: str,
    item: dict[str, Any],
) -> dict[str, Any]:
    """The reading of a composed verl config (shared by the strict and the lenient path)."""
    core = (pkg / "trainer" / "ppo" / "core_algos.py").read_text()
    est = semantics.verl_estimators(core)
    trainer, cite = verl_trainer_rule(entry, pkg, compose_root, version, composed.values, item)
    reading = semantics.verl_reading(composed.values, entry, trainer, est)
    reading.notes.append(f"reward rule {trainer.reward_rule} ({cite})")
    out = reading.as_dict()
    out["values"] = {k: v for k, v in composed.values.items() if v != verl_compose._MISSING}
    return out


def _rel(p: str, root: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(Path(p).relative_to(ROOT)) if str(p).startswith(str(ROOT)) else p


def _rejected(lib: str, entry: str, why: str) -> dict[str, Any]:
    r = semantics.Reading(lib, entry, rejected=why)
    return r.as_dict()


# ----------------------------------------------------------------------------- OpenRLHF
def openrlhf_expect(
    launch: shell_trace.Launch, root: Path, item: dict[str, Any], which: str, version: str
) -> dict[str, Any]:
    """Parse one OpenRLHF launch with the newest or the pinned parser."""
    name = (
        "train_ppo.py" if launch.entry.rstrip(".py").endswith("train_ppo") else "train_ppo_ray.py"
    )
    if which == "newest":
        script = OPENRLHF_WHEEL / "openrlhf" / "cli" / name
    else:
        script = root / item.get("openrlhf_package", "openrlhf") / "cli" / name
    if not script.exists():
        return _rejected("openrlhf", launch.entry, f"{name} not in this version")
    parsed = openrlhf_args.parse(script, launch.argv)
    if parsed.rejected:
        out = _rejected("openrlhf", launch.entry, f"argparse: {parsed.rejected}")
        known = openrlhf_args.parse(script, launch.argv, lenient=True)
        if known.rejected is None:
            kl = _openrlhf_read(known, version, launch.entry)
            kl["dropped"] = known.unknown
            out["kl_keys_only"] = kl
        return out
    return _openrlhf_read(parsed, version, launch.entry)


def _openrlhf_read(parsed: openrlhf_args.Parsed, version: str, entry: str) -> dict[str, Any]:
    """The reading of a parsed OpenRLHF argv."""
    reading = semantics.openrlhf_reading(parsed.args, version, entry)
    out = reading.as_dict()
    keys = ("kl", "epoch", "batch_size", "n_samples", "async", "estimator")
    out["values"] = {
        k: v for k, v in parsed.args.items() if any(s in k for s in keys) and v is not None
    }
    return out


# ----------------------------------------------------------------------------- TRL
def trl_venv(version: str) -> Path:
    """The Python of the venv holding that trl version."""
    v = BUILD / ("venv-trl" if version == NEWEST["trl"] else f"venv-trl-{version}")
    return v / "bin" / "python"


def trl_job(version: str, job: dict[str, Any]) -> dict[str, Any]:
    """Run trl_config.py in the venv of ``version``."""
    py = trl_venv(version)
    if not py.exists():
        return {"rejected": f"(derivation) no venv for trl {version}"}
    proc = subprocess.run(
        [str(py), str(HERE / "trl_config.py")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"rejected": f"(derivation) trl_config failed: {proc.stderr[-300:]}"}


def trl_classes(script: Path, root: Path) -> tuple[list[Any], str]:
    """The dataclasses a script hands TrlParser, and the trainer class it builds (by ast)."""
    src = script.read_text(encoding="utf-8")
    tree = ast.parse(src)
    imports: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                imports[a.asname or a.name] = f"{node.module}:{a.name}"
    local = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    tuples: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List)):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    tuples[t.id] = node.value
    specs: list[Any] = []
    trainer = ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("TrlParser", "HfArgumentParser") and node.args and not specs:
                arg = node.args[0]
                if isinstance(arg, ast.Name) and arg.id in tuples:
                    arg = tuples[arg.id]
                elts = arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]
                for e in elts:
                    cname = e.id if isinstance(e, ast.Name) else ""
                    specs.append(_class_spec(cname, local, imports, script, root))
            if name.endswith("Trainer") and ("GRPO" in name or "RLOO" in name) and not trainer:
                trainer = name
    return specs, trainer


def _class_spec(
    cname: str, local: set[str], imports: dict[str, str], script: Path, root: Path
) -> Any:
    if cname in local:
        return {"file": str(script), "class": cname}
    target = imports.get(cname, f"trl:{cname}")
    mod, _, name = target.partition(":")
    if mod.split(".")[0] == "trl":
        return f"trl:{name}"
    for base in (script.parent, *script.parents):
        p = base / Path(*mod.split(".")).with_suffix(".py")
        if p.exists():
            return {"file": str(p), "class": name}
        init = base / Path(*mod.split(".")) / "__init__.py"
        if init.exists():  # a package re-exporting the class: follow `from .x import name`
            found = _reexport(init, name)
            if found is not None:
                return {"file": str(found), "class": name}
        if base == root:
            break
    return f"trl:{name}"


def _reexport(init: Path, name: str) -> Path | None:
    tree = ast.parse(init.read_text(encoding="utf-8"))
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.level >= 1
            and node.module
            and any((a.asname or a.name) == name for a in node.names)
        ):
            p = init.parent / Path(*node.module.split(".")).with_suffix(".py")
            return p if p.exists() else None
    return None


def trl_expect(
    launch: shell_trace.Launch, root: Path, item: dict[str, Any], which: str, version: str
) -> dict[str, Any]:
    """Build the TRL config of one launch with that trl version and read it."""
    sem = item.get("trl_trainer")  # grpo | rloo, when the script's trainer is a custom class
    if launch.entry.startswith("trl "):
        sub = launch.entry.split()[1]
        cls = "trl:GRPOConfig" if sub == "grpo" else "trl:RLOOConfig"
        specs: list[Any] = ["trl:ScriptArguments", cls, "trl:ModelConfig"]
        kind = sub
    else:
        script = root / launch.entry
        specs, trainer = trl_classes(script, root)
        kind = sem or ("rloo" if "RLOO" in trainer else "grpo")
    cwd = root / launch.cwd if not Path(launch.cwd).is_absolute() else Path(launch.cwd)
    job = {"mode": "parser", "classes": specs, "argv": launch.argv, "cwd": str(cwd)}
    if "kwargs" in item.get("_python", {}):
        job = {
            "mode": "kwargs",
            "class": item["_python"]["class"],
            "kwargs": item["_python"]["kwargs"],
        }
    ans = trl_job(version, job)
    if "rejected" in ans:
        out = _rejected("trl", launch.entry, f"TRL {version}: {ans['rejected']}")
        known = trl_job(version, {**job, "lenient": True})
        if "rejected" not in known:
            kl = _trl_read(known, kind, version, launch.entry, item)
            kl["dropped"] = known.get("dropped", [])
            out["kl_keys_only"] = kl
        return out
    return _trl_read(ans, kind, version, launch.entry, item)


def _trl_read(
    ans: dict[str, Any], kind: str, version: str, entry: str, item: dict[str, Any]
) -> dict[str, Any]:
    """The reading of a built TRL config."""
    vals = ans["values"]
    if kind == "rloo" or ans.get("kind") == "RLOOConfig":
        reading = semantics.trl_rloo_reading(vals, version, entry)
    else:
        reading = semantics.trl_grpo_reading(vals, version, entry)
    for n in item.get("trl_notes", []):
        reading.notes.append(n)
    out = reading.as_dict()
    out["values"] = vals
    out["config_class"] = ans.get("config_class")
    return out


# ----------------------------------------------------------------------------- Python files
def python_file(root: Path, item: dict[str, Any], log: list[str]) -> list[shell_trace.Launch]:
    """A Python file as the launch: its ``GRPOConfig(...)``/``RLOOConfig(...)`` call (ast)."""
    path = root / item["path"]
    src = path.read_text(encoding="utf-8")
    tree = ast.parse(src)
    consts = _constants(tree)
    call = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("GRPOConfig", "RLOOConfig"):
                call = (name, node)
                break
    if call is None:  # a TrlParser script: run as `python FILE` with the required args only
        return [shell_trace.Launch(item["path"], item.get("args", []), 0, "python", ".")]
    name, node = call
    kwargs: dict[str, Any] = {}
    unresolved: list[str] = []
    for kw in node.keywords:
        if kw.arg is None:
            unresolved.append("**")
            continue
        try:
            kwargs[kw.arg] = _eval(kw.value, consts)
        except ValueError:
            unresolved.append(kw.arg)
    kl_keys = {"beta", "loss_type", "num_iterations", "steps_per_generation",
               "gradient_accumulation_steps", "max_completion_length", "kl_coef",
               "num_ppo_epochs", "num_mini_batches"}  # fmt: skip
    lost = [u for u in unresolved if u in kl_keys or u == "**"]
    item["_python"] = {"class": f"trl:{name}", "kwargs": kwargs, "unresolved": unresolved}
    log.append(json.dumps({"python_call": name, "line": node.lineno, "kwargs": kwargs,
                           "unresolved": unresolved}, default=str))  # fmt: skip
    if lost:
        item.setdefault("trl_notes", []).append(f"unresolved KL-relevant arguments: {lost}")
    if unresolved:
        item.setdefault("trl_notes", []).append(
            f"arguments not evaluated by ast (left to their defaults): {unresolved}"
        )
    return [shell_trace.Launch(item["path"], [], 0, "python", ".")]


def _constants(tree: ast.Module) -> dict[str, Any]:
    """Simple ``NAME = <literal>`` assignments anywhere in the file (last one wins)."""
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name):
                try:
                    out[t.id] = _eval(node.value, out)
                except ValueError:
                    out.pop(t.id, None)
    return out


def _eval(node: ast.AST, consts: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, consts) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {
            _eval(k, consts): _eval(v, consts)
            for k, v in zip(node.keys, node.values, strict=True)
            if k
        }
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, consts)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, consts), _eval(node.right, consts)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.Div: lambda: a / b, ast.FloorDiv: lambda: a // b}  # fmt: skip
        if type(node.op) in ops:
            return ops[type(node.op)]()
    raise ValueError(ast.dump(node)[:80])


# ----------------------------------------------------------------------------- per file
def yaml_launches(root: Path, item: dict[str, Any]) -> list[shell_trace.Launch]:
    """A config file as one launch of its entry (``entry`` and ``entry_argv`` in list.yaml)."""
    path = Path(item.get("mount", "")) / item["path"]
    argv = [a.replace("{path}", str(path)).replace("{dir}", str(root / path.parent))
            .replace("{stem}", path.stem) for a in item["entry_argv"]]  # fmt: skip
    return [shell_trace.Launch(item["entry"], argv, 0, "python", item.get("cwd", "."))]


EXPECT = {"verl": verl_expect, "openrlhf": openrlhf_expect, "trl": trl_expect}


def derive_item(mirrors: Path, item: dict[str, Any], logdir: Path | None) -> dict[str, Any]:
    """Everything files.yaml holds for one listed file."""
    gdir = git_dir(mirrors, item["repo"])
    commit = rev(gdir, item["ref"])
    out: dict[str, Any] = {k: v for k, v in item.items() if not k.startswith("_")}
    out["commit"] = commit
    out["blob"] = blob_of(gdir, commit, item["path"])
    pin = find_pin(mirrors, gdir, commit, item)
    out["pin"] = pin
    log: list[str] = []
    work = Path(tempfile.mkdtemp(prefix="rf-derive-"))
    try:
        materialise_repo(mirrors, item, commit, work)
        rel = str(Path(item.get("mount", "")) / item["path"]) if item.get("mount") else item["path"]
        if item.get("placeholders"):  # template values a user must fill in (derivation only)
            f = work / rel
            text = f.read_text()
            for k, v in item["placeholders"].items():
                text = text.replace(k, v)
            f.write_text(text)
        kind = item["kind"]
        if kind in ("shell", "slurm"):
            launches = shell_launches(work, item, rel, log)
        elif kind == "cluster-yaml":
            launches = cluster_yaml_launches(work, item, rel, log)
        elif kind == "yaml":
            launches = yaml_launches(work, item)
        elif kind == "python":
            launches = python_file(work, item, log)
        else:
            raise ValueError(f"unknown kind {kind}")
        lib = item["library"]
        expect: dict[str, Any] = {}
        for which in ("newest", "pinned"):
            if which == "pinned" and pin is None:
                continue
            version = NEWEST[lib] if which == "newest" or pin is None else pin["version"]
            readings = []
            for launch in launches:
                r = EXPECT[lib](launch, work, item, which, version)
                r["argv_len"] = len(launch.argv)
                readings.append(r)
            expect[which] = {"version": f"{lib} {version}", "launches": readings}
        out["expect"] = expect
        # the recorded argvs stay in the (uncommitted) log: they are the file's own flags
        log.append(json.dumps([{"entry": x.entry, "prog": x.prog, "cwd": x.cwd, "argv": x.argv}
                               for x in launches]))  # fmt: skip
        out["launches"] = [{"entry": x.entry, "via": x.prog, "cwd": x.cwd} for x in launches]
        out["siblings"] = siblings(gdir, commit, item, launches, work, mirrors)
        if item.get("_traces"):
            out["trace"] = item["_traces"]
    finally:
        if logdir is not None:
            logdir.mkdir(parents=True, exist_ok=True)
            (logdir / f"{item['id']}.log").write_text("\n".join(log))
        shutil.rmtree(work, ignore_errors=True)
    return out


def siblings(
    gdir: Path,
    commit: str,
    item: dict[str, Any],
    launches: list[shell_trace.Launch],
    root: Path,
    mirrors: Path | None = None,
) -> list[dict[str, str]]:
    """Files besides the launch file that its reading needs: config files it names, sourced
    scripts, the Hydra config a launch composes with its ``defaults`` chain; each with its
    blob (the scorer materialises them next to the file). A file of an overlay (a submodule a
    symlinked config points into) carries ``overlay``: the overlay's mount."""
    mount = item.get("mount", "")
    want: set[str] = set(item.get("siblings", []))
    extra: list[dict[str, str]] = []
    for f in hydra_chain(root, launches):
        want.add(f.path)  # the Hydra app itself, then its config chain
        if f.link_target is not None:
            want.add(f.link_target)
    for w in sorted(want):
        ov = next((o for o in item.get("overlays", []) if w.startswith(o["mount"] + "/")), None)
        if ov is None or mirrors is None:
            continue
        want.discard(w)
        og = git_dir(mirrors, ov["repo"])
        inner = str(Path(w).relative_to(ov["mount"]))
        try:
            extra.append({"path": inner, "blob": blob_of(og, rev(og, ov["ref"]), inner),
                          "overlay": ov["mount"]})  # fmt: skip
        except Exception:
            continue
    text = (
        (root / mount / item["path"]).read_text(errors="replace")
        if item["kind"] != "python"
        else ""
    )
    for m in re.finditer(r"^\s*(?:source|\.)\s+([^\s;]+)", text, re.M):
        cand = Path(item["path"]).parent / m.group(1).strip("\"'")
        want.add(str(cand))
    for x in launches:
        argv = x.argv
        for i, a in enumerate(argv):
            val = None
            if a in ("--config-path", "--config", "-cp", "--config_file") and i + 1 < len(argv):
                val = argv[i + 1]
            elif a.startswith(("--config-path=", "--config=")):
                val = a.split("=", 1)[1]
            if val is None:
                continue
            p = Path(x.cwd) / val if not Path(val).is_absolute() else Path(val)
            full = (root / p).resolve() if not p.is_absolute() else p
            try:
                relp = full.relative_to(root.resolve())
            except ValueError:
                continue
            if full.is_dir():
                want.update(str(f.relative_to(root.resolve())) for f in full.glob("*.yaml"))
            elif full.is_file():
                want.add(str(relp))
    out = []
    for w in sorted(want):
        repo_path = str(Path(w).relative_to(mount)) if mount and w.startswith(mount) else w
        repo_path = str(Path(repo_path))
        if repo_path == item["path"]:
            continue
        try:
            out.append({"path": repo_path, "blob": blob_of(gdir, commit, repo_path)})
        except Exception:
            continue
    return out + extra


def hydra_chain(root: Path, launches: list[shell_trace.Launch]) -> list[hydra_siblings.ConfigFile]:
    """The files the Hydra launches among ``launches`` read: the entry script (its
    ``@hydra.main`` names the config folder, as it does for the user's checkout) and the
    config files they compose (``hydra_siblings``) from that folder (or ``--config-path``)
    and ``--config-name``."""
    out: list[hydra_siblings.ConfigFile] = []
    for x in launches:
        base = root / x.cwd if x.cwd and not Path(x.cwd).is_absolute() else root
        module = next((b / x.entry for b in (base, root)
                       if x.entry.endswith(".py") and (b / x.entry).is_file()), None)  # fmt: skip
        if module is None:
            continue
        try:
            cpath, cname = verl_compose.hydra_main_args(module)
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        _, options = verl_compose.split_options(x.argv)
        cpath = options.get("config-path", cpath)
        cname = options.get("config-name", cname)
        if cpath is None or not cname:
            continue
        cdir = Path(cpath) if Path(cpath).is_absolute() else module.parent / cpath
        app = hydra_siblings.ConfigFile(str(Path(os.path.abspath(module)).relative_to(root)))
        files = [app, *hydra_siblings.chain(root, cdir, cname)]
        out += [f for f in files if f not in out]
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mirrors", type=Path)
    p.add_argument("--list", type=Path, default=HERE / "list.yaml")
    p.add_argument("--out", type=Path, default=HERE / "files.yaml")
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--log", type=Path, default=BUILD / "derive-logs")
    args = p.parse_args(argv)
    items = yaml.safe_load(args.list.read_text())["files"]
    old: dict[str, Any] = {}
    if args.out.exists():
        old = {x["id"]: x for x in (yaml.safe_load(args.out.read_text()) or {}).get("files", [])}
    done = []
    for item in items:
        if args.only and item["id"] not in args.only:
            if item["id"] in old:
                done.append(old[item["id"]])
            continue
        print(f"{item['id']} ...", flush=True)
        try:
            res = derive_item(args.mirrors, dict(item), args.log)
        except Exception as exc:
            print(f"  FAILED: {type(exc).__name__}: {exc}", flush=True)
            res = {**item, "derive_error": f"{type(exc).__name__}: {exc}"}
        for which, e in res.get("expect", {}).items():
            for r in e["launches"]:
                print(f"  {which:6} {_short(r)}", flush=True)
        done.append(res)
    header = {"schema": "kl-patches.real-files/1", "newest": NEWEST, "files": done}
    args.out.write_text(yaml.safe_dump(header, sort_keys=False, width=100, allow_unicode=True))
    return 0


def _short(r: dict[str, Any]) -> str:
    if r.get("rejected"):
        return f"{r['entry']}: REJECTED {r['rejected'][:100]}"
    side = lambda s: f"{s['estimator']}@{s['coef']:g}" if s else "-"  # noqa: E731
    return f"{r['entry']}: reward {side(r['reward'])} loss {side(r['loss'])} off={r['off_policy']}"


if __name__ == "__main__":
    raise SystemExit(main())
