#!/usr/bin/env bash
# Installs what is missing (Debian packages, --no-install-recommends) and builds rfuse into build/.
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ python3
          llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
          libgtest-dev libgmock-dev nlohmann-json3-dev libxxhash-dev
          r-base-dev r-cran-rcpp r-cran-testthat r-cran-rlang r-cran-jsonlite r-cran-magrittr r-cran-knitr r-cran-cli)
scripts/install-missing.sh "${packages[@]}"

if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release
fi
echo "== building (ninja -j${RFUSE_JOBS:-$(nproc)})"
ninja -C build -j"${RFUSE_JOBS:-$(nproc)}"
