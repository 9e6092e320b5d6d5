"""Helpers of the shell reader's tests: the words of every command a text runs."""

from __future__ import annotations

from kl_patches.audit.shell import parse_script


def words(text: str, **variables: str) -> list[list[str]]:
    return [c.words for c in parse_script(text, variables).commands]


def read(text: str, **kw: object) -> list[list[str]]:
    script = parse_script(text, script_dir="/s", partial=True, **kw)  # type: ignore[arg-type]
    return [c.words for c in script.commands if c.words and c.words[0] == "run"]
