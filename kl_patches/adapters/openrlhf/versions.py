"""What kl-patches knows about OpenRLHF itself: supported versions, flag history, constants.

Nothing here imports OpenRLHF. The numbers are those of OpenRLHF 0.11.2's code
(``openrlhf/models/utils.py``, ``cli/train_ppo_ray.py``).

The patch runs on OpenRLHF 0.8.0-0.11.x (:data:`SUPPORT`); the compat session tests the oldest
release, every release where something the patch touches changed (:data:`CHANGE_POINTS`) and
the newest (:data:`COMPAT_MATRIX`); a newer release is patched when every behaviour canary
passes (one warning). Where OpenRLHF itself computes something else on older releases (no value
clamp before 0.8.6: :func:`native_kl_clamp`), the canaries, the translation and the tests ask
this module for the release's own behaviour.
"""

from __future__ import annotations

from dataclasses import replace
from importlib import metadata

from packaging.version import Version

from kl_patches.adapters.support import CompatPlan, CompatStep, VersionSupport
from kl_patches.adapters.support_table import SupportRow

RELEASES: tuple[str, ...] = (
    "0.8.0", "0.8.0.post1", "0.8.1", "0.8.1.post1", "0.8.2", "0.8.3", "0.8.4", "0.8.5", "0.8.6",
    "0.8.7", "0.8.8", "0.8.9", "0.8.9.post1", "0.8.10", "0.8.11", "0.9.0", "0.9.1", "0.9.1.post1",
    "0.9.2", "0.9.3", "0.9.4", "0.9.5", "0.9.6", "0.9.7", "0.9.8", "0.9.9", "0.9.10", "0.10.0",
    "0.10.1", "0.10.1.post1", "0.10.1.post2", "0.10.2", "0.10.3", "0.10.4", "0.11.0", "0.11.1",
    "0.11.2",
)  # fmt: skip
"""Every OpenRLHF release of the supported range, ascending."""

CHANGE_POINTS: tuple[tuple[str, str], ...] = (
    (
        "0.8.3",
        "the scalar reward moves from info['reward'] to Experience.rewards (a keyword dataclass "
        "from here); the sequence-shaped penalty follows it",
    ),
    (
        "0.8.6",
        "every estimator value clamped to +-10 (no clamp before: the canaries and the native "
        "reading follow the release); training_step(experience, kl_ctl, step) (no step before)",
    ),
    (
        "0.9.8",
        "training_step returns {'metrics', 'weights'} (a flat dict of floats before, where the "
        "off-policy path's own metrics are not added); the patch passes its status through",
    ),
    (
        "0.9.9",
        "compute_advantages_and_returns(self, experiences) (before: **kwargs, which the wrapper "
        "passes on); compute_approx_kl raises on an unknown estimator",
    ),
    (
        "0.10.2",
        "flags and args dotted (--algo.kl.*, args.algo.kl.use_loss / init_coef / estimator) "
        "instead of flat (--use_kl_loss, --init_kl_coef, --kl_estimator); the patch reads both",
    ),
    (
        "0.10.3",
        "training_step's KL loss through models.loss.aggregate_loss(kl, mask, **loss_batch_info) "
        "instead of masked_mean(kl, mask); the patch wraps whichever ppo_actor has",
    ),
    (
        "0.10.4",
        "training_step gains loss_batch_info (a step-global token count); the wrapper passes "
        "through what OpenRLHF passes",
    ),
    (
        "0.11.1",
        "compute_approx_kl gains log_probs_old and unbiased_gradient (kl_estimator no longer the "
        "third positional); --algo.kl.unbiased_gradient",
    ),
    (
        "0.11.2",
        "k3 log-ratio clamped at -10 before exp (value unchanged); rewards cast to >= fp32 in "
        "compute_advantages_and_returns; newest release of the range",
    ),
)
"""Releases after 0.8.0 where something the patch touches changed (read from each wheel; the
other 0.8.x and 0.9.x releases, 0.10.0, 0.10.1-0.10.1.post2 and 0.11.0 change nothing it
touches: ``compat.CHANGE_POINTS`` lists what they change elsewhere)."""

TOO_OLD = (
    "before 0.8.0: the 0.7.x trainers were not read against the patch (their hook points "
    "differ: 0.7.0's training_step takes no kl_ctl). `kl-patches audit` reads these launches"
)
"""Why OpenRLHF < 0.8.0 is refused."""

VALUE_CLAMP_SINCE = "0.8.6"
"""First release whose ``compute_approx_kl`` clamps every estimator value to +-10 (the history
row ``estimator.value_clamp``; 0.8.0-0.8.5 return the raw estimator)."""

