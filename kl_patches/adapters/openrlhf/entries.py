"""OpenRLHF's entry points and flag history as the audit needs them, recorded from its code.

``openrlhf.cli.train_ppo_ray`` is the PPO/REINFORCE/GRPO trainer of every release; releases up
to 0.6.x also shipped ``openrlhf.cli.train_ppo``, a DeepSpeed (non-Ray) trainer with the same KL
flags and the same two placements (reward KL in the experience maker unless ``--use_kl_loss``,
loss KL in the PPO trainer). The other ``openrlhf.cli`` modules do not train with a reference
KL. Sources: the OpenRLHF repository at tags v0.5.0-v0.10.0 and the 0.11.2 wheel.
"""

from __future__ import annotations

from kl_patches.adapters.base import Entry, TrainerFacts

__all__ = [
    "ARGV_MARKERS",
    "LEGACY_FLAGS",
    "OTHER_ENTRIES",
    "TRAINERS",
    "entries",
    "facts",
]

TRAINERS: tuple[TrainerFacts, ...] = (
    TrainerFacts(
        "openrlhf.cli.train_ppo_ray",
        source="openrlhf 0.11.2 trainer/ppo_utils/experience_maker.py:205 (reward KL unless "
        "--algo.kl.use_loss), trainer/ray/ppo_actor.py:318 (loss KL)",
        where="OpenRLHF 0.1-0.11.2",
    ),
    TrainerFacts(
        "openrlhf.cli.train_ppo",
        source="OpenRLHF v0.6.0 openrlhf/trainer/ppo_utils/experience_maker.py:355 (reward KL "
        "unless --use_kl_loss), openrlhf/trainer/ppo_trainer.py:403 (loss KL), "
        "openrlhf/cli/train_ppo.py:333 (--init_kl_coef)",
        where="OpenRLHF up to 0.6.x (removed 2025-03-18, PR #882)",
        note="the non-Ray DeepSpeed trainer; read with the flags of train_ppo_ray",
    ),
)
"""OpenRLHF's reference-KL trainers."""

OTHER_ENTRIES: dict[str, str] = {
    "openrlhf.cli.train_sft": "OpenRLHF's supervised fine-tuning (no KL regulariser)",
    "openrlhf.cli.train_rm": "OpenRLHF's reward-model training (no KL regulariser)",
    "openrlhf.cli.train_prm": "OpenRLHF's process-reward-model training (no KL regulariser)",
    "openrlhf.cli.train_dpo": "OpenRLHF's DPO (its beta is the DPO temperature, not a KL "
    "regulariser in a reward or loss)",
    "openrlhf.cli.train_kto": "OpenRLHF's KTO (no KL regulariser in a reward or loss)",
    "openrlhf.cli.train_kd": "OpenRLHF's knowledge distillation (a KL to a teacher model, not "
    "to a reference policy)",
    "openrlhf.cli.batch_inference": "OpenRLHF's batch inference (no training)",
    "openrlhf.cli.interactive_chat": "OpenRLHF's chat demo (no training)",
    "openrlhf.cli.serve_rm": "OpenRLHF's reward-model server (no training)",
    "openrlhf.cli.lora_combiner": "OpenRLHF's LoRA merger (no training)",
}
"""OpenRLHF modules that do not train with a reference KL, and what they run instead."""

LEGACY_FLAGS: dict[str, tuple[tuple[str, ...], str]] = {
    "use_kl_estimator_k3": (
        ("--kl_estimator", "k3"),
        "--use_kl_estimator_k3 (OpenRLHF 0.5.x-0.6.0: v0.6.0 openrlhf/cli/train_ppo_ray.py, "
        "models/utils.py compute_approx_kl(use_kl_estimator_k3=...)) selects k3; read as "
        "--kl_estimator k3 (the flag was replaced in 0.6.0.post1, and releases after it refuse "
        "it)",
    ),
}
"""Flags of older releases -> (the current flags they mean, what the audit says about them)."""

ARGV_MARKERS: tuple[str, ...] = (
    r"^--algo\.(kl|advantage)\.",
    r"^--(init_kl_coef|kl_estimator|use_kl_loss|use_kl_estimator_k3|advantage_estimator)$",
    r"^--(reward_pretrain|remote_rm_url|actor_num_gpus_per_node|ref_num_nodes)$",
)
"""Flags that mark an OpenRLHF trainer's command line."""

_BY_MODULE = {t.module: t for t in TRAINERS}


def entries() -> tuple[Entry, ...]:
    """The descriptor's entries."""
    return tuple(Entry(t.module, t.module) for t in TRAINERS)


def facts(label: str) -> TrainerFacts | None:
    """The recorded facts of an entry label, None for an unknown one."""
    return _BY_MODULE.get(label)


def match_entry(module: str) -> Entry | None:
    """A fork's copy of ``train_ppo_ray`` (``my_project.cli.train_ppo_ray``)."""
    if module in _BY_MODULE or module in OTHER_ENTRIES or module.startswith("openrlhf."):
        return None
    if module.rsplit(".", 1)[-1] in ("train_ppo_ray", "train_ppo"):
        return Entry(module, module)
    return None
