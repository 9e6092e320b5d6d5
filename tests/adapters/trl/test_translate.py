"""KLArguments with TRL's own TrlParser: the kl_* keys give the KLConfig back."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")


import kl_patches.trl as klt  # noqa: E402
from kl_patches import KLConfig  # noqa: E402

TOL = 1e-6


# ------------------------------------------------------------------ arguments and reader
def test_kl_arguments_with_trl_parser(tmp_path: Path) -> None:
    from trl import GRPOConfig, TrlParser

    parser = TrlParser((GRPOConfig, klt.KLArguments))
    argv = [
        "--output_dir",
        str(tmp_path),
        "--kl_estimator",
        "k3",
        "--kl_placement",
        "both",
        "--kl_coef",
        "0.1",
        "--use_cpu",
        "true",
        "--bf16",
        "false",
    ]
    _, kl_args = parser.parse_args_and_config(argv)
    assert kl_args.to_config() == KLConfig(estimator="k3", placement="both", coef=0.1)
    assert klt.KLArguments.from_config(kl_args.to_config()) == kl_args
    with pytest.raises(ValueError, match="placement"):
        klt.KLArguments(kl_placement="advantage").to_config()
