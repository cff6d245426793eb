#!/usr/bin/env bash
# Run HERE (a machine with pip access), in the checkout, before lending the check to a GPU machine that has
# no network (the project's H200: Python 3.12, torch, Lightning, pytest, sacrebleu, tokenizers, pyarrow
# preinstalled; see the device tool's KINDS.md). It fills two folders that travel with the run (name both
# in the device tool's `carry`), both git-ignored:
#   .whl/       wheels of what that machine lacks (--no-deps, Python 3.12, manylinux x86_64)
#   .gpu-data/  a copy of Multi30k (../shared/data/multi30k does not travel)
# Then, on the GPU machine:  scripts/gpu-check.sh --data .gpu-data/multi30k
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Missing on the H200 image (KINDS.md's package list), pinned to what the project is tested with.
WHEELS=(datasets==4.8.5 dill==0.4.1 multiprocess==0.70.19 sweeps==0.3.0 jsonschema==4.26.0
        jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 jsonref==1.1.0
        pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5)
PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  PLATFORMS+=(--platform "$p")
done
mkdir -p .whl .gpu-data
for w in "${WHEELS[@]}"; do
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${PLATFORMS[@]}" -d .whl "$w"
done
rm -rf .gpu-data/multi30k && cp -r ../shared/data/multi30k .gpu-data/multi30k
du -sh .whl .gpu-data
echo "ready: carry [\".whl\", \".gpu-data\"] and run: scripts/gpu-check.sh --data .gpu-data/multi30k"
