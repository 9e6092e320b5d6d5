"""The shell reader, arithmetic as bash computes it."""

from __future__ import annotations

import pytest


def test_arithmetic_wraps_like_bash() -> None:
    from kl_patches.audit.shell import arith

    assert arith("9**9**9") == pow(9, 9**9, 1 << 64) - (1 << 64)  # wraps to a negative int64
    assert arith("2**63") == -(1 << 63)
    assert arith("-7 / 2") == -3 and arith("-7 % 2") == -1  # C truncation
    assert arith("x = 3, x += 4, x * 2") == 14
    assert arith("1 ? 2 : 3") == 2 and arith("0x10 + 8#17 + 2#101") == 16 + 15 + 5
    with pytest.raises(ValueError, match="division by 0"):
        arith("1 / 0")
