"""A synthetic OpenRLHF fork for the tests: a ``cli/train_ppo_ray.py`` of a recorded release's
shape (one ``add_argument`` call per recorded option, with the recorded default, action and
choices) plus the fork's own options, and a checkout holding it."""

from __future__ import annotations

from pathlib import Path

from kl_patches.adapters.openrlhf import flagsets


def fork_cli(
    release: str, extra: tuple[str, ...] = (), defaults: dict[str, object] | None = None
) -> str:
    """The text of a fork's ``train_ppo_ray.py``: ``release``'s options, ``extra`` (string
    options defaulting to None) and ``defaults`` overriding the recorded defaults."""
    lines = ["import argparse", "", "", "def main():", "    parser = argparse.ArgumentParser()"]
    for name in sorted(flagsets.options(release) or ()):
        entry = dict(flagsets.entry(release, name) or {})
        words = [f'"--{name}"']
        action = entry.get("action")
        if isinstance(action, str):
            words.append(f'action="{action}"')
        default = (defaults or {}).get(name, entry.get("default"))
        if not isinstance(default, dict) and (action is None or name in (defaults or {})):
            words.append(f"default={default!r}")
        if isinstance(entry.get("choices"), list):
            words.append(f"choices={entry['choices']!r}")
        lines.append(f"    parser.add_argument({', '.join(words)})")
    lines += [f'    parser.add_argument("--{name}", type=str, default=None)' for name in extra]
    lines.append("    return parser.parse_args()")
    return "\n".join(lines) + "\n"


def checkout(root: Path, files: dict[str, str]) -> Path:
    """``files`` written under ``root`` (a ``.git`` folder marks the repository root)."""
    (root / ".git").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
