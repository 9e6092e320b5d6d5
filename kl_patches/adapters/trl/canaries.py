"""Behaviour canaries for the TRL adapter: TRL's own methods on tiny synthetic batches.

The hooks (:mod:`.hooks`) rely on what TRL's code computes, not only on its names: that
``GRPOTrainer._compute_loss`` adds ``beta * k3`` and nothing else when ``beta`` is set (the hooks
switch TRL's KL off by setting ``beta = 0`` while the loss runs), that ``RLOOTrainer._compute_loss``
has no KL term, that both trainers' ``_generate_and_score_completions`` compute the advantages
that :mod:`.advantages` re-computes (RLOO's with ``beta * sum_t(log pi - log pi_ref)`` in the
reward before the leave-one-out baseline), and that ``trl.trainer.utils.nanstd`` is the
NaN-ignoring unbiased std. :func:`canaries` returns one
:class:`~kl_patches.adapters.support.Canary` per assumption; each calls TRL's real method (the
original, when the class is patched) on a stand-in ``self``: an instance of the TRL class made
without ``__init__``, carrying the few attributes the method reads, with the model forward and
the generation replaced by fixed tensors. Nothing is trained, downloaded or distributed: the
module-level gathers of TRL's trainer module are the identity while a probe runs, under the
patch lock (:data:`kl_patches.adapters.patching.LOCK`), and restored when it returns or raises
(:func:`_identity_gathers`).

One behaviour is read from the loss probe rather than assumed (:data:`DETECTED`): whether the
dapo/cispo/vespo token normaliser is rescaled by ``gradient_accumulation_steps /
steps_per_generation`` (TRL 1.9.1 and later) or not (1.0.0-1.9.0); the loss hook follows it.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import sys
import textwrap
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import torch

from kl_patches.adapters.patching import LOCK, is_replacement
from kl_patches.adapters.support import Canary

from .advantages import grpo_advantages, rloo_advantages

DETECTED: dict[str, bool] = {}
"""Behaviours read from the installed TRL by the canaries (see the module docstring).

``grpo.dapo_normaliser_ga_scaled``: True when GRPO's global token normaliser is multiplied by
``current_gradient_accumulation_steps / steps_per_generation`` in training."""

TOL = 1e-6
"""Absolute tolerance of every comparison (float32 on a handful of numbers)."""


# ------------------------------------------------------------------ stand-ins
class _Sink:
    """Absorbs TRL's logging: any key, ``append``, ``extend``, ``clear``."""

    def __getitem__(self, key: object) -> _Sink:
        return self

    def append(self, value: object) -> None:
        """Discard."""

    def extend(self, values: object) -> None:
        """Discard."""

    def clear(self) -> None:
        """Nothing to clear."""


class _Accelerator:
    """One CPU process: gathers and reductions are the identity."""

    device = torch.device("cpu")
    num_processes = 1
    process_index = 0
    is_main_process = True
    sync_gradients = True

    def gather(self, value: Any) -> Any:
        return value

    def gather_for_metrics(self, value: Any) -> Any:
        return value

    def reduce(self, value: Any, reduction: str = "sum") -> Any:
        return value

    def unwrap_model(self, model: Any) -> Any:
        return model


def original(cls: type, name: str) -> Callable[..., Any]:
    """TRL's own ``cls.name`` (the registry's original when kl-patches replaced it)."""
    attr = cls.__dict__.get(name, getattr(cls, name))
    while is_replacement(attr):
        attr = attr.__wrapped__
    return attr  # type: ignore[no-any-return]


def _stand_in(cls: type, **attrs: Any) -> Any:
    """An instance of ``cls`` built without ``__init__``, with ``attrs`` set."""
    self: Any = object.__new__(cls)
    model = SimpleNamespace(training=True, is_gradient_checkpointing=False)
    base: dict[str, Any] = {
        "model": model,
        "accelerator": _Accelerator(),
        "_metrics": _Sink(),
        "_logs": _Sink(),
        "_pending_extra_logs": {},
        "_pending_metrics": {},
        "aux_loss_enabled": False,
        "_entropy_bonus_enabled": False,
        "use_liger_kernel": False,
        "log_multimodal": False,
        "epsilon_low": 0.2,
        "epsilon_high": 0.2,
        "temperature": 1.0,
        "tools": None,  # 0.26-0.28 read it in the loss (tool masks)
    }
    base.update(attrs)
    for key, value in base.items():
        object.__setattr__(self, key, value)
    return self


