"""Could tree-sitter-bash replace the audit's hand-written shell lexer and parser? (issue 33)

Usage::

    pip install tree-sitter==0.26.1 tree-sitter-bash==0.25.1   # measurement only
    python benchmarks/shell_treesitter.py record build/shell_inputs.jsonl
    python benchmarks/shell_treesitter.py compare build/shell_inputs.jsonl [--mirrors /work/.mirror]

``record`` runs the audit's tests (tests/audit, tests/reliability, tests/cli) with this file as a
pytest plugin that writes down every script text given to ``parse_script``. ``compare`` reads
those texts, the shell files of the test corpora (``tests/**/*.sh`` ...) and, with
``--mirrors``, the shell launch files of the real-file benchmark
(benchmarks/audit_real_files/files.yaml, read from the bare mirrors), and parses each twice:
with the audit's lexer+parser and with tree-sitter-bash. Each side gives its simple commands as
(line, words as written), backslash-newlines removed; tree-sitter's ``[ ... ]`` expression
trees are flattened to their tokens and array values to ``NAME=(...)``, so that a difference is
one of parsing, not of representation. Categories per distinct text: ``same``, ``differs``
(both parse, the commands differ), ``ts_error`` (tree-sitter has ERROR/MISSING nodes where the
audit parses the text whole), ``ours_error``, ``both_error``. Times are parsing only.
Not part of the test suite (it needs tree-sitter, and the mirrors for the real files).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORD_ENV = "KL_PATCHES_RECORD_SHELL"

Commands = list[tuple[int, tuple[str, ...]]]


# ----------------------------------------------------------------------------- record (plugin)
def _install_recorder(out: str) -> None:
    import kl_patches.audit.inputs as inputs
    import kl_patches.audit.shell as shell
    import kl_patches.audit.shell.script as script

    original = script.parse_script

    def recording(text: str, *args: Any, **kwargs: Any) -> Any:
        with open(out, "a") as f:
            test = os.environ.get("PYTEST_CURRENT_TEST", "")
            f.write(json.dumps({"text": text, "source": test}) + "\n")
        return original(text, *args, **kwargs)

    script.parse_script = recording  # type: ignore[assignment]
    shell.parse_script = recording  # type: ignore[assignment]
    inputs.parse_script = recording  # type: ignore[assignment]


if os.environ.get(RECORD_ENV) and __name__ != "__main__":  # loaded by pytest -p
    _install_recorder(os.environ[RECORD_ENV])


def record(out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    env = {
        **os.environ,
        RECORD_ENV: str(out.resolve()),
        "PYTHONPATH": f"{Path(__file__).parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "HF_HUB_OFFLINE": "1",
    }
    tests = ["tests/audit", "tests/reliability", "tests/cli"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "shell_treesitter", *tests]
    return subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode


# ----------------------------------------------------------------------------- the two parsers
def _norm(word: str) -> str:
    return word.replace("\\\n", "")


def ours(text: str) -> Commands:
    """The audit's simple commands (its own lexer and parser, nothing interpreted)."""
    from kl_patches.audit.shell import nodes as n
    from kl_patches.audit.shell.lexer import ArrayLit, Lexer
    from kl_patches.audit.shell.parser import Parser

    out: Commands = []

    def walk(node: n.Node | None) -> None:
        if node is None:
            return
        if isinstance(node, n.Simple):
            words = [
                f"{it.name}{'+=' if it.append else '='}(...)"
                if isinstance(it, ArrayLit)
                else _norm(it)
                for it in node.items
            ]
            if words:
                out.append((node.line, tuple(words)))
        elif isinstance(node, n.Pipeline):
            for c in node.commands:
                walk(c)
        elif isinstance(node, n.AndOr):
            walk(node.first)
            for _, c in node.rest:
                walk(c)
        elif isinstance(node, n.List):
            for c in node.items:
                walk(c)
        elif isinstance(node, n.If):
            for cond, body in node.clauses:
                walk(cond)
                walk(body)
            walk(node.otherwise)
        elif isinstance(node, n.Loop):
            walk(node.cond)
            walk(node.body)
        elif isinstance(node, n.For | n.ArithFor):
            walk(node.body)
        elif isinstance(node, n.Case):
            for _, body in node.items:
                walk(body)
        elif isinstance(node, n.Group | n.FuncDef):
            walk(node.body)

    parser = Parser(Lexer(text))
    while (node := parser.complete_command()) is not None:
        walk(node)
    return out


_REDIRECTS = {"file_redirect", "heredoc_redirect", "herestring_redirect", "comment"}
_EXPRESSIONS = {
    "binary_expression",
    "unary_expression",
    "parenthesized_expression",
    "negation_expression",
}
_NOT_SCRIPT_LEVEL = {
    "command_substitution",
    "process_substitution",
    "arithmetic_expansion",
    "expansion",
    "string",
}


