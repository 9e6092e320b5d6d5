"""Build a TRL trainer config the way a launch builds it, inside a venv with trl installed.

Run with the Python of a venv that has ``trl==1.16.0`` (``build/venv-trl``), one JSON job on
stdin, one JSON answer on stdout:

* ``{"mode": "parser", "classes": [SPEC, ...], "argv": [...], "cwd": DIR}``: what the
  script's ``TrlParser((A, B, C)).parse_args_and_config()`` returns for that argv (``--config
  FILE`` included). SPEC is ``"trl:GRPOConfig"`` (imported from trl) or ``{"file": PATH,
  "class": NAME}``: a dataclass defined in the project's own file, whose ``class`` statement
  (and the module-level dataclasses it derives from) is taken from the file with ``ast`` and
  executed with ``dataclasses``, ``typing`` and the names the file imports from ``trl``
  available (the rest of the file, its models and trainers, is never run).
* ``{"mode": "kwargs", "class": SPEC, "kwargs": {...}}``: ``CLASS(**kwargs)`` (a Python
  script's ``GRPOConfig(...)`` call, its arguments read with ast by the caller).
* ``"lenient": true`` in either: arguments the dataclasses do not know are left out (and
  listed as ``dropped``), for the benchmark's "KL keys only" reading of a refused launch.

The answer is ``{"config_class": NAME, "values": {field: value}}`` for the instance that is a
``trl.GRPOConfig`` or ``trl.RLOOConfig``, or ``{"rejected": MESSAGE}`` when TRL (or
transformers' argument parser) refuses it, as it would at launch.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import sys
import types
import typing
from typing import Any

FIELDS = (
    "beta",
    "loss_type",
    "max_completion_length",
    "num_iterations",
    "steps_per_generation",
    "gradient_accumulation_steps",
    "per_device_train_batch_size",
    "generation_batch_size",
    "num_generations",
    "use_bias_correction_kl",
    "kl_coef",
    "num_ppo_epochs",
    "num_mini_batches",
    "token_level_kl",
    "sync_ref_model",
    "use_liger_loss",
)
"""Fields reported back (missing ones are left out)."""

CPU_ARGV = ["--use_cpu", "true"]
CPU_KWARGS = {"use_cpu": True}
"""Added to every job: TrainingArguments refuses bf16 on a machine without a GPU unless
use_cpu is set; use_cpu changes no KL-relevant field."""


def _project_class(path: str, name: str) -> type:
    import trl

    with open(path, encoding="utf-8") as fh:
        src = fh.read()
    tree = ast.parse(src)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    module = types.ModuleType("rf_project_" + str(abs(hash(path))))
    sys.modules[module.__name__] = module  # dataclasses looks the module up by name
    ns: dict[str, Any] = module.__dict__
    ns.update({"dataclasses": dataclasses, "typing": typing})
    ns.update({k: getattr(typing, k) for k in ("Optional", "Union", "Any", "Literal")})
    ns["dataclass"], ns["field"] = dataclasses.dataclass, dataclasses.field
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] in ("trl", "transformers")
        ):
            for alias in node.names:
                try:
                    mod = __import__(node.module, fromlist=[alias.name])
                    ns[alias.asname or alias.name] = getattr(mod, alias.name)
                except (ImportError, AttributeError) as exc:
                    raise ImportError(
                        f"{path}: from {node.module} import {alias.name} fails in this venv"
                    ) from exc
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "trl":
                    ns[(alias.asname or alias.name).split(".")[0]] = trl
    order: list[str] = []

    def need(cname: str) -> None:
        node = classes.get(cname)
        if node is None or cname in order:
            return
        for base in node.bases:
            if isinstance(base, ast.Name):
                need(base.id)
        order.append(cname)

    need(name)
    if name not in order:
        raise ValueError(f"{path}: no class {name}")
    body: list[ast.stmt] = [classes[c] for c in order]
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), ns)
    return ns[name]


def _resolve(spec: Any) -> type:
    if isinstance(spec, str):
        mod, _, name = spec.partition(":")
        return getattr(__import__(mod, fromlist=[name]), name)
    return _project_class(spec["file"], spec["class"])


def _values(objs: tuple[Any, ...]) -> dict[str, Any]:
    """The trainer config among the parsed objects: a trl.GRPOConfig/RLOOConfig, or a project's
    own class of that name (VLM-R1 ships a GRPOConfig copy deriving from TrainingArguments)."""
    for obj in objs:
        names = [c.__name__ for c in type(obj).__mro__]
        kind = next((n for n in ("GRPOConfig", "RLOOConfig") if n in names), None)
        if kind is not None:
            vals = {f: getattr(obj, f) for f in FIELDS if hasattr(obj, f)}
            return {
                "config_class": type(obj).__name__,
                "kind": kind,
                "values": vals,
                "module": type(obj).__module__,
            }
    return {"rejected": "no GRPOConfig/RLOOConfig among the parsed dataclasses"}


def _without_deepspeed(argv: list[str]) -> list[str]:
    """argv without ``--deepspeed FILE``: TrainingArguments imports deepspeed to check that
    file, which this CPU machine does not have; the DeepSpeed config changes no KL field."""
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--deepspeed":
            skip = True
            continue
        if a.startswith("--deepspeed="):
            continue
        out.append(a)
    return out


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Answer one job (see the module docstring)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        if job["mode"] == "parser":
            from trl import TrlParser

            classes = tuple(_resolve(s) for s in job["classes"])
            if job.get("cwd"):
                os.chdir(job["cwd"])
            parser = TrlParser(classes)
            argv = [*_without_deepspeed(job["argv"]), *CPU_ARGV]
            if not job.get("lenient"):
                return _values(tuple(parser.parse_args_and_config(argv)))
            *objs, rest = parser.parse_args_and_config(argv, return_remaining_strings=True)
            out = _values(tuple(objs))
            out["dropped"] = [r for r in rest if str(r).startswith("--")]
            return out
        cls = _resolve(job["class"])
        kwargs = {**job["kwargs"], **CPU_KWARGS}
        dropped: list[str] = []
        while True:
            try:
                out = _values((cls(**kwargs),))
                if job.get("lenient"):
                    out["dropped"] = dropped
                return out
            except TypeError as exc:
                m = re.search(r"unexpected keyword argument '([^']+)'", str(exc))
                if not job.get("lenient") or not m or m.group(1) not in kwargs:
                    raise
                kwargs.pop(m.group(1))
                dropped.append(m.group(1))
    except SystemExit as exc:
        return {"rejected": f"argument parser exited ({exc.code}): {_last_err()}"}
    except Exception as exc:
        first = str(exc).strip().splitlines()
        return {"rejected": f"{type(exc).__name__}: {first[0] if first else ''}"[:400]}


_ERR: list[str] = []


def _last_err() -> str:
    return _ERR[-1] if _ERR else ""


class _Tee:
    def write(self, text: str) -> int:
        if text.strip():
            _ERR.append(text.strip().splitlines()[-1])
        return len(text)

    def flush(self) -> None:
        pass


if __name__ == "__main__":
    job = json.loads(sys.stdin.read())
    real_stdout = sys.stdout
    sys.stderr = _Tee()  # type: ignore[assignment]
    sys.stdout = sys.stderr
    out = run(job)
    real_stdout.write(json.dumps(out, default=str))
