"""KLConfig <-> TRL's own options: ``KLArguments`` for ``TrlParser``, and what a TRL config runs.

A TRL YAML config (``--config recipe.yaml``) writes the KL settings under a ``kl:`` mapping with
the flag names of the launcher's ``--kl NAME --kl.FIELD V`` (``name``, ``coef``, ``estimator``,
``clamp``, ..., and ``full_monitor``): :data:`KL_BLOCK`, :func:`flatten_kl_block`.

``KLArguments`` is generated from :class:`~kl_patches.KLConfig`'s fields (one ``kl_<field>`` per
field; ``kl_clamp`` keeps its name) plus ``kl_full_monitor``. ``TrlParser((GRPOConfig,
KLArguments, ...))`` accepts them as flat keys of a YAML config and as ``--kl_<field>`` flags:
the deprecated spellings, which the launcher still reads (with a warning naming the line).
:meth:`KLArguments.to_config` validates and returns the KLConfig; the defaults are KLConfig's.

:func:`from_trl_config` says which KLConfig a ``GRPOConfig``/``RLOOConfig`` (or any object with
the same attributes), a trainer, or a dict such as a TRL YAML config runs. Native TRL 1.16: GRPO
runs k3 in the loss (times pi/pi_old when ``use_bias_correction_kl``), reduced like its
``loss_type``, or nothing when ``beta == 0`` (its default); RLOO runs k1 in the reward, summed
over the sequence, before the leave-one-out baseline (``beta`` default 0.05). Pure parsing with
the defaults in :mod:`.versions`: TRL need not be installed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from kl_patches.adapters import flags
from kl_patches.config import KLConfig

from .versions import GRPO_DEFAULTS, GRPO_LOSS_AGGREGATION, RLOO_DEFAULTS

MONITOR_FIELD = "kl_full_monitor"
"""The one KLArguments field that is not a KLConfig field (a monitor switch)."""

KL_BLOCK = "kl"
"""The key of a TRL YAML config whose mapping holds the KL settings (``kl: {coef: 0.05}``)."""

MONITOR_SWITCH = "full_monitor"
"""The monitor switch's name under ``kl:`` and after ``--kl.`` (``--kl.full_monitor``)."""


def argument_name(field: str) -> str:
    """``coef`` -> ``kl_coef``; a field already starting with ``kl_`` keeps its name."""
    return field if field.startswith("kl_") else f"kl_{field}"


_TYPES: dict[str, Any] = {"choice": str, "float": float, "optional_float": Optional[float]}  # noqa: UP045 - HfArgumentParser needs typing.Optional


def _kl_arguments() -> type:
    specs = [
        (
            argument_name(item.name),
            _TYPES[item.kind],
            dataclasses.field(
                default=item.default,
                metadata={
                    "help": item.help
                    + (f" Choices: {', '.join(item.choices)}." if item.choices else "")
                },
            ),
        )
        for item in flags.fields()
    ]
    specs.append(
        (
            MONITOR_FIELD,
            bool,
            dataclasses.field(
                default=False,
                metadata={
                    "help": "Also log kl_patches/full_vocab, the exact KL over the vocabulary (two "
                    "extra forwards per generation batch). A monitor only: not part of the KL "
                    "config."
                },
            ),
        )
    )

    def to_config(self: Any) -> KLConfig:
        """The validated :class:`~kl_patches.KLConfig` (raises ValueError naming valid choices)."""
        return KLConfig.from_dict(
            {item.name: getattr(self, argument_name(item.name)) for item in flags.fields()}
        )

    def from_config(cls: Any, config: KLConfig) -> Any:
        """The arguments that reproduce ``config``."""
        return cls(**{argument_name(k): v for k, v in config.to_dict().items()})

    cls = dataclasses.make_dataclass(
        "KLArguments",
        specs,
        namespace={"to_config": to_config, "from_config": classmethod(from_config)},
    )
    cls.__module__ = __name__
    return cls


KLArguments: Any = _kl_arguments()
KLArguments.__doc__ = """KL regulariser options (kl-patches) for ``TrlParser``: one ``kl_<field>``
per KLConfig field, plus ``kl_full_monitor``."""

KL_KEYS: tuple[str, ...] = tuple(argument_name(item.name) for item in flags.fields())
"""The TRL config keys that carry a KLConfig (``kl_estimator``, ``kl_coef``, ...)."""

FIELD_OF: dict[str, str] = {argument_name(item.name): item.name for item in flags.fields()}
"""TRL config key -> KLConfig field (``kl_coef`` -> ``coef``, ``kl_clamp`` -> ``kl_clamp``)."""

_RLOO_ONLY = ("normalize_advantages", "reward_clip_range")


def kl_block_tokens(
    block: Any, where: str = "TRL config", lines: dict[str, int] | None = None
) -> tuple[list[str], bool | None]:
    """A ``kl:`` block (a mapping, or a short name) as ``--kl NAME --kl.FIELD V`` tokens and
    the ``full_monitor`` switch (None when not set). ValueError naming ``where`` and the valid
    keys for anything else."""
    if isinstance(block, str):
        block = {"name": block}
    if not isinstance(block, dict):
        raise ValueError(
            f"{where}: kl: must be a mapping of KL settings (coef: 0.05, estimator: k1, ...) or "
            f"a short name such as k1-in-reward, got {block!r}"
        )
    mapping = dict(block)
    monitor = mapping.pop(MONITOR_SWITCH, None)
    if monitor is not None and not isinstance(monitor, bool):
        raise ValueError(f"{where}: kl: {MONITOR_SWITCH}: {monitor!r} is not valid; use true/false")
    return flags.tokens_from_mapping(mapping, where, lines), monitor


