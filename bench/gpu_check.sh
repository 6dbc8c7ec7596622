#!/usr/bin/env bash
# One script for a lent GPU machine (issue 9): environment facts, the GPU tests for real,
# then eager vs inductor vs ember on CUDA (fp32 and bf16, alternating rounds).
#   bash bench/gpu_check.sh            (from the repository root; ~8 minutes)
# The device machine has no network: wheels it lacks (cuda-bindings) are installed from
# bench/wheels/ when that folder is carried along.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ember-gpu-check}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$OUT/gpu.txt"
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())" 2>&1 | tee -a "$OUT/gpu.txt"
if [ -d bench/wheels ]; then
    python -m pip install -q --no-index --find-links bench/wheels cuda-bindings nvidia-nvvm 2>&1 | tail -2
fi
python -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
python -c "from ember.targets.cuda.launcher import cuda_unavailable as u; print('ember cuda:', u() or 'available')" | tee -a "$OUT/gpu.txt"
timeout 180 python -m pytest -q test/unit/test_gpu_target.py -k "real_gpu or host_executor or matches_eager" -x 2>&1 | tail -15 | tee "$OUT/tests.txt"
timeout 300 python bench/models.py --device cuda --dtype float32,bfloat16 --batch 8 \
    --models bert,gpt2,llama,vit,resnet,t5-encoder --iters 20 --no-warm --json "$OUT/models.json" \
    2>&1 | grep -v "^W1" | tee "$OUT/models.txt"
