"""``apply(config)`` / ``revert()``: a KLConfig's loss side inside unsloth's own GRPO loss.

Unsloth replaces ``trl.GRPOTrainer`` by ``UnslothGRPOTrainer``, generated from TRL's source into
a module of ``unsloth_compiled_cache`` (:mod:`.unsloth_facts`), so the TRL patch refuses it
(:mod:`.foreign`). Its ``compute_loss`` ends in one of two calls of the generated module, both
with ``beta`` as an argument: ``UnslothEfficientGRPO.apply`` (an autograd function that runs
unsloth_zoo's ``grpo_compute_loss`` in a ``torch.compile``-d region and returns the loss with the
gradient of the log-probs saved) or ``grpo_compute_loss_slow`` (a compiled copy of the same
function). Those two module attributes are the hook points, replaced through a
:class:`~kl_patches.adapters.patching.PatchRegistry`, and the KL config's term is computed
eagerly, outside unsloth's compiled code (the kernel's autograd functions are not traceable by
Dynamo inside ``torch.func.grad``):

* the replacement calls unsloth's with ``beta=0`` (its k3 term switched off; a canary checks at
  :func:`apply` that this removes exactly ``beta * k3``) and adds
  :func:`kl_patches.core.loss_term` of the active config on the same log-probs, scaled like
  unsloth scales its own loss in that call (divided by the gradient-accumulation steps, or, for
  a token mean under ``loss_type`` dapo/cispo/vespo, by the window's token count, as unsloth
  does) and, on the ``UnslothEfficientGRPO`` path, with that function's gradient convention
  (the input gradient computed in the forward, times the mixed-precision scale; the upstream
  gradient used only with ``upstream_scale``, as unsloth does); the ``kl`` metric unsloth logs
  becomes the config's estimator (:func:`kl_patches.core.per_token_kl`, averaged over
  completions);
* ``UnslothGRPOTrainer.__init__`` is wrapped so a trainer built while applied gets
  ``beta = KLConfig.coef`` (non-zero exactly when the config needs reference log-probs, so
  unsloth builds the reference model), with a warning when the config's own ``beta`` differed.

Only the loss side can be expressed: the reward and the advantages are computed in unsloth's
copy of TRL's scoring code, which kl-patches does not patch, so placement ``reward`` and
``both`` are refused with the nearest setting. ``KLConfig.parse('k2-in-loss',
granularity='sequence')`` (sum aggregation) is unbiased (:mod:`kl_patches.theory`).

Deviations from unsloth: its clamps (log-ratio to [-20, 20], k3 to [-10, 10]) are the config's
``log_ratio_clamp``/``kl_clamp`` (unset: none); since unsloth_zoo 2026.10.9 its [-10, 10] clamp
applies after the pi/pi_old weight, the kernel's before it, so the two differ only where a
weighted term passes 10. Batches weighted by ``UNSLOTH_GRPO_ZERO_VARIANCE_EXCLUDE`` /
``UNSLOTH_GRPO_LOSS_AGGREGATION`` (``sample_weight``), filtered by ``UNSLOTH_GRPO_ROLLOUT_RS``
or split into several chunks are refused (their normaliser and token filter are not the
kernel's). The patch is module-wide: :func:`revert` switches every trainer back to unsloth's k3
(a warning names those built under the patch, which keep ``beta = coef``).

Call :func:`apply` after ``import unsloth`` (which generates the trainer) in the training script;
every accelerate rank runs the script, so every rank applies it. Tested with unsloth_zoo and
unsloth 2026.10.9 on TRL 1.15.0 (:data:`SUPPORT`), with unsloth's ``torch.compile`` on and off;
on a CPU-only machine ``import unsloth`` keeps TRL's own trainer (its CPU backend supports SFT
only) and :func:`kl_patches.trl.apply` is the patch to use.
"""

from __future__ import annotations

