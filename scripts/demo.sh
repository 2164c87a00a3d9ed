#!/usr/bin/env bash
# The main job: installs what is missing, builds, then traces a small model through the C++
# GraphBuilder, prints its rfuse IR and runs it on the reference interpreter; then runs the
# examples/ modules with rfuse-run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo
build/bin/rfuse-trace-demo
for f in examples/*.mlir; do
  echo
  echo "== rfuse-run $f --random --seed 1"
  build/bin/rfuse-run "$f" --random --seed 1
done
