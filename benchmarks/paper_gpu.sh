#!/usr/bin/env bash
# The paper miniature on the GPU machine (benchmarks/paper_gpu.py), at most about 7 minutes.
#
# Run from the repository root, with the wheels of TRL and the packages the machine lacks in
# .whl/ (see docs/results.md, "On a GPU"), e.g. through the device tool:
#   bash benchmarks/paper_gpu.sh            (writes to $OUT)
#   PAPER_GPU_TINY=1 bash benchmarks/paper_gpu.sh   (CPU smoke test: a few minutes, mostly imports)
# Outputs (at most 6 files in $OUT): env.txt, log.txt, runs.jsonl, table.md,
# paper_gpu_curves.png, paper_gpu_summary.png.
set -uo pipefail
OUT=${OUT:-/tmp/paper-gpu-out}
mkdir -p "$OUT"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1 && [ -z "${PAPER_GPU_TINY:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TRL_EXPERIMENTAL_SILENCE=1 TOKENIZERS_PARALLELISM=false
PY=${PYTHON:-python3}
# Fail fast (seconds, not a wasted run) when the carried wheels do not fit the machine's
# packages: datasets 5.2 needs pyarrow >= 24 and huggingface_hub >= 1.31, which the machine has.
"$PY" -c "import pyarrow, huggingface_hub, transformers, accelerate, datasets, trl, torch
print('preflight:', 'pyarrow', pyarrow.__version__, 'hub', huggingface_hub.__version__,
      'transformers', transformers.__version__, 'accelerate', accelerate.__version__,
      'datasets', datasets.__version__, 'trl', trl.__version__, 'torch', torch.__version__,
      'cuda', torch.cuda.is_available())" 2>&1 | tee "$OUT/log.txt" | tail -3
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "preflight failed: see above" >&2; exit 1; }
if [ -n "${PAPER_GPU_TINY:-}" ]; then
  ARGS=(--tiny --workers 2 --budget-min 10)
  LIMIT=900
else
  ARGS=(--workers "${PAPER_GPU_WORKERS:-12}" --budget-min "${PAPER_GPU_BUDGET:-4.5}")
  LIMIT=${PAPER_GPU_LIMIT:-400}
fi
timeout -k 10 "$LIMIT" "$PY" benchmarks/paper_gpu.py --out "$OUT" "${ARGS[@]}" 2>&1 | tee -a "$OUT/log.txt"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ] && [ -s "$OUT/runs.jsonl" ]; then  # cut short: report what finished
  "$PY" benchmarks/paper_gpu.py --out "$OUT" --report-only 2>&1 | tee -a "$OUT/log.txt"
fi
exit "$status"
