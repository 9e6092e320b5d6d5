"""``kl-patches verdict``: the uniform ``--kl.FIELD`` flags, and the old spellings."""

from __future__ import annotations

import pytest

from kl_patches.cli.verdict import main


def test_fields_with_the_uniform_syntax(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["k2-in-loss", "--kl.granularity", "sequence", "--kl.coef", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "granularity=sequence" in out and "coef=0.1" in out and "unbiased:    yes" in out


def test_old_spellings_still_work_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(FutureWarning, match="--granularity is deprecated"):
        assert main(["k2-in-loss", "--granularity", "sequence"]) == 0
    assert "unbiased:    yes" in capsys.readouterr().out


def test_bad_values_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["k9-in-loss"]) == 2
    assert main(["k1-in-reward", "--kl.estimator", "k3"]) == 2
    assert "drop one" in capsys.readouterr().err
