"""What ``python -m kl_patches.dev record trl VERSION`` reads from a TRL release (and, for the
fields TRL's parsers accept from transformers, ``record transformers VERSION``).

The data land in ``data/<release>.json`` (``data/transformers/<release>.json``) and are loaded by
:mod:`.fieldsets` (config fields per release) and :mod:`.compat` (the hooked methods'
signatures). PPOConfig is read from ``trl/trainer/ppo_config.py`` while that file exists (in
0.26-0.28 it is a deprecation shim deriving from an alias, so it records no field: the class
is recorded as absent there), else from ``trl/experimental/ppo/ppo_config.py`` (0.29-1.12).
"""

from __future__ import annotations

from kl_patches.adapters.releases import NameSetSpec, RecordSpec, SymbolSpec

HOOKED_METHODS: tuple[str, ...] = (
    "__init__",
    "_get_per_token_logps_and_entropies",
    "_calculate_rewards",
    "_generate_and_score_completions",
    "_compute_loss",
    "training_step",
)
"""The trainer methods :mod:`.patch` wraps (``compat.HOOKED_METHODS`` is this tuple)."""

TRAINER_MODULES: dict[str, str] = {
    "GRPOTrainer": "trl.trainer.grpo_trainer",
    "RLOOTrainer": "trl.trainer.rloo_trainer",
}
"""Where each trainer class is defined (every recorded release)."""

OLDER_HOOK_POINTS: tuple[str, ...] = (
    "GRPOTrainer.compute_loss",
    "GRPOTrainer._get_per_token_logps",
    "GRPOTrainer._prepare_inputs",
    "RLOOTrainer.train",
)
"""Where the KL is computed before the 1.x hooks exist (the history's ``grpo.hook_methods`` /
``rloo.hook_methods`` rows: ``compute_loss`` from 0.14, ``_get_per_token_logps`` 0.15-0.19,
RLOO's PPO-style ``train`` until 0.21), recorded for patches of the older releases."""

SPEC = RecordSpec(
    library="trl",
    distribution="trl",
    package="trl",
    data_package="kl_patches.adapters.trl",
    data_folder="data",
    name_sets=(
        NameSetSpec(
            "GRPOConfig",
            "dataclass",
            (("GRPOConfig", ("trl/trainer/grpo_config.py",)),),
            bases=("BaseConfig", "_BaseConfig"),
        ),
        NameSetSpec(
            "RLOOConfig",
            "dataclass",
            (("RLOOConfig", ("trl/trainer/rloo_config.py",)),),
            bases=("OnPolicyConfig", "BaseConfig", "_BaseConfig"),
        ),
        NameSetSpec(
            "PPOConfig",
            "dataclass",
            (("PPOConfig", ("trl/trainer/ppo_config.py", "trl/experimental/ppo/ppo_config.py")),),
            bases=("OnPolicyConfig",),
        ),
        NameSetSpec(
            "ModelConfig", "dataclass", (("ModelConfig", ("trl/trainer/model_config.py",)),)
        ),
        NameSetSpec(
            "ScriptArguments",
            "dataclass",
            (
                ("ScriptArguments", ("trl/scripts/utils.py",)),
                ("GRPOScriptArguments", ("trl/scripts/grpo.py",)),
            ),
        ),
    ),
    symbols=tuple(
        SymbolSpec(f"{cls}.{method}", (module,))
        for cls, module in TRAINER_MODULES.items()
        for method in HOOKED_METHODS
    )
    + tuple(
        SymbolSpec(name, (TRAINER_MODULES[name.partition(".")[0]],)) for name in OLDER_HOOK_POINTS
    ),
)
"""TRL: its config dataclasses, the hooked trainer methods and the older hook points."""

TRANSFORMERS = RecordSpec(
    library="transformers",
    distribution="transformers",
    package="transformers",
    data_package="kl_patches.adapters.trl",
    data_folder="data/transformers",
    name_sets=(
        NameSetSpec(
            "TrainingArguments",
            "dataclass",
            (("TrainingArguments", ("transformers/training_args.py",)),),
        ),
    ),
)
"""transformers' ``TrainingArguments`` (the fields every TRL config inherits)."""

SPECS = (SPEC, TRANSFORMERS)
"""Everything this adapter records."""
