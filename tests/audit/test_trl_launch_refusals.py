"""TRL launches the audit read wrong on real files (issue 33), each from a file of the same shape.

* a marimo notebook saved as ``.py`` (every cell an ``@app.cell`` function named ``_``, names
  passed between cells as parameters and return values) that builds ``GRPOConfig`` in one cell
  and ``GRPOTrainer`` in a later one, with ``from trl import ...`` inside the cell;
* a ``GRPOConfig`` keyword TRL 1.x refuses whose value the script computes at run time;
* a TrainingArguments field that the transformers a fresh TRL 1.x install gets no longer has;
* a flag given without a value (``--bf16`` then another flag), which HfArgumentParser accepts
  only for a boolean field with a default.

TRL is not imported: the audit reads the recorded data of each release.
"""

from __future__ import annotations

from pathlib import Path

from kl_patches.audit import audit

NOTEBOOK = """# /// script
# dependencies = ["marimo", "trl==0.22.2", "unsloth"]
# ///
import marimo

app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo
    return (mo,)


@app.cell
def _():
    from unsloth import FastLanguageModel
    model, tokenizer = FastLanguageModel.from_pretrained("some/model")
    maximum_length = len(tokenizer("x"))
    return maximum_length, model, tokenizer


@app.cell(hide_code=True)
def _(mo):
    mo.md("Train the model")
    return


@app.cell
def _(maximum_length):
    max_prompt_length = maximum_length + 1
    from trl import GRPOConfig, GRPOTrainer

    training_args = GRPOConfig(
        beta={beta},
        {extra}
        max_prompt_length=max_prompt_length,
        num_generations=2,
        output_dir="outputs",
    )
    return GRPOTrainer, training_args


@app.cell
def _(GRPOTrainer, model, tokenizer, training_args):
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=training_args)
    trainer.train()
    return


if __name__ == "__main__":
    app.run()
"""


def _notebook(tmp_path: Path, beta: float = 0.04, extra: str = "") -> Path:
    path = tmp_path / "grpo_notebook.py"
    path.write_text(NOTEBOOK.replace("{beta}", repr(beta)).replace("{extra}", extra))
    return path


def _codes(entry: object) -> dict[str, str]:
    return {f.code: f.severity for f in entry.findings}  # type: ignore[attr-defined]


def test_a_marimo_notebook_builds_one_grpo_trainer_from_its_cells(tmp_path: Path) -> None:
    (entry,) = audit(_notebook(tmp_path, beta=0.04), version="trl=0.22.2")
    assert entry.reading.library == "trl"
    assert entry.reading.settings["beta"] == 0.04  # the config cell's value reached the trainer
    assert entry.status != "error", _codes(entry)


def test_a_marimo_notebook_is_read_cell_by_cell_not_only_its_last_cell(tmp_path: Path) -> None:
    text = _notebook(tmp_path).read_text()
    # the same notebook without the marimo import is plain Python: only the last `_` counts
    plain = tmp_path / "plain.py"
    plain.write_text(text.replace("import marimo\n", "import os\n").replace("marimo.App", "App"))
    assert len(audit(_notebook(tmp_path), version="trl=0.22.2")) == 1
    entries = audit(plain, version="trl=0.22.2")
    # the trainer's `training_args` parameter then comes from nowhere: a trainer is still
    # found (every function definition is read), but its config is not the cell's
    assert len(entries) == 1
    assert entries[0].reading.settings["beta"] != 0.04


def test_a_field_set_from_a_run_time_value_is_still_refused_by_name(tmp_path: Path) -> None:
    (entry,) = audit(_notebook(tmp_path), version="trl=1.16.0")
    assert entry.status == "error"
    (refusal,) = [f for f in entry.findings if f.code == "trl.field_rejected"]
    assert "max_prompt_length" in refusal.message
    (older,) = audit(_notebook(tmp_path), version="trl=0.22.2")  # 0.22.2 still has it
    assert "trl.field_rejected" not in _codes(older)


def test_a_training_argument_transformers_5_dropped_is_refused_by_trl_1(tmp_path: Path) -> None:
    path = _notebook(tmp_path, extra="warmup_ratio=0.1,")
    (entry,) = audit(path, version="trl=1.16.0")
    messages = [f.message for f in entry.findings if f.code == "trl.field_rejected"]
    assert any("warmup_ratio" in m and "transformers 5.24.0" in m for m in messages), messages
    (older,) = audit(path, version="trl=0.22.2")  # installed with transformers 4.56
    assert "trl.field_rejected" not in _codes(older)


def _launch(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / "run_grpo.sh"
    path.write_text(
        'torchrun --nproc_per_node="8" \\\n'
        "    src/open_r1/grpo.py \\\n"
        "    --output_dir out \\\n"
        f"{flags}"
        "    --beta 0.04\n"
    )
    return path


def test_a_bare_bf16_is_refused_where_trl_declares_it_optional(tmp_path: Path) -> None:
    path = _launch(tmp_path, "    --bf16 \\\n    --report_to wandb \\\n")
    for version in ("1.16.0", "0.19.0"):  # bf16: bool | None = None from 0.19.0
        (entry,) = audit(path, version=f"trl={version}")
        assert entry.status == "error", version
        (refusal,) = [f for f in entry.findings if f.code == "trl.argument_rejected"]
        assert "--bf16" in refusal.message and "hf_argparser.py" in refusal.message
    (old,) = audit(path, version="trl=0.14.0")  # TrainingArguments' bf16: bool = False
    assert old.status != "error"
    assert old.reading.config.coef == 0.04


def test_a_bare_boolean_with_a_default_is_true(tmp_path: Path) -> None:
    (entry,) = audit(_launch(tmp_path, "    --use_vllm \\\n"), version="trl=1.16.0")
    assert "trl.argument_rejected" not in _codes(entry)
    assert entry.reading.settings["use_vllm"] is True


def test_a_string_flag_without_its_value_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("python src/open_r1/grpo.py --beta 0.04 --output_dir\n")
    (entry,) = audit(path, version="trl=1.16.0")
    assert entry.status == "error"
    (refusal,) = [f for f in entry.findings if f.code == "trl.argument_rejected"]
    assert "--output_dir" in refusal.message
