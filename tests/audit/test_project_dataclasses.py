"""A TRL project script's own dataclasses: the options they add to its parser (issue 38).

The shape of VLM-R1's launches: a shell script in ``run_scripts/`` finds the repository root
with ``$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)``, goes into the project folder and
runs ``torchrun src/pkg/train.py``; the script builds ``TrlParser((ProjectArguments,
GRPOConfig, ProjectModelConfig))`` with its own ``ProjectArguments`` (a ``list[str]`` field
takes several words), ``GRPOConfig`` imported from its own package (a copy on transformers'
``TrainingArguments``), and trains its own trainer class (not TRL's, so the launch is read as
``trl grpo`` by its options). TRL is not imported: the audit reads each release's recorded
fields.
"""

from __future__ import annotations

from pathlib import Path

from kl_patches.audit import audit
from kl_patches.audit.checkout_classes import checkout_class
from kl_patches.audit.python import read_python

SCRIPT = """from dataclasses import dataclass, field
from typing import ClassVar, List, Optional

from pkg.trainer import GRPOConfig, ProjectTrainer
from trl import ModelConfig, ScriptArguments, TrlParser


@dataclass
class ProjectArguments(ScriptArguments):
    reward_funcs: list[str] = field(default_factory=lambda: ["accuracy"])
    task_type: Optional[str] = None
    image_folders: "List[str]" = field(default_factory=list)
    crops: Optional[list[int]] = None
    registry: ClassVar[dict] = {}


@dataclass
class MoreArguments(ProjectArguments):
    strict: bool = False


@dataclass
class ProjectModelConfig(ModelConfig):
    freeze_vision_modules: bool = False


def main(script_args, training_args, model_args):
    trainer = ProjectTrainer(model=model_args.model_name_or_path, args=training_args)
    trainer.train()


if __name__ == "__main__":
    parser = TrlParser((MoreArguments, GRPOConfig, ProjectModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config()
    main(script_args, training_args, model_args)
"""

CONFIG_COPY = """from dataclasses import dataclass, field

from transformers import TrainingArguments


@dataclass
class GRPOConfig(TrainingArguments):
    beta: float = field(default=0.04)
    num_generations: int = 8
    vision_crop_size: int = 336
"""

LAUNCH = """ROOT="$( cd "$( dirname "${{BASH_SOURCE[0]}}" )/.." && pwd )"
cd ${{ROOT}}/project
torchrun --nproc_per_node="8" \\
    src/pkg/train.py \\
    --output_dir out \\
    --reward_funcs accuracy format \\
    --bf16 \\
{extra}    --num_generations 8 \\
    --beta 0.04
"""


def _project(tmp_path: Path, extra: str = "", with_script: bool = True) -> Path:
    """The repository: the launch in run_scripts/, the project under project/src/pkg/."""
    pkg = tmp_path / "project" / "src" / "pkg"
    (pkg / "trainer").mkdir(parents=True)
    if with_script:
        (pkg / "train.py").write_text(SCRIPT)
        (pkg / "trainer" / "__init__.py").write_text(
            "from .config import GRPOConfig\nfrom .trainer import ProjectTrainer\n"
        )
        (pkg / "trainer" / "config.py").write_text(CONFIG_COPY)
        (pkg / "trainer" / "trainer.py").write_text(
            "from transformers import Trainer\n\n\nclass ProjectTrainer(Trainer):\n    pass\n"
        )
    launch = tmp_path / "run_scripts" / "run_grpo.sh"
    launch.parent.mkdir()
    launch.write_text(LAUNCH.format(extra=extra))
    return launch


def _codes(entry: object) -> dict[str, str]:
    return {f.code: f.severity for f in entry.findings}  # type: ignore[attr-defined]


def _messages(entry: object, code: str) -> list[str]:
    return [f.message for f in entry.findings if f.code == code]  # type: ignore[attr-defined]