def ts_commands(parser: Any, text: str) -> tuple[Commands, bool]:
    """tree-sitter-bash's simple commands, and whether its tree has ERROR/MISSING nodes."""
    data = text.encode()
    tree = parser.parse(data)
    out: Commands = []

    def txt(node: Any) -> str:
        return _norm(data[node.start_byte : node.end_byte].decode(errors="replace"))

    def assignment(node: Any) -> str:
        value = node.child_by_field_name("value")
        if value is not None and value.type == "array":
            name = txt(node.child_by_field_name("name"))
            op = "+=" if "+=" in txt(node).split("(", 1)[0] else "="
            return f"{name}{op}(...)"
        return txt(node)

    def word(node: Any) -> str:
        return assignment(node) if node.type == "variable_assignment" else txt(node)

    def leaves(node: Any) -> list[str]:
        if node.type in _EXPRESSIONS:
            return [w for c in node.children for w in leaves(c)]
        return [txt(node)]

    def walk(node: Any) -> None:
        kind = node.type
        line = node.start_point[0] + 1
        if kind == "command":
            out.append(
                (line, tuple(word(c) for c in node.named_children if c.type not in _REDIRECTS))
            )
            return
        if kind in ("declaration_command", "unset_command"):
            out.append((line, tuple(word(c) for c in node.children if c.type not in _REDIRECTS)))
            return
        if kind in ("variable_assignment", "variable_assignments"):
            parts = [node] if kind == "variable_assignment" else node.named_children
            out.append((line, tuple(assignment(a) for a in parts if a.type == kind.rstrip("s"))))
            return
        if kind == "test_command":
            if not txt(node).startswith(("[[", "((")):  # ours: [[ ]] and (( )) are not commands
                out.append((line, ("[", *(w for c in node.named_children for w in leaves(c)), "]")))
            return
        if kind in _NOT_SCRIPT_LEVEL:  # the audit keeps these as text inside a word
            return
        for c in node.children:
            walk(c)

    walk(tree.root_node)
    return out, tree.root_node.has_error


# ----------------------------------------------------------------------------- inputs
def inputs(recorded: Path, mirrors: Path | None) -> dict[str, str]:
    """Distinct script texts -> where the first one came from."""
    texts: dict[str, str] = {}
    for line in recorded.read_text().splitlines():
        row = json.loads(line)
        texts.setdefault(row["text"], row["source"].split(" ")[0] or "tests")
    for suffix in ("sh", "bash", "slurm", "sbatch"):
        for path in sorted(glob.glob(str(ROOT / f"tests/**/*.{suffix}"), recursive=True)):
            texts.setdefault(Path(path).read_text(), str(Path(path).relative_to(ROOT)))
    if mirrors is not None:
        import yaml

        listed = yaml.safe_load((ROOT / "benchmarks/audit_real_files/files.yaml").read_text())
        for f in listed["files"]:
            if f.get("kind") not in ("shell", "slurm"):
                continue
            gdir = mirrors / f["repo"].replace("/", "+") / "repo"
            blob = subprocess.run(
                ["git", f"--git-dir={gdir}", "cat-file", "blob", f["blob"]],
                capture_output=True,
                check=True,
            ).stdout
            texts.setdefault(blob.decode(errors="replace"), "real:" + f["id"])
    return texts


def compare(recorded: Path, mirrors: Path | None, out: Path | None) -> dict[str, Any]:
    import tree_sitter
    import tree_sitter_bash

    from kl_patches.audit.shell.model import ShellLimitError, ShellParseError

    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    texts = inputs(recorded, mirrors)
    groups: dict[str, dict[str, int]] = {}
    seconds = {"ours": 0.0, "tree_sitter": 0.0}
    detail: list[dict[str, Any]] = []
    for text, source in texts.items():
        group = "real files" if source.startswith("real:") else "tests"
        t0 = time.perf_counter()
        try:
            mine: Commands | None = ours(text)
            error = ""
        except (ShellParseError, ShellLimitError) as err:
            mine, error = None, str(err)
        t1 = time.perf_counter()
        theirs, ts_error = ts_commands(parser, text)
        t2 = time.perf_counter()
        seconds["ours"] += t1 - t0
        seconds["tree_sitter"] += t2 - t1
        if mine is None:
            cat = "both_error" if ts_error else "ours_error"
        elif ts_error:
            cat = "ts_error"
        else:
            cat = "same" if mine == theirs else "differs"
        groups.setdefault(group, {}).setdefault(cat, 0)
        groups[group][cat] += 1
        if cat != "same":
            mine = mine or []
            k = next(
                (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
                min(len(mine), len(theirs)),
            )
            detail.append(
                {
                    "source": source,
                    "category": cat,
                    "ours": mine[k : k + 1],
                    "tree_sitter": theirs[k : k + 1],
                    "error": error,
                }
            )
    result = {
        "texts": len(texts),
        "by_group": groups,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "not_same": detail,
    }
    if out is not None:
        out.write_text(json.dumps(result, indent=1))
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record", help="record the texts the audit's tests give the reader")
    r.add_argument("out", type=Path)
    c = sub.add_parser("compare", help="parse every recorded text with both parsers")
    c.add_argument("recorded", type=Path)
    c.add_argument("--mirrors", type=Path, help="bare mirrors of the real-file benchmark")
    c.add_argument("--json", type=Path, help="write the figures and every difference here")
    args = p.parse_args()
    if args.what == "record":
        raise SystemExit(record(args.out))
    result = compare(args.recorded, args.mirrors, args.json)
    print(json.dumps({k: v for k, v in result.items() if k != "not_same"}, indent=1))
    for d in result["not_same"]:
        print(
            f"{d['category']:<11} {d['source']}: ours {d['ours']} / tree-sitter {d['tree_sitter']}"
        )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
