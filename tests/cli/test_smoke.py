"""``kl-patches smoke``: verl and OpenRLHF say plainly that they are not there yet."""

from __future__ import annotations

import pytest

from kl_patches.cli import smoke


@pytest.mark.parametrize("library", ["verl", "openrlhf"])
def test_not_yet_libraries_say_so_in_one_line(
    library: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert smoke.main([library]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"kl-patches smoke: smoke {library} is not")
    assert "issue 37" in err[0] and f"kl-patches {library} ... --print" in err[0]


def test_an_unknown_library_names_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert smoke.main(["deepspeed"]) == 2
    assert "'trl', 'verl', 'openrlhf'" in capsys.readouterr().err
