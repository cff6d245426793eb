#!/usr/bin/env bash
# The GPU check of issue 16, in about 8 minutes on one GPU, from a clean copy of the repository:
#   pytest -m gpu; bf16 vs fp32 training tokens/s and MFU of the paper's base model on ~25k-token batches
#   against torch.nn.Transformer (same process); the SDPA backend per score; the first-time cost of a batch
#   shape (cuDNN attention first vs off); tokens/s at 1x and 2x the batch (host-bound?); beam-5 sentences/s;
#   1/2/4/8 small trials packed on the GPU through `ablate sweep run --parallel K`; torch.compile.
# It prints one JSON and writes results/gpu/<date>.json (and copies it to $OUT when that is set).
#
#   scripts/gpu-check.sh [--data DIR] [--stages tests,training,packed,decoding,compile] [--no-compile]
#     (data: ../shared/data/multi30k, else the copy in .gpu-data/multi30k that scripts/gpu-prepare.sh makes)
#   scripts/gpu-check.sh --stages quality                 # ~9.5 min: the Multi30k base-size run alone
#   scripts/gpu-check.sh --stages compile --cap compile=400   # one stage with a longer cap (H100: >90 s to compile)
#   scripts/gpu-check.sh --tiny --stages training         # CPU smoke run
#   python -m scripts.gpu_check.check --help               # every option
#
# With the device tool (a lent H200; 15 minutes of device time a session, 10 a command): run
# scripts/gpu-prepare.sh here first, then  run(command="scripts/gpu-check.sh", carry=[".whl", ".gpu-data"],
# timeout_s=560); the JSON comes back through $OUT: copy it to results/gpu/ and commit it. The quality
# stage does not fit in the same lease as the rest (7.5 + ~1.5 minutes): give it a lease of its own, or
# shorten it (--quality-minutes) and the others (--stages, --budget-s).
#
# Install: whatever of the project's imports the machine lacks comes from wheels carried in .whl/
# (scripts/gpu-prepare.sh downloads them where pip works), or from PyPI where there is a network.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=disabled WANDB_SILENT=true PYTHONUNBUFFERED=1
IMPORTS="torch, pytorch_lightning, datasets, pyarrow, sacrebleu, tokenizers, typer, rich, yaml, filelock, sweeps, jsonschema, pytest"
probe() { "$PY" -c "import warnings; warnings.simplefilter('ignore'); import $IMPORTS" 2>&1 | tail -1; }
if [ -n "$(probe)" ]; then
  if compgen -G ".whl/*.whl" >/dev/null; then
    echo "[gpu-check] installing carried wheels: $(ls .whl | wc -l) files" >&2
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/ablate-site .whl/*.whl >&2
    export PYTHONPATH="$PYTHONPATH:/tmp/ablate-site"
  else
    echo "[gpu-check] installing the project from PyPI" >&2
    "$PY" -m pip install -q -e ".[test]" >&2
  fi
  if [ -n "$(probe)" ]; then
    echo "error: still cannot import the project's dependencies ($(probe)); add the missing wheel to .whl/" >&2
    exit 2
  fi
fi
mkdir -p results/gpu && marker=$(mktemp) && rc=0
"$PY" -m scripts.gpu_check.check "$@" || rc=$?
if [ -n "${OUT:-}" ] && [ -d "${OUT}" ]; then  # the device tool brings back what is under $OUT
  find results/gpu -name '*.json' -newer "$marker" -exec cp {} "$OUT"/ \;
fi
exit $rc
