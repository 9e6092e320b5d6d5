"""unsloth's own GRPO loss on a CPU, and the kl-patches patch of it (``nox -s unsloth``).

On a machine without a GPU ``import unsloth`` (2026.10.9) takes its CPU backend, which supports
SFT only and keeps TRL's GRPOTrainer; ``import unsloth.models`` still runs the trainer generation
a GPU import runs (``PatchFastRL``, called at import by ``unsloth/models/llama.py:5591``), so the
generated ``UnslothGRPOTrainer``, its loss functions and whole training steps run here, eagerly
(``UNSLOTH_COMPILE_DISABLE=1``). Older unsloth_zoo releases refuse to import without a GPU; their
``grpo_compute_loss`` (the function unsloth copies into the generated trainer as source) is
compiled here from the released wheels' source, which ``nox -s unsloth`` downloads and unpacks
into ``$KL_PATCHES_UNSLOTH_WHEELS`` (the facts of ``data/unsloth/history.json`` are re-read from
the same wheels). Only collected where unsloth is installed (see ``conftest.py``).
"""

from __future__ import annotations

import ast
import inspect
import math
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from kl_patches.adapters.support import CanaryError, UnsupportedVersionError
from kl_patches.adapters.trl import unsloth_facts
from kl_patches.config import KLConfig
from kl_patches.core import loss_term, per_token_kl

WHEELS_ENV = "KL_PATCHES_UNSLOTH_WHEELS"
"""Folder of unpacked wheels, ``<package>-<release>/...`` (filled by ``nox -s unsloth``)."""

ZOO_RELEASES = ("2026.9.2", "2026.9.7", "2026.10.8", "2026.10.9")
"""One unsloth_zoo release per state of its KL code: bias correction ignored, read, clamped
before the weight, clamped after it."""

TOL = 1e-6


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The module unsloth generates UnslothGRPOTrainer into (its cache in a temporary folder)."""
    os.environ["UNSLOTH_COMPILE_LOCATION"] = str(tmp_path_factory.mktemp("unsloth_cache"))
    os.environ["UNSLOTH_COMPILE_DISABLE"] = "1"
    torch.set_num_threads(1)
    # first (unsloth patches transformers and TRL on import), then the GRPO trainer
    # generation the CPU backend skips
    import unsloth
    import unsloth.models  # noqa: F401

    from kl_patches.adapters.trl import unsloth as patch

    return patch.generated_module()


@pytest.fixture
def patch(generated: ModuleType) -> Iterator[Any]:
    """kl_patches.adapters.trl.unsloth, reverted after the test."""
    from kl_patches.adapters.trl import unsloth as patch

    yield patch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        patch.revert()


@pytest.fixture(scope="session")
def wheels() -> Path:
    folder = os.environ.get(WHEELS_ENV)
    if not folder or not Path(folder).is_dir():
        pytest.fail(f"{WHEELS_ENV} names no folder of unpacked wheels; run `nox -s unsloth`")
    return Path(folder)


def zoo_loss(wheels: Path, release: str) -> Callable[..., Any]:
    """unsloth_zoo ``release``'s ``grpo_compute_loss``, compiled from the wheel's source."""
    path = wheels / f"unsloth_zoo-{release}" / "unsloth_zoo" / "rl_replacements.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (node,) = [n for n in tree.body if getattr(n, "name", "") == "grpo_compute_loss"]
    scope: dict[str, Any] = {"torch": torch, "math": math}
    exec(compile(ast.Module([node], []), str(path), "exec"), scope)
    return scope["grpo_compute_loss"]  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- synthetic batches
def batch(spread: float = 0.3, seed: int = 0) -> dict[str, torch.Tensor]:
    """Log-probs of 4 completions of up to 6 tokens (two padded), ref and old close to new;
    ``spread=30`` puts some |log pi_ref - log pi| past unsloth's clamp at 20."""
    gen = torch.Generator().manual_seed(seed)
    new = torch.randn(4, 6, generator=gen) * 0.3 - 1.5
    mask = torch.ones(4, 6)
    mask[0, 4:] = 0
    mask[2, 2:] = 0
    return {
        "new": new,
        "ref": new + torch.randn(4, 6, generator=gen) * spread,
        "old": new + torch.randn(4, 6, generator=gen) * 0.1,
        "mask": mask,
        "advantages": torch.randn(4, generator=gen),
        "ids": torch.zeros(4, 6, dtype=torch.long),
    }


