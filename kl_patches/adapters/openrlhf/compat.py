"""The OpenRLHF patch surface from 0.8.0 to 0.11.2, as data: hook points and flags.

:mod:`kl_patches.adapters.openrlhf.patch` wraps ``compute_approx_kl`` where
``experience_maker`` and ``ppo_actor`` imported it by name, ``aggregate_loss`` in
``ppo_actor``, ``RemoteExperienceMaker.compute_advantages_and_returns`` and
``ActorPPOTrainer.training_step``; :mod:`~kl_patches.adapters.openrlhf.translate` reads the
``train_ppo_ray`` flags in :data:`~kl_patches.adapters.openrlhf.translate.FLAGS`. :data:`SURFACE`
comes from the recorded ``data/<release>.json`` (``python -m kl_patches.dev record openrlhf V``
reads each release with ``ast``):
defining module, line, signature text, a hash of the function's source, and every module that
imports it by name (directly or through the ``openrlhf.models`` re-export).
:data:`FLAG_SURFACE` gives, per release, the spelling and default of every flag in ``FLAGS``
(the recorded ``argparse`` options of ``cli/train_ppo_ray.py``). :data:`CHANGE_POINTS` says what
changed for the adapter and why; releases where only line numbers moved are not change points.
Also: the measured CPU install recipes (:data:`INSTALL`). Nothing here imports OpenRLHF.
"""

from __future__ import annotations

from kl_patches.adapters.releases import Recording
from kl_patches.adapters.releases import recording as recording_of
from kl_patches.adapters.surface import ChangePoint, InstallRecipe, Symbol

from . import recording

RELEASES: tuple[str, ...] = (
    "0.8.0",
    "0.8.0.post1",
    "0.8.1",
    "0.8.1.post1",
    "0.8.2",
    "0.8.3",
    "0.8.4",
    "0.8.5",
    "0.8.6",
    "0.8.7",
    "0.8.8",
    "0.8.9",
    "0.8.9.post1",
    "0.8.10",
    "0.8.11",
    "0.9.0",
    "0.9.1",
    "0.9.1.post1",
    "0.9.2",
    "0.9.3",
    "0.9.4",
    "0.9.5",
    "0.9.6",
    "0.9.7",
    "0.9.8",
    "0.9.9",
    "0.9.10",
    "0.10.0",
    "0.10.1",
    "0.10.1.post1",
    "0.10.1.post2",
    "0.10.2",
    "0.10.3",
    "0.10.4",
    "0.11.0",
    "0.11.1",
    "0.11.2",
)
"""Every OpenRLHF release in the patch-surface range, ascending."""

TARGETS: tuple[str, ...] = recording.PATCH_TARGETS
"""Functions tracked per release (``aggregate_loss`` exists from 0.10.3; :mod:`.recording`)."""


def _data() -> Recording:
    return recording_of("kl_patches.adapters.openrlhf")


def _surface() -> dict[str, tuple[Symbol, ...]]:
    out: dict[str, tuple[Symbol, ...]] = {}
    for release in RELEASES:
        record = _data().at(release)
        out[release] = tuple(s for s in (record.symbol(n) for n in TARGETS) if s is not None)
    return out


SURFACE: dict[str, tuple[Symbol, ...]] = _surface()
"""Per release of :data:`RELEASES`, every tracked function that exists (from the recorded
``data/<release>.json``: ``python -m kl_patches.dev record openrlhf V`` reads it with ``ast``)."""