def _returns_aux(function: Callable[..., Any]) -> bool:
    """True when TRL's log-prob method returns (logps, entropies, aux_loss) (it takes
    ``compute_aux_loss``), False for (logps, entropies)."""
    return "compute_aux_loss" in inspect.signature(original_of(function)).parameters


def original_of(function: Callable[..., Any]) -> Callable[..., Any]:
    """Strip kl-patches replacements (not TRL's own decorators)."""
    while is_replacement(function):
        function = function.__wrapped__  # type: ignore[attr-defined]
    return function


def _logps_stub(cls: type, values: dict[int, torch.Tensor], calls: list[Any]) -> Callable[..., Any]:
    """``_get_per_token_logps_and_entropies`` returning fixed log-probs per model object."""
    aux = _returns_aux(cls._get_per_token_logps_and_entropies)  # type: ignore[attr-defined]

    def logps(model: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(model)
        keep = args[2] if len(args) > 2 else kwargs["logits_to_keep"]
        value = values[id(model)][:, -keep:] if keep else values[id(model)]
        entropies = torch.zeros_like(value.detach())
        return (value, entropies, None) if aux else (value, entropies)

    return logps


def _identity(value: Any, *args: Any, **kwargs: Any) -> Any:
    """The gather of one process: its input (marked, so it is never taken for TRL's own)."""
    return value


_identity.__kl_patches_canary__ = True  # type: ignore[attr-defined]

GATHERS = ("gather", "gather_object", "broadcast_object_list")
"""Module-level names of the gathers the scoring probes make the identity while they run."""


@contextlib.contextmanager
def _identity_gathers(function: Callable[..., Any]) -> Iterator[None]:
    """While a probe runs, the module-level gathers of ``function``'s module are the identity.

    Held under the patch lock (:data:`kl_patches.adapters.patching.LOCK`): no other thread's
    probe, ``apply`` or ``revert`` runs meanwhile, so the values saved are TRL's own (a
    stand-in is never saved as "the original"), and they are restored when the probe returns
    or raises. Without the lock two threads applying at once left the identity in TRL's
    modules for good, and every later multi-rank run computed group advantages from the
    local rank only. The probed method runs as it is (with any wrapper around it), so a
    replacement of TRL's method is what the canary checks."""
    module = sys.modules.get(getattr(inspect.unwrap(original_of(function)), "__module__", ""))
    with LOCK:
        saved = {n: vars(module)[n] for n in GATHERS if module is not None and n in vars(module)}
        stand_ins = [n for n, v in saved.items() if getattr(v, "__kl_patches_canary__", False)]
        if stand_ins:  # cannot happen under the lock; refuse rather than keep a stand-in
            raise RuntimeError(
                f"{getattr(module, '__name__', module)}.{stand_ins[0]} is a canary stand-in "
                "left by an earlier probe; re-import TRL"
            )
        try:
            for name in saved:
                setattr(module, name, _identity)
            yield
        finally:
            for name, value in saved.items():
                setattr(module, name, value)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.float(), b.float(), atol=TOL, rtol=0.0))


def _fmt(x: torch.Tensor) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in x.detach().flatten().tolist()) + "]"


# ------------------------------------------------------------------ the synthetic batch
B, T, G = 4, 3, 2
"""Completions, completion length, completions per prompt of the synthetic batch."""

MASK = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]])
"""Completion mask: three lengths, so padding is exercised."""


def _batch() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1234)
    logp = -0.1 - torch.rand(B, T, generator=gen)
    ref = logp + 0.4 * torch.randn(B, T, generator=gen)
    rewards = torch.tensor([1.0, 0.0, 0.5, 2.0])
    advantages = torch.tensor([0.5, -1.0, 0.25, 1.5])
    return {"logp": logp, "ref": ref, "rewards": rewards, "advantages": advantages}


