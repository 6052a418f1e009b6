#!/usr/bin/env bash
# The GPU case of issue 34, as one prepared command for a lent GPU machine (the `device` tool).
#
#   bash bench/gpu_check.sh prepare   # here: .whl/ (wheels that machine lacks), .gpu/ (model folder
#                                     # without weights, the texts of this repository's reindex)
#   device run, carry [".whl", ".gpu"], timeout_s 540, command: bash bench/gpu_check.sh run
#   bash bench/gpu_check.sh local     # the same run on this machine's CPU, small: the script's own check
#                                     # (python3 there must hold the packages the device's image does)
#
# That machine has CUDA torch, transformers and sentence-transformers, and nothing can be fetched there.
# A call carries 64 MiB: the packaged MiniLM's weights (88 MB) and Ray's wheel (79 MB) do not fit, so
# - the model is a stand-in: the packaged folder with seeded random weights of the same shapes
#   (bench/gpu_standin.py): the same work per token, not the same vectors;
# - what needs Ray (bench.run's job, bench.scale) does not run there; the raw encode it is measured
#   against does (bench/encode_sweep.py), in fp32 and bf16, batch sizes swept, bucketing on and off.
# Results land in $OUT: nvidia-smi.txt, tests.log (tests/gpu), encode_sweep.json, sweep.log.
set -euo pipefail
cd "$(dirname "$0")/.."

# Wheels (Python 3.12, manylinux) for what cluster.local.encoder imports that the machine's image lacks.
WHEELS=(pydantic==2.14.4 pydantic-core==2.50.5 pydantic-settings==2.16.3 python-dotenv==1.2.4
        typing-inspection==0.4.5 annotated-types==0.8.0 sentence-transformers==6.2.0)
BATCH_SIZES="${BATCH_SIZES:-32,64,128,256,512,1024}"

prepare() {
    for path in /.whl/ /.gpu/; do grep -qxF "$path" .git/info/exclude 2>/dev/null || echo "$path" >>.git/info/exclude; done
    rm -rf .whl .gpu && mkdir -p .whl .gpu
    "${PYTHON:-python}" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "${WHEELS[@]}"
    "${PYTHON:-python}" -m bench.gpu_standin strip .gpu/model
    "${PYTHON:-python}" -m bench.encode_sweep --write-texts .gpu/texts.json
    du -sh .whl .gpu
}

run() {  # DEVICE, TEXTS_LIMIT, BATCH_SIZES, MATMUL_SIZE: `local` sets them small
    local out="${OUT:?run on the device machine, where OUT is set}" device="${DEVICE:-cuda}"
    if [ -z "${NO_INSTALL:-}" ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    fi
    export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
    rm -rf /tmp/gpu-check-model && cp -r .gpu/model /tmp/gpu-check-model
    export SAMESPACE_EMBEDDING__MODEL=/tmp/gpu-check-model
    nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
    python3 -m bench.gpu_standin fill /tmp/gpu-check-model
    python3 -m pytest --noconftest -p no:cacheprovider -o addopts="" -rs -q tests/gpu 2>&1 | tee "$out/tests.log" || true
    python3 -m bench.encode_sweep --texts .gpu/texts.json ${TEXTS_LIMIT:+--limit "$TEXTS_LIMIT"} --device "$device" \
        --precisions fp32,bf16 --batch-sizes "$BATCH_SIZES" ${MATMUL_SIZE:+--matmul-size "$MATMUL_SIZE"} \
        --out "$out/encode_sweep.json" 2>&1 | tee "$out/sweep.log"
}

case "${1:-}" in
prepare) prepare ;;
run) run ;;
local) OUT="${OUT:-$(mktemp -d)}" DEVICE=cpu NO_INSTALL=1 TEXTS_LIMIT=64 BATCH_SIZES=16,64 MATMUL_SIZE=1024 run ;;
*) echo "usage: bash bench/gpu_check.sh prepare|run|local" >&2; exit 2 ;;
esac
