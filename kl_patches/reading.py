"""What an adapter reports when it reads a library's configuration (the audit's input).

Each adapter turns a library's config (YAML, Hydra overrides, CLI flags, a trainer config) into a
:class:`NativeReading`: the :class:`~kl_patches.config.KLConfig` the library actually runs, whether
its updates are off-policy, the library-specific :class:`Finding` s, and the exact native flags
that would give k1-in-reward at the same coefficient scale. The audit adds the theory's verdict;
it holds no library knowledge of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kl_patches.config import KLConfig

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """One library-specific observation about a KL setup."""

    code: str
    """Stable identifier, e.g. ``verl.gdpo_drops_kl`` or ``token_mean_loss``."""
    severity: str
    """``error`` (the KL is silently dropped or the objective is not what the user set),
    ``warning`` (biased or changed objective), or ``info``."""
    message: str
    """What is wrong and why it matters, in one or two sentences."""
    fix: str = ""
    """The exact native flag(s) or override(s) that fix it, when there is one."""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(
                f"Finding.severity={self.severity!r} is not valid; choose one of {list(SEVERITIES)}"
            )


@dataclass(frozen=True)
class NativeReading:
    """One trainer's KL setup as read from a library's configuration."""

    library: str
    """``verl``, ``openrlhf`` or ``trl``."""
    version: str | None
    """The library version the reading assumes (installed or the tested one)."""
    trainer: str
    """The trainer or entry point, e.g. ``GRPOTrainer`` or ``main_ppo (grpo)``."""
    config: KLConfig
    """The KLConfig the library actually runs (placement ``none`` when the KL is off)."""
    off_policy: bool
    """True when the policy takes several updates per batch or learns from stale rollouts."""
    settings: dict[str, object] = field(default_factory=dict)
    """The raw library settings that were read, for the report."""
    findings: tuple[Finding, ...] = ()
    """Library-specific findings; the theory's verdict is added by the audit."""
    fix: tuple[str, ...] = ()
    """Native flags/overrides giving k1-in-reward with the same coefficient scale."""
