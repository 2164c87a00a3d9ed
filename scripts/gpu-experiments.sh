#!/usr/bin/env bash
# Runs on the GPU box from the repository root (device tool, carry .bundle), after
# scripts/gpu-run.sh has been used once: the A/B experiments recorded in benchmarks/RESULTS.md.
#   bash scripts/gpu-experiments.sh
# W4 with and without row prefetching and at other occupancy bounds; the f32 matmul + bias +
# GELU with cuBLASLt's epilogue and with a generated one; W5's per-step profile summed by kind.
set -uo pipefail
out="${OUT:-/tmp/rfuse-out}"
mkdir -p "$out"
bench() { bash scripts/gpu-run.sh rfuse 2>&1 | grep -E "^(W|mm)" ; }
echo "== W4: prefetch on (default)";           RFUSE_BENCH_ONLY=W4 bench
echo "== W4: RFUSE_ROW_PREFETCH=0";            RFUSE_BENCH_ONLY=W4 RFUSE_ROW_PREFETCH=0 bench
echo "== W4: prefetch, RFUSE_ROW_MIN_BLOCKS=2"; RFUSE_BENCH_ONLY=W4 RFUSE_ROW_MIN_BLOCKS=2 bench
echo "== W4: prefetch, RFUSE_ROW_MIN_BLOCKS=4"; RFUSE_BENCH_ONLY=W4 RFUSE_ROW_MIN_BLOCKS=4 bench
echo "== mm: cuBLASLt epilogues (default)";    RFUSE_BENCH_ONLY=mm_ bench
echo "== mm: RFUSE_LT_EPILOGUES=0";            RFUSE_BENCH_ONLY=mm_ RFUSE_LT_EPILOGUES=0 bench
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
     END { for (k in t) printf "  %-32s %4d steps %8.4f ms\n", k, n[k], t[k] }' "$out/w5-profile.txt" | sort -k4 -n -r