import copy
import functools
import sys
import warnings
import weakref
from collections import Counter
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from kl_patches.adapters.patching import (
    PatchRegistry,
    SignatureMismatchError,
    Target,
    is_replacement,
    shape_of_text,
    signature_shape,
)
from kl_patches.adapters.support import Canary, VersionSupport
from kl_patches.adapters.support_table import SupportRow
from kl_patches.config import KLConfig
from kl_patches.core import loss_term, per_token_kl
from kl_patches.theory import verdict

from . import unsloth_facts

SUPPORT = VersionSupport("unsloth_zoo", ">=2026.10.9,<2026.11", tested=("2026.10.9",))
"""The unsloth_zoo releases whose ``grpo_compute_loss`` the patch was tested against (with
unsloth of the same release and TRL 1.15.0); a newer final release passes when the canary does."""


def support_rows() -> tuple[SupportRow, ...]:
    """The unsloth rows of the support tables (:mod:`kl_patches.adapters.support_table`)."""
    low = SUPPORT.supported.split(",")[0].removeprefix(">=")
    high = SUPPORT.supported.split(",")[1].removeprefix("<")
    native = (
        "k3 in the loss only (unsloth_zoo's `grpo_compute_loss`, `beta`), reduced like "
        "`loss_type`; no KL in the reward"
    )
    return (
        SupportRow(
            f"< {low}",
            native + " (release facts: docs/unsloth.md)",
            "refused: the hook points and the canary were tested on the releases of the next "
            "row only (older unsloth_zoo does not import without a GPU, so its generated trainer "
            "cannot run here); `kl-patches audit` reads these launches with each release's "
            "defaults",
            "refused",
        ),
        SupportRow(
            f">= {low}, < {high}",
            native + ", times pi/pi_old with `use_bias_correction_kl`, clamped to [-10, 10]",
            "the loss side of any KLConfig inside unsloth's own loss (reward and both refused: "
            "unsloth scores in its copy of TRL's code); `kl_patches.adapters.trl.unsloth.apply`",
            f"`nox -s unsloth` (tested: {', '.join(SUPPORT.tested)}, TRL "
            f"{', '.join(TRL_TESTED)}; not in `.ci/run`)",
        ),
        SupportRow(
            f">= {high}",
            native,
            "runs with one warning when the behaviour canary passes; refused otherwise",
            "canaries only",
        ),
    )


TRL_TESTED = ("1.15.0",)
"""The TRL releases the generated trainer was tested from."""

REGISTRY = PatchRegistry("unsloth", f"supported: {SUPPORT.describe()}")
"""The originals and replacements of the generated module's loss functions and constructor."""

LOSS_FUNCTIONS = ("UnslothEfficientGRPO", "grpo_compute_loss_slow")
"""The generated module's attributes that every GRPO loss of the generated trainer goes
through (``UnslothEfficientGRPO`` is called only through its ``apply``)."""

NATIVE_LOSS = "grpo_compute_loss"
"""unsloth_zoo's loss function (copied into the generated module), which the canary probes."""

TRAINER = "UnslothGRPOTrainer"
"""The generated trainer class (its ``__init__`` gets ``beta`` from the config)."""

SIGNATURES: dict[str, tuple[str, ...]] = {
    "grpo_compute_loss_slow": (
        "grpo_compute_loss_slow(ref, new, old, sampling_per_token_logps, input_ids, mask, beta, "
        "advantages, **kwargs)",
    ),
    "UnslothEfficientGRPO.forward": (
        "forward(ctx, _new_logps, _old_logps, _ref_logps, _sampling_per_token_logps, lm_head, "
        "_input_ids, _mask, _advantages, beta, scaler=None, n_chunks=1, extra_kwargs=None, "
        "upstream_scale=None)",
    ),
}
"""The call shapes of the hooked functions in the tested release (``grpo_compute_loss`` has the
slow copy's shape in unsloth_zoo 2026.8.13 to 2026.10.9)."""

INIT_PREFIX = ("self", "model", "reward_funcs", "args")
"""The first parameters of the generated trainer's own ``__init__`` (``args`` is third after
``self``): where the wrapper finds the config."""

GLOBAL_TOKEN_COUNT = ("dapo", "cispo", "vespo")
"""Loss types whose token mean unsloth divides by the window's token count
(unsloth_zoo/rl_replacements.py:1233-1242 in 2026.10.9)."""

