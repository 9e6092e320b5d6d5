"""The shared patch registry on stand-in modules: idempotent apply, exact revert, propagation,
and the signature checks (call shapes against recorded signature texts)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from kl_patches.adapters.patching import (
    MARK,
    PatchRegistry,
    SignatureMismatchError,
    Target,
    is_replacement,
    shape_of_text,
    signature_shape,
)


def _library() -> types.ModuleType:
    lib = types.ModuleType("fake_lib")

    def compute(x: int) -> int:
        return x + 1

    class Trainer:
        def step(self) -> str:
            return "native"

    class Child(Trainer):
        pass

    lib.compute = compute  # type: ignore[attr-defined]
    lib.Trainer = Trainer  # type: ignore[attr-defined]
    lib.Child = Child  # type: ignore[attr-defined]
    return lib


@pytest.fixture
def lib() -> Iterator[types.ModuleType]:
    module = _library()
    importer = types.ModuleType("fake_importer")
    importer.compute = module.compute  # type: ignore[attr-defined]  # `from fake_lib import compute`
    sys.modules["fake_lib"], sys.modules["fake_importer"] = module, importer
    yield module
    for name in ("fake_lib", "fake_importer", "fake_late"):
        sys.modules.pop(name, None)


def doubled(original: Any) -> Any:
    def compute(x: int) -> int:
        return 2 * original(x)

    return compute


def test_patch_marks_propagates_and_reverts_exactly(lib: types.ModuleType) -> None:
    registry = PatchRegistry("fake")
    target = Target("fake_lib", "compute", propagate=True)
    original = lib.compute
    replacement = registry.patch(target, doubled)
    assert lib.compute is replacement and lib.compute(1) == 4
    assert getattr(replacement, MARK) == "fake" and replacement.__wrapped__ is original
    assert is_replacement(replacement, "fake") and not is_replacement(original)
    assert sys.modules["fake_importer"].compute is replacement  # the importer is patched too
    assert registry.applied() == ["fake_lib.compute"] and registry.stale() == []
    assert registry.patch(target, doubled) is replacement  # twice == once
    late = types.ModuleType("fake_late")
    late.compute = replacement  # type: ignore[attr-defined]  # imported after the patch
    sys.modules["fake_late"] = late
    assert registry.revert() == ["fake_lib.compute"]
    assert lib.compute is original and sys.modules["fake_importer"].compute is original
    assert late.compute is original
    assert registry.applied() == [] and registry.targets() == []


def test_stale_lists_importers_the_patch_did_not_reach(lib: types.ModuleType) -> None:
    registry = PatchRegistry("fake")
    target = Target("fake_lib", "compute", propagate=True)
    original = lib.compute
    registry.patch(target, doubled)
    later = types.ModuleType("fake_late")
    later.compute = original  # type: ignore[attr-defined]  # kept a reference from before
    sys.modules["fake_late"] = later
    assert registry.stale() == ["fake_late.compute"]
    assert registry.propagate() == ["fake_late.compute"] and registry.stale() == []
    registry.revert()
    assert later.compute is original


def test_class_attribute_inherited_is_deleted_again(lib: types.ModuleType) -> None:
    registry = PatchRegistry("fake")
    target = Target("fake_lib", "step", owner="Child")
    registry.patch(target, lambda original: lambda self: "patched " + original(self))
    assert lib.Child().step() == "patched native" and "step" in vars(lib.Child)
    assert lib.Trainer().step() == "native"  # the base class is untouched
    registry.revert()
    assert "step" not in vars(lib.Child) and lib.Child().step() == "native"


def test_replaced_behind_the_registry_is_an_error(lib: types.ModuleType) -> None:
    registry = PatchRegistry("fake")
    target = Target("fake_lib", "compute")
    registry.patch(target, doubled)
    lib.compute = lambda x: x  # someone else
    with pytest.raises(RuntimeError, match="was replaced after patching"):
        registry.applied()
    with pytest.raises(RuntimeError, match="replaced by someone else"):
        registry.patch(target, doubled)
    registry.revert()


def test_missing_hook_point_and_foreign_patch_fail_loudly(lib: types.ModuleType) -> None:
    registry = PatchRegistry("fake", "supported: fake>=1")
    with pytest.raises(RuntimeError, match=r"has no fake_lib\.absent.*supported: fake>=1"):
        registry.patch(Target("fake_lib", "absent"), doubled)
    with pytest.raises(RuntimeError, match=r"has no fake_lib\.Missing"):
        registry.patch(Target("fake_lib", "step", owner="Missing"), doubled)
    other = PatchRegistry("other")
    other.patch(Target("fake_lib", "compute"), doubled)
    with pytest.raises(RuntimeError, match="already patched outside the registry"):
        registry.patch(Target("fake_lib", "compute"), doubled)
    other.revert()
    assert registry.targets() == []


# ------------------------------------------------------------------ signatures
_SENTINEL = object()


def _f(
    self: Any,
    model: Any,
    inputs: dict[str, Any],
    *args: Any,
    batch_size: int | None = None,
    flags: tuple[Any, ...] = (None, 1),
    obj: object = _SENTINEL,
    **kw: Any,
) -> None:
    return None


def test_signature_shape_ignores_annotations_and_keeps_kinds_and_literal_defaults() -> None:
    shape = "(self, model, inputs, *args, batch_size=None, flags=(None, 1), obj=..., **kw)"
    assert signature_shape(_f) == shape
    text = (
        "(self, model: 'PreTrainedModel', inputs: dict[str, Any], *args, batch_size: int | None"
        "=None, flags=(None, 1), obj=object(), **kw) -> torch.Tensor"
    )
    assert shape_of_text(text) == shape
    assert shape_of_text("apply_kl_penalty(data: DataProto, kl_ctrl, kl_penalty='kl')") == (
        "(data, kl_ctrl, kl_penalty='kl')"
    )
    assert shape_of_text("(a, b, /, c=3, *, d)") == "(a, b, /, c=3, *, d)"

    def positional(a: int, b: int, /, c: int = 3, *, d: int) -> None:
        return None

    assert signature_shape(positional) == "(a, b, /, c=3, *, d)"


def test_check_signatures_refuses_an_unrecorded_shape(lib: types.ModuleType) -> None:
    registry = PatchRegistry("fake")
    target = Target("fake_lib", "compute")
    assert registry.check_signature(target, ["compute(x: int) -> int"]) == "(x)"
    recorded = ["compute(x: int) -> int", "compute(x, scale=1.0)"]
    assert registry.check_signatures({target: recorded}) == {target: "(x)"}
    method = Target("fake_lib", "step", owner="Trainer")
    with pytest.raises(SignatureMismatchError) as info:
        registry.check_signatures({target: ["compute(y)"], method: ["step(self, n)"]})
    text = str(info.value)
    assert "fake_lib.compute has the signature (x), which no tested release has (tested: (y))" in (
        text
    )
    assert "fake_lib.Trainer.step has the signature (self)" in text and "KL_PATCHES_FORCE" in text
    with pytest.warns(UserWarning, match="no tested release has"):
        registry.check_signatures({target: ["compute(y)"]}, force=True)
    with pytest.raises(SignatureMismatchError):
        registry.patch(target, doubled, signatures=["compute(x, y)"])
    assert lib.compute(1) == 2  # nothing was patched
    registry.patch(target, doubled, signatures=recorded)
    assert lib.compute(1) == 4
    registry.revert()
