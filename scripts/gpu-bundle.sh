#!/usr/bin/env bash
# Packs what the GPU box needs into .bundle/rfuse-gpu.tar.xz (<= 64 MiB; .bundle/ is ignored by
# git and carried by the device tool): rfuse's binaries and libraries, Debian's libMLIR/libLLVM 19
# and their one dependency the box lacks (libz3), the PyTorch baseline scripts, compare.py and
# the run script. Build first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
shared="${RFUSE_SHARED:-$(cd .. && pwd)/shared}"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/rfuse/bin" "$stage/rfuse/lib" .bundle
cp build/bin/rfuse-gpu-tests build/bin/rfuse-bench build/bin/rfuse-step-profile build/bin/rfuse-run build/bin/rfusec build/bin/rfuse-aot-run "$stage/rfuse/bin/"
cp build/lib/*.so "$stage/rfuse/lib/"
cp -L /usr/lib/llvm-19/lib/libMLIR.so.19.1 /usr/lib/llvm-19/lib/libLLVM.so.19.1 \
      /lib/x86_64-linux-gnu/libz3.so.4 "$stage/rfuse/lib/"
mkdir -p "$stage/rfuse/examples" && cp examples/*.mlir "$stage/rfuse/examples/"
# RFUSE_BEFORE=DIR (bin/rfuse-bench + lib/*.so of an earlier build): benchmarked beside this one
# in the same run (gpu-run.sh compare), for before/after tables.
if [ -n "${RFUSE_BEFORE:-}" ]; then
  mkdir -p "$stage/rfuse/before" && cp -r "$RFUSE_BEFORE/bin" "$RFUSE_BEFORE/lib" "$stage/rfuse/before/"
fi
# The R package, installed here (Debian's R 4.2, as on the box through scripts/r-on-gpu-box.sh),
# with its tests and the R benchmark.
mkdir -p "$stage/rfuse/R-library"
R CMD INSTALL --preclean --no-test-load --library="$stage/rfuse/R-library" rbindings > "$stage/rfuse/R-install.log" 2>&1 ||
  { cat "$stage/rfuse/R-install.log"; exit 1; }
cp -r rbindings/tests "$stage/rfuse/R-tests"
cp benchmarks/r-bench.R scripts/r-on-gpu-box.sh "$stage/rfuse/"
cp "$shared/device/torch_baselines.py" "$shared/device/torch_baselines2.py" "$shared/device/torch_best.py" benchmarks/compare.py benchmarks/torch_extra.py benchmarks/torch_w4.py benchmarks/torch_timing.py \
   scripts/gpu-run.sh "$stage/rfuse/"
tar -C "$stage" -cf - rfuse | xz -T2 "-${RFUSE_XZ_LEVEL:-6}" > .bundle/rfuse-gpu.tar.xz
ls -la .bundle/rfuse-gpu.tar.xz
size=$(stat -c %s .bundle/rfuse-gpu.tar.xz)
if [ "$size" -gt $((64 * 1024 * 1024)) ]; then echo "bundle is over 64 MiB" >&2; exit 1; fi