def test_the_scripts_own_fields_are_options_of_its_launch(tmp_path: Path) -> None:
    launch = _project(tmp_path)
    for version in ("0.17.0", "1.16.0"):
        (entry,) = audit(launch, version=f"trl={version}")
        assert entry.status != "error", (version, _codes(entry))
        assert entry.reading.config.estimator == "k3"
        assert entry.reading.config.coef == 0.04
    # the same launch when the script cannot be opened: TRL's own options only, so
    # TRL 0.17.0 refuses reward_funcs (a field from 0.18.0) and 'format' is a stray word
    (bare,) = audit(_project(tmp_path / "alone", with_script=False), version="trl=0.17.0")
    assert bare.status == "error"
    assert any("'format'" in m for m in _messages(bare, "trl.argument_rejected"))
    assert any("reward_funcs" in m for m in _messages(bare, "trl.field_rejected"))


def test_a_trainer_class_of_the_projects_own_is_a_warning(tmp_path: Path) -> None:
    (entry,) = audit(_project(tmp_path), version="trl=0.17.0")
    (warning,) = _messages(entry, "trl.project_trainer")
    assert "ProjectTrainer" in warning and "trainer.py:4" in warning
    (plain,) = audit(_project(tmp_path / "alone", with_script=False), version="trl=0.17.0")
    assert "trl.project_trainer" not in _codes(plain)
    # no line of the report offers kl-patches' launcher, which does not reach that class (on
    # 0.14 the token-mean finding has a fix of its own)
    (old,) = audit(_project(tmp_path / "old"), version="trl=0.14.0")
    assert "trl.token_mean_loss" in _codes(old)
    assert not old.fix_switch
    assert all("kl-patches" not in f.fix for f in old.findings), [f.fix for f in old.findings]


def test_a_trainer_class_chosen_under_an_undecided_condition_is_the_projects_own(
    tmp_path: Path,
) -> None:
    """``cls = A if flag else B`` with a flag the reader cannot decide: a warning when A and B
    are both the project's own, none when one of them is TRL's trainer (it may run)."""
    for other, own in (("VllmProjectTrainerModified", True), ("GRPOTrainer", False)):
        launch = _project(tmp_path / other)
        script = launch.parents[1] / "project" / "src" / "pkg" / "train.py"
        text = script.read_text().replace(
            "    trainer = ProjectTrainer(",
            f"    cls = ProjectTrainer if not training_args.use_vllm else {other}\n"
            "    trainer = cls(",
        )
        text = text.replace("TrlParser\n", "TrlParser, GRPOTrainer\n").replace(
            "ProjectTrainer\nfrom trl", "ProjectTrainer, VllmProjectTrainerModified\nfrom trl"
        )
        script.write_text(text)
        trainer = script.parent / "trainer"
        (trainer / "__init__.py").write_text(
            "from .config import GRPOConfig\n"
            "from .trainer import ProjectTrainer, VllmProjectTrainerModified\n"
        )
        (trainer / "trainer.py").write_text(
            "from transformers import Trainer\n\n\nclass ProjectTrainer(Trainer):\n    pass\n"
            "\n\nclass VllmProjectTrainerModified(Trainer):\n    pass\n"
        )
        (entry,) = audit(launch, version="trl=0.17.0")
        warnings = _messages(entry, "trl.project_trainer")
        if own:
            (warning,) = warnings
            assert "ProjectTrainer (" in warning and "VllmProjectTrainerModified (" in warning
        else:
            assert not warnings, warnings


def test_a_project_script_at_a_known_scripts_path_is_read_as_the_project(tmp_path: Path) -> None:
    """A script at open-r1's path ``src/open_r1/grpo.py`` that trains the project's own class
    (R1-V's) is read as that project's, even with no TRL option on its command line."""
    launch = _project(tmp_path)
    src = launch.parents[1] / "project" / "src"
    (src / "open_r1").mkdir()
    (src / "pkg" / "train.py").rename(src / "open_r1" / "grpo.py")
    text = LAUNCH.format(extra="").replace("src/pkg/train.py", "src/open_r1/grpo.py")
    launch.write_text(text.replace("    --num_generations 8 \\\n    --beta 0.04\n", "    --bf16\n"))
    assert "--beta" not in launch.read_text() and "--num_generations" not in launch.read_text()
    (entry,) = audit(launch, version="trl=0.17.0")
    assert "trl.project_trainer" in _codes(entry)
    assert not entry.fix_switch


