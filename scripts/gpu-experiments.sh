#!/usr/bin/env bash
# Runs on the GPU box from the repository root (device tool, carry .bundle): the A/B experiments
# recorded in benchmarks/RESULTS.md, through scripts/gpu-run.sh's `rfuse` mode (RFUSE_* settings
# pass through).
#   bash scripts/gpu-experiments.sh [w4|mm|w5]...
# w4: the row kernel's occupancy bound and elements per thread. mm: the f32/bf16 matmul + bias +
# GELU with cuBLASLt's epilogue and with a generated one. w5: W5's per-step profile summed by kind.
set -uo pipefail
out="${OUT:-/tmp/rfuse-out}"
mkdir -p "$out"
bench() { bash scripts/gpu-run.sh rfuse 2>&1 | grep -E "^(W[0-9]|mm)" ; }
for what in "${@:-w4}"; do
  case "$what" in
  w4)
    echo "== W4: defaults";                         RFUSE_BENCH_ONLY=W4 bench
    for b in 2 4; do echo "== W4: RFUSE_ROW_MIN_BLOCKS=$b"; RFUSE_BENCH_ONLY=W4 RFUSE_ROW_MIN_BLOCKS=$b bench; done
    echo "== W4: RFUSE_ROW_ELEMENTS_PER_THREAD=8";  RFUSE_BENCH_ONLY=W4 RFUSE_ROW_ELEMENTS_PER_THREAD=8 bench ;;
  mm)
    echo "== mm: cuBLASLt epilogues (default)";    RFUSE_BENCH_ONLY=mm_ bench
    echo "== mm: RFUSE_LT_EPILOGUES=0";            RFUSE_BENCH_ONLY=mm_ RFUSE_LT_EPILOGUES=0 bench ;;
  w5)
    echo "== W5 per-step profile, summed by kind"
    RFUSE_BENCH_ONLY=W5 RFUSE_PROFILE_STEPS=1 bash scripts/gpu-run.sh rfuse > "$out/w5-profile.txt" 2>&1
    grep -E "^W5|step profile" "$out/w5-profile.txt"
    awk '/^ +[0-9]+ +[0-9.]+ ms/ {
           d = $0; sub(/^ +[0-9]+ +[0-9.]+ ms +/, "", d)
           if (d ~ /^cudnn/) { split(d, w, " "); k = w[1] " " w[2] " " w[3] }
           else if (d ~ /^matmul/) k = "cublaslt matmul"
           else if (d ~ /block per row/) k = "reduction, block per row"
           else if (d ~ /thread per column/) k = "reduction, thread per column"
           else if (d ~ /pointwise/) k = "pointwise"
           else k = d
           t[k] += $2; n[k]++ }
         END { for (k in t) printf "  %-32s %4d steps %8.4f ms\n", k, n[k], t[k] }' "$out/w5-profile.txt" | sort -k4 -n -r ;;
  esac
done
