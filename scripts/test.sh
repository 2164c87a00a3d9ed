#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, then GoogleTest + lit (FileCheck) via ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== ctest"
cd build
ctest --output-on-failure -j"$(nproc)"
