"""Read real launch files out of local bare git mirrors, checked against their blob ids.

Shared by the derivation harness (``derive.py``) and the scorer (``../audit_real_files.py``).
A mirror is the bare git directory the team's fetch tool creates:
``MIRROR_ROOT/<owner>+<name>/repo`` (or ``MIRROR_ROOT/<owner>+<name>`` itself when it is the
git directory). Nothing here runs code from the mirrors; files are written as plain text.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


class MirrorError(RuntimeError):
    """A mirror, commit, path or blob that is missing or does not match the list."""


def git_dir(mirror_root: Path, repo: str) -> Path:
    """The bare git directory of ``owner/name`` under ``mirror_root``."""
    base = mirror_root / repo.replace("/", "+")
    for cand in (base / "repo", base):
        if (cand / "HEAD").is_file() and (cand / "objects").is_dir():
            return cand
    raise MirrorError(f"no mirror of {repo} under {mirror_root} (looked for {base}/repo)")


def git(gdir: Path, *args: str) -> bytes:
    """Output of ``git --git-dir=gdir ARGS`` (raises MirrorError with git's message)."""
    proc = subprocess.run(
        ["git", f"--git-dir={gdir}", *args], capture_output=True, check=False, timeout=120
    )
    if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip()
        raise MirrorError(f"git {' '.join(args)} in {gdir}: {msg}")
    return proc.stdout


def entry_of(gdir: Path, commit: str, path: str) -> tuple[str, str]:
    """(mode, blob id) of ``path`` at ``commit`` (``git ls-tree``; mode 120000: a symlink)."""
    out = git(gdir, "ls-tree", commit, "--", path).decode().strip()
    if not out:
        raise MirrorError(f"{path} does not exist at {commit}")
    meta = out.split("\t", 1)[0].split()
    return meta[0], meta[2]


def blob_of(gdir: Path, commit: str, path: str) -> str:
    """The blob id of ``path`` at ``commit`` (``git ls-tree``)."""
    return entry_of(gdir, commit, path)[1]


def read_blob(gdir: Path, blob: str) -> bytes:
    """The content of a blob (``git cat-file blob``)."""
    return git(gdir, "cat-file", "blob", blob)


def materialise(gdir: Path, commit: str, path: str, blob: str | None, dest_root: Path) -> Path:
    """Write ``path`` as of ``commit`` under ``dest_root`` (same relative path); check the blob.

    ``blob`` None skips the check (siblings are listed by path only). A symlink is written as
    a symlink to its relative target (as a checkout has it; an absolute one is refused), so a
    config that links into a submodule resolves once the submodule's file is written too.
    Returns the written path.
    """
    mode, actual = entry_of(gdir, commit, path)
    if blob is not None and actual != blob:
        raise MirrorError(f"{path}@{commit[:10]}: blob {actual} != listed {blob}")
    out = dest_root / path
    out.parent.mkdir(parents=True, exist_ok=True)
    if mode == "120000":
        target = read_blob(gdir, actual).decode()
        if target.startswith("/"):
            raise MirrorError(f"{path}@{commit[:10]}: symlink to an absolute path {target}")
        if out.is_symlink() or out.exists():
            out.unlink()
        out.symlink_to(target)
        return out
    out.write_bytes(read_blob(gdir, actual))
    if path.endswith((".sh", ".bash", ".slurm", ".sbatch")):
        out.chmod(0o755)
    return out


def export_tree(gdir: Path, commit: str, dest_root: Path, prefixes: list[str]) -> None:
    """Write the files under ``prefixes`` (directories or files) at ``commit`` to ``dest_root``.

    Used by the derivation harness to give a script the repository files it reads (configs it
    composes, siblings it sources, scripts it runs). Only text-sized files are written.
    """
    listing = git(gdir, "ls-tree", "-r", "-l", commit, "--", *prefixes).decode()
    for line in listing.splitlines():
        meta, name = line.split("\t", 1)
        mode, kind, sha, size = meta.split()
        if kind != "blob" or not size.isdigit() or int(size) > 2_000_000:  # BAD: absent
            continue
        out = dest_root / name
        if mode == "120000":  # a symlink: recreate it when it stays inside the tree
            target = read_blob(gdir, sha).decode()
            if not target.startswith("/"):
                out.parent.mkdir(parents=True, exist_ok=True)
                if not out.exists() and not out.is_symlink():
                    out.symlink_to(target)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(read_blob(gdir, sha))
        if mode == "100755" or name.endswith((".sh", ".slurm", ".sbatch")):
            out.chmod(0o755)
