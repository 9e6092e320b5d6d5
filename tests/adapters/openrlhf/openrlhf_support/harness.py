"""Builders for the OpenRLHF tests: stand-ins on the path, OpenRLHF args, experiences, a tiny actor.

``activate()`` must run before anything imports OpenRLHF: it puts the import-only stand-in for
``vllm`` (./stubs, tests only) and the package's import-only ``flash_attn`` (the CPU trial's,
:mod:`kl_patches.experiments.cpu.stand_ins`, after ./stubs so that its working ``vllm`` is not
the one imported) on ``sys.path`` and on ``PYTHONPATH`` (so local Ray workers see them too) and
sets ``HF_HUB_OFFLINE=1``. The builders follow OpenRLHF's own test
trick (``RemoteExperienceMaker.__new__`` with a namespace ``args``) so the real methods run
without Ray actor groups or GPUs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

STUBS = Path(__file__).resolve().parent / "stubs"
REPO = Path(__file__).resolve().parents[4]
TESTS = Path(__file__).resolve().parents[1]
STAND_INS = REPO / "kl_patches" / "experiments" / "cpu" / "stand_ins"
"""The package's stand-ins: ``flash_attn`` is taken from there (``vllm`` from ./stubs)."""


def activate() -> None:
    """Stand-ins on sys.path; stand-ins, repo and tests on PYTHONPATH (Ray workers); no hub."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    for folder in (STAND_INS, STUBS):  # ./stubs first
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for extra in (str(REPO), str(TESTS), str(STAND_INS), str(STUBS)):
        if extra not in parts:
            parts.insert(0, extra)
    os.environ["PYTHONPATH"] = os.pathsep.join(parts)


def make_args(
    *,
    init_coef: float = 0.1,
    estimator: str = "k1",
    use_loss: bool = False,
    unbiased_gradient: bool = False,
    advantage: str = "group_norm",
    n_samples: int = 4,
    gamma: float = 1.0,
    lambd: float = 1.0,
    clip_range: tuple[float, float] = (-10.0, 10.0),
) -> SimpleNamespace:
    """The slice of OpenRLHF 0.11.2's hierarchical ``args`` that the KL code reads."""
    ns = SimpleNamespace
    return ns(
        algo=ns(
            kl=ns(
                init_coef=init_coef,
                estimator=estimator,
                use_loss=use_loss,
                unbiased_gradient=unbiased_gradient,
                target=None,
                horizon=10000,
            ),
            advantage=ns(
                estimator=advantage,
                gamma=gamma,
                lambd=lambd,
                no_std_norm=False,
                is_correction_level="off",
                is_correction_mode="mask",
                is_correction_gating="ratio",
                is_correction_threshold=[0.5, 5.0],
            ),
        ),
        rollout=ns(n_samples_per_prompt=n_samples, max_new_tokens=None),
        reward=ns(clip_range=clip_range, overlong_buffer_len=None, stop_properly_penalty_coef=None),
        data=ns(max_len=64),
        actor=ns(
            eps_clip_low_high=(0.2, 0.2),
            dual_clip=None,
            loss_agg_mode="token-mean",
            policy_loss_type="ppo",
            aux_loss_coef=0.0,
            entropy_coef=None,
        ),
        train=ns(dynamic_batch_enable=False, max_epochs=1),
        ds=ns(packing_samples=False, ring_attn_size=1, tensor_parallel_size=1),
        vllm=ns(sync_backend="gloo"),
    )


def installed() -> Any:
    """The installed OpenRLHF release as a ``packaging`` Version."""
    from packaging.version import Version

    from kl_patches.adapters.openrlhf.versions import installed_version

    return Version(installed_version() or "0")