def kwargs_for(loss_type: str, weighted: bool) -> dict[str, Any]:
    """What unsloth's trainer passes, with gradient accumulation 2 over 4 steps per generation."""
    return {
        "loss_type": loss_type,
        "max_completion_length": 6,
        "use_bias_correction_kl": weighted,
        "num_items_in_batch": torch.tensor(40.0),
        "current_gradient_accumulation_steps": 2,
        "steps_per_generation": 4,
        "num_processes": 1,
    }


def plain_kwargs(loss_type: str, weighted: bool, data: dict[str, torch.Tensor]) -> dict[str, Any]:
    """One micro-batch, no accumulation, its own token count: every release normalises these
    loss types alike then (their global-count and accumulation rescaling changed over time)."""
    return {
        "loss_type": loss_type,
        "max_completion_length": 6,
        "use_bias_correction_kl": weighted,
        "num_items_in_batch": data["mask"].sum(),
    }


def run(function: Callable[..., Any], data: dict[str, torch.Tensor], beta: float, **kw: Any) -> Any:
    """(loss, d loss / d new, the returned tuple) of one call of a grpo_compute_loss."""
    new = data["new"].clone().requires_grad_()
    out = function(
        data["ref"], new, data["old"], None, data["ids"], data["mask"], beta, data["advantages"],
        **kw,
    )  # fmt: skip
    (grad,) = torch.autograd.grad(out[0], new)
    return out[0].detach(), grad, out


def run_efficient(efficient: Any, data: dict[str, torch.Tensor], beta: float, **kw: Any) -> Any:
    """(loss, d loss / d new, the returned tuple) of one ``UnslothEfficientGRPO.apply``."""
    new = data["new"].clone().requires_grad_()
    out = efficient.apply(
        new, data["old"], data["ref"], None, None, data["ids"], data["mask"], data["advantages"],
        beta, None, 1, kw, None,
    )  # fmt: skip
    (grad,) = torch.autograd.grad(out[0], new)
    return out[0].detach(), grad, out


def hooked(module: ModuleType, path: str) -> Any:
    """The generated module's callable for a hook point: unsloth's, or the patch's when on."""
    return module.UnslothEfficientGRPO if path == "efficient" else module.grpo_compute_loss_slow


def call(path: str, function: Any, data: dict[str, torch.Tensor], beta: float, **kw: Any) -> Any:
    return (run_efficient if path == "efficient" else run)(function, data, beta, **kw)


def kernel_term(
    data: dict[str, torch.Tensor], config: KLConfig, kw: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(value, gradient) of the kernel's loss term scaled as unsloth scales its loss."""
    from kl_patches.adapters.trl.unsloth import loss_scaling

    new = data["new"].clone().requires_grad_()
    normalizer, divisor = loss_scaling(config, kw)
    term = loss_term(new, data["ref"], data["mask"], config, data["old"], normalizer) / divisor
    (grad,) = torch.autograd.grad(term, new)
    return term.detach(), grad


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.allclose(a, b, rtol=TOL, atol=TOL))


LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")


# --------------------------------------------------------------------------- unsloth's facts
def test_the_facts_hold_against_the_released_wheels(wheels: Path) -> None:
    assert unsloth_facts.check_sources(wheels) == []