TOL = 1e-6
"""Absolute tolerance of the canary (float32 on a handful of numbers)."""

_ACTIVE: list[KLConfig] = []
_CALLS: Counter[str] = Counter()
_TRAINERS: weakref.WeakSet[Any] = weakref.WeakSet()


class PlacementError(ValueError):
    """A KLConfig with a reward side, which unsloth's trainer cannot be given."""


# ------------------------------------------------------------------------------ finding things
def generated_module() -> ModuleType:
    """The module unsloth generated ``trl.GRPOTrainer`` into (RuntimeError when ``trl``'s
    GRPOTrainer is not unsloth's, or the module lacks a loss function)."""
    import trl

    cls = trl.GRPOTrainer
    name = getattr(cls, "__module__", "")
    module = sys.modules.get(name)
    if getattr(cls, "__name__", "") != TRAINER or module is None:
        raise RuntimeError(
            f"kl_patches.unsloth: trl.GRPOTrainer is {name}.{getattr(cls, '__qualname__', cls)}, "
            "not unsloth's generated UnslothGRPOTrainer. Import unsloth before building the "
            "trainer (on a machine without a GPU unsloth keeps TRL's own trainer: use "
            "kl_patches.trl.apply there)"
        )
    names = ("grpo_compute_loss_slow", NATIVE_LOSS, TRAINER)
    missing = [n for n in names if not callable(getattr(module, n, None))]
    if not callable(getattr(getattr(module, "UnslothEfficientGRPO", None), "apply", None)):
        missing.append("UnslothEfficientGRPO")
    if missing:
        raise RuntimeError(
            f"kl_patches.unsloth: the generated module {name} has no {missing}, which the patch "
            f"hooks; {SUPPORT.describe()}"
        )
    return module


def targets(module: ModuleType) -> list[Target]:
    """The patched attributes of the generated ``module``."""
    return [Target(module.__name__, n) for n in LOSS_FUNCTIONS] + [
        Target(module.__name__, "__init__", owner=TRAINER)
    ]


def _unpatched(function: Callable[..., Any]) -> Callable[..., Any]:
    while is_replacement(function, "unsloth"):
        function = function.__wrapped__  # type: ignore[attr-defined]
    return function


# ------------------------------------------------------------------------------ the maths
def coefficient(config: KLConfig) -> float:
    """The ``beta`` a trainer gets under ``config``: its loss coefficient, 0 without a loss side
    (then unsloth builds no reference model)."""
    return config.loss_coef_value if config.has_loss else 0.0


def loss_scaling(config: KLConfig, kwargs: dict[str, Any]) -> tuple[Any, float]:
    """``(normalizer, divisor)`` that scale the KL term as unsloth scales its own loss in a call
    to ``grpo_compute_loss`` with these keyword arguments: a token mean under a global-count
    loss type divides by ``num_items_in_batch / num_processes`` (times ``gradient accumulation
    steps / steps_per_generation`` in training), everything else by the accumulation steps."""
    steps = float(kwargs.get("current_gradient_accumulation_steps", 1) or 1)
    items: Any = kwargs.get("num_items_in_batch")
    global_count = kwargs.get("loss_type", "grpo") in GLOBAL_TOKEN_COUNT and items is not None
    if config.loss_aggregation != "token_mean" or not global_count:
        return None, steps
    if isinstance(items, torch.Tensor):
        normalizer: Any = items.clamp(min=1.0) / kwargs.get("num_processes", 1)
    else:
        normalizer = max(float(items), 1.0) / kwargs.get("num_processes", 1)
    spg = kwargs.get("steps_per_generation")
    if spg:
        normalizer = normalizer * steps / spg
    return normalizer, 1.0


