"""The config-group folders each verl release's trainer config composes through its ``defaults``.

From 0.5.0 on, ``verl/trainer/config/ppo_trainer.yaml`` (and ``ppo_megatron_trainer.yaml``)
start with a ``defaults`` list of config groups (``actor@actor_rollout_ref.actor: dp_actor``,
...), each a folder beside it. Hydra looks those folders up on the search path of the app that
loads the file, not beside the file: a project whose own config folder holds the trainer config
(a symlink into its verl copy, as RAGEN's ``config/ppo_trainer.yaml``, or a copy) composes only
while that file has no groups, and under a release whose file has them it fails with
``MissingConfigException: In 'ppo_trainer': Could not find '<group>/<name>'``. The audit
states that refusal when a project's folder, read as such a release, lacks a group folder.

Source: the ``defaults`` list at ``verl/trainer/config/ppo_trainer.yaml:8`` at the tags
v0.5.0, v0.6.0, v0.6.1, v0.7.0, v0.7.1, v0.8.0, v0.9.0 (v0.9.1: the wheel's, the same as
v0.9.0); v0.2-v0.4.1 have no ``defaults`` list. Plain files the list names (v0.7.0's
``reward_manager.yaml``, v0.8.0's ``legacy_reward_impl.yaml``) are not folders and not listed;
``ppo_megatron_trainer.yaml`` names the same folders (its own list before v0.8.0, then
``ppo_trainer`` with ``override model_engine: megatron``).
"""

from __future__ import annotations

from packaging.version import Version

__all__ = ["GROUPS", "missing_groups"]

_V050 = ("actor", "npu_profile", "data", "ref", "rollout", "critic", "reward_model")
_V060 = ("actor", "data", "ref", "rollout", "model", "critic", "reward_model")
_V071 = (
    "model_engine",
    "actor",
    "data",
    "ref",
    "rollout",
    "model",
    "critic",
    "reward",
    "algorithm",
)

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("0.5.0", _V050),
    ("0.6.0", _V060),
    ("0.6.1", (*_V060, "algorithm")),
    ("0.7.1", _V071),
    ("0.8.0", (*_V071, "distillation")),
    ("0.9.0", (*_V071, "distillation", "transfer_queue")),
)
"""(first release, group folders its trainer config composes), ascending; before 0.5.0 none.
0.7.0 lists the 0.6.1 folders (its ``reward_manager`` entry is a file)."""


def _groups(release: str) -> tuple[str, ...]:
    out: tuple[str, ...] = ()
    for first, groups in GROUPS:
        if Version(release) >= Version(first):
            out = groups
    return out


def missing_groups(release: str, present: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The group folders verl ``release``'s trainer config composes that ``present`` (the
    folders on the project's search path) lacks, in the order of its ``defaults`` list."""
    return tuple(g for g in _groups(release) if g not in present)
