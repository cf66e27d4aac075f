#!/usr/bin/env bash
# Issue 16's GPU check in one call, from the repository root, within 10 minutes on one H200
# with 16 cores: set up, then `pytest -m gpu`, the Pong PPO throughput of HTS against TorchRL's
# collectors and a Pong PPO learning run (benchmarks/gpu/driver.py). Everything lands in $OUT
# (default ./gpu-out): setup.log, machine.txt, pytest_gpu.txt, throughput.md, learning.csv,
# driver.log.
#
#   bash benchmarks/gpu/run.sh              # on the GPU machine
#   bash benchmarks/gpu/run.sh --dry-run    # anywhere, < 1 min: CartPole, tiny sizes, no setup
#
# Setup (skipped when hts_lightning and a CUDA torch import already): wheels in ./.whl are
# installed offline when present (a machine with no registry), else torch==2.13.0 from the
# default index (the CUDA build on Linux x86-64) and then this package, `pip install -e .`.
set -uo pipefail
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
DRY=""
[ "${1:-}" = "--dry-run" ] && DRY="--dry-run"

if [ -z "$DRY" ]; then
  {
    if "$PY" -c "import torch, torchrl, envpool, hts_lightning.collectors; assert torch.cuda.is_available()" 2>/dev/null; then
      echo "setup: torch with CUDA and hts_lightning already import"
    elif ls .whl/*.whl >/dev/null 2>&1; then
      "$PY" -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
      export PYTHONPATH="/tmp/site:$PWD"
    else
      # --break-system-packages only where pip refuses a system Python without it.
      "$PY" -m pip install -q "torch==2.13.0" || "$PY" -m pip install -q --break-system-packages "torch==2.13.0"
      "$PY" -m pip install -q -e ".[dev]" || "$PY" -m pip install -q --break-system-packages -e ".[dev]"
    fi
    "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  } > "$OUT/setup.log" 2>&1
  tail -n 3 "$OUT/setup.log"
fi
export PYTHONPATH="${PYTHONPATH:-$PWD}"
timeout 590 "$PY" benchmarks/gpu/driver.py --out "$OUT" $DRY 2>&1 | tee "$OUT/driver.log"