@pytest.mark.parametrize("release", ZOO_RELEASES)
@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("weighted", [False, True])
def test_zoo_k3_is_the_kernels_for_the_recorded_config(
    wheels: Path, release: str, loss_type: str, weighted: bool
) -> None:
    """Each release's loss at beta = its loss at beta=0 + the kernel's term for the KLConfig the
    facts give that release (ignored bias correction, clamps), on batches inside the clamps."""
    function = zoo_loss(wheels, release)
    data, beta = batch(), 0.04
    kw = plain_kwargs(loss_type, weighted, data)
    config = unsloth_facts.native_config(
        beta, loss_type, max_completion_length=6, use_bias_correction_kl=weighted, zoo=release
    )
    full, g_full, _ = run(function, data, beta, **kw)
    bare, g_bare, _ = run(function, data, 0.0, **kw)
    term, g_term = kernel_term(data, config, kw)
    assert close(full, bare + term), (full, bare + term)
    assert close(g_full, g_bare + g_term)


@pytest.mark.parametrize("release", ZOO_RELEASES)
@pytest.mark.parametrize("weighted", [False, True])
def test_zoo_clamps_are_the_kernels_except_after_the_weight(
    wheels: Path, release: str, weighted: bool
) -> None:
    """Log-ratios past 20: the clamps of 2026.9.8+ are the kernel's ``log_ratio_clamp`` and
    ``kl_clamp``, except 2026.10.9's clamp of the weighted term (the documented deviation);
    before 2026.9.8 nothing bounds the term (its KL part passes beta * 10 per token)."""
    function = zoo_loss(wheels, release)
    data, beta = batch(spread=30.0), 0.04
    kw = plain_kwargs("bnpo", weighted, data)
    config = unsloth_facts.native_config(beta, "bnpo", use_bias_correction_kl=weighted, zoo=release)
    full, g_full, _ = run(function, data, beta, **kw)
    bare, g_bare, _ = run(function, data, 0.0, **kw)
    if config.kl_clamp is None:
        assert float(full - bare) > beta * 10.0
        return
    term, g_term = kernel_term(data, config, kw)
    facts = unsloth_facts.facts("unsloth_zoo", release)
    if weighted and facts.get("grpo.kl_clamp_after_weight"):
        assert not close(g_full, g_bare + g_term)
    else:
        assert close(full, bare + term) and close(g_full, g_bare + g_term)


# --------------------------------------------------------------------------- the hook points
def test_the_generated_trainer_on_cpu(generated: ModuleType) -> None:
    import trl
    import unsloth_zoo.rl_replacements as zoo

    assert trl.GRPOTrainer.__module__ == generated.__name__ == "UnslothGRPOTrainer"
    # the generated module's loss is zoo's function, copied as source
    copied = inspect.getsource(generated.grpo_compute_loss)
    assert copied == inspect.getsource(zoo.grpo_compute_loss)
    assert "def compute_loss" in inspect.getsource(generated._UnslothGRPOTrainer)
    assert "grpo_accumulated_loss(" in inspect.getsource(generated._UnslothGRPOTrainer.compute_loss)


CPU_IMPORT = """
import unsloth, trl
from kl_patches.trl import apply, applied
assert trl.GRPOTrainer.__module__ == "trl.trainer.grpo_trainer", trl.GRPOTrainer
apply("k1-in-reward")
print("APPLIED", len(applied()))
"""


def test_on_a_cpu_import_unsloth_keeps_trls_trainer_for_the_trl_patch(tmp_path: Path) -> None:
    """Without ``import unsloth.models``: the CPU backend leaves TRL's GRPOTrainer, which the
    TRL patch applies to (a fresh process: this one has generated unsloth's trainer)."""
    import subprocess
    import sys

    env = {**os.environ, "UNSLOTH_COMPILE_LOCATION": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CPU_IMPORT], capture_output=True, text=True, env=env,
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "APPLIED 12" in done.stdout, done.stdout[-2000:]


