"""Small synthetic launches of each library and format, for the fix tests."""

from __future__ import annotations

VERL_SHELL = """#!/bin/bash
set -x
kl_coef=0.002
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=1024 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=$kl_coef \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    actor_rollout_ref.actor.ppo_mini_batch_size=256 \\
    trainer.total_epochs=15 $@
"""

VERL_YAML = """# verl config
algorithm:
  adv_estimator: grpo  # group
  use_kl_in_reward: false
actor_rollout_ref:
  actor:
    use_kl_loss: true
    kl_loss_coef: 0.002   # loss coef
    kl_loss_type: low_var_kl
    ppo_mini_batch_size: 256
data:
  train_batch_size: 1024
"""

OPENRLHF_SHELL = """#!/bin/bash
ray job submit --address="http://127.0.0.1:8265" \\
   -- python3 -m openrlhf.cli.train_ppo_ray \\
   --pretrain Qwen/Qwen2.5-7B \\
   --init_kl_coef 0.01 \\
   --use_kl_loss \\
   --kl_estimator k3 \\
   --n_samples_per_prompt 8 \\
   --advantage_estimator group_norm
"""

TRL_YAML = """model_name_or_path: Qwen/Qwen2.5-0.5B
beta: 0.04   # KL
num_generations: 8
"""

TRL_SHELL = """trl grpo --model_name_or_path Qwen/Qwen2.5-0.5B \\
  --beta 0.04 \\
  --output_dir out
"""

CASES = {
    "verl-shell": ("run.sh", VERL_SHELL),
    "verl-yaml": ("ppo_trainer.yaml", VERL_YAML),
    "openrlhf-shell": ("train.sh", OPENRLHF_SHELL),
    "trl-yaml": ("grpo.yaml", TRL_YAML),
    "trl-shell": ("grpo.sh", TRL_SHELL),
}
"""name -> (file name, text): one biased launch per library and format."""
