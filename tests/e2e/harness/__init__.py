"""Test harness: verl's, OpenRLHF's and TRL's own trainers end to end on CPU (test-only code).

Reusable: :func:`kl_patches.experiments.tiny.build` writes the tiny model, tokenizer, datasets
and reward into a directory once; :func:`.verl.overrides`, :func:`.openrlhf.flags` and
:func:`.trl.write_config` give the library's own configuration for a short run of it, and each
module's ``environment()`` the process environment that loads the stand-ins. :mod:`.releases`
names the supported releases (verl 0.9.1, OpenRLHF 0.11.2, TRL 1.16.0) and refuses others with
a message.

What stands in for what a CPU machine lacks is the package's, shared with
``kl-patches smoke verl|openrlhf`` (one copy): :mod:`kl_patches.experiments.cpu` lists every
piece (verl's ``cpu`` platform, FSDP engines, gloo, unpinned offload and ``hfcpu`` rollout;
OpenRLHF's ``vllm`` and ``flash_attn`` stand-ins, CUDA no-ops, CPU device mesh, DeepSpeed without
its C++ ops, logical GPUs for Ray). The harness loads them through its own hooks, which add what
only the tests need: :mod:`.verl_cpu` (verl's ``VERL_USE_EXTERNAL_MODULES``) and
``startup/sitecustomize.py`` (every OpenRLHF and TRL process).
TRL: nothing stands in (TRL runs on CPU); ``accelerate launch`` runs two ranks over gloo.

Test-only recording hooks (``KL_E2E_RECORD``): :mod:`.verl_record`, :mod:`.openrlhf_record`,
:mod:`.trl_record` write, from the running processes, the rewards, log-probs, advantages and
losses each library actually used; ``tests/e2e/recompute.py`` recomputes them. :mod:`.profile`
(``KL_E2E_PROFILE``) times kl-patches' KL code inside the loop for ``benchmarks/e2e_overhead.py``.
"""