COMPILED = """
import json, sys, torch
import unsloth, unsloth.models
from kl_patches.adapters.trl import unsloth as patch, unsloth_facts
from kl_patches.config import KLConfig
from kl_patches.core import loss_term
module = patch.generated_module()
torch.manual_seed(0)
new = torch.randn(4, 6) * 0.3 - 1.5
ref = new + torch.randn(4, 6) * 0.3
mask = torch.ones(4, 6)
mask[0, 4:] = 0
adv, ids = torch.randn(4), torch.zeros(4, 6, dtype=torch.long)
kw = {"loss_type": "bnpo", "max_completion_length": 6, "use_bias_correction_kl": True,
      "current_gradient_accumulation_steps": 1, "num_processes": 1, "use_vllm": False}
def step(beta):
    x = new.clone().requires_grad_()
    out = module.UnslothEfficientGRPO.apply(x, None, ref, None, None, ids, mask, adv, beta,
                                            None, 1, dict(kw), None)
    out[0].backward()
    return out[0].item(), x.grad
native, g_native = step(0.04)
bare, g_bare = step(0.0)
patch.apply(unsloth_facts.native_config(0.04, "bnpo", use_bias_correction_kl=True))
same, g_same = step(0.04)
config = KLConfig.parse("k2-in-loss", granularity="sequence", coef=0.04)
patch.apply(config)
k2, g_k2 = step(0.04)
x = new.clone().requires_grad_()
term = loss_term(x, ref, mask, config)
term.backward()
print(json.dumps({
    "native": abs(native - same), "g_native": (g_native - g_same).abs().max().item(),
    "k2": abs(k2 - bare - term.item()), "g_k2": (g_k2 - g_bare - x.grad).abs().max().item(),
    "calls": patch.hook_calls(),
    "graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"],
}))
"""


