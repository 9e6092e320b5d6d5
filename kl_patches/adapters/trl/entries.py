"""TRL's entry points, example scripts and Python API as the audit needs them (no TRL needed).

TRL trains with a reference KL in three trainers: ``GRPOTrainer`` (k3 in the loss),
``RLOOTrainer`` (k1 in the reward) and, until 1.12.x, ``PPOTrainer`` (k1 or k3 per token in the
reward, then GAE). They are started by the ``trl grpo|rloo`` console command (``trl/cli``), by
TRL's scripts (``trl/scripts/*.py``), by the example scripts of a TRL checkout, or by a Python
script that builds the trainer itself. The other ``trl`` commands and trainers use "beta" or
"KL" in other senses (DPO's temperature, a distillation KL to a teacher).

PPO is recorded from the last release that shipped it, TRL 1.12.0
(``trl/experimental/ppo/ppo_config.py:231-272``: ``num_ppo_epochs`` 4, ``kl_coef`` 0.05,
``kl_estimator`` "k1", ``gamma`` 1.0, ``lam`` 0.95; ``ppo_trainer.py:773-775``: per-token
``kl = -logr`` (k1) or ``(exp(logr) - 1) - logr`` (k3), ``non_score_reward = -kl_coef * kl``).
"""

from __future__ import annotations

from kl_patches.adapters.base import Entry, PythonApi

__all__ = [
    "ENTRIES",
    "OTHER_ENTRIES",
    "PPO_DEFAULTS",
    "PPO_LAST_RELEASE",
    "PYTHON",
    "SCRIPTS",
]

ENTRIES: tuple[Entry, ...] = (
    Entry("trl.scripts.grpo", "trl grpo", ("trl", "grpo")),
    Entry("trl.scripts.rloo", "trl rloo", ("trl", "rloo")),
)
"""TRL's own trainer entry points (``trl/cli/commands/__init__.py`` registers grpo and rloo)."""

OTHER_ENTRIES: dict[str, str] = {
    "trl sft": "TRL's supervised fine-tuning (no KL regulariser)",
    "trl dpo": "TRL's DPO (its beta is the DPO temperature, not a KL regulariser)",
    "trl kto": "TRL's KTO (no KL regulariser in a reward or loss)",
    "trl reward": "TRL's reward-model training (no KL regulariser)",
    "trl distillation": "TRL's distillation (a KL to a teacher model, not to a reference policy)",
    "trl env": "TRL's environment report (no training)",
    "trl vllm-serve": "TRL's vLLM server (no training)",
    "trl.scripts.sft": "TRL's supervised fine-tuning (no KL regulariser)",
    "trl.scripts.dpo": "TRL's DPO (its beta is the DPO temperature, not a KL regulariser)",
    "trl.scripts.kto": "TRL's KTO (no KL regulariser in a reward or loss)",
    "trl.scripts.reward": "TRL's reward-model training (no KL regulariser)",
    "trl.scripts.distillation": "TRL's distillation (a KL to a teacher, not to a reference)",
    "trl.scripts.vllm_serve": "TRL's vLLM server (no training)",
}
"""TRL commands and modules that are not reference-KL RL trainers, and what they run."""

SCRIPTS: dict[str, str] = {
    "examples/scripts/ppo/ppo.py": "trl ppo",
    "examples/scripts/ppo/ppo_tldr.py": "trl ppo",
    "examples/scripts/rloo/rloo.py": "trl rloo",
    "examples/scripts/rloo/rloo_tldr.py": "trl rloo",
    "examples/scripts/rloo.py": "trl rloo",
    "examples/scripts/grpo_vlm.py": "trl grpo",
    "examples/scripts/gspo.py": "trl grpo",
    "examples/scripts/gspo_vlm.py": "trl grpo",
    "trl/scripts/grpo.py": "trl grpo",
    "trl/scripts/rloo.py": "trl rloo",
    "src/open_r1/grpo.py": "trl grpo",
}
"""Example scripts of a TRL checkout (huggingface/trl) and of open-r1 (huggingface/open-r1)
that build one trainer from ``TrlParser`` flags -> the entry they are read as."""

PYTHON = PythonApi(
    modules=("trl",),
    trainers={
        "GRPOTrainer": "grpo",
        "RLOOTrainer": "rloo",
        "PPOTrainer": "ppo",
        "PPOv2Trainer": "ppo",
    },
    configs={
        "GRPOConfig": "grpo",
        "RLOOConfig": "rloo",
        "PPOConfig": "ppo",
        "PPOv2Config": "ppo",
    },
    config_argument="args",
    parsers=("TrlParser", "HfArgumentParser"),
    other={
        "SFTTrainer": "supervised fine-tuning (no KL regulariser)",
        "DPOTrainer": "DPO (its beta is the DPO temperature, not a KL regulariser)",
        "OnlineDPOTrainer": "online DPO (beta is the DPO temperature; its KL is only logged)",
        "KTOTrainer": "KTO (no KL regulariser in a reward or loss)",
        "ORPOTrainer": "ORPO (no reference model)",
        "CPOTrainer": "CPO (no reference model)",
        "RewardTrainer": "reward-model training (no KL regulariser)",
        "GKDTrainer": "generalised knowledge distillation (its beta mixes a divergence to a "
        "teacher model, not a KL to a reference policy)",
        "GOLDTrainer": "distillation to a teacher (not a KL to a reference policy)",
        "DistillationTrainer": "distillation to a teacher (not a KL to a reference policy)",
        "AsyncGRPOTrainer": "asynchronous GRPO without a reference model (its kl metric is "
        "between the current and the old policy)",
        "NashMDTrainer": "Nash-MD (a mixture with the reference inside the game, not a KL "
        "regulariser in a reward or loss)",
        "XPOTrainer": "XPO (a DPO-style loss)",
        "BCOTrainer": "BCO (a DPO-style loss)",
    },
    kl_methods=(
        "compute_loss",
        "_compute_loss",
        "_generate_and_score_completions",
        "_calculate_rewards",
        "_get_per_token_logps",
        "_get_per_token_logps_and_entropies",
        "_prepare_inputs",
        "training_step",
    ),
    patchers={
        "unsloth": "unsloth replaces GRPOTrainer with a generated copy whose loss is its own "
        "(unsloth_zoo's grpo_compute_loss: k3 in the loss at beta): the reading uses unsloth's "
        "defaults and loss code, kl-patches' TRL patch refuses it, and "
        "kl_patches.adapters.trl.unsloth.apply replaces only its loss-side term",
    },
    kl_patches_modules=("kl_patches.trl", "kl_patches.adapters.trl"),
    kl_argument="kl",
)
"""What a TRL training script builds, as names in its syntax tree."""

PPO_LAST_RELEASE = "1.12.0"
"""The last TRL release that ships PPOTrainer (``trl.experimental.ppo``)."""

PPO_DEFAULTS: dict[str, object] = {
    "kl_coef": 0.05,
    "kl_estimator": "k1",
    "gamma": 1.0,
    "lam": 0.95,
    "num_ppo_epochs": 4,
    "num_mini_batches": 1,
    "whiten_rewards": False,
}
"""PPOConfig defaults of TRL 1.12.0 that matter for the KL (see the module docstring)."""