def _loss_inputs(data: dict[str, torch.Tensor]) -> dict[str, Any]:
    return {
        "prompt_ids": torch.zeros(B, 2, dtype=torch.long),
        "prompt_mask": torch.ones(B, 2, dtype=torch.long),
        "completion_ids": torch.zeros(B, T, dtype=torch.long),
        "completion_mask": MASK.clone(),
        "advantages": data["advantages"].clone(),
        "ref_per_token_logps": data["ref"].clone(),
        "num_items_in_batch": MASK.sum(),
    }


# ------------------------------------------------------------------ GRPO loss
def _grpo_loss(beta: float, data: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    import trl

    cls = trl.GRPOTrainer
    logp = data["logp"].clone().requires_grad_(True)
    policy = SimpleNamespace(training=True, is_gradient_checkpointing=False)
    calls: list[Any] = []
    self = _stand_in(
        cls,
        model=policy,
        beta=beta,
        loss_type="dapo",
        importance_sampling_level="token",
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        current_gradient_accumulation_steps=2,
        max_completion_length=T,
        args=SimpleNamespace(
            use_bias_correction_kl=False,
            delta=None,
            steps_per_generation=1,
            gradient_accumulation_steps=2,
        ),
    )
    self._get_per_token_logps_and_entropies = _logps_stub(cls, {id(policy): logp}, calls)
    loss = original(cls, "_compute_loss")(self, policy, _loss_inputs(data))
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad


def _probe_grpo_loss() -> str | None:
    data = _batch()
    mask, adv = MASK.float(), data["advantages"]
    tokens = mask.sum()
    loss0, grad0 = _grpo_loss(0.0, data)
    # on-policy (old = current, detached): the ratio is 1, so the policy term is -A per token
    normalisers = {True: tokens * 2, False: tokens}  # GA / steps_per_generation = 2 / 1
    found = [
        scaled
        for scaled, n in normalisers.items()
        if _close(loss0, (-adv[:, None] * mask).sum() / n)
    ]
    if not found:
        return (
            f"a dapo loss of {float(loss0):.6g} with beta=0 (the policy term alone is "
            f"{float((-adv[:, None] * mask).sum() / tokens):.6g} over the token count, or half of "
            "it with the accumulation rescaling)"
        )
    scaled = found[0]
    n = normalisers[scaled]
    if not _close(grad0, -adv[:, None] * mask / n):
        want0 = -adv[:, None] * mask / n
        return f"a beta=0 gradient {_fmt(grad0)}, not the policy term's {_fmt(want0)}"
    beta = 0.1
    loss1, grad1 = _grpo_loss(beta, data)
    delta = data["ref"] - data["logp"]
    k3 = (delta.exp() - delta - 1) * mask
    want = beta * k3.sum() / n
    if not _close(loss1 - loss0, want):
        return (
            f"a KL term of {float(loss1 - loss0):.6g} at beta={beta} (beta * sum of k3 / tokens is "
            f"{float(want):.6g})"
        )
    want_grad = beta * (1 - delta.exp()) * mask / n
    if not _close(grad1 - grad0, want_grad):
        return f"a KL gradient {_fmt(grad1 - grad0)}, not beta * dk3/dlogp {_fmt(want_grad)}"
    DETECTED["grpo.dapo_normaliser_ga_scaled"] = scaled
    return None


# ------------------------------------------------------------------ RLOO loss
def _rloo_loss(beta: float, data: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    import trl

    cls = trl.RLOOTrainer
    logp = data["logp"].clone().requires_grad_(True)
    policy = SimpleNamespace(training=True, is_gradient_checkpointing=False)
    self = _stand_in(cls, model=policy, beta=beta, args=SimpleNamespace())
    self._get_per_token_logps_and_entropies = _logps_stub(cls, {id(policy): logp}, [])
    inputs = _loss_inputs(data)
    inputs["old_logps"] = (data["logp"] * MASK).sum(1)
    loss = original(cls, "_compute_loss")(self, policy, inputs)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad


def _probe_rloo_loss() -> str | None:
    data = _batch()
    adv = data["advantages"]
    want = -adv.mean()
    want_grad = -adv[:, None] * MASK.float() / B
    for beta in (0.0, 0.05):
        loss, grad = _rloo_loss(beta, data)
        if not _close(loss, want) or not _close(grad, want_grad):
            return (
                f"a loss of {float(loss):.6g} (gradient {_fmt(grad)}) at beta={beta}; with no KL "
                f"term it is {float(want):.6g} ({_fmt(want_grad)})"
            )
    return None


# ------------------------------------------------------------------ scoring
def _generate_targets(function: Callable[..., Any]) -> list[str]:
    """The names TRL unpacks ``self._generate(prompts)`` into, read from its own source."""
    source = textwrap.dedent(inspect.getsource(original_of(function)))
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "_generate"
            and isinstance(node.targets[0], ast.Tuple)
        ):
            return [e.id for e in node.targets[0].elts if isinstance(e, ast.Name)]
    raise LookupError("no `... = self._generate(prompts)` unpacking")


def _scored(
    kind: str, beta: float, data: dict[str, torch.Tensor], **attrs: Any
) -> tuple[dict[str, Any], list[Any], Any, Any]:
    """TRL's own scoring of the synthetic completions; returns (output, log-prob calls, policy
    model, reference model)."""
    import trl

    cls = trl.GRPOTrainer if kind == "GRPO" else trl.RLOOTrainer
    method = original(cls, "_generate_and_score_completions")
    policy = SimpleNamespace(training=True, is_gradient_checkpointing=False)
    reference = SimpleNamespace(training=False, is_gradient_checkpointing=False)
    lengths = MASK.sum(1).tolist()
    prompt_ids = [[2, 3] for _ in range(B)]
    completion_ids = [[4 + (i + j) % 3 for j in range(n)] for i, n in enumerate(lengths)]
    completions = ["x" * n for n in lengths]
    rewards = data["rewards"]
    tokenizer = SimpleNamespace(
        pad_token_id=0,
        eos_token_id=1,
        batch_decode=lambda ids, **_: ["x" * len(row) for row in ids],
    )
    calls: list[Any] = []
    values = {id(policy): data["logp"], id(reference): data["ref"]}
    fields: dict[str, Any] = {
        "prompt_ids_list": prompt_ids,
        "completion_ids_list": completion_ids,
        "tool_mask_list": None,
        "completions": completions,
        "num_items_in_batch": MASK.sum(),
        "sampling_per_token_logps_list": None,
        "extra_fields": {},
        "images": None,
        "tool_images": None,
    }
    if kind == "GRPO":
        names = _generate_targets(method)
        unknown = [n for n in names if n not in fields]
        if unknown:
            raise LookupError(f"_generate returns fields the canary does not know: {unknown}")
        generated: tuple[Any, ...] = tuple(fields[n] for n in names)
    else:
        generated = (prompt_ids, completion_ids, completions)
    self = _stand_in(
        cls,
        model=policy,
        ref_model=reference,
        beta=beta,
        num_generations=G,
        num_generations_eval=G,
        num_iterations=1,
        reward_weights=torch.tensor([1.0]),
        reward_func_names=["reward"],
        reward_funcs=[None],
        pad_to_multiple_of=None,
        mask_truncated_completions=False,
        pad_token_id=0,
        eos_token_id=1,
        eos_token_ids=[1],
        _tokenizer=tokenizer,
        processing_class=tokenizer,
        chat_template_kwargs={},
        tools=None,
        environments=None,
        environment_factories=None,
        _multi_environment=False,
        _is_vlm=False,
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        normalize_advantages=False,
        reward_clip_range=None,
        args=SimpleNamespace(
            per_device_train_batch_size=B,
            per_device_eval_batch_size=B,
            gradient_checkpointing_kwargs=None,
            gradient_accumulation_steps=1,
            steps_per_generation=1,
        ),
        **attrs,
    )
    self._generate = lambda prompts: generated
    self._get_per_token_logps_and_entropies = _logps_stub(cls, values, calls)
    self._calculate_rewards = lambda *a, **k: rewards[:, None].clone()
    inputs = [{"prompt": "ab"} for _ in range(B)]
    with _identity_gathers(method), torch.no_grad():
        out = method(self, inputs)
    return out, calls, policy, reference


def _probe_grpo_scoring() -> str | None:
    data = _batch()
    for scale in ("group", "batch", "none"):
        out, calls, _, reference = _scored(
            "GRPO",
            0.04,
            data,
            scale_rewards=scale,
            multi_objective_aggregation="sum_then_normalize",
        )
        want, _ = grpo_advantages(data["rewards"], torch.zeros(B), G, scale)
        got = out["advantages"]
        if not _close(got, want):
            return (
                f"advantages {_fmt(got)} with scale_rewards={scale!r}, where "
                f"kl_patches.adapters.trl.advantages re-computes {_fmt(want)}"
            )
        ref = out.get("ref_per_token_logps")
        if ref is None or reference not in calls or not _close(ref * MASK, data["ref"] * MASK):
            return "no reference log-probs in its output although beta != 0"
    return None


def _probe_rloo_scoring() -> str | None:
    data = _batch()
    beta = 0.05
    out, calls, policy, reference = _scored("RLOO", beta, data)
    mask = MASK.float()
    delta = data["logp"] - data["ref"]
    got = out["advantages"]
    want = rloo_advantages(data["rewards"], beta * (delta * mask).sum(1), G, None, False)
    if _close(got, want):
        if calls != [policy, reference]:
            order = [
                "policy" if c is policy else "reference" if c is reference else "?" for c in calls
            ]
            return f"log-probs of {order}, not [policy, reference] in that order"
        return None
    k3 = (-delta).exp() + delta - 1
    alternatives = {
        "k3 summed per sequence": beta * (k3 * mask).sum(1),
        "k1 averaged per sequence": beta * (delta * mask).sum(1) / mask.sum(1),
        "no KL": torch.zeros(B),
    }
    for name, penalty in alternatives.items():
        if _close(got, rloo_advantages(data["rewards"], penalty, G, None, False)):
            return f"advantages {_fmt(got)}: reward - beta * ({name}) before the baseline"
    return f"advantages {_fmt(got)}, not {_fmt(want)}"


# ------------------------------------------------------------------ nanstd
def _probe_nanstd() -> str | None:
    from trl.trainer.utils import nanstd

    x = torch.tensor([[1.0, 2.0, float("nan"), 4.0], [0.5, 0.5, 3.0, float("nan")]])
    rows = torch.stack([r[~r.isnan()].std() for r in x])
    flat = x[~x.isnan()].std()
    got_rows, got_flat = nanstd(x, dim=1), nanstd(x)
    if not _close(got_rows, rows) or not _close(got_flat, flat):
        return (
            f"{_fmt(got_rows)} per row and {float(got_flat):.6g} overall, not {_fmt(rows)} and "
            f"{float(flat):.6g}"
        )
    return None


def canaries() -> tuple[Canary, ...]:
    """The TRL canaries, in the order :func:`~kl_patches.adapters.support.VersionSupport.check`
    runs them."""
    return (
        Canary(
            "trl.trainer.utils.nanstd",
            "the unbiased standard deviation of the non-NaN entries (per row with dim=1)",
            _probe_nanstd,
        ),
        Canary(
            "trl.GRPOTrainer._compute_loss",
            "beta * k3 per token is its only KL term (none at beta=0), aggregated like the "
            "policy term",
            _probe_grpo_loss,
        ),
        Canary(
            "trl.RLOOTrainer._compute_loss",
            "no KL term in the loss, whatever beta",
            _probe_rloo_loss,
        ),
        Canary(
            "trl.GRPOTrainer._generate_and_score_completions",
            "group-normalised advantages equal to kl_patches.adapters.trl.advantages, and "
            "reference log-probs whenever beta != 0",
            _probe_grpo_scoring,
        ),
        Canary(
            "trl.RLOOTrainer._generate_and_score_completions",
            "log-probs of the policy then the reference, and advantages of "
            "reward - beta * sum_t(log pi - log pi_ref) with the leave-one-out baseline",
            _probe_rloo_scoring,
        ),
    )
