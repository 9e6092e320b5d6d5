"""vLLM stand-in for OpenRLHF on a CPU (the CPU trial only; see the ``stand_ins`` docstring)."""

from __future__ import annotations

import asyncio
import importlib
import os
import socket
from dataclasses import dataclass, field
from typing import Any

__version__ = "0.16.0"  # what OpenRLHF 0.11.x checks against: the >= 0.9 / >= 0.16 paths


class SamplingParams:
    """vLLM's sampling parameters: kept as attributes (temperature, max_tokens, logprobs, ...)."""

    def __init__(self, **kwargs: Any) -> None:
        self.temperature = 1.0
        self.top_p = 1.0
        self.top_k = -1
        self.max_tokens: int | None = None
        self.min_tokens = 0
        self.logprobs: int | None = None
        self.__dict__.update(kwargs)


class AsyncEngineArgs:
    """The engine's keyword arguments (model path, seed, dtype, worker extension, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


@dataclass
class Logprob:
    """vLLM's per-token log-probability entry."""

    logprob: float


@dataclass
class CompletionOutput:
    """vLLM's ``RequestOutput.outputs[i]``."""

    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str
    text: str = ""


@dataclass
class RequestOutput:
    """vLLM's generation result for one request."""

    request_id: str
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True


class _ModelRunner:
    def __init__(self, model: Any) -> None:
        self.model = _LoadableModel(model)


class _LoadableModel:
    """``model_runner.model`` with vLLM's ``load_weights([(name, tensor)])``."""

    def __init__(self, model: Any) -> None:
        self.hf = model
        self.loaded = 0

    def load_weights(self, weights: Any) -> None:
        import torch

        params = dict(self.hf.named_parameters())
        with torch.no_grad():
            for name, tensor in weights:
                if name not in params:
                    raise KeyError(f"vllm stand-in: no parameter {name!r} in the sampler")
                params[name].copy_(tensor.to(params[name].dtype))
                self.loaded += 1


def _update_weight_on_cpu(
    self: Any, name: str, dtype: Any, shape: Any, empty_cache: bool = False
) -> None:
    """OpenRLHF's ``WorkerWrap.update_weight`` on a CPU: the same receive (the trainer's
    broadcast through the weight-sync group) into a CPU tensor instead of a CUDA one."""
    import torch

    if dtype != self.model_config.dtype:
        raise TypeError(f"mismatch dtype: src {dtype}, dst {self.model_config.dtype}")
    weight = torch.empty(shape, dtype=dtype)
    self._model_update_group.broadcast(weight, src=0, stream=None)
    self.model_runner.model.load_weights(weights=[(name, weight)])


@dataclass
class _ModelConfig:
    dtype: Any


class AsyncLLMEngine:
    """One sampler process: the HF model, sampled token by token on CPU."""

    def __init__(self, args: AsyncEngineArgs) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(
            str(getattr(args, "dtype", "float32")), torch.float32
        )
        path = args.__dict__["model"]  # the engine's keyword arguments, kept as given
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype).eval()
        self.eos = self.model.config.eos_token_id
        self.generator = torch.Generator().manual_seed(int(getattr(args, "seed", 0)))
        self._worker = self._make_worker(args, dtype)
        self.output_processor = self
        self._unfinished = 0

    def _make_worker(self, args: AsyncEngineArgs, dtype: Any) -> Any:
        import torch

        if not torch.distributed.is_initialized():  # vLLM's workers have a default group
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            torch.distributed.init_process_group(
                "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1
            )
        base = object
        path = getattr(args, "worker_extension_cls", None)
        if path:
            module, _, name = path.rpartition(".")
            base = getattr(importlib.import_module(module), name)
        worker = type("Worker", (base,), {"update_weight": _update_weight_on_cpu})()
        worker.device = torch.device("cpu")
        worker.model_config = _ModelConfig(dtype)
        worker.model_runner = _ModelRunner(self.model)
        return worker

    @classmethod
    def from_engine_args(cls, args: AsyncEngineArgs) -> AsyncLLMEngine:
        """Build the engine (vLLM's constructor)."""
        return cls(args)

    async def is_sleeping(self) -> bool:
        return False

    async def collective_rpc(self, method: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """Run ``method`` of the worker extension (OpenRLHF's WorkerWrap) in a thread: its
        broadcast waits for the trainer's, which the trainer sends after this call started."""
        return [await asyncio.to_thread(getattr(self._worker, method), *args)]

    def get_num_unfinished_requests(self) -> int:
        return self._unfinished

    async def reset_prefix_cache(self) -> None:
        return None

    async def pause_generation(self, **_: Any) -> None:
        return None

    async def resume_generation(self) -> None:
        return None

    async def sleep(self, level: int = 1) -> None:
        return None

    async def wake_up(self, tags: Any = None) -> None:
        return None

    def _sample(self, prompt_ids: list[int], params: SamplingParams) -> CompletionOutput:
        import torch

        temperature = float(params.temperature)
        max_tokens = int(params.max_tokens or 16)
        tokens: list[int] = []
        logprobs: list[dict[int, Logprob]] = []
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([prompt_ids]), use_cache=True)
            for _ in range(max_tokens):
                logits = out.logits[0, -1].float()
                logp = torch.log_softmax(logits / temperature if temperature > 0 else logits, -1)
                if temperature > 0:
                    token = int(torch.multinomial(logp.exp(), 1, generator=self.generator))
                else:
                    token = int(logp.argmax())
                tokens.append(token)
                logprobs.append({token: Logprob(float(logp[token]))})
                if token == self.eos:
                    break
                out = self.model(
                    input_ids=torch.tensor([[token]]),
                    past_key_values=out.past_key_values,
                    use_cache=True,
                )
        finish = "stop" if tokens and tokens[-1] == self.eos else "length"
        return CompletionOutput(tokens, logprobs if params.logprobs is not None else None, finish)

    async def generate(self, prompt: Any, sampling_params: SamplingParams, request_id: str) -> Any:
        """vLLM's streaming generate: one final output per request."""
        ids = list(prompt["prompt_token_ids"])
        self._unfinished += 1
        try:
            output = self._sample(ids, sampling_params)
        finally:
            self._unfinished -= 1
        yield RequestOutput(request_id, ids, [output])


os.environ.setdefault("VLLM_STAND_IN", "1")
