"""The kl-patches route of a Python script: the fix writes ``kl_patches.trl.apply({...})``.

Synthetic scripts of the shapes the real-file benchmark has: a plain script with a config
literal, a ``TrlParser`` script that reads its config from the command line, a marimo notebook
saved as ``.py`` (config in one cell, trainer in another) and an unsloth script. marimo is not
installed in the core test environment, so the notebook's structure is checked with :mod:`ast`
(every cell still an ``@app.cell`` function, the patch inside the trainer's cell).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kl_patches.audit.fix.apply import fix_file, summary, write_fix
from kl_patches.audit.fix.python_apply import add_apply, launcher_config
from kl_patches.audit.fix.python_values import PythonEditError
from kl_patches.audit.python import read_python
from kl_patches.audit.run import audit

LITERAL = (
    '"""Train."""\n'
    "import os\n"
    "\n"
    "from trl import GRPOConfig, GRPOTrainer\n"
    "\n"
    "\n"
    "def main():\n"
    "    args = GRPOConfig(output_dir='o', beta=0.04)\n"
    "    GRPOTrainer(model='m', args=args, reward_funcs=[], train_dataset=[]).train()\n"
    "\n"
    "\n"
    "main()\n"
)

PARSER = (
    "from trl import GRPOConfig, GRPOTrainer, ModelConfig, ScriptArguments, TrlParser\n"
    "\n"
    "\n"
    "def main(script_args, training_args, model_args):\n"
    "    trainer = GRPOTrainer(model='m', reward_funcs=[], args=training_args)\n"
    "    trainer.train()\n"
    "\n"
    "\n"
    "if __name__ == '__main__':\n"
    "    parser = TrlParser((ScriptArguments, GRPOConfig, ModelConfig))\n"
    "    script_args, training_args, model_args = parser.parse_args_and_config()\n"
    "    main(script_args, training_args, model_args)\n"
)

MARIMO = (
    "import marimo\n"
    "\n"
    "app = marimo.App()\n"
    "\n"
    "\n"
    "@app.cell\n"
    "def _():\n"
    "    from trl import GRPOConfig, GRPOTrainer\n"
    "\n"
    "    training_args = GRPOConfig(\n"
    "        output_dir='o',\n"
    "        beta=0.04,\n"
    "    )\n"
    "    return GRPOTrainer, training_args\n"
    "\n"
    "\n"
    "@app.cell(hide_code=True)\n"
    "def _():\n"
    "    return\n"
    "\n"
    "\n"
    "@app.cell\n"
    "def _(GRPOTrainer, training_args):\n"
    "    # the trainer\n"
    "    trainer = GRPOTrainer(\n"
    "        model='m',\n"
    "        reward_funcs=[],\n"
    "        args=training_args,\n"
    "    )\n"
    "    return (trainer,)\n"
    "\n"
    "\n"
    "if __name__ == '__main__':\n"
    "    app.run()\n"
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _line(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_a_literal_config_script_gets_the_patch_after_its_imports(tmp_path: Path) -> None:
    path = _write(tmp_path, "train.py", LITERAL)
    fix = fix_file(path)
    assert fix.problems == [] and fix.changed, fix.problems
    new = fix.new_text
    ast.parse(new)
    applied = _line(new, "kl_patches.trl.apply(")
    assert _line(new, "import kl_patches.trl") == applied - 1
    assert _line(new, "from trl import") < applied < _line(new, "def main")
    assert '"estimator": "k1", "placement": "reward", "coef": 0.04' in new
    assert "beta=0.0" in new and "scale_rewards=" in new  # the change set's config edits
    write_fix(fix, backup=False)
    (entry,) = audit(str(path))
    assert entry.status == "unbiased", [f.code for f in entry.findings]
    config = entry.reading.config
    assert (config.estimator, config.placement, config.coef) == ("k1", "reward", 0.04)
    assert "kl-patches" in entry.reading.trainer
    assert any("entry_point" in ln for ln in summary(fix))


def test_the_patch_goes_first_where_no_import_comes_before_the_trainer() -> None:
    text = (
        '"""Doc."""\n'
        "from __future__ import annotations\n"
        "\n"
        "\n"
        "def main():\n"
        "    from trl import GRPOConfig, GRPOTrainer\n"
        "    GRPOTrainer(model='m', args=GRPOConfig(beta=0.04), reward_funcs=[])\n"
    )
    new = add_apply(text, "kl_patches.trl --kl k1-in-reward --kl.coef 0.1")
    ast.parse(new)
    assert _line(new, "from __future__") + 2 == _line(new, "import kl_patches.trl")
    assert _line(new, "kl_patches.trl.apply(") < _line(new, "def main")
    (launch,) = read_python(new, "x").launches
    assert launch.kl is not None and launch.kl["coef"] == 0.1


def test_a_command_line_config_is_fixed_by_the_patch_whatever_beta_the_launch_passes(
    tmp_path: Path,
) -> None:
    """TRL 0.14 reads GRPOConfig from the command line here and has no scale_rewards: the
    patch is written, beta is left to it (the launch's --beta is taken over), and the group
    std scaling, which 0.14 always does, is the user's choice."""
    path = _write(tmp_path, "grpo.py", PARSER)
    versions = {"trl": "0.14.0"}
    fix = fix_file(path, versions=versions)
    assert fix.problems == [] and fix.changed, fix.problems
    assert "beta" not in fix.new_text and "scale_rewards" not in fix.new_text
    assert '"reward_shape": "sequence"' in fix.new_text  # 0.14-0.26: a sequence-level reward
    (line,) = [ln for ln in summary(fix) if "beta=0.0" in ln]  # said as what the patch does
    assert "beta=0.0 (by the patch at run time" in line, line
    (after,) = fix.after  # 0.14 always divides by the group std: reported, not blocking
    assert "trl.std_scaled_kl" in {f.code for f in after.findings}
    write_fix(fix, backup=False)
    launch = _write(tmp_path, "run.sh", "python grpo.py --beta 0.5 --output_dir o\n")
    for source in (path, launch):
        (entry,) = audit(str(source), version=versions)
        config = entry.reading.config
        assert entry.status == "unbiased", (source, [f.code for f in entry.findings])
        assert (config.estimator, config.placement, config.coef) == ("k1", "reward", 0.04)


def test_a_command_line_config_on_a_release_with_scale_rewards_sends_it_to_the_launch(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, "grpo.py", PARSER)
    fix = fix_file(path, versions={"trl": "0.17.0"})  # beta 0.04 by default before 0.19
    assert not fix.changed
    assert any("--scale_rewards in the launch command" in p for p in fix.problems), fix.problems


def test_a_marimo_notebook_gets_the_patch_inside_the_trainer_cell(tmp_path: Path) -> None:
    path = _write(tmp_path, "notebook.py", MARIMO)
    fix = fix_file(path)
    assert fix.problems == [] and fix.changed, fix.problems
    new = fix.new_text
    tree = ast.parse(new)
    cells = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert len(cells) == 3 and all(
        ast.unparse(c.decorator_list[0]).startswith("app.cell") for c in cells
    )
    body = [ast.unparse(s) for s in cells[2].body]
    assert body[0] == "import kl_patches.trl" and body[1].startswith("kl_patches.trl.apply(")
    assert body[2].startswith("trainer = GRPOTrainer(")
    assert "# the trainer" in new  # the comment stays with its statement
    assert "beta=0.0" in ast.unparse(cells[0])  # the config cell, followed from the parameter
    write_fix(fix, backup=False)
    (entry,) = audit(str(path))
    assert entry.status == "unbiased", [f.code for f in entry.findings]


def test_a_marimo_parameter_no_cell_returns_is_refused(tmp_path: Path) -> None:
    text = MARIMO.replace("return GRPOTrainer, training_args", "return (GRPOTrainer,)")
    path = _write(tmp_path, "notebook.py", text)
    fix = fix_file(path)
    assert not fix.changed


UNSLOTH_NOTEBOOK = (
    "import marimo\n"
    "\n"
    "app = marimo.App()\n"
    "\n"
    "\n"
    "@app.cell\n"
    "def _():\n"
    "    from unsloth import FastLanguageModel\n"
    "    model = FastLanguageModel.from_pretrained('m')\n"
    "    return (model,)\n"
    "\n"
    "\n"
    "@app.cell\n"
    "def _():\n"
    "    prompt_length = len(open('data.txt').read())\n"
    "    from trl import GRPOConfig, GRPOTrainer\n"
    "    training_args = GRPOConfig(\n"
    "        output_dir='o',\n"
    "        warmup_ratio=0.1,\n"
    "        loss_type='bnpo',\n"
    "        max_completion_length=1024 - prompt_length,\n"
    "    )\n"
    "    return GRPOTrainer, training_args\n"
    "\n"
    "\n"
    "@app.cell\n"
    "def _(GRPOTrainer, model, training_args):\n"
    "    trainer = GRPOTrainer(model=model, args=training_args, reward_funcs=[])\n"
    "    return (trainer,)\n"
    "\n"
    "\n"
    "if __name__ == '__main__':\n"
    "    app.run()\n"
)
"""An unsloth GRPO notebook of the benchmark's shape: unsloth imported in one cell, a config
with a field transformers 5 dropped (warmup_ratio), unsloth's default beta (not set) and a
max_completion_length computed at run time, the trainer built in a third cell."""


def test_an_unsloth_script_gets_unsloths_own_loss_patch(tmp_path: Path) -> None:
    """kl_patches.trl refuses unsloth's generated trainer; the fix applies unsloth's own
    loss-side patch (k2 on the sequence log-ratio) in the trainer's cell, renames warmup_ratio
    to warmup_steps and pins beta; the written notebook re-audits clean and unbiased."""
    path = _write(tmp_path, "notebook.py", UNSLOTH_NOTEBOOK)
    fix = fix_file(path, versions={"trl": "1.16.0"})
    assert fix.problems == [] and fix.changed, fix.problems
    new = fix.new_text
    tree = ast.parse(new)
    cells = [f for f in tree.body if isinstance(f, ast.FunctionDef)]
    assert len(cells) == 3 and all(ast.unparse(f.decorator_list[0]) == "app.cell" for f in cells)
    trainer_cell = ast.unparse(cells[2])
    assert "import kl_patches.adapters.trl.unsloth" in trainer_cell
    applied = _line(new, "kl_patches.adapters.trl.unsloth.apply(")
    assert applied < _line(new, "trainer = GRPOTrainer(")
    assert '"estimator": "k2", "placement": "loss", "coef": 0.001, "granularity": "sequence"' in new
    assert "warmup_steps=0.1" in new and "warmup_ratio" not in new
    assert "beta=0.001" in new
    assert "kl_patches.trl.apply" not in new
    write_fix(fix, backup=False)
    (entry,) = audit(str(path), version={"trl": "1.16.0"})
    assert entry.status == "unbiased", [(f.code, f.severity) for f in entry.findings]
    config = entry.reading.config
    assert (config.estimator, config.placement, config.granularity) == ("k2", "loss", "sequence")
    severity = {f.code: f.severity for f in entry.findings}
    assert "trl.unsloth_loss" not in severity and "trl.field_rejected" not in severity
    assert severity.get("trl.unresolved_settings") == "info"  # the KL no longer reads it


def test_an_unsloth_patch_value_goes_after_the_unsloth_import_in_a_plain_script() -> None:
    text = "import unsloth\n" + LITERAL.split('"""Train."""\n')[1]
    value = "kl_patches.adapters.trl.unsloth --kl k2-in-loss --kl.granularity sequence"
    new = add_apply(text, value)
    ast.parse(new)
    assert _line(new, "import unsloth") < _line(new, "kl_patches.adapters.trl.unsloth.apply(")
    (launch,) = read_python(new, "x").launches
    assert launch.kl_module == "kl_patches.adapters.trl.unsloth"
    assert (launch.kl or {}).get("estimator") == "k2"


def test_applying_the_same_patch_twice_adds_it_once() -> None:
    value = "kl_patches.trl --kl k1-in-reward --kl.coef 0.04"
    once = add_apply(LITERAL, value)
    assert add_apply(once, value) == once and once.count("import kl_patches.trl") == 1


def test_a_later_apply_that_wins_is_an_error() -> None:
    text = LITERAL.replace(
        "def main():\n", "def main():\n    kl_patches.trl.apply('k3-in-loss')\n"
    ).replace("import os\n", "import os\nimport kl_patches.trl\n")
    with pytest.raises(PythonEditError, match="another apply"):
        add_apply(text, "kl_patches.trl --kl k1-in-reward --kl.coef 0.04")


def test_launcher_values_are_read_or_refused() -> None:
    module, config, given = launcher_config(
        "kl_patches.trl --kl k1-in-reward --kl.coef 0.02 --kl.reward_shape sequence"
    )
    assert (module, config.coef, config.reward_shape, given) == (
        "kl_patches.trl",
        0.02,
        "sequence",
        {"coef", "reward_shape"},
    )
    for bad in (
        "trl grpo",
        "kl_patches.trl --kl",
        "kl_patches.trl --beta 0",
        "kl_patches.trl --kl k9-in-x",
    ):
        with pytest.raises(PythonEditError):
            launcher_config(bad)