def kl_block_values(
    block: Any, where: str = "TRL config", lines: dict[str, int] | None = None
) -> tuple[dict[str, Any], bool | None]:
    """A ``kl:`` block as KLArguments keys (``kl_coef``, ...) and the ``full_monitor`` switch
    (see :func:`kl_block_tokens`)."""
    tokens, monitor = kl_block_tokens(block, where, lines)
    name, values = flags.parse_tokens(tokens)
    if name is not None:
        short = KLConfig.parse(name)
        values.setdefault("placement", short.placement)
        if short.placement != "none":
            values.setdefault("estimator", short.estimator)
    return {argument_name(k): v for k, v in values.items()}, monitor


def flatten_kl_block(source: dict[str, Any]) -> dict[str, Any]:
    """``source`` with its ``kl:`` block as flat ``kl_*`` keys (the block wins over flat keys of
    the same setting); unchanged without a block. For the reader: no deprecation warnings."""
    if KL_BLOCK not in source:
        return source
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        values, monitor = kl_block_values(source[KL_BLOCK])
    out = {k: v for k, v in source.items() if k != KL_BLOCK}
    out.update(values)
    if monitor is not None:
        out[MONITOR_FIELD] = monitor
    return out


def kind_of(source: Any) -> str:
    """``GRPO`` or ``RLOO``: the trainer a config, trainer or dict belongs to."""
    if isinstance(source, dict):
        name = str(source.get("trainer", "")).lower()
        if name in ("grpo", "rloo"):
            return name.upper()
        if name:
            raise ValueError(f"trainer={name!r} is not valid; choose one of ['grpo', 'rloo']")
        return "RLOO" if any(k in source for k in _RLOO_ONLY) else "GRPO"
    cls_names = [c.__name__ for c in type(source).__mro__]
    if any(n.startswith("RLOO") for n in cls_names):
        return "RLOO"
    if any(n.startswith("GRPO") for n in cls_names):
        return "GRPO"
    return "RLOO" if any(hasattr(source, k) for k in _RLOO_ONLY) else "GRPO"


def settings_of(source: Any, kind: str) -> dict[str, object]:
    """The KL-relevant TRL settings of ``source`` with the recorded defaults filled in."""
    defaults = GRPO_DEFAULTS if kind == "GRPO" else RLOO_DEFAULTS
    args = getattr(source, "args", source)  # a trainer carries its config in .args
    out: dict[str, object] = {}
    for key, default in defaults.items():
        if isinstance(args, dict):
            out[key] = args.get(key, default)
        else:
            out[key] = getattr(args, key, default)
    if kind == "GRPO" and isinstance(out["scale_rewards"], bool):
        out["scale_rewards"] = "group" if out["scale_rewards"] else "none"
    return out


def patched_config(source: Any) -> KLConfig | None:
    """The kl-patches KLConfig a trainer or a dict with ``kl_*`` keys runs, else None."""
    config = source.__dict__.get("_kl_config") if hasattr(source, "__dict__") else None
    if isinstance(config, KLConfig):
        return config
    if isinstance(source, dict):
        source = flatten_kl_block(source)
    if isinstance(source, dict) and any(k in source for k in KL_KEYS):
        arguments = KLArguments(**{k: source[k] for k in KL_KEYS if k in source})
        result: KLConfig = arguments.to_config()
        return result
    return None


def native_config(kind: str, s: dict[str, object]) -> KLConfig:
    """The KLConfig TRL's own code runs for the settings ``s`` of a ``kind`` trainer."""
    beta = float(s["beta"])  # type: ignore[arg-type]
    if beta == 0.0:
        return KLConfig(placement="none", coef=0.0)
    if kind == "RLOO":
        return KLConfig(estimator="k1", placement="reward", coef=beta)
    loss_type = str(s["loss_type"])
    if loss_type not in GRPO_LOSS_AGGREGATION:
        raise ValueError(
            f"loss_type={loss_type!r} is not one TRL's GRPOTrainer has (up to 1.16); "
            f"choose one of {sorted(GRPO_LOSS_AGGREGATION)}"
        )
    coef = beta
    if loss_type == "dr_grpo":  # sum / (B * max_completion_length): a sum with beta / L
        coef = beta / float(s["max_completion_length"])  # type: ignore[arg-type]
    return KLConfig(
        estimator="k3",
        placement="loss",
        coef=coef,
        loss_aggregation=GRPO_LOSS_AGGREGATION[loss_type],
        importance_weighting="token" if s["use_bias_correction_kl"] else "none",
    )


def from_trl_config(source: Any) -> KLConfig:
    """The KLConfig a TRL config, trainer or dict runs (the kl-patches one when patched)."""
    patched = patched_config(source)
    if patched is not None:
        return patched
    kind = kind_of(source)
    return native_config(kind, settings_of(source, kind))
