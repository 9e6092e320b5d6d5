"""What verl and OpenRLHF lack on a CPU, for ``kl-patches smoke verl|openrlhf`` only.

The CPU trial runs each library's own trainer, launched as users launch it, on a tiny model
built locally (:func:`kl_patches.experiments.tiny.build`). Neither library trains on a CPU as
released, so a trial loads the stand-ins below into every process of its run, and only there:
nothing here is imported by ``import kl_patches``, by the adapters, by the launchers or by the
audit, and a real run (``kl-patches verl``, ``python -m kl_patches.openrlhf`` without the
trial's environment) never loads any of it. The end-to-end tests (``tests/e2e``) load the same
modules. Written against verl 0.9.1 and OpenRLHF 0.11.2 (:data:`RELEASES`), whose internals they
touch.

verl (:mod:`.verl_platform`, loaded by verl itself in every process through
``VERL_USE_EXTERNAL_MODULES``; :mod:`.verl_trial` gives the overrides and the environment):
    * a ``cpu`` platform (``VERL_PLATFORM=cpu``) for the GPU platform verl assumes: device
      ``cpu``, backend ``gloo``, a ``torch.cuda`` stand-in for the memory and seed queries;
    * the FSDP/FSDP2 engines registered for the ``cpu`` device (verl registers cuda and npu);
    * ``gloo`` for verl's ``"cpu:gloo,cpu:gloo"`` process-group backend, which torch refuses;
    * the reference model's CPU-offload policy without pinned memory (pinning needs a GPU);
    * the ``hfcpu`` rollout (:mod:`.verl_rollout`) for vLLM/SGLang: a Ray actor sampling with
      transformers, its replica, and the actor-side adapter that pushes the weights each step;
    * logical resources for Ray (``num_cpus=16``, ``num_gpus=1``, never used as CUDA).
OpenRLHF (:mod:`.openrlhf_shims`, installed in every process by ``startup/sitecustomize.py``
on ``PYTHONPATH``; :mod:`.openrlhf_trial` gives the flags and the environment):
    * a working ``vllm`` (``stand_ins/vllm``) for vLLM: engine args, an async engine that
      samples with transformers and returns vLLM-shaped outputs with log-probs, the weight-sync
      group (a TCPStore rendezvous and a gloo broadcast for NCCL), OpenRLHF's worker extension
      receiving the weights into CPU tensors;
    * an import-only ``flash_attn`` (``stand_ins/flash_attn``): OpenRLHF imports it at module
      level; nothing calls it;
    * ``torch.cuda`` no-ops (``set_device``, ``synchronize``, ``empty_cache``,
      ``current_stream``; ``current_device`` answering ``"cpu"``), a CPU device mesh for
      ``init_device_mesh("cuda")``, the replay buffer's device on the CPU;
    * DeepSpeed without its JIT-compiled C++ ops (shared-memory all-reduce, FusedAdam: its own
      ``torch_adam`` option instead);
    * logical GPUs for Ray (``RAY_OVERRIDE_RESOURCES``: every OpenRLHF actor asks for one).
TRL runs on a CPU as released: ``smoke trl`` needs none of this.
"""

from __future__ import annotations

RELEASES: dict[str, tuple[str, ...]] = {"verl": ("0.9.1",), "openrlhf": ("0.11.2",)}
"""Library -> the releases the stand-ins were written and run against."""
