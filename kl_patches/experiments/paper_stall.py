"""Why k1-in-reward stalls on the tiny transformer of ``kl-patches reproduce --model transformer``.

At beta = 0.1 that experiment (a one-layer transformer whose reference is its own random
initialisation, 300 Adam updates at lr 0.003, 16 samples per update) ends k1-in-reward at an
exact objective of about 0.53 against an optimum of 0.551, below k3 in the loss, with a large
forward KL. Each experiment here changes one thing and measures the same exact quantities
(:mod:`.reproduce_train`: every one of the 81 sequences is enumerated):

* ``lr`` and ``updates``: a smaller step, or many more updates;
* ``exact``: the *expected* gradient, computed exactly over all sequences instead of sampled
  (the expected k1-in-reward gradient is the exact gradient of E[R] - beta * KL; the expected
  k3-in-loss gradient is E[R]'s plus beta times the token-level forward-KL gradient), so the
  sampling is taken out and only the parametrisation and the optimiser remain;
* ``tabular``: the same reference *distribution* (the transformer's, copied prefix by prefix
  into a table of logits) trained as a tabular policy, so the network is taken out;
* ``batch``: more samples per update (the sampled estimate's variance and coverage);
* ``exact`` from the stalled point: 300 sampled updates, then exact expected-gradient updates
  (is the stalled point flat for the true gradient, or only for the samples?);
* ``reference``: other random references (other task seeds, a flatter reference).

For each run the diagnostics say where the policy's mass is: ``missing`` is the optimum's mass
on sequences to which the policy gives less than a tenth of the optimum's probability, and
``ref_top`` the policy's mass on the reference's ten likeliest sequences.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from kl_patches import core
from kl_patches.config import KLConfig

from .reproduce_train import (
    Adam,
    Problem,
    TabularModel,
    TinyTransformer,
    ToyTask,
    TrainSettings,
    batch_advantage,
    exact_metrics,
    make_toy,
    optimum,
    policy_loss,
)

BETA = 0.1
"""The coefficient at which the stall was seen."""

TASK = ToyTask(vocab=3, length=4, model="transformer", seed=0)
"""The stalled setting: ``kl-patches reproduce --model transformer`` (V=3, T=4)."""

BASE = TrainSettings(steps=300, batch_size=16, lr=0.003)
"""Its optimisation settings (the transformer's default learning rate)."""


@dataclass(frozen=True)
class Outcome:
    """Exact end state of one run, and where its mass is."""

    experiment: str
    """Which cause the run tests (``baseline``, ``lr``, ``updates``, ``exact``, ...)."""
    label: str
    """What changed, in words."""
    config: str
    """``k1-in-reward`` or ``k3-in-loss`` (sampled or exact expectation)."""
    seed: int
    """Sampling seed (exact runs: 0)."""
    objective: float
    """Final exact E[R] - beta * KL(pi || pi_ref)."""
    best: float
    """Best exact objective over the run."""
    optimum: float
    """beta * log E_ref[exp(R / beta)] for this reference."""
    reverse_kl: float
    """Final KL(pi || pi_ref)."""
    forward_kl: float
    """Final KL(pi_ref || pi)."""
    missing: float
    """The optimum's mass on sequences where pi < pi*/10."""
    ref_top: float
    """The policy's mass on the reference's ten likeliest sequences."""
    objective_at_300: float
    """Exact objective after 300 updates (the original budget)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return asdict(self)


def optimal_policy(problem: Problem, beta: float) -> torch.Tensor:
    """pi*(y) proportional to pi_ref(y) exp(R(y) / beta), over the enumerated sequences."""
    w = problem.ref_logp.sum(-1) + problem.reward / beta
    return torch.softmax(w, dim=0)


def mass_diagnostics(problem: Problem, all_logp: torch.Tensor, beta: float) -> tuple[float, float]:
    """(``missing``, ``ref_top``) of the policy with token log-probs ``all_logp``."""
    p = all_logp.detach().sum(-1).exp()
    star = optimal_policy(problem, beta)
    missing = float(star[p < star / 10].sum())
    top = problem.ref_logp.sum(-1).topk(10).indices
    return missing, float(p[top].sum())


def transformer_log_softmax(model: TinyTransformer) -> torch.Tensor:
    """[N, T, V] full next-token log-probabilities of every enumerated sequence's prefixes."""
    h = model.embed(model.inputs) + model.pos
    h = model.block(h, src_mask=model.causal, is_causal=True)
    return torch.log_softmax(model.head(h), dim=-1)


def tabular_copy(problem: Problem) -> Problem:
    """The same task with a tabular policy whose reference is the transformer's distribution."""
    assert isinstance(problem.ref_model, TinyTransformer)
    with torch.no_grad():
        lsm = transformer_log_softmax(problem.ref_model)
    enum = problem.enum
    logits = torch.zeros(enum.policy.num_prefixes, enum.policy.vocab, dtype=lsm.dtype)
    logits[enum.prefix_ids.flatten()] = lsm.reshape(-1, lsm.shape[-1])
    model = TabularModel(enum, logits)
    ref_model = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        ref_logp = ref_model.all_token_logp()
    return replace(problem, model=model, ref_model=ref_model, ref_logp=ref_logp)


def expected_loss(problem: Problem, all_logp: torch.Tensor, config: KLConfig) -> torch.Tensor:
    """A surrogate whose gradient is the exact *expected* gradient of ``config``'s update.

    Reward side: the score-function term, exactly (sum_y p(y) (R(y) - penalty(y)) grad log p).
    Loss side: the path-wise term on fixed samples, exactly (sum_y p(y) grad K(y)). The
    leave-one-out baseline has zero mean and is left out. Penalties and terms from the core.
    """
    mask = torch.ones_like(all_logp, dtype=torch.bool)
    seq = all_logp.sum(-1)
    p = seq.detach().exp()
    shaped = problem.reward.to(all_logp.dtype)
    if config.has_reward:
        shaped = shaped - core.reward_penalty(all_logp.detach(), problem.ref_logp, mask, config)
    loss = -(p * shaped * seq).sum()
    if config.has_loss:
        terms = core.kl_terms(all_logp, problem.ref_logp, mask, config).sum(-1)
        loss = loss + config.loss_coef_value * (p * terms).sum()
    return loss


def _outcome(
    experiment: str,
    label: str,
    config: str,
    seed: int,
    problem: Problem,
    curve: list[float],
    final_logp: torch.Tensor,
    rkl: float,
    fkl: float,
) -> Outcome:
    missing, ref_top = mass_diagnostics(problem, final_logp, BETA)
    return Outcome(
        experiment=experiment,
        label=label,
        config=config,
        seed=seed,
        objective=curve[-1],
        best=max(curve),
        optimum=optimum(problem, BETA),
        reverse_kl=rkl,
        forward_kl=fkl,
        missing=missing,
        ref_top=ref_top,
        objective_at_300=curve[min(300, len(curve) - 1)],
    )


def sampled(
    experiment: str,
    label: str,
    config: str,
    task: ToyTask,
    settings: TrainSettings,
    seed: int,
    tabular: bool = False,
) -> Outcome:
    """The sampled on-policy update of ``kl-patches reproduce`` (REINFORCE, leave-one-out)."""
    problem = make_toy(task)
    if tabular:
        problem = tabular_copy(problem)
    cfg = KLConfig.parse(config, coef=BETA)
    curve, final, rkl, fkl = sampled_loop(problem, cfg, settings, seed)
    return _outcome(experiment, label, config, seed, problem, curve, final, rkl, fkl)


def sampled_loop(
    problem: Problem, cfg: KLConfig, settings: TrainSettings, seed: int
) -> tuple[list[float], torch.Tensor, float, float]:
    """On-policy REINFORCE + leave-one-out, the same update and random draws as
    :func:`.reproduce_train.train` with one update per batch, on any ``problem`` (a tabular
    copy too). Returns (exact objective curve, final token log-probs, reverse KL, forward KL)."""

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = problem.model
        opt = Adam(list(model.parameters()), lr=settings.lr)
        gen = torch.Generator().manual_seed(10_000 + seed)
        curve: list[float] = []
        for step in range(settings.steps + 1):
            all_logp = model.all_token_logp()
            er, rkl, fkl = exact_metrics(problem, all_logp)
            curve.append(er - BETA * rkl)
            if step == settings.steps:
                return curve, all_logp.detach(), rkl, fkl
            probs = all_logp.detach().sum(-1).exp()
            idx = torch.multinomial(probs, settings.batch_size, replacement=True, generator=gen)
            old = all_logp.detach()[idx]
            adv = batch_advantage(cfg, old, old, problem.ref_logp[idx], problem.reward[idx])
            loss = policy_loss(cfg, all_logp[idx], old, problem.ref_logp[idx], adv, settings.clip)
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    raise AssertionError("unreachable")


def exact_loop(
    problem: Problem, cfg: KLConfig, settings: TrainSettings
) -> tuple[list[float], torch.Tensor, float, float]:
    """Adam on the exact expected gradient of ``cfg`` (:func:`expected_loss`), from wherever
    ``problem.model`` is. Returns what :func:`sampled_loop` returns."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = problem.model
        opt = Adam(list(model.parameters()), lr=settings.lr)
        curve: list[float] = []
        for step in range(settings.steps + 1):
            all_logp = model.all_token_logp()
            er, rkl, fkl = exact_metrics(problem, all_logp)
            curve.append(er - BETA * rkl)
            if step == settings.steps:
                return curve, all_logp.detach(), rkl, fkl
            loss = expected_loss(problem, all_logp, cfg)
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    raise AssertionError("unreachable")


def exact(
    experiment: str,
    label: str,
    config: str,
    task: ToyTask,
    settings: TrainSettings,
    tabular: bool = False,
) -> Outcome:
    """Adam on the exact expected gradient of ``config`` (no sampling), from the reference."""
    cfg = KLConfig.parse(config, coef=BETA)
    problem = make_toy(task)
    if tabular:
        problem = tabular_copy(problem)
    curve, final, rkl, fkl = exact_loop(problem, cfg, settings)
    return _outcome(experiment, label, config, 0, problem, curve, final, rkl, fkl)


def sampled_then_exact(
    experiment: str,
    label: str,
    config: str,
    task: ToyTask,
    settings: TrainSettings,
    seed: int,
    extra: int,
) -> Outcome:
    """``settings.steps`` sampled updates, then ``extra`` exact expected-gradient updates
    (fresh Adam state) from where the sampled run stopped."""
    problem = make_toy(task)
    cfg = KLConfig.parse(config, coef=BETA)
    first, _, _, _ = sampled_loop(problem, cfg, settings, seed)
    curve, final, rkl, fkl = exact_loop(problem, cfg, replace(settings, steps=extra))
    return _outcome(experiment, label, config, seed, problem, first + curve[1:], final, rkl, fkl)


# ---------------------------------------------------------------------------------- the plan
Job = tuple[str, str, str, str, ToyTask, TrainSettings, int, bool]
"""(kind, experiment, label, config, task, settings, seed, tabular); kind is ``sampled``,
``exact`` or ``resume`` (sampled, then exact from there)."""


def jobs(seeds: int = 4, long_steps: int = 3000) -> list[Job]:
    """Every run of the stall experiments (``seeds`` sampling seeds per sampled setting)."""
    out: list[Job] = []

    def both(experiment: str, label: str, task: ToyTask, settings: TrainSettings) -> None:
        for config in ("k1-in-reward", "k3-in-loss"):
            for s in range(seeds):
                out.append(("sampled", experiment, label, config, task, settings, s, False))

    both("baseline", "as in reproduce: lr 0.003, 300 updates", TASK, BASE)
    for lr, steps in ((0.001, 300), (0.001, 900), (0.0003, long_steps)):
        both("lr", f"lr {lr:g}, {steps} updates", TASK, replace(BASE, lr=lr, steps=steps))
    both("updates", f"lr 0.003, {long_steps} updates", TASK, replace(BASE, steps=long_steps))
    for bsz in (64, 256):
        both("batch", f"{bsz} samples per update", TASK, replace(BASE, batch_size=bsz))
    for steps in (300, long_steps):
        for config in ("k1-in-reward", "k3-in-loss"):
            label = f"exact expected gradient, {steps} updates"
            out.append(
                ("exact", "exact", label, config, TASK, replace(BASE, steps=steps), 0, False)
            )
    label = "300 sampled updates, then 300 exact expected-gradient updates"
    for s in range(seeds):
        out.append(("resume", "exact", label, "k1-in-reward", TASK, BASE, s, False))
    for lr in (0.05, 0.003):
        label = f"tabular policy, transformer's reference, lr {lr:g}"
        for config in ("k1-in-reward", "k3-in-loss"):
            for s in range(seeds):
                out.append(
                    ("sampled", "tabular", label, config, TASK, replace(BASE, lr=lr), s, True)
                )
    for task_seed in (1, 2):
        both(
            "reference",
            f"another random reference (task seed {task_seed})",
            replace(TASK, seed=task_seed),
            BASE,
        )
    both(
        "reference",
        "a flatter random reference (ref_scale 0.5)",
        replace(TASK, ref_scale=0.5),
        BASE,
    )
    return out


def run_job(job: Job) -> Outcome:
    """Run one job of :func:`jobs`."""
    kind, experiment, label, config, task, settings, seed, tabular = job
    if kind == "exact":
        return exact(experiment, label, config, task, settings, tabular)
    if kind == "resume":
        return sampled_then_exact(experiment, label, config, task, settings, seed, settings.steps)
    return sampled(experiment, label, config, task, settings, seed, tabular)


def format_markdown(outcomes: list[Outcome]) -> str:
    """One row per (experiment, label, config): mean +- std over seeds of the exact metrics."""
    import statistics

    def ms(values: list[float]) -> str:
        if len(values) == 1:
            return f"{values[0]:.3f}"
        return f"{statistics.fmean(values):.3f} ± {statistics.stdev(values):.3f}"

    keys: list[tuple[str, str, str]] = []
    for o in outcomes:
        if (o.experiment, o.label, o.config) not in keys:
            keys.append((o.experiment, o.label, o.config))
    lines = [
        "| experiment | setting | config | runs | objective at 300 | final objective | optimum "
        "| reverse KL | forward KL | optimum's mass missing | mass on ref's top 10 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for exp, label, config in keys:
        g = [o for o in outcomes if (o.experiment, o.label, o.config) == (exp, label, config)]
        lines.append(
            f"| {exp} | {label} | {config} | {len(g)} | {ms([o.objective_at_300 for o in g])} "
            f"| {ms([o.objective for o in g])} | {statistics.fmean(o.optimum for o in g):.3f} "
            f"| {ms([o.reverse_kl for o in g])} | {ms([o.forward_kl for o in g])} "
            f"| {ms([o.missing for o in g])} | {ms([o.ref_top for o in g])} |"
        )
    return "\n".join(lines)