def test_the_patch_under_unsloths_torch_compile(tmp_path: Path) -> None:
    """With unsloth's own ``torch.compile`` on (its default; the other tests run eagerly), the
    KL term stays outside the compiled region and both the native reproduction and k2 hold."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "UNSLOTH_COMPILE_DISABLE"}
    env.update(UNSLOTH_COMPILE_LOCATION=str(tmp_path), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", COMPILED], capture_output=True, text=True, env=env, cwd=tmp_path,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["graphs"] > 0 and got["calls"] == {"UnslothEfficientGRPO": 2}
    assert max(got["native"], got["g_native"], got["k2"], got["g_k2"]) <= TOL, got


def test_version_gate(patch: Any) -> None:
    with pytest.raises(UnsupportedVersionError, match=r"unsloth_zoo>=2026\.10\.9"):
        patch.SUPPORT.gate("2026.9.2")
    assert patch.SUPPORT.gate() == "2026.10.9"


def test_the_canary_passes_and_catches_another_kl(
    patch: Any, generated: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert patch.probe_native(generated.grpo_compute_loss) is None
    original = generated.grpo_compute_loss

    def doubled(
        ref: Any, new: Any, old: Any, sampling_per_token_logps: Any, input_ids: Any, mask: Any,
        beta: float, advantages: Any, **kwargs: Any,
    ) -> Any:  # fmt: skip
        return original(
            ref, new, old, sampling_per_token_logps, input_ids, mask, 2 * beta, advantages,
            **kwargs,
        )  # fmt: skip

    assert "not its beta=0 loss plus" in (patch.probe_native(doubled) or "")
    monkeypatch.setattr(generated, "grpo_compute_loss", doubled)
    with pytest.raises(CanaryError, match="grpo_compute_loss computed a loss"):
        patch.apply("k2-in-loss")
    assert patch.applied() == []


def test_apply_revert_restores_every_slot(patch: Any, generated: ModuleType) -> None:
    cls = generated.UnslothGRPOTrainer
    before = {n: getattr(generated, n) for n in patch.LOSS_FUNCTIONS}
    init = vars(cls)["__init__"]
    config = patch.apply("k2-in-loss")
    assert patch.active_config() == config and patch.is_applied()
    assert patch.applied() == [
        "UnslothGRPOTrainer.UnslothEfficientGRPO",
        "UnslothGRPOTrainer.grpo_compute_loss_slow",
        "UnslothGRPOTrainer.UnslothGRPOTrainer.__init__",
    ]
    replaced = {n: getattr(generated, n) for n in patch.LOSS_FUNCTIONS}
    assert all(replaced[n] is not before[n] for n in before)
    patch.apply("k3-in-loss")  # again: same replacements, new config
    assert all(getattr(generated, n) is replaced[n] for n in before)
    assert patch.active_config().estimator == "k3"
    patch.revert()
    assert all(getattr(generated, n) is before[n] for n in before)
    assert vars(cls)["__init__"] is init and patch.applied() == [] and not patch.is_applied()


def test_reward_placement_is_refused_with_the_nearest_setting(patch: Any) -> None:
    for name in ("k1-in-reward", "k3-in-both"):
        with pytest.raises(patch.PlacementError, match=r"k2-in-loss', granularity='sequence'"):
            patch.apply(name)
    assert patch.applied() == []


def test_trl_patch_refuses_unsloth_and_names_this_one() -> None:
    from kl_patches.adapters.trl.foreign import ForeignTrainerError
    from kl_patches.trl import applied, apply

    with pytest.raises(ForeignTrainerError, match=r"kl_patches\.adapters\.trl\.unsloth\.apply"):
        apply("k1-in-reward")
    assert applied() == []


@pytest.mark.parametrize("path", ["efficient", "slow"])
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_patched_loss_reproduces_unsloths_k3(
    patch: Any, generated: ModuleType, path: str, loss_type: str
) -> None:
    """Applied with the KLConfig unsloth itself runs, each hook point computes unsloth's own
    loss (value and gradient to 1e-6)."""
    original = hooked(generated, path)
    data, kw, beta = batch(), kwargs_for(loss_type, True), 0.04
    config = unsloth_facts.native_config(
        beta, loss_type, max_completion_length=6, use_bias_correction_kl=True
    )
    native, g_native, _ = call(path, original, data, beta, **kw)
    patch.apply(config)
    patched, g_patched, _ = call(path, hooked(generated, path), data, beta, **kw)
    assert close(patched, native) and close(g_patched, g_native), (patched, native)
    assert sum(patch.hook_calls().values()) == 1


@pytest.mark.parametrize("path", ["efficient", "slow"])
def test_patched_loss_runs_the_configs_loss_side(
    patch: Any, generated: ModuleType, path: str
) -> None:
    """k2 on the sequence log-ratio, summed: unsloth's beta=0 loss plus the kernel's term, and
    the kl metric is the config's estimator; unsloth's beta only switches the reference on."""
    original = hooked(generated, path)
    data, kw = batch(), kwargs_for("dapo", False)
    config = KLConfig.parse("k2-in-loss", granularity="sequence", coef=0.05)
    bare, g_bare, _ = call(path, original, data, 0.0, **kw)
    term, g_term = kernel_term(data, config, kw)
    patch.apply(config)
    got, g_got, out = call(path, hooked(generated, path), data, 0.7, **kw)
    assert close(got, bare + term) and close(g_got, g_bare + g_term)
    rows = per_token_kl(data["new"], data["ref"], data["mask"], config)
    assert close(out[2], rows.sum() / 4)


def test_the_efficient_path_keeps_unsloths_gradient_convention(
    patch: Any, generated: ModuleType
) -> None:
    """UnslothEfficientGRPO ignores the upstream gradient unless given upstream_scale (it
    scales its loss itself); the added KL term does the same."""
    data, kw = batch(), kwargs_for("bnpo", False)
    patch.apply(KLConfig.parse("k2-in-loss", coef=0.05))
    grads = []
    for upstream in (None, 3.0):
        new = data["new"].clone().requires_grad_()
        out = generated.UnslothEfficientGRPO.apply(
            new, data["old"], data["ref"], None, None, data["ids"], data["mask"],
            data["advantages"], 0.05, None, 1, kw, upstream,
        )  # fmt: skip
        (out[0] * 2.0).backward()
        grads.append(new.grad)
    assert close(grads[1], grads[0] * 6.0)


def test_patched_loss_with_placement_none_drops_unsloths_kl(
    patch: Any, generated: ModuleType
) -> None:
    data, kw = batch(), kwargs_for("bnpo", True)
    bare, g_bare, _ = run_efficient(generated.UnslothEfficientGRPO, data, 0.0, **kw)
    patch.apply(KLConfig(placement="none", coef=0.0))
    got, g_got, out = run_efficient(generated.UnslothEfficientGRPO, data, 0.04, **kw)
    assert torch.equal(got, bare) and torch.equal(g_got, g_bare) and float(out[2]) == 0.0


@pytest.mark.parametrize("path", ["efficient", "slow"])
def test_patched_loss_refuses_what_it_cannot_follow(
    patch: Any, generated: ModuleType, path: str
) -> None:
    data, kw = batch(), kwargs_for("bnpo", False)
    patch.apply("k2-in-loss")
    function = hooked(generated, path)
    with pytest.raises(RuntimeError, match="UNSLOTH_GRPO_ZERO_VARIANCE_EXCLUDE"):
        call(path, function, data, 0.05, **kw, sample_weight=torch.ones(4))
    with pytest.raises(RuntimeError, match="UNSLOTH_GRPO_ROLLOUT_RS"):
        call(path, function, data, 0.05, **kw, rollout_rs=[("token_k3", None, 2.0)])
    data["ref"] = None  # type: ignore[assignment]  # a trainer built with beta=0
    with pytest.raises(RuntimeError, match="no reference log-probs"):
        call(path, function, data, 0.0, **kw)


# --------------------------------------------------------------------------- training steps
@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from trl_support import tiny

    return tiny.build_model_dir(tmp_path_factory.mktemp("unsloth_model") / "model")  # type: ignore[no-any-return]


def train_one_step(model_dir: Path, out: Path, **overrides: Any) -> tuple[dict[str, float], Any]:
    """One GRPO step of unsloth's generated trainer on the tiny model (seeded, fp32)."""
    import trl
    from trl_support import tiny
    from unsloth import FastLanguageModel

    torch.manual_seed(0)
    model, tokenizer = FastLanguageModel.from_pretrained(
        str(model_dir), max_seq_length=64, load_in_4bit=False, dtype=torch.float32
    )
    args = trl.GRPOConfig(**tiny.common_args(out, max_steps=1, **overrides))
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[tiny.target_reward],
        args=args,
        train_dataset=tiny.dataset(),
        processing_class=tokenizer,
    )
    trainer.train()
    logged = trainer.state.log_history[0]
    return {k: float(logged[k]) for k in ("loss", "grad_norm", "kl")}, trainer