def test_a_script_run_from_a_folder_the_launch_does_not_enter_is_found_by_its_path(
    tmp_path: Path,
) -> None:
    """A launch that runs ``src/pkg/train.py`` without ``cd``-ing to ``project/`` (R1-V's
    ``src/scripts/*.sh``): in a checkout the one file ending with that path is the script."""
    for checkout in (True, False):
        root = tmp_path / str(checkout)
        launch = _project(root)
        launch.write_text(launch.read_text().replace("cd ${ROOT}/project\n", ""))
        if checkout:
            (root / ".git").mkdir()
        (entry,) = audit(launch, version="trl=0.17.0")
        assert ("trl.project_trainer" in _codes(entry)) is checkout, _codes(entry)


def test_a_bare_flag_the_config_copy_inherits_is_transformers_boolean(tmp_path: Path) -> None:
    """TRL 1.16.0's GRPOConfig redeclares ``bf16: bool | None = None`` (a bare flag is refused);
    the project's copy does not, so its ``bf16`` is TrainingArguments' ``bool = False``."""
    (entry,) = audit(_project(tmp_path), version="trl=1.16.0")
    assert "trl.argument_rejected" not in _codes(entry), _codes(entry)
    assert entry.reading.settings["beta"] == 0.04


def test_a_field_of_the_config_copy_is_an_option(tmp_path: Path) -> None:
    (entry,) = audit(_project(tmp_path, "    --vision_crop_size 448 \\\n"), version="trl=0.17.0")
    assert entry.status != "error", _codes(entry)


def test_a_second_word_after_a_one_value_field_is_still_stray(tmp_path: Path) -> None:
    (entry,) = audit(_project(tmp_path, "    --task_type rec gui \\\n"), version="trl=0.17.0")
    assert entry.status == "error"
    (refusal,) = _messages(entry, "trl.argument_rejected")
    assert "'gui'" in refusal and "'format'" not in refusal


def test_a_trl_field_neither_the_release_nor_the_script_declares_is_refused(
    tmp_path: Path,
) -> None:
    """steps_per_generation is a GRPOConfig field from TRL 0.18.0: neither 0.17.0's classes nor
    the script's own declare it."""
    extra = "    --steps_per_generation 2 \\\n"
    (entry,) = audit(_project(tmp_path, extra), version="trl=0.17.0")
    assert entry.status == "error"
    assert any("steps_per_generation" in m for m in _messages(entry, "trl.field_rejected"))


def test_the_reader_gives_each_own_field_its_parser_kind(tmp_path: Path) -> None:
    launch = _project(tmp_path)
    path = launch.parent.parent / "project" / "src" / "pkg" / "train.py"
    script = read_python(path.read_text(), str(path))
    fields = script.parser_fields
    assert fields["reward_funcs"] == "list"
    assert fields["image_folders"] == "list"  # a string annotation, typing.List
    assert fields["crops"] == "list"  # Optional[list[int]]: the parser drops the None
    assert fields["task_type"] == "value"
    assert fields["strict"] == "bool"  # MoreArguments' own, ProjectArguments' inherited
    assert fields["freeze_vision_modules"] == "bool"
    assert fields["vision_crop_size"] == "value"  # the GRPOConfig copy's
    assert "registry" not in fields  # a ClassVar is no dataclass field
    assert set(script.config_copies) == {"GRPOConfig"}
    assert script.config_copies["GRPOConfig"].endswith("config.py:7")  # the class line


def test_a_class_is_found_through_a_package_reexport_only_in_the_checkout(
    tmp_path: Path,
) -> None:
    _project(tmp_path)
    script = tmp_path / "project" / "src" / "pkg" / "train.py"
    found = checkout_class(script, "pkg.trainer", 0, "GRPOConfig")
    assert found is not None and found[1].name == "config.py"
    assert checkout_class(script, "trl", 0, "GRPOConfig") is None  # not a checkout file
    assert checkout_class(script, "pkg.trainer", 0, "Missing") is None
