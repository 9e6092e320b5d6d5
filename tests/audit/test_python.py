"""The Python reader: which trainer a script builds and with what, from its syntax tree only."""

from __future__ import annotations

import pytest

from kl_patches.audit.model import InputError
from kl_patches.audit.python import read_python


def test_config_keywords_constants_dicts_and_attributes() -> None:
    src = (
        "import os\nfrom trl import GRPOConfig, GRPOTrainer\n"
        "BETA = 0.01 * 2\nBASE = {'num_iterations': 3}\n"
        "args = GRPOConfig(beta=BETA, **BASE, loss_type='dr_' + 'grpo',\n"
        "                  max_completion_length=int(os.environ.get('MCL', '128')))\n"
        "args.scale_rewards = 'none'\n"
        "GRPOTrainer(model='m', reward_funcs=[], args=args)\n"
    )
    (launch,) = read_python(src, "s.py").launches
    assert (launch.library, launch.label, launch.line) == ("trl", "grpo", 8)
    assert launch.kwargs == {
        "beta": 0.02,
        "num_iterations": 3,
        "loss_type": "dr_grpo",
        "max_completion_length": 128,  # the default of os.environ.get: a clean environment
        "scale_rewards": "none",
    }
    assert launch.unresolved == [] and not launch.from_argv


def test_positional_config_subclass_and_patcher() -> None:
    src = (
        "import unsloth\nfrom trl import RLOOConfig, RLOOTrainer\n"
        "class Mine(RLOOTrainer):\n    def _generate_and_score_completions(self, x):\n"
        "        return x\n    def log(self, x):\n        pass\n"
        "Mine('m', [], RLOOConfig(beta=0.1))\n"
    )
    script = read_python(src, "s.py")
    (launch,) = script.launches
    assert launch.label == "rloo" and launch.kwargs == {"beta": 0.1}
    assert launch.subclass == "Mine"
    assert launch.overrides == ("_generate_and_score_completions", "log")
    assert script.patchers == ["unsloth"]


def test_parser_configs_come_from_the_command_line() -> None:
    src = (
        "from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser\n"
        "types = (ScriptArguments, GRPOConfig, ModelConfig)\n"
        "def main():\n    parser = TrlParser(types)\n"
        "    s, t, m = parser.parse_args_and_config()\n    t.beta = 0.0\n"
        "    GRPOTrainer(model=m.model_name_or_path, args=t)\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    (launch,) = read_python(src, "s.py").launches
    assert launch.from_argv and launch.kwargs == {"beta": 0.0}


def test_unresolved_values_are_listed_not_guessed() -> None:
    src = (
        "from trl import GRPOConfig, GRPOTrainer\nimport json\n"
        "cfg = json.load(open('c.json'))\n"
        "args = GRPOConfig(beta=cfg['beta'], **cfg)\nGRPOTrainer(model='m', args=args)\n"
    )
    (launch,) = read_python(src, "s.py").launches
    assert launch.kwargs == {}
    assert "beta" in launch.unresolved and "**cfg" in launch.unresolved


def test_kl_patches_trainer_and_apply() -> None:
    src = (
        "from kl_patches import KLConfig\nfrom kl_patches.trl import GRPOTrainer as KT\n"
        "import kl_patches.trl\nfrom trl import RLOOTrainer\n"
        "KT(model='m', kl=KLConfig.parse('k3-in-both', coef=0.02))\n"
        "kl_patches.trl.apply('k1-in-reward')\nRLOOTrainer(model='m')\n"
    )
    first, second = read_python(src, "s.py").launches
    assert first.kl is not None and first.kl["placement"] == "both" and first.kl["coef"] == 0.02
    assert second.kl is not None and second.kl["estimator"] == "k1"


@pytest.mark.parametrize(
    "imports, call",
    [
        ("import kl_patches.adapters.trl.unsloth\n", "kl_patches.adapters.trl.unsloth.apply"),
        ("from kl_patches.adapters.trl.unsloth import apply as patch\n", "patch"),
    ],
)
def test_unsloths_own_patch_is_read_as_the_trl_trainers_kl(imports: str, call: str) -> None:
    """``kl_patches.adapters.trl.unsloth.apply`` sets the KL of the TRL trainers built after
    it (unsloth's generated GRPOTrainer), and the reader says which patch it was."""
    src = (
        "import unsloth\nfrom trl import GRPOConfig, GRPOTrainer\n" + imports
        + f"{call}({{'estimator': 'k2', 'placement': 'loss', 'granularity': 'sequence'}})\n"
        "GRPOTrainer(model='m', args=GRPOConfig(beta=0.001))\n"
    )  # fmt: skip
    (launch,) = read_python(src, "s.py").launches
    assert launch.kl is not None and launch.kl["estimator"] == "k2"
    assert launch.kl_module == "kl_patches.adapters.trl.unsloth"


def test_other_trainers_hydra_apps_and_errors() -> None:
    script = read_python("from trl import DPOTrainer\nDPOTrainer(model='m')\n", "d.py")
    assert script.launches == [] and "DPO" in script.others[0][1]
    hydra = read_python(
        "import hydra\nimport verl\n@hydra.main(config_path='cfg', config_name='x')\n"
        "def main(c):\n    pass\n",
        "h.py",
    )
    assert hydra.hydra == {"config_path": "cfg", "config_name": "x"}
    assert "verl" in hydra.libraries
    with pytest.raises(InputError, match="not valid Python"):
        read_python("def (:\n", "bad.py")
    with pytest.raises(InputError, match="nested too deeply"):
        read_python("x = " + "(" * 100000 + ")" * 100000, "deep.py")
