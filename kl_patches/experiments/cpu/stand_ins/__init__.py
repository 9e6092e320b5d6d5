"""Stand-ins for ``vllm`` and ``flash_attn``, for the CPU trial of OpenRLHF only.

This folder goes on ``PYTHONPATH`` (so ``import vllm`` finds ``./vllm``) in the processes of a
``kl-patches smoke openrlhf`` run and of the end-to-end tests, never in a real run: neither
package installs on a CPU machine, and OpenRLHF 0.11.x imports both at module level.

* ``vllm``: answers exactly what OpenRLHF calls: ``AsyncEngineArgs``, ``AsyncLLMEngine``
  (sampling token by token with transformers, vLLM-shaped outputs with log-probs,
  ``collective_rpc`` into OpenRLHF's own ``WorkerWrap`` for the weight sync),
  ``SamplingParams``, ``TokensPrompt``, ``random_uuid``, ``StatelessProcessGroup`` (a TCPStore)
  and ``PyNcclCommunicator`` (a gloo group broadcasting on CPU).
* ``flash_attn``: import-only, version 0.0.0 so that transformers treats flash-attn as
  unavailable; its functions raise if called.
"""
