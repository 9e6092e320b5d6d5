"""The shared wire format of a KLConfig in an environment variable."""

from __future__ import annotations

import json
import sys

import pytest

from kl_patches.adapters import delivery
from kl_patches.config import KLConfig, all_configs


@pytest.mark.parametrize("config", all_configs(coef=0.2)[::7], ids=str)
def test_round_trip(config: KLConfig) -> None:
    text = delivery.encode(config, {"kl_outside_std": True})
    assert delivery.decode(text, "V", ("kl_outside_std",)) == (config, {"kl_outside_std": True})


def test_compact_and_full_forms_decode_alike() -> None:
    config = KLConfig.parse("k3-in-loss", coef=0.1)
    assert json.loads(delivery.encode(config)) == {
        "estimator": "k3",
        "placement": "loss",
        "coef": 0.1,
    }
    full = json.dumps(config.to_dict())  # what an older sender wrote
    assert delivery.decode(full, "V")[0] == config


@pytest.mark.parametrize(
    ("text", "why"),
    [("{not json", "not JSON"), ("[1, 2]", "JSON object"),
     ('{"placement": "sideways"}', "sideways"), ('{"beta": 1}', "unknown field")],
)  # fmt: skip
def test_invalid_values_name_the_variable(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"KL_PATCHES_X.*not a valid KLConfig.*{why}"):
        delivery.decode(text, "KL_PATCHES_X")


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert delivery.env_var("verl") == "KL_PATCHES_VERL"
    monkeypatch.delenv("KL_PATCHES_TRL", raising=False)
    assert delivery.from_environ("trl") is None
    monkeypatch.setenv("KL_PATCHES_TRL", "  ")
    assert delivery.from_environ("trl") is None
    monkeypatch.setenv("KL_PATCHES_TRL", delivery.encode(KLConfig(coef=0.3)))
    assert delivery.from_environ("trl") == (KLConfig(coef=0.3), {})
    with pytest.raises(ValueError, match="collides"):
        delivery.encode(KLConfig(), {"coef": 1})


def test_announce_logs_once_per_process_at_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(delivery, "_ANNOUNCED", set())
    with caplog.at_level("WARNING", logger="kl_patches.demo"):
        assert delivery.announce("demo", "k1-in-reward")
        assert not delivery.announce("demo", "k1-in-reward")
    lines = [r for r in caplog.records if r.name == "kl_patches.demo"]
    assert len(lines) == 1 and lines[0].levelname == "WARNING"
    assert "demo patch active in pid" in lines[0].getMessage()


def _package(root, name: str, files: dict[str, str]):  # type: ignore[no-untyped-def]
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text(files.pop("__init__", ""))
    for module, text in files.items():
        (folder / f"{module}.py").write_text(text)
    return folder


def test_after_import_waits_for_the_module(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _package(tmp_path, "kp_demo_wait", {"kl": "VALUE = 1\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []

    def callback() -> None:
        seen.append(sys.modules["kp_demo_wait"].kl.VALUE)  # the package attribute is set

    assert delivery.after_import(["kp_demo_wait.kl"], callback) is False
    assert seen == []
    import kp_demo_wait.kl  # noqa: F401 - the import the callback waits for

    assert seen == [1]
    assert delivery.after_import(["kp_demo_wait.kl"], lambda: seen.append(2)) is True
    assert seen == [1, 2]
    assert not any(isinstance(f, delivery._AfterImportFinder) for f in sys.meta_path)


def test_after_import_settles_the_package_first(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The watched module imported from inside another module of the package: the callback, which
    imports a module needing that other module's later names, must wait until it has finished
    (verl's distillation.losses imports workers.utils.losses at its top, and ray_trainer imports
    a name distillation.losses defines further down)."""
    _package(
        tmp_path,
        "kp_demo_settle",
        {
            "kl": "VALUE = 1\n",
            "outer": "from kp_demo_settle import kl\nLATER = 2\n",
            "needs_outer": "from kp_demo_settle.outer import LATER\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []

    def callback() -> None:
        import kp_demo_settle.needs_outer

        seen.append(kp_demo_settle.needs_outer.LATER)

    assert delivery.after_import(["kp_demo_settle.kl"], callback, settle="kp_demo_settle") is False
    import kp_demo_settle.outer  # noqa: F401

    assert seen == [2]


def test_after_import_without_settle_fires_mid_import(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The failure ``settle`` prevents: without it the callback runs while ``outer`` is half
    done."""
    _package(
        tmp_path,
        "kp_demo_early",
        {
            "kl": "VALUE = 1\n",
            "outer": "from kp_demo_early import kl\nLATER = 2\n",
            "needs_outer": "from kp_demo_early.outer import LATER\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    def callback() -> None:
        import kp_demo_early.needs_outer  # noqa: F401

    delivery.after_import(["kp_demo_early.kl"], callback)
    with pytest.raises(ImportError, match="partially initialized"):
        import kp_demo_early.outer  # noqa: F401
