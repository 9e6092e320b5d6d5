"""Compose a verl launch's Hydra overrides with a given verl version's own config files.

The real-file benchmark's expectation for a verl launch is what verl's ``@hydra.main`` would
build: the entry module's ``config_path``/``config_name`` (read from its decorator with
``ast``, or ``--config-path``/``--config-name`` on the command line), the config tree of the
chosen verl version (the released wheel for the newest version, the repository or the vendored
copy for a pinned one), and the recorded overrides, composed by hydra-core itself in struct
mode. A key the config does not have, or a malformed override, raises as it would at launch:
that is reported as ``rejected`` with Hydra's message.

``pkg://verl.trainer.config`` search paths are served from a shim package (empty
``__init__`` files and the config directory), so verl itself is never imported; ``file://``
paths are relative to the compose root, which stands for the launch's working directory.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KEYS = (
    "algorithm.adv_estimator",
    "algorithm.use_kl_in_reward",
    "algorithm.kl_penalty",
    "algorithm.kl_ctrl.type",
    "algorithm.kl_ctrl.kl_coef",
    "algorithm.norm_adv_by_std_in_grpo",
    "actor_rollout_ref.actor.use_kl_loss",
    "actor_rollout_ref.actor.kl_loss_coef",
    "actor_rollout_ref.actor.kl_loss_type",
    "actor_rollout_ref.actor.ppo_epochs",
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.actor.loss_agg_mode",
    "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.rollout.multi_turn.enable",
    "data.train_batch_size",
    "data.gen_batch_size",
    "trainer.use_v1",
    "trainer.v1.trainer_mode",
    "critic.ppo_epochs",
    "async_training.staleness_threshold",
    "async_training.trigger_parameter_sync_step",
    "async_training.require_batches",
    "actor_rollout_ref.hybrid_engine",
    "algorithm.filter_groups.enable",
)
"""Keys read from the composed config (missing keys read as None)."""

_MISSING = "<missing>"


@dataclass
class Composed:
    """The outcome of one composition."""

    values: dict[str, Any] = field(default_factory=dict)
    """``KEYS`` -> resolved value (``"<missing>"`` when the config has no such key)."""
    rejected: str | None = None
    """Hydra's error when the launch would fail at composition, else None."""
    config_dir: str = ""
    """The primary config directory used."""
    config_name: str = ""
    """The primary config name used."""


_OFFENDING = (
    re.compile(r"Could not override '([^']+)'"),
    re.compile(r"An item is already at '([^']+)'"),
    re.compile(r"Key '([^']+)' is not in struct"),
    re.compile(r"Could not delete from config. '([^']+)'"),
)


def offending_override(message: str, overrides: list[str]) -> str | None:
    """The override Hydra's error message names (by key, or by its text), if any."""
    for pat in _OFFENDING:
        m = pat.search(message)
        if m:
            key = m.group(1)
            for o in overrides:
                if o.split("=", 1)[0].lstrip("+~") == key:
                    return o
    for o in overrides:
        if o and o in message:
            return o
    return None


def compose_lenient(
    compose_root: Path, module_file: Path, argv: list[str], verl_config: Path, limit: int = 40
) -> tuple[Composed, list[str]]:
    """Compose, dropping each override Hydra refuses, until it composes: (result, dropped).

    Only for the benchmark's "KL keys only" reading of a launch the library refuses: what the
    KL settings would mean if the user removed the overrides this version does not have.
    """
    argv = list(argv)
    dropped: list[str] = []
    for _ in range(limit):
        out = compose(compose_root, module_file, argv, verl_config)
        if out.rejected is None:
            return out, dropped
        bad = offending_override(out.rejected, [a for a in argv if not a.startswith("-")])
        if bad is None:
            return out, dropped
        argv.remove(bad)
        dropped.append(bad.split("=", 1)[0])
    return out, dropped


