"""YAML edits in place: values, comments and quoting kept; missing keys under their parent."""

from __future__ import annotations

import pytest

from kl_patches.audit.fix.change import Change
from kl_patches.audit.fix.shell_edit import EditError
from kl_patches.audit.fix.yaml_edit import apply_yaml

TEXT = """# top
algorithm:
  adv_estimator: grpo  # group
  kl_ctrl:
    kl_coef: 0.001
actor:
  use_kl_loss: true   # on
name: "x"
"""


def test_set_keeps_the_comment() -> None:
    out = apply_yaml(TEXT, [Change("set", "hydra", "actor.use_kl_loss", "False")])
    assert out == TEXT.replace("use_kl_loss: true   # on", "use_kl_loss: false   # on")


def test_set_keeps_quotes() -> None:
    out = apply_yaml(TEXT, [Change("set", "trl", "name", "y")])
    assert 'name: "y"' in out


def test_missing_key_goes_under_its_parent() -> None:
    out = apply_yaml(TEXT, [Change("set", "hydra", "algorithm.kl_ctrl.type", "fixed")])
    assert "    kl_coef: 0.001\n    type: fixed\nactor:" in out
    out = apply_yaml(TEXT, [Change("set", "hydra", "algorithm.use_kl_in_reward", "True")])
    assert "  use_kl_in_reward: true\nactor:" in out


def test_missing_parents_are_created_at_the_end() -> None:
    out = apply_yaml(TEXT, [Change("set", "trl", "kl.coef", "0.04")])
    assert out.endswith('name: "x"\nkl:\n  coef: 0.04\n')


def test_unset_deletes_the_line() -> None:
    out = apply_yaml(TEXT, [Change("unset", "hydra", "actor.use_kl_loss")])
    assert "use_kl_loss" not in out and out.count("\n") == TEXT.count("\n") - 1


def test_flow_style_is_refused() -> None:
    with pytest.raises(EditError, match=r"not a plain scalar|block style"):
        apply_yaml("a: {b: 1}\n", [Change("set", "hydra", "a", "2")])
