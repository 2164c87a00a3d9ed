#!/usr/bin/env bash
# The main job: installs what is missing, builds rfuse and its R package, then runs
# examples/demo.R: plain R code and a small model traced, fused, compiled and run, checked against
# base R. (The C++ tracing demo and the examples/*.mlir modules run first, briefly.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/install-r-package.sh > build/r-install.log 2>&1 || { cat build/r-install.log; exit 1; }
echo
echo "== C++ API: rfuse-trace-demo"
build/bin/rfuse-trace-demo | tail -n 8
for f in examples/*.mlir; do
  echo "== rfuse-run $f --random --seed 1"
  build/bin/rfuse-run "$f" --random --seed 1
done
echo
echo "== R: examples/demo.R"
Rscript examples/demo.R
