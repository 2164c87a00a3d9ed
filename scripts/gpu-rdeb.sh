#!/usr/bin/env bash
# Downloads Debian's R 4.2 and the R packages rfuse's tests and benchmarks need into .rdeb/ (git
# ignores it), for the GPU box, which has no R and reaches no registry: carry .rdeb alone to
# `gpu-run.sh r-setup`, then .bundle to the next call on the same warm machine (see gpu-run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .rdeb
rpkgs="r-cran-rcpp r-cran-testthat r-cran-jsonlite r-cran-rlang r-cran-magrittr r-cran-cli"
# The R packages they need in turn (Debian's r-cran-* dependencies, recursively).
deps=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
         --no-enhances $rpkgs | grep -E '^r-cran-|^r-base-core$' | sort -u)
(cd .rdeb && apt-get download r-base-core libicu72 libblas3 liblapack3 libgfortran5 libreadline8 libtirpc3 $deps > /dev/null)
du -sh .rdeb
