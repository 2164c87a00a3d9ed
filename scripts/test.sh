#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, then
#   1. ctest: GoogleTest (tests/unit), lit/FileCheck (tests/lit), the docs check;
#   2. scripts/sanitize.sh: the unit tests built with clang, ASan and UBSan, and each libFuzzer
#      target (MLIR parser + verifier, .npy reader, call key) for 60 s on its seed corpus;
#   3. the R package: installed into the machine's R library, its testthat suite, and
#      R CMD check --no-manual (no ERROR, no WARNING allowed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== ctest"
(cd build && ctest --output-on-failure -j"$(nproc)")

scripts/sanitize.sh

echo "== R package: install"
scripts/install-r-package.sh > build/r-install.log 2>&1 || { cat build/r-install.log; exit 1; }
echo "== R package: testthat"
(cd rbindings/tests && Rscript testthat.R)

echo "== R package: R CMD check --no-manual"
rm -rf build/rcheck && mkdir -p build/rcheck
export RFUSE_SRC="$PWD" RFUSE_BUILD="$PWD/build"
(cd build/rcheck && R CMD build ../../rbindings > build.log 2>&1 || { cat build.log; exit 1; }
 _R_CHECK_FORCE_SUGGESTS_=false R CMD check --no-manual rfuse_*.tar.gz > check.log 2>&1 || true
 tail -n 25 check.log
 if grep -qE "^Status: .*(ERROR|WARNING)" check.log || ! grep -q "^Status:" check.log; then
   echo "R CMD check reported an ERROR or WARNING (see build/rcheck/check.log)"; exit 1
 fi)
(cd rbindings && ./cleanup)
echo "== all tests passed"