REWARD_FIELD_SINCE = "0.8.3"
"""First release whose ``Experience`` carries the scalar reward as ``rewards`` (read by
``compute_advantages_and_returns``); 0.8.0-0.8.2 read ``info["reward"]``."""


def native_kl_clamp(version: str | None = None) -> float | None:
    """The clamp OpenRLHF ``version`` puts on every estimator value: 10 from 0.8.6, None before
    (``None``: the newest tested release's)."""
    found = Version(version or TESTED_VERSION)
    return NATIVE_KL_CLAMP if found >= Version(VALUE_CLAMP_SINCE) else None


PINS_08: tuple[str, ...] = ("transformers==4.51.3", "deepspeed==0.16.7", "datasets==3.6.0")
"""What the compat venv switches to for OpenRLHF 0.8.x: 0.8.0's own transformers and deepspeed
pins (0.8.x pins transformers 4.51-4.56, deepspeed 0.16-0.17), and a datasets that imports with
the huggingface-hub < 1.0 transformers 4.51 takes (datasets 5 needs huggingface-hub >= 1.31)."""

PINS_BACK: tuple[str, ...] = ("-U", "transformers==5.15.0", "deepspeed==0.19.6", "datasets")
"""Back to the 0.11.2 set of :data:`COMPAT_PLAN`'s base for 0.9.0 on (0.9.0 itself pins
transformers 4.57; the compat session runs 0.9.0-0.11.2 on transformers 5.15.0, as before)."""

PIN_SWITCHES: dict[str, tuple[str, ...]] = {"0.8.0": PINS_08, "0.9.0": PINS_BACK}
"""Release -> the pins its compat step installs after it (one switch there and one back). On
2026-12-07 (shared 2-core VM, load 10-20, warm pip cache) each switch took 90-120 s wall, 14-19 s
CPU; ``nox -s "compat(library='openrlhf')"`` took 26 min cold with the three 0.8.x steps and the
six tests that now run on 0.9.0-0.10.1 too, against 11 min for the plan before (run right
after, at load 10-13)."""

SWEEP_ONLY: dict[str, str] = {
    "0.8.3": "its two sides are each tested in CI: 0.8.0 reads the scalar reward from "
    "info['reward'], 0.8.6 from Experience.rewards (CI time: .ci/run stays under 45 min)",
}
"""Change points left to ``nox -s compat_sweep``, with the reason (the releases around them in
:data:`COMPAT_MATRIX` test both behaviours)."""

COMPAT_MATRIX: tuple[str, ...] = tuple(
    sorted(
        {RELEASES[0], *(r for r, _ in CHANGE_POINTS if r not in SWEEP_ONLY), *PIN_SWITCHES},
        key=Version,
    )
)
"""The releases ``nox -s compat`` tests: the oldest, the change points (0.11.2, the newest, is
one) but those of :data:`SWEEP_ONLY`, and where the venv's pins switch (0.9.0)."""

SUPPORT = VersionSupport(library="openrlhf", supported=">=0.8.0,<0.12", tested=COMPAT_MATRIX)
"""Patched OpenRLHF versions and those tested; ``KL_PATCHES_FORCE=1`` overrides."""

SIGNATURES: dict[str, tuple[str, ...]] = {
    "compute_approx_kl": (
        "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, kl_estimator: "
        "str='k1') -> torch.Tensor",
        "compute_approx_kl(log_probs: torch.Tensor, log_probs_base: torch.Tensor, log_probs_old: "
        "Optional[torch.Tensor]=None, kl_estimator: str='k1', unbiased_gradient: bool=False) -> "
        "torch.Tensor",
    ),
    "RemoteExperienceMaker.compute_advantages_and_returns": (
        "compute_advantages_and_returns(self, experiences: List[Experience], **kwargs) -> "
        "Tuple[List[Experience], List[torch.Tensor]]",
        "compute_advantages_and_returns(self, experiences: List[Experience]) -> List[Experience]",
    ),
    "aggregate_loss": (
        "aggregate_loss(loss: torch.Tensor, loss_mask: torch.Tensor, token_level_loss: bool=True, "
        "dp_size: int=1, batch_num_tokens: Optional[float]=None, global_batch_size: "
        "Optional[float]=None) -> torch.Tensor",
    ),
    "masked_mean": (
        "masked_mean(tensor: torch.Tensor, mask: Optional[torch.Tensor], dim: int=None) -> "
        "torch.Tensor",
    ),
    "ActorPPOTrainer.training_step": (
        "training_step(self, experience: Experience, kl_ctl: float) -> Dict[str, float]",
        "training_step(self, experience: Experience, kl_ctl: float, step: int) -> Dict[str, float]",
        "training_step(self, experience: Experience, kl_ctl: float, step: int, loss_batch_info: "
        "Optional[Dict]=None) -> Dict[str, float]",
    ),
}
"""The signatures of every patched function in the releases 0.8.0-0.11.2 (read with ``ast``
from each wheel: compute_advantages_and_returns changes in 0.9.9, compute_approx_kl in 0.11.1,
training_step in 0.8.6 and 0.10.4, aggregate_loss is new in 0.10.3); the patch refuses another
call shape."""