def hydra_main_args(module_file: Path) -> tuple[str | None, str | None]:
    """``(config_path, config_name)`` of the ``@hydra.main`` decorator in a module (by ast)."""
    tree = ast.parse(module_file.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in node.decorator_list:
            if not isinstance(dec, ast.Call):
                continue
            fn = dec.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name != "main":
                continue
            kw = {k.arg: k.value for k in dec.keywords if k.arg}
            path = kw.get("config_path")
            cname = kw.get("config_name")
            return (
                path.value
                if isinstance(path, ast.Constant) and isinstance(path.value, str)
                else None,
                cname.value
                if isinstance(cname, ast.Constant) and isinstance(cname.value, str)
                else None,
            )
    return None, None


def split_options(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """(overrides, {config-path|config-name|config-dir: value}) of a Hydra app's argv."""
    names = {
        "--config-path": "config-path",
        "-cp": "config-path",
        "--config-name": "config-name",
        "-cn": "config-name",
        "--config-dir": "config-dir",
        "-cd": "config-dir",
    }
    overrides: list[str] = []
    options: dict[str, str] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        key, eq, val = tok.partition("=")
        if key in names:
            if not eq:
                val = argv[i] if i < len(argv) else ""
                i += 1
            options[names[key]] = val
        elif tok.startswith("-"):
            continue  # other Hydra flags (--multirun, -c job ...) do not change the config
        else:
            overrides.append(tok)
    return overrides, options


def _shim(root: Path, verl_config: Path) -> Path:
    shim = root / "_rf_shim"
    pkg = shim / "verl" / "trainer"
    pkg.mkdir(parents=True, exist_ok=True)
    (shim / "verl" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    link = pkg / "config"
    if link.is_symlink() or link.exists():
        if link.is_symlink():
            link.unlink()
        else:
            shutil.rmtree(link)
    link.symlink_to(verl_config.resolve(), target_is_directory=True)
    return shim


def compose(
    compose_root: Path,
    module_file: Path,
    argv: list[str],
    verl_config: Path,
) -> Composed:
    """Compose ``argv`` (the trainer's arguments) as verl's entry ``module_file`` would.

    ``compose_root`` stands for the launch's working directory (``file://`` search paths are
    resolved from it); ``verl_config`` is the ``verl/trainer/config`` directory of the verl
    version in question (it serves ``pkg://verl.trainer.config``).
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    overrides, options = split_options(argv)
    cpath, cname = hydra_main_args(module_file)
    cpath = options.get("config-path", cpath or "")
    cname = options.get("config-name", cname or "")
    cdir = Path(cpath) if os.path.isabs(cpath) else (module_file.parent / cpath)
    out = Composed(config_dir=str(cdir), config_name=cname)
    shim = _shim(compose_root, verl_config)
    old_cwd = os.getcwd()
    old_path = list(sys.path)
    for mod in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
        del sys.modules[mod]
    GlobalHydra.instance().clear()
    try:
        os.chdir(compose_root)
        sys.path.insert(0, str(shim))
        if "config-dir" in options:
            overrides = [*overrides, f"hydra.searchpath=[file://{options['config-dir']}]"]
        with initialize_config_dir(config_dir=str(cdir.resolve()), version_base=None):
            cfg = hydra_compose(config_name=cname, overrides=overrides)
        for key in KEYS:
            try:
                node = OmegaConf.select(cfg, key, default=_MISSING, throw_on_missing=False)
                if OmegaConf.is_config(node):
                    node = OmegaConf.to_container(node, resolve=True)
                out.values[key] = node
            except Exception as exc:  # an interpolation verl resolves at run time
                out.values[key] = f"<unresolved: {type(exc).__name__}>"
    except Exception as exc:
        first = str(exc).strip().splitlines()
        out.rejected = f"{type(exc).__name__}: {first[0] if first else ''}"[:300]
    finally:
        GlobalHydra.instance().clear()
        os.chdir(old_cwd)
        sys.path[:] = old_path
        for mod in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
            del sys.modules[mod]
    return out