def release_args(args: SimpleNamespace) -> SimpleNamespace:
    """``args`` (OpenRLHF 0.10.2+'s dotted namespace) as the installed release's parser gives
    them: the flat names of 0.8.0-0.10.1 where the release is older."""
    from packaging.version import Version

    from kl_patches.adapters.openrlhf.versions import DOTTED_SINCE

    if installed() >= Version(DOTTED_SINCE) or not hasattr(args, "algo"):
        return args
    kl, adv = args.algo.kl, args.algo.advantage
    return SimpleNamespace(
        use_kl_loss=kl.use_loss,
        init_kl_coef=kl.init_coef,
        kl_estimator=kl.estimator,
        kl_target=kl.target,
        kl_horizon=kl.horizon,
        advantage_estimator=adv.estimator,
        gamma=adv.gamma,
        lambd=adv.lambd,
        no_advantage_std_norm=adv.no_std_norm,
        n_samples_per_prompt=args.rollout.n_samples_per_prompt,
        reward_clip_range=args.reward.clip_range,
        aux_loss_coef=args.actor.aux_loss_coef,
        # None (entropy off) from 0.8.3; 0.8.0-0.8.2 compare it with 1e-8 (their default: 0)
        entropy_loss_coef=(
            0.0
            if args.actor.entropy_coef is None and installed() < Version("0.8.3")
            else args.actor.entropy_coef
        ),
        use_dynamic_batch=False,
        packing_samples=False,
        overlong_buffer_len=None,  # 0.8.7-0.9.1 read it here (DAPO's length penalty: off)
    )


def make_experience_maker(args: SimpleNamespace) -> Any:
    """A real ``RemoteExperienceMaker`` without actor groups (fixed KL controller), reading
    ``args`` in the installed release's layout (:func:`release_args`)."""
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController

    from kl_patches.adapters.openrlhf.patch import kl_args

    args = release_args(args)
    maker = RemoteExperienceMaker.__new__(RemoteExperienceMaker)
    maker.strategy = SimpleNamespace(args=args)
    maker.args = args
    algo = getattr(args, "algo", None)
    maker.advantage_estimator = algo.advantage.estimator if algo else args.advantage_estimator
    maker.kl_ctl = FixedKLController(kl_args(args)[1])
    return maker


def experience_class() -> Any:
    """A builder of OpenRLHF's ``Experience`` (``trainer/ppo_utils/experience.py`` from 0.9.9,
    ``experience_maker.py`` before) from the keyword fields of 0.8.6+.

    0.9.0-0.9.8 turn an empty ``info`` dict into a list (``info or []``); OpenRLHF's own
    ``make_experience`` never passes an empty one, so the builder sets the dict after
    construction. 0.8.0-0.8.2's dataclass has required positional fields and no ``rewards`` or
    ``index``: the scalar reward goes where those releases keep it, ``info["reward"]``; the
    fields not given are None. ``index`` (0.8.6+) is dropped where it does not exist."""
    import dataclasses

    try:
        from openrlhf.trainer.ppo_utils.experience import Experience
    except ImportError:
        from openrlhf.trainer.ppo_utils.experience_maker import Experience

    names = {f.name for f in dataclasses.fields(Experience)}

    def build(**fields: Any) -> Any:
        info = fields.pop("info", None)
        info = {} if info is None else info
        if "rewards" not in names and "rewards" in fields:
            info["reward"] = fields.pop("rewards")
        fields = {k: v for k, v in fields.items() if k in names}
        missing = {
            f.name: None
            for f in dataclasses.fields(Experience)
            if f.name not in fields
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        }
        experience = Experience(**missing, **fields)
        experience.info = info
        return experience

    return build


def make_experience(
    rewards: Any,
    logp: Any,
    ref: Any,
    mask: Any,
    index: list[int],
    values: Any = None,
    keep_ref: bool = False,
) -> Any:
    """An ``Experience`` as ``make_experience`` leaves it, before the KL is attached."""
    Experience = experience_class()

    return Experience(
        action_mask=mask.clone(),
        action_log_probs=logp.clone(),
        base_action_log_probs=ref.clone() if keep_ref else None,
        values=values,
        rewards=rewards.clone(),
        index=list(index),
        info={},
    )


