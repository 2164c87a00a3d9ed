#!/usr/bin/env bash
# Regenerates the R package's help pages (rbindings/man/*.Rd) from the #' comments in
# rbindings/R with roxygen2 (Debian's r-cran-roxygen2, installed if missing). It reads the
# installed package's objects, so it installs the package first. NAMESPACE stays hand-written.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-missing.sh r-cran-roxygen2
scripts/install-r-package.sh > build/r-install.log 2>&1 || { cat build/r-install.log; exit 1; }
(cd rbindings && Rscript -e 'roxygen2::roxygenise(roclets = "rd", load_code = roxygen2::load_installed)')
