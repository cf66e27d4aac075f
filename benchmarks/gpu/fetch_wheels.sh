#!/usr/bin/env bash
# For a GPU machine that reaches no package registry but has a CUDA torch (this workplace's
# H200: python 3.12, torch 2.11): download, here, the wheels of what the driver imports beyond
# that image, into ./.whl (git-ignored); run.sh installs them offline.
# envpool is left out (its asset packages are ~750 MB, over what travels): the driver's
# "HTS envpool" row then reports the import error and the learning run uses the Python stack.
#
#   bash benchmarks/gpu/fetch_wheels.sh        # then carry .whl with the device call
set -euo pipefail
PLATFORMS=()
for n in 2_17 2_27 2_28 2_31 2_34 2_35; do PLATFORMS+=(--platform "manylinux_${n}_x86_64"); done
PLATFORMS+=(--platform manylinux2014_x86_64 --platform any)
"${PYTHON:-python3}" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${PLATFORMS[@]}" -d .whl \
  torchrl==0.14.1 tensordict==0.14.3 gymnasium==1.4.0 farama-notifications==0.0.4 \
  ale-py==0.12.1 pyvers==0.2.3 dill==0.4.1
du -sh .whl
