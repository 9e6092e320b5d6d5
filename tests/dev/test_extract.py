"""The recorder's readings on small synthetic packages (no training library, no network).

Each test writes a few modules to a temporary folder, reads them as a release and checks what
the recorder extracts: dataclass fields with their defaults, argparse options (loop f-strings
included), Hydra keys, and a function's definer, signature, body hash and by-name importers.
"""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

from kl_patches.dev import extract as ex
from kl_patches.dev.source import Release


def _release(tmp_path: Path, files: dict[str, str]) -> Release:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return Release("fakelib", "1.0", tmp_path, "test")


def test_dataclass_fields_record_defaults_and_the_line_of_the_default(tmp_path: Path) -> None:
    release = _release(
        tmp_path,
        {
            "fakelib/__init__.py": "",
            "fakelib/config.py": """
            from dataclasses import dataclass, field
            from typing import ClassVar

            @dataclass
            class Config:
                kind: ClassVar[str] = "x"
                beta: float = field(
                    default=0.04,
                    metadata={"help": "KL coefficient"},
                )
                pair: tuple = (1, 2)
                names: list = field(default_factory=lambda: ["a"])
                level: str = DEFAULT_LEVEL
                required: int
            """,
        },
    )
    package = ex.Package(release, "fakelib")
    hit = ex.find_class(package, "Config", ("fakelib/config.py",))
    assert hit is not None
    fields = ex.dataclass_fields(*hit)
    assert list(fields) == ["beta", "pair", "names", "level", "required"]  # ClassVar skipped
    assert fields["beta"] == {"default": 0.04, "at": "fakelib/config.py:8"}  # default= line
    assert fields["pair"]["default"] == [1, 2]
    assert fields["names"]["default"] == {"factory": "lambda: ['a']"}
    assert fields["level"]["default"] == {"expr": "DEFAULT_LEVEL"}
    assert fields["required"] == {"at": "fakelib/config.py:14"}
    # Listed files only: a class elsewhere is not found when files are given.
    assert ex.find_class(package, "Config", ("fakelib/other.py",)) is None
    assert ex.find_class(package, "Config") is not None


def test_argparse_options_expand_loop_fstrings_and_give_argparse_defaults(tmp_path: Path) -> None:
    release = _release(
        tmp_path,
        {
            "fakelib/__init__.py": "",
            "fakelib/cli.py": """
            import argparse
            parser = argparse.ArgumentParser()
            parser.add_argument("--kl_coef", type=float, default=0.01)
            parser.add_argument("--estimator", choices=["k1", "k2", "k3"], default="k1")
            parser.add_argument("--use_loss", action="store_true")
            parser.add_argument("--no_norm", action="store_false")
            parser.add_argument("--target", type=float)
            parser.add_argument("--clip", type=float, nargs=2, default=(-10, 10))
            for prefix in ("actor", "critic"):
                parser.add_argument(f"--{prefix}.lr", type=float, default=1e-6)
            parser.add_argument(
                "--multi", type=int, default=3
            )
            """,
        },
    )
    module = ex.Package(release, "fakelib").module("fakelib/cli.py")
    assert module is not None
    options = ex.argparse_options(module)
    assert set(options) == {
        "kl_coef", "estimator", "use_loss", "no_norm", "target", "clip", "actor.lr", "critic.lr",
        "multi",
    }  # fmt: skip
    assert options["kl_coef"] == {"default": 0.01, "type": "float", "at": "fakelib/cli.py:3"}
    assert options["estimator"]["choices"] == ["k1", "k2", "k3"]
    assert options["use_loss"]["default"] is False and options["use_loss"]["action"] == "store_true"
    assert options["no_norm"]["default"] is True
    assert options["target"]["default"] is None
    assert options["clip"]["default"] == [-10, 10] and options["clip"]["nargs"] == 2
    assert options["critic.lr"]["default"] == 1e-6
    assert options["multi"]["at"] == "fakelib/cli.py:12"  # the line of "--multi", not the call


def test_hydra_leaves_compose_the_defaults_list(tmp_path: Path) -> None:
    release = _release(
        tmp_path,
        {
            "cfg/trainer.yaml": """
            defaults:
              - actor@actor: dp
              - _self_
            algorithm:
              kl_coef: 0.001
              extra: {}
            ref: ${actor.lr}
            """,
            "cfg/actor/dp.yaml": """
            lr: 1e-6
            loss: kl
            """,
        },
    )
    leaves = ex.hydra_leaves(release.path("cfg"), "trainer")
    assert leaves == {
        "actor.lr": 1e-6,
        "actor.loss": "kl",
        "algorithm.kl_coef": 0.001,
        "algorithm.extra": {},
        "ref": "${actor.lr}",
    }
    assert ex.hydra_leaves(release.path("cfg"), "missing") is None


_CORE = """
def kl(logp, ref, kind="k1") -> float:
    return logp - ref


class Trainer:
    def step(self, batch):
        return kl(batch, batch)
"""


def test_symbol_records_definer_signature_hash_and_binders(tmp_path: Path) -> None:
    release = _release(
        tmp_path,
        {
            "fakelib/__init__.py": "",
            "fakelib/core.py": _CORE,
            "fakelib/models/__init__.py": "from ..core import kl\n",
            "fakelib/by_name.py": "from fakelib.core import kl as penalty\n",
            "fakelib/via_reexport.py": "from .models import kl\n",
            "fakelib/late.py": "def f():\n    from fakelib.core import kl\n",
            "fakelib/typed.py": "if TYPE_CHECKING:\n    from fakelib.core import kl\n",
            "fakelib/attr.py": "from fakelib import core\n\ndef g(x):\n    return core.kl(x, x)\n",
            "fakelib/uses_class.py": (
                "try:\n    from fakelib.core import Trainer\nexcept ImportError:\n    pass\n"
            ),
        },
    )
    package = ex.Package(release, "fakelib")
    record = ex.symbol(package, "kl")
    assert record is not None
    source = textwrap.dedent(_CORE).lstrip("\n").split("\n")
    body = "\n".join(source[0:2])
    assert record == {
        "module": "fakelib.core",
        "at": "fakelib/core.py:1",
        "signature": "kl(logp, ref, kind='k1') -> float",
        "body_sha": hashlib.sha256(body.encode()).hexdigest()[:12],
        # by name when the module loads (late.py binds it inside a function only, typed.py
        # for type checkers only)
        "importers": ["fakelib.by_name", "fakelib.via_reexport"],
        "attribute_users": ["fakelib.attr"],
        "reexports": ["fakelib.models"],
    }
    method = ex.symbol(package, "Trainer.step")
    assert method is not None
    # A method's hash keeps its class indentation; its importers are its class's.
    indented = "\n".join(source[5:7])
    assert method["body_sha"] == hashlib.sha256(indented.encode()).hexdigest()[:12]
    assert method["signature"] == "step(self, batch)"
    assert method["importers"] == ["fakelib.uses_class"]
    assert ex.symbol(package, "missing") is None
    assert ex.symbol(package, "Trainer.missing") is None