_T = "tests/adapters/openrlhf/"
KNOWN_DIFFERENCES: tuple[tuple[str, str, str], ...] = (
    (
        "<0.11.1",
        _T + "test_regression.py::test_unbiased_gradient_is_importance_weighted_k3",
        "--algo.kl.unbiased_gradient and compute_approx_kl's log_probs_old exist from 0.11.1",
    ),
    (
        "<0.10.4",
        _T + "test_patch.py::test_sum_aggregation_uses_openrlhf_global_sample_count",
        "training_step takes loss_batch_info (the step-global counts) from 0.10.4",
    ),
    (
        "<0.10.2",
        _T + "test_patch.py::test_real_make_experience_path",
        "the test drives 0.10.2+'s make_experience (dotted args, its sample layout); the other "
        "tests build each release's own args (flat before 0.10.2) and run everywhere",
    ),
)
"""(releases, test node-id prefix, why): tests written against 0.11.2 whose assertion does not
hold on older releases because OpenRLHF differs there; the compat session deselects them for
those releases and ``test_compat.py`` asserts each difference."""


def deselected(version: str) -> tuple[str, ...]:
    """The :data:`KNOWN_DIFFERENCES` tests that do not apply to OpenRLHF ``version``."""
    from packaging.specifiers import SpecifierSet

    return tuple(t for spec, t, _ in KNOWN_DIFFERENCES if SpecifierSet(spec).contains(version))


def _reason(version: str) -> str:
    if version == RELEASES[0]:
        return f"oldest release of the range, with its own pins ({', '.join(PINS_08[:2])})"
    if version in SWEEP_ONLY:
        return f"sweep only: {dict(CHANGE_POINTS)[version]}"
    if version in dict(CHANGE_POINTS):
        return dict(CHANGE_POINTS)[version]
    if version == "0.9.0":
        return "the venv's transformers and deepspeed back to the 0.11.2 set (KL code as 0.8.11)"
    earlier = [v for v in COMPAT_MATRIX if Version(v) < Version(version)]
    return f"sweep only: between change points, the surface of {earlier[-1]}"


def _steps(releases: tuple[str, ...]) -> tuple[CompatStep, ...]:
    return tuple(
        CompatStep(
            v,
            (("--no-deps", f"openrlhf=={v}"), *((PIN_SWITCHES[v],) if v in PIN_SWITCHES else ())),
            _reason(v),
            deselected(v),
        )
        for v in releases
    )


COMPAT_PLAN = CompatPlan(
    library="openrlhf",
    base=(
        "deepspeed==0.19.6",
        "transformers==5.15.0",
        "peft",
        "ray==2.55.0",
        "pylatexenc",
        "torchdata",
        "aiohttp",
        "pillow",
        "datasets",
        "einops",
        "pytest>=8",
        "pyyaml",
    ),
    tests=(
        "tests/adapters/openrlhf/test_compat.py",
        "tests/adapters/openrlhf/test_regression.py",
        "tests/adapters/openrlhf/test_patch.py",
    ),
    steps=_steps(COMPAT_MATRIX),
    install_env=(("DS_BUILD_OPS", "0"),),
)
"""``nox -s compat`` for OpenRLHF: the 0.11.2 CPU set (OpenRLHF --no-deps, deepspeed built as pure
Python, the libraries its KL modules import; vllm and flash_attn as the tests' import-only
stand-ins), then each release --no-deps; 0.8.x on 0.8.0's pins (:data:`PIN_SWITCHES`)."""

SWEEP_PLAN = replace(COMPAT_PLAN, steps=_steps(RELEASES))
"""``nox -s compat_sweep``: :data:`COMPAT_PLAN` on every release of the range (37; not run by
``.ci/run``). Its last run is :data:`SWEEP`."""

