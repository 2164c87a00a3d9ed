#!/usr/bin/env bash
# One-off experiment on the GPU box (repository root, .bundle carried): W4 under the row-kernel
# launch variants, then Nsight Compute's view of the default variant. See benchmarks/RESULTS.md.
set -uo pipefail
mkdir -p /tmp/rfuse-gpu && tar -C /tmp/rfuse-gpu -xJf .bundle/rfuse-gpu.tar.xz
R=/tmp/rfuse-gpu/rfuse
export LD_LIBRARY_PATH="$R/lib:${LD_LIBRARY_PATH:-}" RFUSE_CACHE_DIR=/tmp/rfuse-kc RFUSE_BENCH_ONLY=W4 OUT=/tmp
for ept in 4 8 16; do for grid in rows wave; do
  echo "== elements/thread $ept, grid $grid"
  RFUSE_ROW_ELEMENTS_PER_THREAD=$ept RFUSE_ROW_GRID=$grid "$R/bin/rfuse-bench" | grep W4_
done; done
echo "== ncu (default variant)"
timeout 200 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
  -k regex:main_k0_reduction -c 1 "$R/bin/rfuse-bench" 2>&1 | grep -vE "^==PROF==" | tail -n 60
