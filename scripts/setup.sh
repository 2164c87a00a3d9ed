#!/usr/bin/env bash
# Installs what is missing (Debian packages, --no-install-recommends) and builds rfuse into build/.
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ python3
          llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
          libgtest-dev libgmock-dev
          r-base-dev r-cran-rcpp r-cran-testthat r-cran-knitr r-cran-cli)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release
fi
echo "== building (ninja -j${RFUSE_JOBS:-$(nproc)})"
ninja -C build -j"${RFUSE_JOBS:-$(nproc)}"