def test_a_training_step_with_unsloths_own_config_is_unsloths(
    patch: Any, generated: ModuleType, model_dir: Path, tmp_path: Path
) -> None:
    native, t_native = train_one_step(model_dir, tmp_path / "a", beta=0.04, loss_type="bnpo")
    config = unsloth_facts.native_config(0.04, "bnpo", use_bias_correction_kl=True)
    patch.apply(config)
    patched, t_patched = train_one_step(model_dir, tmp_path / "b", beta=0.04, loss_type="bnpo")
    assert type(t_patched).__module__ == generated.__name__
    assert patch.hook_calls()["__init__"] == 1 and patch.hook_calls()["UnslothEfficientGRPO"] >= 1
    for key in native:
        assert abs(native[key] - patched[key]) <= TOL, (key, native, patched)
    for (name, p), q in zip(
        t_native.model.named_parameters(), t_patched.model.parameters(), strict=True
    ):
        assert float((p - q).detach().abs().max()) <= TOL, name


def test_a_training_step_with_k2_in_the_loss(patch: Any, model_dir: Path, tmp_path: Path) -> None:
    native, _ = train_one_step(model_dir, tmp_path / "a", beta=0.04, loss_type="bnpo")
    patch.apply(KLConfig.parse("k2-in-loss", granularity="sequence", coef=0.04))
    # beta=0 would build no reference model: the patched constructor sets it from the config
    patched, trainer = train_one_step(model_dir, tmp_path / "b", beta=0.0, loss_type="bnpo")
    assert trainer.beta == 0.04 and trainer.ref_model is not None
    assert patch.hook_calls()["UnslothEfficientGRPO"] >= 1
    assert abs(native["loss"] - patched["loss"]) > 1e-5  # another KL term
    assert patched["kl"] > 0.0