def kl_loss(
    config: KLConfig,
    new: torch.Tensor,
    ref: torch.Tensor,
    old: torch.Tensor | None,
    mask: torch.Tensor,
    kwargs: dict[str, Any],
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the differentiable KL term to add to unsloth's loss, the ``kl`` metric): the config's
    loss side on these log-probs, scaled by :func:`loss_scaling`; the metric is the mean over
    completions with a token of each one's per-token estimate."""
    normalizer, divisor = loss_scaling(config, kwargs)
    old_logp = new.detach() if old is None else old
    term = loss_term(new, ref, mask, config, old_logp=old_logp, normalizer=normalizer)
    if divisor != 1.0:
        term = term / divisor
    per_row = per_token_kl(new.detach(), ref.detach(), mask, config)
    rows = (mask.sum(-1) > 0).sum().clamp(min=1)
    return term, per_row.float().sum() / rows


def _refuse_options(kwargs: dict[str, Any]) -> None:
    if kwargs.get("sample_weight") is not None:
        raise RuntimeError(
            "kl_patches.unsloth: this batch carries unsloth's per-completion sample_weight "
            "(UNSLOTH_GRPO_ZERO_VARIANCE_EXCLUDE / UNSLOTH_GRPO_LOSS_AGGREGATION), whose "
            "normaliser the KL term cannot follow; unset those variables"
        )
    if kwargs.get("rollout_rs") is not None:
        raise RuntimeError(
            "kl_patches.unsloth: UNSLOTH_GRPO_ROLLOUT_RS drops rejected tokens from every loss "
            "term, which the KL term does not follow; unset it"
        )


def _config_for_call(kwargs: dict[str, Any], ref: Any, n_chunks: int = 1) -> KLConfig | None:
    """The active config when it has a loss side, after refusing what it cannot follow; None
    when the call should only drop unsloth's KL (placement none)."""
    config = _ACTIVE[-1]
    if not config.has_loss:
        return None
    _refuse_options(kwargs)
    if n_chunks != 1:
        raise RuntimeError(
            f"kl_patches.unsloth: UnslothEfficientGRPO was called with n_chunks={n_chunks}; the "
            "KL term is computed on the whole micro-batch (unsloth_zoo 2026.10.9 always passes 1)"
        )
    if ref is None:
        raise RuntimeError(
            "kl_patches.unsloth: unsloth computed no reference log-probs (the trainer's beta "
            "is 0), but the KL config needs them; build the trainer after "
            "kl_patches.adapters.trl.unsloth.apply(), which sets beta"
        )
    return config


def _slow_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    """``grpo_compute_loss_slow`` (compiled by unsloth) at ``beta=0`` plus the config's term,
    added outside the compiled function."""

    @functools.wraps(original)
    def grpo_compute_loss_slow(
        ref: Any,
        new: torch.Tensor,
        old: Any,
        sampling_per_token_logps: Any,
        input_ids: Any,
        mask: torch.Tensor,
        beta: float,
        advantages: Any,
        **kwargs: Any,
    ) -> Any:
        args = (ref, new, old, sampling_per_token_logps, input_ids, mask)
        if not _ACTIVE:  # the module kept a reference past revert()
            return original(*args, beta, advantages, **kwargs)
        _CALLS["grpo_compute_loss_slow"] += 1
        out = original(*args, 0.0, advantages, **kwargs)
        config = _config_for_call(kwargs, ref)
        if config is None:
            return out
        term, metric = kl_loss(config, new, ref, old, mask, kwargs)
        return (out[0] + term, out[1], metric.to(out[2].dtype), *out[3:])

    return grpo_compute_loss_slow


class _KLTerm(torch.autograd.Function):
    """A precomputed KL term with ``UnslothEfficientGRPO``'s gradient convention: the input
    gradient saved in the forward, times the upstream gradient and ``upstream_scale`` only when
    ``upstream_scale`` is given (unsloth_zoo/rl_replacements.py:1427-1431 in 2026.10.9)."""

    @staticmethod
    def forward(
        ctx: Any, new: torch.Tensor, value: torch.Tensor, grad: torch.Tensor, upstream: Any
    ) -> torch.Tensor:
        ctx.save_for_backward(grad)
        ctx.upstream_scale = upstream
        return value.clone()

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:
        (grad,) = ctx.saved_tensors
        if ctx.upstream_scale is not None:
            grad = grad * (grad_output * ctx.upstream_scale)
        return grad, None, None, None


class _Efficient:
    """Stands in for the generated module's ``UnslothEfficientGRPO`` (called only as
    ``UnslothEfficientGRPO.apply(...)``): unsloth's at ``beta=0`` plus the config's term."""

    def __init__(self, original: Any) -> None:
        self.original = original
        """unsloth's autograd function."""
        self.__name__ = self.__qualname__ = getattr(original, "__name__", "UnslothEfficientGRPO")

    def apply(
        self,
        new: torch.Tensor,
        old: Any,
        ref: Any,
        sampling_per_token_logps: Any,
        lm_head: Any,
        input_ids: Any,
        mask: torch.Tensor,
        advantages: Any,
        beta: float,
        scaler: Any = None,
        n_chunks: int = 1,
        extra_kwargs: Any = None,
        upstream_scale: Any = None,
    ) -> Any:
        """``UnslothEfficientGRPO.apply`` with the active config's KL term instead of k3."""
        head = (new, old, ref, sampling_per_token_logps, lm_head, input_ids, mask, advantages)
        tail = (scaler, n_chunks, extra_kwargs, upstream_scale)
        if not _ACTIVE:  # the module kept a reference past revert()
            return self.original.apply(*head, beta, *tail)
        _CALLS["UnslothEfficientGRPO"] += 1
        out = self.original.apply(*head, 0.0, *tail)
        kwargs = dict(extra_kwargs or {})
        config = _config_for_call(kwargs, ref, n_chunks)
        if config is None:
            return out
        scaling = scaler.get_scale() if scaler is not None else 1.0
        with torch.enable_grad():
            leaf = new.detach().requires_grad_()
            term, metric = kl_loss(config, leaf, ref, old, mask, kwargs)
            (grad,) = torch.autograd.grad(term * scaling, leaf)
        added = _KLTerm.apply(new, term.detach().to(out[0].dtype), grad, upstream_scale)
        return (out[0] + added, out[1], metric.to(out[2].dtype), *out[3:])


def _config_with_beta(module: ModuleType, args: Any, config: KLConfig) -> Any:
    """A copy of the trainer config ``args`` (unsloth's default one when None) with ``beta``
    set for ``config``."""
    args = module.UnslothGRPOConfig() if args is None else copy.copy(args)
    beta = coefficient(config)
    if float(args.beta) not in (0.0, 0.001, beta):
        warnings.warn(
            f"kl_patches.unsloth: GRPOConfig.beta={args.beta} is replaced by the KL config "
            f"({config}); the KL coefficient is KLConfig.coef. Set beta to 0 to silence this.",
            UserWarning,
            stacklevel=4,
        )
    args.beta = beta
    return args


def _init_wrapper(module: ModuleType, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        config = _ACTIVE[-1] if _ACTIVE else None
        if config is None:
            original(self, *args, **kwargs)
            return
        if "args" in kwargs or len(args) < 3:
            kwargs["args"] = _config_with_beta(module, kwargs.get("args"), config)
        else:
            args = (*args[:2], _config_with_beta(module, args[2], config), *args[3:])
        original(self, *args, **kwargs)
        self._kl_config = config
        _TRAINERS.add(self)
        _CALLS["__init__"] += 1

    return __init__


# ------------------------------------------------------------------------------ guard
def _synthetic() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    new = torch.randn(3, 5, generator=gen) * 0.3 - 1.5
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.float32)
    return {
        "new": new,
        "ref": new + torch.randn(3, 5, generator=gen) * 0.3,
        "old": new + torch.randn(3, 5, generator=gen) * 0.1,
        "mask": mask,
        "advantages": torch.randn(3, generator=gen),
        "input_ids": torch.zeros(3, 5, dtype=torch.long),
    }


def probe_native(function: Callable[..., Any], zoo: str | None = None) -> str | None:
    """None when ``function`` (unsloth's ``grpo_compute_loss``) at ``beta`` equals itself at
    ``beta=0`` plus the kernel's loss term for the KLConfig :mod:`.unsloth_facts` gives unsloth_zoo
    ``zoo`` (value and gradient, bnpo and dr_grpo, with and without use_bias_correction_kl);
    else what differs."""
    data = _synthetic()
    beta = 0.1
    for loss_type in ("bnpo", "dr_grpo"):
        for weighted in (False, True):
            kwargs = {
                "loss_type": loss_type,
                "max_completion_length": 5,
                "use_bias_correction_kl": weighted,
                "current_gradient_accumulation_steps": 1,
            }
            new = data["new"].clone().requires_grad_()
            args = (data["ref"], new, data["old"], None, data["input_ids"], data["mask"])
            full = function(*args, beta, data["advantages"], **kwargs)
            bare = function(*args, 0.0, data["advantages"], **kwargs)
            config = unsloth_facts.native_config(
                beta, loss_type, max_completion_length=5, use_bias_correction_kl=weighted, zoo=zoo
            )
            expected = bare[0] + loss_term(new, data["ref"], data["mask"], config, data["old"])
            (g_full,) = torch.autograd.grad(full[0], new)
            (g_expected,) = torch.autograd.grad(expected, new)
            full, expected = [full[0].detach(), *full[1:]], expected.detach()
            what = f"loss_type={loss_type}, use_bias_correction_kl={weighted}"
            if float(bare[2]) != 0.0:
                return f"a KL metric of {float(bare[2]):.3g} at beta=0 ({what})"
            if abs(float(full[0]) - float(expected)) > TOL:
                return (
                    f"a loss of {float(full[0]):.7g} at beta={beta}, not its beta=0 loss plus "
                    f"beta * k3 = {float(expected):.7g} ({config.short_name}, {what})"
                )
            if float((g_full - g_expected).abs().max()) > TOL:
                return f"a gradient that is not its beta=0 gradient plus that of beta * k3 ({what})"
    return None


def canaries(module: ModuleType, zoo: str | None = None) -> tuple[Canary, ...]:
    """The behaviour canary of the generated module's (unpatched) ``grpo_compute_loss``."""
    function = _unpatched(getattr(module, NATIVE_LOSS))
    return (
        Canary(
            f"{module.__name__}.{NATIVE_LOSS}",
            "beta * k3 in the loss as data/unsloth/history.json records for this unsloth_zoo, "
            "and nothing else that depends on beta",
            lambda: probe_native(function, zoo),
        ),
    )


def _check_init(module: ModuleType, force: bool) -> None:
    import inspect

    init = getattr(getattr(module, f"_{TRAINER}", None), "__init__", None)
    names = tuple(inspect.signature(inspect.unwrap(init)).parameters)[:4] if init else ()
    if names != INIT_PREFIX:
        message = (
            f"kl_patches.unsloth: the generated _{TRAINER}.__init__ starts with {names}, not "
            f"{INIT_PREFIX}; the wrapper would not find the config. {SUPPORT.describe()}"
        )
        if not force:
            raise RuntimeError(message)
        warnings.warn(message, stacklevel=3)


def _check_efficient(module: ModuleType, force: bool) -> None:
    """Refuse (SignatureMismatchError; a warning when ``force``) an ``UnslothEfficientGRPO``
    whose ``forward`` has a call shape the tested release does not have."""
    efficient = module.UnslothEfficientGRPO
    if isinstance(efficient, _Efficient):
        efficient = efficient.original
    found = signature_shape(efficient.forward)
    expected = sorted({shape_of_text(t) for t in SIGNATURES["UnslothEfficientGRPO.forward"]})
    if found in expected:
        return
    message = (
        f"kl_patches.unsloth: {module.__name__}.UnslothEfficientGRPO.forward has the signature "
        f"{found}, which no tested release has (tested: {' or '.join(expected)}); the "
        "replacement could pass its arguments to the wrong parameters"
    )
    if not force:
        raise SignatureMismatchError(message)
    warnings.warn(message, stacklevel=3)


def guard(force: bool = False) -> str:
    """Check the installed unsloth before patching; returns the unsloth_zoo version.

    The unsloth_zoo version is in :data:`SUPPORT`'s range or above it, ``trl.GRPOTrainer`` is
    unsloth's generated class, both hooked functions have the recorded call shape, the generated
    constructor takes ``(model, reward_funcs, args, ...)``, and the canary passes (above the
    range, passing gives one warning). ``force`` (or ``KL_PATCHES_FORCE=1``) turns each refusal
    into a warning.
    """
    forced = SUPPORT.forced(force)
    version = SUPPORT.gate(force=forced)
    module = generated_module()
    REGISTRY.check_signatures(
        {Target(module.__name__, "grpo_compute_loss_slow"): SIGNATURES["grpo_compute_loss_slow"]},
        force=forced,
    )
    _check_efficient(module, forced)
    _check_init(module, forced)
    return SUPPORT.verify(version, force=forced, canaries=canaries(module, version))


def check_placement(config: KLConfig) -> None:
    """Refuse a config with a reward side (PlacementError naming the nearest settings)."""
    if not config.has_reward:
        return
    coef = config.coef or 0.05
    unbiased = KLConfig(
        estimator="k2", placement="loss", coef=coef, granularity="sequence", loss_aggregation="sum"
    )
    raise PlacementError(
        f"kl_patches.unsloth: {config.short_name} puts the KL in the reward, but unsloth's "
        "trainer scores completions in its own copy of TRL's code, which kl-patches does not "
        "patch; only the loss-side term of grpo_compute_loss can be replaced. Nearest: "
        f"KLConfig.parse('k2-in-loss', granularity='sequence', coef={coef:g}) "
        f"({verdict(unbiased).gradient}, unbiased), or for a reward-side KL TRL's own trainer in "
        "a process that does not import unsloth (kl_patches.trl.apply)"
    )


# ------------------------------------------------------------------------------ verbs
def apply(config: KLConfig | str | dict[str, Any], *, force: bool = False) -> KLConfig:
    """Patch unsloth's generated GRPO trainer to run ``config``'s loss side instead of its k3.

    ``config`` is anything :meth:`KLConfig.coerce` takes (``"k2-in-loss"``, a KLConfig...);
    placement ``loss`` or ``none`` (the latter removes unsloth's KL). Raises PlacementError for a
    reward side and refuses what :func:`guard` refuses unless ``force``. Trainers built
    afterwards get ``beta`` from the config; the loss functions are module-wide, so a trainer
    built before keeps its ``beta`` (0 means no reference model: its first step raises).
    Applying again replaces the active config. Returns it.
    """
    resolved = KLConfig.coerce(config)
    check_placement(resolved)
    guard(force)
    module = generated_module()
    _ACTIVE[:] = [resolved]
    for target in targets(module):
        factory: Callable[[Any], Any]
        if target.owner is not None:
            factory = functools.partial(_init_wrapper, module)
        elif target.attr == "UnslothEfficientGRPO":
            factory = _Efficient
        else:
            factory = _slow_wrapper
        REGISTRY.patch(target, factory)
    return resolved


def revert() -> None:
    """Restore unsloth's functions exactly; a no-op when nothing is applied. Warns when trainers
    built under the patch are alive (they now run unsloth's k3 at ``beta = coef``)."""
    alive = len(_TRAINERS)
    REGISTRY.revert()
    _ACTIVE.clear()
    _CALLS.clear()
    if alive:
        warnings.warn(
            f"kl_patches.unsloth: {alive} trainer(s) built under the patch now run unsloth's own "
            "k3 at the beta the patch gave them; build new trainers to drop it",
            UserWarning,
            stacklevel=2,
        )
    _TRAINERS.clear()


def applied() -> list[str]:
    """The patched attributes (checked on the live objects); empty when not applied."""
    return REGISTRY.applied()


def is_applied() -> bool:
    """True while :func:`apply` is in effect."""
    return bool(applied())


def active_config() -> KLConfig | None:
    """The config the loss functions run, or None when not applied."""
    return _ACTIVE[-1] if _ACTIVE else None


def hook_calls() -> dict[str, int]:
    """Patched name -> how often its replacement ran the KL config since :func:`apply`."""
    return dict(_CALLS)
