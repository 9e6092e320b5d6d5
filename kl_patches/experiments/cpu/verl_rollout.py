"""The ``hfcpu`` rollout backend (the CPU trial only): generation with transformers in a Ray actor.

verl 0.9.1 registers only vLLM, SGLang and TRT-LLM rollouts, all GPU servers; its
``HFRollout`` is no longer reachable. This backend has the three parts verl's trainer talks to:

* :class:`HFServer`, the server actor the agent loop calls ``generate`` on: it samples with the
  tiny model at the configured temperature and returns verl's ``TokenOutput`` with the sampled
  tokens' log-probabilities and the training step of its weights;
* :class:`CpuReplica`, the replica that starts one server per actor rank group;
* :class:`CpuServerAdapter`, the rollout object inside the actor worker: its ``update_weights``
  sends the actor's full state dict to the server each step (the weights then reach the sampler,
  which ``training/rollout_probs_diff_max`` shows every step).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

SERVER_NAME = "kl_patches_hfcpu_server_{}"


class HFServer:
    """One sampler: the tiny model in float32, sampling token by token with a KV cache."""

    def __init__(self, config: Any, model_config: Any) -> None:
        from transformers import AutoModelForCausalLM

        path = getattr(model_config, "local_path", None) or model_config.path
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
        self.eos = self.model.config.eos_token_id
        self.response_length = int(config.response_length)
        self.global_steps = 0
        self.loads = 0

    def load_weights(self, state: dict[str, torch.Tensor], global_steps: int | None) -> int:
        """Load the actor's weights (every parameter must match a name here)."""
        own = self.model.state_dict()
        unknown = sorted(set(state) - set(own))
        if unknown:
            raise KeyError(f"weights the sampler does not have: {unknown[:5]}")
        self.model.load_state_dict(state, strict=False)
        self.loads += 1
        if global_steps is not None:
            self.global_steps = int(global_steps)
        return len(state)

    @torch.no_grad()
    def generate(
        self,
        request_id: str | None = None,
        prompt_ids: list[int] | None = None,
        sampling_params: dict[str, Any] | None = None,
        **_: Any,
    ) -> TokenOutput:
        params = dict(sampling_params or {})
        temperature = float(params.get("temperature", 1.0))
        max_tokens = int(params.get("max_tokens") or params.get("max_new_tokens") or 0)
        max_tokens = max_tokens or self.response_length
        ids = torch.tensor([list(prompt_ids or [])])
        out = self.model(input_ids=ids, use_cache=True)
        tokens: list[int] = []
        log_probs: list[float] = []
        for _step in range(max_tokens):
            logits = out.logits[0, -1].float()
            if temperature > 0:
                logp = torch.log_softmax(logits / temperature, -1)
                token = int(torch.multinomial(logp.exp(), 1))
            else:
                logp = torch.log_softmax(logits, -1)
                token = int(logp.argmax())
            tokens.append(token)
            log_probs.append(float(logp[token]))
            if token == self.eos:
                break
            out = self.model(
                input_ids=torch.tensor([[token]]),
                past_key_values=out.past_key_values,
                use_cache=True,
            )
        return TokenOutput(
            token_ids=tokens,
            log_probs=log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def state(self) -> dict[str, int]:
        """How many weight loads reached this sampler, and the step of its weights."""
        return {"loads": self.loads, "global_steps": self.global_steps}

    # the control calls verl's trainer makes on a server: nothing to do on a CPU sampler
    def wake_up(self, *a: Any, **k: Any) -> None:
        return None

    sleep = clear_kv_cache = abort_all_requests = resume_generation = wake_up
    release_kv_cache = resume_kv_cache = start_profile = stop_profile = wake_up


class CpuReplica(RolloutReplica):
    """One :class:`HFServer` per replica (a CPU actor; the actor ranks keep the logical GPUs)."""

    def rollout_worker_use_gpu(self) -> bool:
        return False

    async def launch_servers(self) -> None:
        server = (
            ray.remote(HFServer)
            .options(name=SERVER_NAME.format(self.replica_rank), num_cpus=0.1, max_concurrency=1)
            .remote(self.config, self.model_config)
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"hfcpu-{self.replica_rank}"


class CpuServerAdapter(BaseRollout):
    """The rollout inside the actor worker: pushes the actor's weights to its server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, *a: Any, **k: Any):
        super().__init__(config, model_config, device_mesh)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        size = int(self.config.tensor_model_parallel_size) * int(self.config.data_parallel_size)
        self.replica_rank = rank // max(size, 1)
        self.is_leader = rank % max(size, 1) == 0
        self.sleep_level = 2

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    async def update_weights(
        self,
        weights: Generator[tuple[str, torch.Tensor], None, None],
        wire_format: str = "named_tensors",
        **kwargs: Any,
    ) -> None:
        state = {}
        for name, tensor in weights:
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            state[name] = tensor.detach().to("cpu", copy=True)
        if self.is_leader:
            server = ray.get_actor(SERVER_NAME.format(self.replica_rank))
            await server.load_weights.remote(state, kwargs.get("global_steps"))