def attach_kl_like_make_experience(exp: Any, ref: Any, args: SimpleNamespace) -> None:
    """What ``make_experience`` (experience_maker.py L205-227) does with the KL, run for real.

    Calls the module-global ``compute_approx_kl`` of ``experience_maker`` (the name the patch
    replaces), exactly with the arguments OpenRLHF passes.
    """
    from openrlhf.models.utils import masked_mean
    from openrlhf.trainer.ppo_utils import experience_maker

    from kl_patches.adapters.openrlhf.patch import kl_args

    use_loss, init_coef, estimator = kl_args(args)
    if init_coef > 0 and not use_loss:
        kl = experience_maker.compute_approx_kl(exp.action_log_probs, ref, kl_estimator=estimator)
    else:
        import torch

        kl = torch.zeros_like(exp.action_log_probs)
    exp.base_action_log_probs = ref.clone() if use_loss else None
    exp.kl = kl
    exp.info["kl"] = masked_mean(kl, exp.action_mask, dim=-1)


class FakeStrategy:
    """DeepSpeed stand-in: ``backward`` records the loss and backpropagates; no optimiser step."""

    def __init__(self, args: SimpleNamespace) -> None:
        self.args = args
        self.ring_attn_group = None
        self.losses: list[Any] = []

    def backward(self, loss: Any, model: Any, optimizer: Any) -> None:
        self.losses.append(loss.detach().clone())
        loss.backward()

    def optimizer_step(self, *args: Any, **kwargs: Any) -> None:
        return None

    def get_grad_norm(self, model: Any) -> float:
        return 0.0


def tiny_actor(seed: int = 0) -> Any:
    """A 2-layer random Llama (vocab 64, width 32) in OpenRLHF's ``Actor`` (eager attention)."""
    import torch
    from openrlhf.models import Actor
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    model = LlamaForCausalLM(config).float()
    actor = Actor(model, attn_implementation="eager")
    actor.packing_samples = False  # not set by Actor.__init__ when given a module
    return actor


def actor_trainer(actor: Any, args: SimpleNamespace) -> Any:
    """A real ``ActorPPOTrainer`` around ``actor`` without Ray, DeepSpeed or a replay buffer
    (``args`` in the installed release's layout: :func:`release_args`)."""
    import inspect

    import torch
    from openrlhf.models import PolicyLoss
    from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer

    args = release_args(args)
    trainer = ActorPPOTrainer.__new__(ActorPPOTrainer)
    trainer.strategy = FakeStrategy(args)
    trainer.args = args
    trainer.actor = actor
    trainer.ema_model = None
    trainer.actor_optim = torch.optim.SGD(actor.parameters(), lr=0.0)
    trainer.actor_scheduler = SimpleNamespace(get_last_lr=lambda: [0.0])
    trainer.aux_loss = False
    trainer.replay_buffer = None
    if "clip_eps_low" in inspect.signature(PolicyLoss).parameters:
        trainer.actor_loss_fn = PolicyLoss(
            clip_eps_low=0.2, clip_eps_high=0.2, token_level_loss=True
        )
    else:  # 0.8.0-0.8.2: one clip range
        trainer.actor_loss_fn = PolicyLoss(clip_eps=0.2, token_level_loss=True)
    return trainer


def step_arguments() -> list[Any]:
    """What ``ppo_train`` passes to ``training_step`` after ``(experience, kl_ctl)`` on the
    installed release: ``step`` from 0.8.6, ``loss_batch_info`` (None) from 0.10.4."""
    import inspect

    from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer

    parameters = inspect.signature(ActorPPOTrainer.training_step).parameters
    return [v for name, v in (("step", 0), ("loss_batch_info", None)) if name in parameters]
