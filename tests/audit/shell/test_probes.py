"""An accelerator probe (``python3 -c 'import torch_npu'``) picks a launch script's device: the
shape of verl's examples since 0.9.0, which then branch on the device (and on a machine tag
and the rollout backend) into arrays of overrides. The probe is read as failing (an NVIDIA GPU
machine), so the script runs one launch, as bash does on such a machine, and the launch
carries an ``accelerator_assumed`` finding naming the other run; before issue 33 the probe's
unknown value made every ``case`` arm a launch (three or four phantom launches)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kl_patches.audit import audit
from kl_patches.audit.shell import parse_script
from kl_patches.audit.shell.probes import probed_package

SCRIPT = """#!/usr/bin/env bash
set -xeuo pipefail
DEVICE=${DEVICE:-{probe}}
BACKEND=${BACKEND:-vllm}
TAG=${TAG:-}

case "${DEVICE}" in
    gpu | npu) ;;
    *) echo "bad DEVICE ${DEVICE}" >&2; exit 1 ;;
esac

EXTRA=()
case "${DEVICE}" in
    gpu)
        mini=64
        case "${TAG}" in
            big) EXTRA+=(actor_rollout_ref.rollout.enforce_eager=True) ;;
            *) ;;
        esac
        ;;
    npu)
        mini=16
        EXTRA+=(actor_rollout_ref.actor.use_torch_compile=False)
        if [ "${BACKEND}" = sglang ]; then
            EXTRA+=(+actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=ascend)
        fi
        ;;
esac

ACTOR=(
    actor_rollout_ref.actor.use_kl_loss=True
    actor_rollout_ref.actor.kl_loss_coef=0.003
    actor_rollout_ref.actor.ppo_mini_batch_size=${mini}
)
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=64 \\
    "${ACTOR[@]}" "${EXTRA[@]}" "$@"
"""

PROBES = [
    "$(python3 -c 'import torch_npu' 2>/dev/null && echo npu || echo gpu)",
    '$(python -c "import torch_npu" >/dev/null 2>&1 && echo npu || echo gpu)',
    "$(python3 -c 'import torch_npu' &>/dev/null && echo npu || echo gpu)",
]


@pytest.mark.parametrize("probe", PROBES)
def test_the_probe_reads_as_failing_and_the_script_runs_one_launch(
    tmp_path: Path, probe: str
) -> None:
    path = tmp_path / "run_qwen3_fsdp.sh"
    path.write_text(SCRIPT.replace("{probe}", probe))
    (entry,) = audit(path, version="verl=0.9.1")
    assert entry.reading.config.placement == "loss"
    assert entry.reading.config.coef == pytest.approx(0.003)
    codes = {f.code for f in entry.findings}
    assert "branch_dependent" not in codes
    (found,) = [f for f in entry.findings if f.code == "accelerator_assumed"]
    assert found.severity == "info"
    assert "Ascend NPUs" in found.message and "'npu'" in found.message, found.message
    assert "'gpu'" in found.message
    assert "--var DEVICE=VALUE" in found.message  # DEVICE=${DEVICE:-$(probe)}


def test_a_plain_assignment_names_no_variable_to_set() -> None:
    # DEVICE=$(probe): the script overwrites any DEVICE given, so no --var hint
    script = parse_script(f"DEVICE={PROBES[0]}\nrun $DEVICE\n")
    (launch,) = [c for c in script.commands if c.words[0] == "run"]
    assert launch.words == ["run", "gpu"]
    (assumed,) = launch.assumed
    assert "--var" not in assumed and "'npu'" in assumed


def test_the_gpu_arm_is_the_one_read() -> None:
    script = parse_script(SCRIPT.replace("{probe}", PROBES[0]))
    (launch,) = [c for c in script.commands if c.words[0] == "python3" and len(c.words) > 3]
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=64" in launch.words
    assert not any("use_torch_compile" in w for w in launch.words)
    assert launch.branch == ()
    assert launch.assumed and "torch_npu" in launch.assumed[0]


def test_a_set_device_variable_reads_the_other_run() -> None:
    script = parse_script(SCRIPT.replace("{probe}", PROBES[0]), {"DEVICE": "npu"})
    (launch,) = [c for c in script.commands if c.words[0] == "python3" and len(c.words) > 3]
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=16" in launch.words
    assert launch.assumed == ()  # the probe never ran: ${DEVICE:-...} had a value


def test_a_probe_as_an_if_condition_reads_as_failing() -> None:
    text = "if python3 -c 'import torch_npu' 2>/dev/null; then run npu; else run gpu; fi\nrun end\n"
    script = parse_script(text)
    runs = [c for c in script.commands if c.words[0] == "run"]
    assert [c.words for c in runs] == [["run", "gpu"], ["run", "end"]]
    assert all(c.assumed for c in runs)


@pytest.mark.parametrize(
    "text",
    [
        # not a vendor accelerator package: unknown, every branch is read (unchanged)
        "D=$(python3 -c 'import vllm' 2>/dev/null && echo a || echo b)\n",
        # a probe piped into something else: not the idiom
        "D=$(python3 -c 'import torch_npu' | grep x && echo a || echo b)\n",
        # a probe whose output is kept (not a redirection to /dev/null)
        "D=$(python3 -c 'import torch_npu' 2>err.log && echo a || echo b)\n",
    ],
)
def test_other_command_output_stays_unknown(text: str) -> None:
    script = parse_script(text + 'case "$D" in a) run a ;; b) run b ;; esac\n')
    runs = [c for c in script.commands if c.words[0] == "run"]
    assert [c.words for c in runs] == [["run", "a"], ["run", "b"]]
    assert all(c.branch for c in runs)
    assert not any(c.assumed for c in runs)


@pytest.mark.parametrize(
    ("words", "package"),
    [
        (["python3", "-c", "import torch_npu"], "torch_npu"),
        (["/usr/bin/python3.10", "-c", "import habana_frameworks.torch"], "habana_frameworks"),
        (["python", "-c", "import torch"], None),
        (["python3", "-c", "import torch_npu; print(1)"], None),
        (["python3", "train.py", "import torch_npu"], None),
    ],
)
def test_probed_package(words: list[str], package: str | None) -> None:
    assert probed_package(words) == package