def _value(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def _flag_surface() -> dict[str, dict[str, tuple[str | None, object]]]:
    from .translate import FLAGS

    out: dict[str, dict[str, tuple[str | None, object]]] = {}
    for release in RELEASES:
        record = _data().at(release)
        row: dict[str, tuple[str | None, object]] = {}
        for flag in FLAGS:
            for spelling in (flag.dotted, flag.flat):
                entry = record.entry("train_ppo_ray", spelling) if spelling else None
                if entry is not None:
                    row[flag.dotted] = (spelling, _value(entry["default"]))
                    break
            else:
                row[flag.dotted] = (None, None)
        out[release] = row
    return out


FLAG_SURFACE: dict[str, dict[str, tuple[str | None, object]]] = _flag_surface()
"""Per release: dotted flag name (as in ``translate.FLAGS``) -> (spelling in that release or None,
argparse default or None), from the recorded ``train_ppo_ray`` options (a list default as a
tuple)."""

CHANGE_POINTS: tuple[ChangePoint, ...] = (
    ChangePoint(
        "0.8.1",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "advantages whitened over the flattened rows (torch.cat, not zero_pad_sequences)",
    ),
    ChangePoint(
        "0.8.3",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "scalar reward read from Experience.rewards (info['reward'] before); group std logged",
    ),
    ChangePoint(
        "0.8.3",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "PolicyLoss returns (loss, clip_ratio); entropy coefficient None = off; KL block same",
    ),
    ChangePoint(
        "0.8.5",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "advantages whitened for gae/reinforce/reinforce_baseline only (rloo too before)",
    ),
    ChangePoint(
        "0.8.6",
        "compute_approx_kl",
        ("body_sha",),
        "every estimator value clamped to [-10, 10] (no clamp before)",
    ),
    ChangePoint(
        "0.8.6",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "rewards put back in sample order by Experience.index (dynamic batch); KL unchanged",
    ),
    ChangePoint(
        "0.8.6",
        "ActorPPOTrainer.training_step",
        ("signature", "body_sha"),
        "new step argument (dynamic-batch loss scale and optimiser step); KL block unchanged",
    ),
    ChangePoint(
        "0.8.7",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "DAPO overlong penalty on Experience.rewards (args.overlong_buffer_len); KL unchanged",
    ),
    ChangePoint(
        "0.8.8",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "PolicyLoss also returns ppo_kl (logged); KL block unchanged",
    ),
    ChangePoint(
        "0.8.9",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "rollout_log_probs passed to PolicyLoss (vllm_kl logged); KL block unchanged",
    ),
    ChangePoint(
        "0.9.0",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "a comment's spelling only",
    ),
    ChangePoint(
        "0.9.1",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("importers",),
        "trainer.ppo_trainer_async no longer imports RemoteExperienceMaker",
    ),
    ChangePoint(
        "0.9.2",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "DAPO overlong penalty moved out (apply_length_penalties); reward KL unchanged",
    ),
    ChangePoint(
        "0.9.2",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "logs logprobs_diff beside the KL loss; KL block unchanged",
    ),
    ChangePoint(
        "0.9.6",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "status gains actor_grad_norm; KL block unchanged",
    ),
    ChangePoint(
        "0.9.8",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "returns {'metrics': 0-D tensors, 'weights': ...} instead of a flat dict of floats",
    ),
    ChangePoint(
        "0.9.9",
        "compute_approx_kl",
        ("body_sha",),
        "one log-ratio for every estimator, ValueError on an unknown one; same values and clamp",
    ),
    ChangePoint(
        "0.9.9",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("signature", "body_sha"),
        "(self, experiences) -> experiences: **kwargs and the Tuple annotation dropped",
    ),
    ChangePoint(
        "0.10.0",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "VLM inputs merged into the actor forward; KL block unchanged",
    ),
    ChangePoint(
        "0.10.2",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "reads args.rollout.* / args.algo.* (dotted config namespaces) instead of flat args",
    ),
    ChangePoint(
        "0.10.2",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "reads args.algo.kl.use_loss / init_coef / estimator instead of use_kl_loss etc.",
    ),
    ChangePoint(
        "0.10.3",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "KL loss through aggregate_loss(kl, mask, **loss_batch_info) instead of masked_mean",
    ),
    ChangePoint(
        "0.10.3",
        "aggregate_loss",
        ("module", "signature", "body_sha", "importers", "reexports"),
        "new in openrlhf.models.loss, re-exported by openrlhf.models, imported by ray.ppo_actor",
    ),
    ChangePoint(
        "0.10.4",
        "ActorPPOTrainer.training_step",
        ("signature", "body_sha"),
        "new loss_batch_info argument: ppo_train passes a step-global token count",
    ),
    ChangePoint("0.10.4", "aggregate_loss", ("body_sha",), "docstring and comment only"),
    ChangePoint(
        "0.11.1",
        "compute_approx_kl",
        ("signature", "body_sha"),
        "log_probs_old and unbiased_gradient added; kl_estimator is no longer the 3rd positional",
    ),
    ChangePoint(
        "0.11.1",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "passes log_probs_old=old_action_log_probs and unbiased_gradient to compute_approx_kl",
    ),
    ChangePoint(
        "0.11.2",
        "compute_approx_kl",
        ("body_sha",),
        "k3 log-ratio pre-clamped at -10 (value unchanged where finite)",
    ),
    ChangePoint(
        "0.11.2",
        "RemoteExperienceMaker.compute_advantages_and_returns",
        ("body_sha",),
        "rewards cast to >= fp32; flash_reinforce; gamma forced to 1 for all but reinforce",
    ),
    ChangePoint(
        "0.11.2",
        "ActorPPOTrainer.training_step",
        ("body_sha",),
        "PolicyLoss returns 5 values (is_filter_ratio); KL block unchanged",
    ),
    ChangePoint(
        "0.10.2",
        "flag:*",
        ("spelling",),
        "every flag renamed to its dotted name; flat names no longer parse",
    ),
    ChangePoint(
        "0.11.1",
        "flag:algo.kl.unbiased_gradient",
        ("spelling", "default"),
        "new flag (default False)",
    ),
    ChangePoint(
        "0.11.2",
        "flag:actor.loss_agg_mode",
        ("spelling", "default"),
        "new flag (default token-mean); the KL loss ignores it",
    ),
)
"""What changed, release by release (0.8.0.post1, 0.8.1.post1, 0.8.2, 0.8.4, 0.8.9.post1-0.8.11,
0.10.0 -> 0.10.1.post2 and 0.11.0 moved nothing)."""

UNBIASED_GRADIENT_SINCE = "0.11.1"
"""First release with ``--algo.kl.unbiased_gradient`` (versions.UNBIASED_GRADIENT_SINCE agrees)."""

_CPU_TORCH = "$P install torch==2.13.0  # CPU wheel first: nothing may pull a CUDA build"
_MODULES = (
    "openrlhf.models.utils",
    "openrlhf.models.loss",
    "openrlhf.trainer.ppo_utils.experience_maker",
    "openrlhf.trainer.ray.ppo_actor",
)
_CHECKS = (
    "seed 0, lp = randn(2,5) - 2, base = lp + 0.1*noise: sum/grad-sum k1 0.37135/10.0, "
    "k2 0.03515/0.37135, k3 0.03435/0.33699; compute_reward gives (2, 5)"
)

INSTALL: tuple[InstallRecipe, ...] = (
    InstallRecipe(
        version="0.10.0",
        commands=(
            _CPU_TORCH,
            "$P install --no-deps openrlhf==0.10.0",
            "DS_BUILD_OPS=0 $P install deepspeed==0.18.9",
            "$P install transformers==5.5.3 peft ray==2.48.0 pylatexenc aiohttp torchdata pillow",
        ),
        seconds=146.9,
        size="1.4G",
        imports=_MODULES,
        not_importable=(),
        checks=_CHECKS
        + ". Needs a flash_attn stub with a dist-info (top_level.txt 'flash_attn'): with the "
        "repo's import-only stubs transformers 5.5.3 raises KeyError 'flash_attn' in "
        "is_flash_attn_2_available",
    ),
    InstallRecipe(
        version="0.10.2",
        commands=(
            _CPU_TORCH,
            "$P install --no-deps openrlhf==0.10.2",
            "DS_BUILD_OPS=0 $P install deepspeed==0.18.9",
            "$P install transformers==5.5.4 peft ray==2.48.0 pylatexenc aiohttp torchdata pillow",
        ),
        seconds=208.6,
        size="1.4G",
        imports=_MODULES,
        not_importable=(),
        checks=_CHECKS + ". Same stub caveat as 0.10.0 (transformers 5.5.4)",
    ),
    InstallRecipe(
        version="0.11.2",
        commands=(
            _CPU_TORCH,
            "$P install --no-deps openrlhf==0.11.2",
            "DS_BUILD_OPS=0 $P install deepspeed==0.19.6",
            "$P install transformers==5.15.0 peft ray==2.55.0 pylatexenc aiohttp torchdata pillow",
        ),
        seconds=212.8,
        size="1.5G",
        imports=_MODULES,
        not_importable=(),
        checks=_CHECKS + "; the repo's stubs work as they are (transformers 5.15.0). datasets is "
        "not needed for these modules (the noxfile installs it)",
    ),
)
"""Measured one at a time on the shared 2-core VM, each in a fresh venv with a warm pip cache
(deepspeed's pure-Python sdist build comes from pip's wheel cache). The 0.10.0 set was found by
adding, one at a time, the package whose absence made an import fail, starting from torch +
openrlhf --no-deps with transformers/ray/deepspeed pinned to OpenRLHF's own pins; 0.10.2 and
0.11.2 use the same set with their own pins. flash-attn and vllm are never installed: import
stubs on ``PYTHONPATH``."""