TESTED_VERSION = "0.11.2"
"""The OpenRLHF release whose defaults and code this adapter is tested against."""
DOTTED_SINCE = "0.10.2"
"""First release with dotted flag names (``--algo.kl.*``)."""
UNBIASED_GRADIENT_SINCE = "0.11.1"
"""First release with ``--algo.kl.unbiased_gradient`` (read from 0.11.1's ``train_ppo_ray``)."""
NATIVE_KL_CLAMP = 10.0
"""OpenRLHF clamps every estimator value to [-10, 10] (``compute_approx_kl``)."""
IS_WEIGHT_CLIP = 10.0
"""Upper clip of the importance weight under ``--algo.kl.unbiased_gradient``."""
GROUP_ESTIMATORS = ("rloo", "reinforce_baseline", "group_norm", "dr_grpo", "flash_reinforce")
WHITENED_ESTIMATORS = ("gae", "reinforce", "reinforce_baseline")
ADVANTAGE_ESTIMATORS = ("gae", "reinforce", *GROUP_ESTIMATORS)


def installed_version() -> str | None:
    """OpenRLHF's installed version from its metadata (not imported); None if absent."""
    try:
        return metadata.version("openrlhf")
    except metadata.PackageNotFoundError:
        return None


SWEEP: dict[str, tuple[str, str]] = {
    "0.8.2": ("71 passed, 6 deselected (transformers 4.51.3)", "2026-12-07"),
    "0.8.5": ("71 passed, 6 deselected (transformers 4.51.3)", "2026-12-07"),
    "0.8.11": ("71 passed, 6 deselected (transformers 4.51.3)", "2026-12-07"),
    "0.10.1": ("32 passed, 43 deselected (flat args)", "2026-12-01"),
    "0.10.1.post1": ("32 passed, 43 deselected (flat args)", "2026-12-01"),
    "0.10.1.post2": ("32 passed, 43 deselected (flat args)", "2026-12-01"),
    "0.11.0": ("72 passed, 3 deselected", "2026-12-01"),
}
"""Release -> (result of the compat tests, ``COMPAT_PLAN.tests`` with :func:`deselected` applied,
run once against it in the compat venv; the day of that run): releases of the range outside
:data:`COMPAT_MATRIX`, recorded by hand from that run (``nox -s compat_sweep`` reruns all)."""


def support_rows() -> tuple[SupportRow, ...]:
    """The OpenRLHF support table (README, docs/openrlhf.md), one row per change point."""
    reasons = dict(CHANGE_POINTS)
    out = [
        SupportRow(
            "< 0.8.0",
            "see `kl-patches audit`",
            f"refused (`KL_PATCHES_FORCE=1` runs anyway): {TOO_OLD}",
            "refused",
        )
    ]
    bounds = {*COMPAT_MATRIX, *reasons}  # a row per tested release and per change point
    starts = sorted(RELEASES.index(v) for v in bounds)
    for i, start in enumerate(starts):
        segment = RELEASES[start : (starts[i + 1] if i + 1 < len(starts) else len(RELEASES))]
        first = segment[0]
        flags = (
            "--algo.kl.*"
            if Version(first) >= Version(DOTTED_SINCE)
            else "--init_kl_coef, --kl_estimator, --use_kl_loss"
        )
        clamp = (
            "every value clamped to +-10"
            if native_kl_clamp(first)
            else "no clamp on the values (clamped to +-10 from 0.8.6)"
        )
        native = (
            f"k1/k2/k3 ({flags}) in the reward, per token after the baseline, or in the loss as a "
            f"token mean; {clamp}"
        )
        if Version(first) >= Version(UNBIASED_GRADIENT_SINCE):
            native += "; --algo.kl.unbiased_gradient"
        patched = "any KLConfig" + (
            f"; here: {reasons[first].split(';')[0]}" if first in reasons else ""
        )
        in_ci = first in COMPAT_MATRIX
        once = [v for v in (segment[1:] if in_ci else segment) if v in SWEEP]
        tested = (
            f"CI (`nox -s compat`): {first}"
            if in_ci
            else f"not in CI ({SWEEP_ONLY.get(first, 'between tested releases')})"
        )
        if in_ci and Version(first) < Version("0.9.0"):
            tested += f" ({', '.join(p.replace('==', ' ') for p in PINS_08[:2])})"
        if once:
            days = " and ".join(sorted({SWEEP[v][1] for v in once}))
            tested += f"; once: {', '.join(once)} (sweep of {days})"
        span = first if len(segment) == 1 else f"{first}-{segment[-1]}"
        out.append(SupportRow(span, native, patched, tested))
    out.append(
        SupportRow(
            ">= 0.12.0",
            "-",
            "runs when every behaviour canary passes, with one warning; refused otherwise",
            "canaries at `apply()`",
        )
    )
    return tuple(out)
