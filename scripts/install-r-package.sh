#!/usr/bin/env bash
# Installs the R package from rbindings/ into the machine's R library, against the C++ build in
# build/ (run scripts/setup.sh first).
set -euo pipefail
cd "$(dirname "$0")/.."
export RFUSE_SRC="$PWD" RFUSE_BUILD="$PWD/build"
if [ -w "$(Rscript -e 'cat(.libPaths()[1])')" ]; then
  R CMD INSTALL --preclean --no-multiarch rbindings
else
  mkdir -p "$HOME/R/library"
  R_LIBS_USER="$HOME/R/library" R CMD INSTALL --preclean --no-multiarch -l "$HOME/R/library" rbindings
fi
(cd rbindings && ./cleanup) # (its paths are the package's own)
