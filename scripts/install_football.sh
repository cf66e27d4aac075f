#!/usr/bin/env bash
# Install the `football` extra (Google Research Football) into a venv:
#   scripts/install_football.sh [VENV]          (default: .venv)
# after hts-lightning itself is installed in VENV (gfootball also imports numpy and cv2, which
# come with it).
#
# gfootball 2.10.2 is published as an sdist only; building it takes about 5.5 minutes on
# 2 cores. This script
#   1. apt-installs the build and run-time packages that are missing (needs root; Debian/Ubuntu),
#   2. builds the gfootball wheel once into ${XDG_CACHE_HOME:-~/.cache}/hts_lightning/wheels
#      (set HTS_WHEEL_CACHE to use another folder) and reuses it on later runs,
#   3. installs the wheel and what it needs at run time: gym==0.25.2 (0.26 breaks gfootball's
#      reset), six (imported, undeclared), psutil (its build script imports it) and absl-py.
#      The wheel goes in with --no-deps: its declared opencv-python would clash with our
#      opencv-python-headless (both own `cv2`), and pygame/scipy serve only keyboard play.
# It does nothing (beyond a check) when everything is already installed.
set -euo pipefail

VENV=${1:-.venv}
GFOOTBALL_VERSION=2.10.2
PY="$VENV/bin/python"
CACHE=${HTS_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hts_lightning/wheels}
APT_PACKAGES=(
    cmake build-essential python3-dev libgl1-mesa-dev libegl-dev
    libsdl2-dev libsdl2-image-dev libsdl2-ttf-dev libsdl2-gfx-dev
    libboost-dev libboost-python-dev libboost-thread-dev libboost-system-dev
    libboost-filesystem-dev
)

say() { echo "install_football: $*" >&2; }

if [[ ! -x "$PY" ]]; then
    say "no Python at $PY; create the venv first (python3 -m venv $VENV)"
    exit 2
fi

# 1. System packages: the wheel links against SDL2 and Boost.Python, so they are needed to run
#    it too, not only to build it.
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
    if ! command -v apt-get >/dev/null; then
        say "missing system packages (${missing[*]}) and no apt-get; install their equivalents."
        exit 1
    fi
    if [[ $(id -u) -ne 0 ]]; then
        say "missing system packages; run as root, then run this script again:"
        say "  apt-get update && apt-get install -y ${missing[*]}"
        exit 1
    fi
    say "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if "$PY" - "$GFOOTBALL_VERSION" <<'EOF' 2>/dev/null; then
import sys
from importlib.metadata import version

assert version("gfootball") == sys.argv[1]
assert version("gym") == "0.25.2"
import gfootball.env, psutil, six  # noqa: E401,F401
EOF
    say "gfootball $GFOOTBALL_VERSION already installed in $VENV"
    exit 0
fi

# 2. The wheel: built once, then taken from the cache. gfootball's build script runs a bare
#    `python3` that must import psutil, so the venv's bin goes first on PATH.
mkdir -p "$CACHE"
# The same list as the `football` extra of pyproject.toml (tests/test_packaging.py checks).
RUNTIME_DEPS=("gym==0.25.2" "six>=1.16" "psutil>=5.9" "absl-py>=1.0")
"$VENV/bin/pip" install -q "${RUNTIME_DEPS[@]}" "setuptools>=69" wheel
shopt -s nullglob
wheels=("$CACHE"/gfootball-"$GFOOTBALL_VERSION"-*.whl)
if ((${#wheels[@]} == 0)); then
    say "building gfootball $GFOOTBALL_VERSION (about 5.5 minutes on 2 cores) into $CACHE"
    PATH="$(cd "$VENV/bin" && pwd):$PATH" "$VENV/bin/pip" wheel -q --no-build-isolation \
        --no-deps "gfootball==$GFOOTBALL_VERSION" -w "$CACHE"
    wheels=("$CACHE"/gfootball-"$GFOOTBALL_VERSION"-*.whl)
else
    say "reusing ${wheels[0]}"
fi

# 3. The wheel (its run-time deps went in above).
"$VENV/bin/pip" install -q --no-deps "${wheels[0]}"
"$PY" - "$GFOOTBALL_VERSION" <<'EOF'
import contextlib
import io
import sys

with contextlib.redirect_stderr(io.StringIO()):  # gym 0.25's "unmaintained" notice
    import gym  # noqa: F401
import gfootball.env  # noqa: F401

print("install_football: gfootball", sys.argv[1], "ready")
EOF
