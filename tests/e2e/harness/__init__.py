"""Test harness: verl's, OpenRLHF's and TRL's own trainers end to end on CPU (test-only code).

Reusable: :func:`.tiny.build` writes the tiny model, tokenizer, datasets and reward into a
directory once; :func:`.verl.overrides`, :func:`.openrlhf.flags` and :func:`.trl.write_config`
give the library's own configuration for a short run of it, and each module's ``environment()``
the process environment that loads the stand-ins below. :mod:`.releases` names the supported
releases (verl 0.9.1, OpenRLHF 0.11.2, TRL 1.16.0) and refuses others with a message.

Everything here stands in for something a CPU machine lacks, and nothing is used outside tests:

verl (:mod:`.verl_cpu`, loaded by verl itself in every process through
``VERL_USE_EXTERNAL_MODULES``):
    * a ``cpu`` platform (``VERL_PLATFORM=cpu``) for the GPU platform verl assumes: device
      ``cpu``, backend ``gloo``, a ``torch.cuda`` stand-in for the memory and seed queries;
    * the FSDP/FSDP2 engines registered for the ``cpu`` device (verl registers cuda and npu);
    * ``gloo`` for verl's ``"cpu:gloo,cpu:gloo"`` process-group backend, which torch refuses;
    * the reference model's CPU-offload policy without pinned memory (pinning needs a GPU);
    * the ``hfcpu`` rollout (:mod:`.verl_rollout`) for vLLM/SGLang: a Ray actor sampling with
      transformers, its replica, and the actor-side adapter that pushes the weights each step;
    * logical resources for Ray (``num_cpus=16``, ``num_gpus=1``, never used as CUDA).
OpenRLHF (``startup/sitecustomize.py`` in every process, :mod:`.openrlhf_cpu`):
    * a working ``vllm`` (``openrlhf_stubs/vllm``) for vLLM: engine args, an async engine that
      samples with transformers and returns vLLM-shaped outputs with log-probs, the weight-sync
      group (a TCPStore rendezvous and a gloo broadcast for NCCL), OpenRLHF's worker extension
      receiving the weights into CPU tensors;
    * the import-only ``flash_attn`` of ``tests/adapters/openrlhf/openrlhf_support/stubs``
      (OpenRLHF imports it at module level; nothing calls it);
    * ``torch.cuda`` no-ops (``set_device``, ``synchronize``, ``empty_cache``,
      ``current_stream``; ``current_device`` answering ``"cpu"``), a CPU device mesh for
      ``init_device_mesh("cuda")``, the replay buffer's device on the CPU;
    * DeepSpeed without its JIT-compiled C++ ops (shared-memory all-reduce, FusedAdam: its own
      ``torch_adam`` option instead);
    * logical GPUs for Ray (``RAY_OVERRIDE_RESOURCES``: every OpenRLHF actor asks for one).
TRL: nothing stands in (TRL runs on CPU); ``accelerate launch`` runs two ranks over gloo.

Test-only recording hooks (``KL_E2E_RECORD``): :mod:`.verl_record`, :mod:`.openrlhf_record`,
:mod:`.trl_record` write, from the running processes, the rewards, log-probs, advantages and
losses each library actually used; ``tests/e2e/recompute.py`` recomputes them. :mod:`.profile`
(``KL_E2E_PROFILE``) times kl-patches' KL code inside the loop for ``benchmarks/e2e_overhead.py``.
"""
