#!/usr/bin/env bash
# Runs on the GPU box from the repository root, with .bundle carried:
#   bash scripts/gpu-run.sh [tests|bench|all|quick|rfuse|compare|torch-best|r-setup|r|r-bench]
# tests: the GPU test suite, then the corpus under compute-sanitizer memcheck.
# bench: rfuse-bench twice (the second process must compile nothing: disk cache), PyTorch's
#        baselines, and the side-by-side table (benchmarks/compare.py).
# compare: rfuse-bench of the bundled earlier build (before/, see gpu-bundle.sh) and of this one,
#          alternately, twice each. torch-best: ../shared/device/torch_best.py (PyTorch's best setting).
# r-setup: unpacks Debian's R from .rdeb (carried alone: R's debs and the bundle do not fit one
#          call) into /opt/r, where the next call, back to back, finds it.
# r: the R package's tests on the GPU. r-quick: its device, profile and tensor tests (or the files
#          in RFUSE_R_TESTS), then r-bench.R alone (RFUSE_BENCH_ONLY=W5,W3 picks workloads). r-bench: rfuse-bench, torch_best.py and
#          benchmarks/r-bench.R in one run, side by side (the product's benchmark, from R).
# r-diag: benchmarks/r-diag.R (where R-level time goes: Rprof of the training loops and calls;
#          RFUSE_DIAG_ONLY=W5,W3 picks workloads).
# r-each: each file of RFUSE_R_TESTS in its own R process (its exit status shows a crash).
# warm-start: benchmarks/r-warm-start.R (W1, W1-gc, W5, W5-file; RFUSE_WARM_ONLY picks) in fresh R processes,
#          first with an empty program cache (and no W5 step file), then twice with what it left (issue 18);
#          RFUSE_WARM_VARIANTS="default late-warm" alternates the warm runs over r-warm-start.R's variants.
# r-corpus: scripts/torch-corpus.R over RFUSE_CORPUS (a folder of ported torch-for-R model files;
#          default .bundle/corpus, which the device tool carries with .bundle); RFUSE_CORPUS_PATTERN
#          picks files by a regular expression (a share that fits one call's time).
# gtest: the GPU gtests matching RFUSE_GTEST_FILTER.
# bench-ab: rfuse-bench (C++, no R) alternating the settings in RFUSE_AB (e.g.
#     "RFUSE_COLUMN_PREFETCH=TRUE RFUSE_COLUMN_PREFETCH=FALSE"), RFUSE_AB_ROUNDS rounds (default 2),
#     RFUSE_BENCH_ONLY picking workloads by prefix; then PyTorch's W4 (torch_w4.py) when W4 is picked.
# ncu-r: Nsight Compute (speed of light, memory, warp states) on the first RFUSE_NCU_COUNT kernels
#     matching RFUSE_NCU_KERNEL that r-bench.R's RFUSE_BENCH_ONLY workloads run (a diagnostic);
#     with RFUSE_NCU_METRICS (e.g. gpu__time_duration.sum) a CSV row a kernel instead, after
#     RFUSE_NCU_SKIP launches (a training step's kernels one by one: W5's per-kernel times).
#     RFUSE_NCU_CACHE_CONTROL=none keeps L2 warm between kernels (ncu flushes it by default), as in
#     a real step. ncu-torch-w5: the same metric over PyTorch's W5 steps (benchmarks/torch_w5_kernels.py;
#     RFUSE_TORCH_W5_SETTINGS, RFUSE_TORCH_W5_STEPS), CSVs ncu-torch-<setting>.csv.
# w6: W6 (the LSTM-128) alone: PyTorch's rows (benchmarks/torch_w6.py), then benchmarks/r-bench.R's
#     W6 with the steps written out (cudnn_rnn FALSE) and with each of cuDNN's RNN algorithms
#     (RFUSE_W6_ALGOS), twice each, alternately.
# w7drop: W7 bf16 with the layer's default dropout (0.1) and without: PyTorch's rows
#     (benchmarks/torch_w7drop.py; RFUSE_TORCH_SETTINGS and RFUSE_TORCH_ROWS pick), then benchmarks/r-bench.R's
#     W7bf16 and W7drop, RFUSE_W7_ROUNDS times (default 2).
# aot: the ahead-of-time path (issue 18): rfuse-bench exports every workload (RFUSE_BENCH_ONLY
#        picks) as an artifact while timing the JIT; then each artifact runs in a fresh process of
#        rfuse-aot-run whose library path holds only rfuse_rt's libraries (no MLIR, LLVM, NVRTC:
#        ldd and the loader's log checked), timed; and the examples through rfusec -> rfuse-aot-run
#        against rfuse-run --device cuda, line by line.
# ddp-bench: data-parallel training on every GPU of the machine (1, 2, 4, 8 ranks as there are
#          GPUs): PyTorch DDP (benchmarks/torch_ddp.py through torchrun) and rfuse from R
#          (benchmarks/r-ddp-bench.R, rf_launch()), in one call.
# column-cache: for each column_cache / column_tiles_from_l2 / column_clusters setting, the GPU
#          corpus against the interpreter and W4 from R (r-bench.R): the column tiles' variants
#          side by side; then PyTorch's W4 (benchmarks/torch_w4.py).
# step-profile: rfuse-step-profile (benchmarks/step-profile.cpp) on rfuse-bench's W5 step and on
#          each fused module in .bundle/diag/ (carried with .bundle; benchmarks/r-step-dump.R writes
#          rf_fit's W5 step there): per-step device time by kind, CSVs under $OUT. A diagnostic:
#          which steps of two programs of one model differ.
# lib-ab: this build against library variants carried in .bundle/alt*/ (rfuse libraries built from
#        other commits or settings, e.g. libRfuseCodegen.so; each folder goes first in the library
#        path): the GPU gtests of RFUSE_GTEST_FILTER (default Gpu.Attention*) once each, then
#        rfuse-step-profile over .bundle/diag/*.mlir and (where R is unpacked) benchmarks/r-bench.R
#        (RFUSE_BENCH_ONLY) alternately, twice each.
# r-ab: benchmarks/r-bench.R (RFUSE_BENCH_ONLY picks) under each setting of RFUSE_AB (words
#        VAR=VALUE, several joined by commas, e.g. "RFUSE_COLUMN_CLUSTERS=TRUE RFUSE_COLUMN_CLUSTERS=FALSE"), alternately,
#        RFUSE_AB_ROUNDS times (default 2): a change behind an option, before and after, in one call.
# rfuse: rfuse-bench once (RFUSE_BENCH_ONLY=<prefix> picks workloads; RFUSE_* settings pass
#        through, for experiments). quick: that, then benchmarks/torch_extra.py.
set -uo pipefail
what="${1:-all}"
out="${OUT:-/tmp/rfuse-out}"
mkdir -p "$out" /tmp/rfuse-gpu
if [ "$what" = r-setup ]; then
  source scripts/r-on-gpu-box.sh && echo "R is unpacked under /opt/r"
  exit $?
fi
tar -C /tmp/rfuse-gpu -xJf .bundle/rfuse-gpu.tar.xz
R=/tmp/rfuse-gpu/rfuse
# cuDNN comes with PyTorch's wheels there (nvidia-cudnn-cu13).
cudnn_dir=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
# NCCL too (nvidia-nccl-cu13), for data-parallel training (rf_fit(strategy = "ddp")).
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="$R/lib:${cudnn_dir:+$cudnn_dir:}${nccl_dir:+$nccl_dir:}${LD_LIBRARY_PATH:-}"
# NVLink multicast stays off on these machines (KINDS.md); the ranks inherit it.
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
# BLAS and LAPACK (the CPU backend's products, rfuse.solve's host step) come with R's debs: when
# an earlier call unpacked them (r-setup), the tests find them too.
[ -d /opt/r/usr/lib/x86_64-linux-gnu/lapack ] &&
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/opt/r/usr/lib/x86_64-linux-gnu/blas:/opt/r/usr/lib/x86_64-linux-gnu/lapack:/opt/r/usr/lib/x86_64-linux-gnu"
export RFUSE_CACHE_DIR=/tmp/rfuse-kernel-cache
# The package's tests are written for testthat's third edition (its DESCRIPTION says so; test_file()
# run outside the package does not read it).
export TESTTHAT_EDITION=3
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== GPU tests"
  "$R/bin/rfuse-gpu-tests" 2>&1 | tee "$out/gpu-tests.log" | grep -vE "^\[ +(RUN|OK) " | tail -n 40
  echo "== rfuse-run --device cuda --check on examples/"
  for f in "$R"/examples/*.mlir; do "$R/bin/rfuse-run" "$f" --random --seed 3 --device cuda --check | grep -E "^(output|check|host)"; done
  echo "== compute-sanitizer memcheck (corpus, fallback, 20 random graphs)"
  RFUSE_GPU_PROPERTY_COUNT=20 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$R/bin/rfuse-gpu-tests" --gtest_filter='Gpu.CorpusMatchesInterpreter:Gpu.HostFallbackRunsPooling:Gpu.RandomGraphsMatchInterpreter:Gpu.RepeatedRunsReplayTheCapturedGraph' \
    > "$out/memcheck.log" 2>&1
  echo "memcheck exit code: $? (0 = clean, 9 = errors found)"; tail -n 5 "$out/memcheck.log"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== rfuse-bench, first process (cold kernel cache)"
  rm -rf "$RFUSE_CACHE_DIR"
  OUT=/tmp "$R/bin/rfuse-bench" | tee "$out/bench-cold.log"
  echo "== rfuse-bench, second process (must compile nothing)"
  OUT="$out" "$R/bin/rfuse-bench" | tee "$out/bench.log"
  echo "== PyTorch baselines"
  (cd "$R" && OUT="$out" timeout 420 python3 torch_baselines.py > "$out/torch1.log" 2>&1; tail -n 3 "$out/torch1.log")
  (cd "$R" && OUT="$out" timeout 200 python3 torch_baselines2.py > "$out/torch2.log" 2>&1; tail -n 3 "$out/torch2.log")
  (cd "$R" && OUT="$out" timeout 300 python3 torch_extra.py > "$out/torch3.log" 2>&1; tail -n 3 "$out/torch3.log")
  echo "== side by side"
  python3 "$R/compare.py" "$out" | tee "$out/compare.txt"
fi
if [ "$what" = compare ]; then
  for round in 1 2; do
    for build in before after; do
      if [ "$build" = before ]; then lib="$R/before/lib" bin="$R/before/bin"; else lib="$R/lib" bin="$R/bin"; fi
      echo "== rfuse-bench $build (round $round)"
      LD_LIBRARY_PATH="$lib:$LD_LIBRARY_PATH" OUT=/tmp "$bin/rfuse-bench" | tee "$out/bench-$build-$round.log" | grep -E "^(W|mm|rfuse-bench)"
    done
  done
fi
if [ "$what" = torch-best ]; then
  (cd "$R" && OUT="$out" PYTHONUNBUFFERED=1 timeout 540 python3 torch_best.py 2>&1 | tee "$out/torch-best.log" | tail -n 40)
fi
if [ "$what" = r ] || [ "$what" = w6 ] || [ "$what" = w7drop ] || [ "$what" = ddp-bench ] || [ "$what" = column-cache ] || [ "$what" = warm-start ] || [ "$what" = r-bench ] || [ "$what" = r-ab ] || [ "$what" = r-quick ] || [ "$what" = ncu-r ] || [ "$what" = r-each ] || [ "$what" = r-diag ] || [ "$what" = r-corpus ] ||
   { [ "$what" = lib-ab ] && [ -x /opt/r/usr/lib/R/bin/R ]; }; then # (lib-ab: R where unpacked)
  if [ ! -x /opt/r/usr/lib/R/bin/R ]; then echo "no R under /opt/r: run 'gpu-run.sh r-setup' with .rdeb first"; exit 3; fi
  # The environment r-on-gpu-box.sh sets up (R was unpacked by the r-setup call).
  RHOME=/opt/r/usr/lib/R
  export LD_LIBRARY_PATH=/opt/r/lib/x86_64-linux-gnu:/opt/r/usr/lib/x86_64-linux-gnu:/opt/r/usr/lib/x86_64-linux-gnu/blas:/opt/r/usr/lib/x86_64-linux-gnu/lapack:$RHOME/lib:$LD_LIBRARY_PATH
  export R_LIBS_USER=$R/R-library R_LIBS=$R/R-library:/opt/r/usr/lib/R/site-library:/opt/r/usr/lib/R/library
  export RHOME PATH=$RHOME/bin:$PATH
fi
if [ "$what" = r ]; then
  echo "== R package tests on the GPU"
  (cd "$R/R-tests" && timeout 500 Rscript -e 'library(testthat); library(rfuse); cat("device:", rf_default_device(), attr(rf_default_device(), "description"), "\n"); test_dir("testthat", reporter = "summary", stop_on_failure = FALSE)' 2>&1 | tee "$out/r-tests.log" | tail -n 60)
fi
if [ "$what" = r-each ]; then # each file of RFUSE_R_TESTS in its own R process, with its exit status
  for f in ${RFUSE_R_TESTS:-test-device.R}; do # a test file's name, or a script's path in the tree
    if [ -f "$f" ]; then p="$PWD/$f"; else p="testthat/$f"; fi
    log="$out/r-each-$(basename "$f").log"
    (cd "$R/R-tests" && timeout 300 Rscript -e 'library(testthat); library(rfuse); test_file(commandArgs(TRUE)[1], reporter = "summary")' "$p" > "$log" 2>&1)
    echo "$f: exit $? ($(grep -cE '^── [0-9]+\. (Failure|Error)' "$log") failures)"
  done
fi
if [ "$what" = r-corpus ]; then # scripts/torch-corpus.R over RFUSE_CORPUS (ported model files; default .bundle/corpus)
  timeout 500 Rscript scripts/torch-corpus.R "${RFUSE_CORPUS:-.bundle/corpus}" ${RFUSE_CORPUS_PATTERN:+"$RFUSE_CORPUS_PATTERN"} 2>&1 | tee "$out/corpus.log" | tail -n 60
fi
if [ "$what" = column-cache ]; then
  # Settings column_cache:column_tiles_from_l2:column_clusters (RFUSE_COLUMN_SETTINGS picks).
  for c in ${RFUSE_COLUMN_SETTINGS:-8:FALSE:TRUE 8:FALSE:FALSE 8:TRUE:FALSE 4:FALSE:FALSE 0:FALSE:FALSE}; do
    IFS=: read -r RFUSE_COLUMN_CACHE RFUSE_COLUMN_TILES_FROM_L2 RFUSE_COLUMN_CLUSTERS <<< "$c"
    export RFUSE_COLUMN_CACHE RFUSE_COLUMN_TILES_FROM_L2 RFUSE_COLUMN_CLUSTERS
    echo "== column_cache = $RFUSE_COLUMN_CACHE, column_tiles_from_l2 = $RFUSE_COLUMN_TILES_FROM_L2, column_clusters = $RFUSE_COLUMN_CLUSTERS"
    "$R/bin/rfuse-gpu-tests" --gtest_filter='Gpu.CorpusMatchesInterpreter' 2>&1 | grep -E "PASSED|FAILED|Failure|error" | head -n 8
    RFUSE_BENCH_ONLY=W4 OUT="$out" timeout 200 Rscript benchmarks/r-bench.R 2>&1 | grep -E "^W4 "
  done
  unset RFUSE_COLUMN_CACHE RFUSE_COLUMN_TILES_FROM_L2 RFUSE_COLUMN_CLUSTERS
  echo "== PyTorch's W4 (benchmarks/torch_w4.py)"
  (cd "$R" && timeout 200 python3 torch_w4.py 2>&1 | grep -E "^W4|Error")
fi
if [ "$what" = ddp-bench ]; then
  ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
  sizes=""; for n in 1 2 4 8; do [ "$n" -le "$ngpu" ] && sizes="$sizes${sizes:+,}$n"; done
  echo "== PyTorch DDP (torch_ddp.py), world sizes $sizes"
  for n in ${sizes//,/ }; do
    OUT="$out" timeout 300 torchrun --standalone --nproc_per_node="$n" benchmarks/torch_ddp.py 2>&1 | grep -E "^W|FAILED|Error" | head -n 20
  done
  echo "== rfuse from R (r-ddp-bench.R), world sizes $sizes"
  OUT="$out" timeout 500 Rscript benchmarks/r-ddp-bench.R "$sizes" 2>&1 | tee "$out/r-ddp-bench.log" | tail -n 20
fi
if [ "$what" = aot ]; then
  rtlib=/tmp/rfuse-rt-only && rm -rf "$rtlib" && mkdir -p "$rtlib" /tmp/rfuse-aot
  cp "$R/lib/librfuse_rt.so" "$R/lib/libRfusePlan.so" "$R/lib/libRfuseTypes.so" "$rtlib/"
  echo "== rfuse-bench (the JIT, C++), exporting each workload"
  RFUSE_BENCH_EXPORT=/tmp/rfuse-aot OUT="$out" "$R/bin/rfuse-bench" 2>&1 | tee "$out/bench.log" | grep -E "^(W|mm|  \()"
  echo "== rfuse-aot-run: its libraries (only rfuse_rt's on the path; CUDA's found by dlopen)"
  rtenv="LD_LIBRARY_PATH=$rtlib${cudnn_dir:+:$cudnn_dir}"
  env $rtenv ldd "$R/bin/rfuse-aot-run" | grep -E "rfuse|not found|MLIR|LLVM|nvrtc"
  for a in /tmp/rfuse-aot/*.rfuse; do
    echo "== $(basename "$a")"
    env $rtenv LD_DEBUG=libs "$R/bin/rfuse-aot-run" "$a" --random --time 50 > "$out/aot.log" 2> "$out/aot-ld.log"
    echo "exit $?: $(grep -E '^time' "$out/aot.log")"
    echo "libraries loaded: $(grep -oE 'calling init: [^ ]+' "$out/aot-ld.log" | sed 's|.*/||' | sort -u | tr '\n' ' ')"
    grep -iE "nvrtc|libMLIR|libLLVM" "$out/aot-ld.log" | grep -i "calling init" && echo "A COMPILER WAS LOADED"
  done
  echo "== examples: rfuse-run --device cuda vs rfusec -> rfuse-aot-run"
  for f in "$R"/examples/*.mlir; do
    n=$(basename "$f" .mlir)
    "$R/bin/rfusec" "$f" -o "/tmp/rfuse-aot/$n.rfuse" --arch sm_90 > /dev/null 2>&1 || { echo "$n: not exported"; continue; }
    "$R/bin/rfuse-run" "$f" --random --seed 3 --device cuda | grep -vE "^host" > "$out/jit-$n.txt"
    env $rtenv "$R/bin/rfuse-aot-run" "/tmp/rfuse-aot/$n.rfuse" --random --seed 3 > "$out/aot-$n.txt" 2>&1
    if diff -q "$out/jit-$n.txt" "$out/aot-$n.txt" > /dev/null; then echo "$n: identical"; else echo "$n: DIFFERENT"; diff "$out/jit-$n.txt" "$out/aot-$n.txt" | head -n 6; fi
  done
fi
if [ "$what" = gtest ]; then # the GPU gtests matching RFUSE_GTEST_FILTER
  "$R/bin/rfuse-gpu-tests" --gtest_filter="${RFUSE_GTEST_FILTER:-*}" > "$out/gtest.log" 2>&1
  grep -E "Failure" -A3 "$out/gtest.log" | head -n 40; grep -vE "^\[ +(RUN|OK) " "$out/gtest.log" | tail -n 12
fi
if [ "$what" = w6 ]; then
  timeout 200 python3 benchmarks/torch_w6.py 2>&1 | tee "$out/torch-w6.log" | grep -E "^W6|Error"
  for round in 1 2; do
    for algo in written-out ${RFUSE_W6_ALGOS:-auto standard persist_static_small_h persist_dynamic}; do
      if [ "$algo" = written-out ]; then rnn=FALSE; a=auto; else rnn=TRUE; a=$algo; fi
      echo "== W6, $algo (round $round)"
      RFUSE_CUDNN_RNN=$rnn RFUSE_CUDNN_RNN_ALGO=$a RFUSE_BENCH_ONLY=W6 OUT="$out" timeout 150 Rscript benchmarks/r-bench.R 2>&1 |
        tee "$out/r-bench-w6-$algo-$round.log" | grep -E "^W6|rror"
    done
  done
fi
if [ "$what" = w7drop ]; then
  timeout 300 python3 benchmarks/torch_w7drop.py 2>&1 | tee "$out/torch-w7drop.log" | grep -E "^W7|Error"
  for round in $(seq "${RFUSE_W7_ROUNDS:-2}"); do
    echo "== W7bf16, W7drop (round $round)"
    RFUSE_BENCH_ONLY=W7bf16,W7drop OUT="$out" timeout 200 Rscript benchmarks/r-bench.R 2>&1 |
      tee "$out/r-bench-w7drop-$round.log" | grep -E "^W7|rror"
  done
fi
if [ "$what" = r-quick ]; then # the device, profile and tensor tests, then r-bench (RFUSE_BENCH_ONLY)
  # RFUSE_R_TESTS: the test files (default: the device, profile and tensor tests).
  export RFUSE_R_TESTS="${RFUSE_R_TESTS:-test-device.R test-profile.R test-tensors.R}"
  (cd "$R/R-tests" && timeout 300 Rscript -e 'library(testthat); library(rfuse); for (f in strsplit(Sys.getenv("RFUSE_R_TESTS"), " ")[[1]]) test_file(file.path("testthat", f), reporter = "summary")' 2>&1 | tee "$out/r-tests.log" | grep -vE "^ *$" | tail -n 40)
  OUT="$out" timeout 250 Rscript benchmarks/r-bench.R 2>&1 | tee "$out/r-bench.log"
fi
if [ "$what" = ncu-r ]; then # Nsight Compute on r-bench.R's RFUSE_BENCH_ONLY kernels (a diagnostic)
  if [ -n "${RFUSE_NCU_METRICS:-}" ]; then # one CSV row a kernel: e.g. every kernel's duration over a step's launches
    timeout 500 ncu --target-processes all --clock-control none --cache-control "${RFUSE_NCU_CACHE_CONTROL:-all}" \
      --metrics "$RFUSE_NCU_METRICS" --csv --print-units base \
      -k "regex:${RFUSE_NCU_KERNEL:-.}" -s "${RFUSE_NCU_SKIP:-0}" -c "${RFUSE_NCU_COUNT:-1}" Rscript benchmarks/r-bench.R > "$out/ncu.csv" 2> "$out/ncu.err"
    grep -c '"' "$out/ncu.csv"; tail -n 3 "$out/ncu.err"
  else
    timeout 400 ncu --target-processes all --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats \
      -k "regex:${RFUSE_NCU_KERNEL:-main_k0}" -c "${RFUSE_NCU_COUNT:-1}" Rscript benchmarks/r-bench.R > "$out/ncu.log" 2>&1
    grep -vE "^==PROF==" "$out/ncu.log" | grep -vE "^ *-+ *$" | tail -n "${RFUSE_NCU_LINES:-90}"
  fi
fi
if [ "$what" = ncu-torch-w5 ]; then # PyTorch's W5 step kernel by kernel (benchmarks/torch_w5_kernels.py), a diagnostic
  for key in ${RFUSE_TORCH_W5_SETTINGS:-compile_reduce_overhead}; do
    timeout 400 ncu --target-processes all --clock-control none --cache-control "${RFUSE_NCU_CACHE_CONTROL:-all}" \
      --profile-from-start off --metrics gpu__time_duration.sum --csv --print-units base \
      python3 benchmarks/torch_w5_kernels.py "$key" "${RFUSE_TORCH_W5_STEPS:-3}" > "$out/ncu-torch-$key.csv" 2> "$out/ncu-torch-$key.err"
    echo "$key: $(grep -c '"' "$out/ncu-torch-$key.csv") rows"; tail -n 2 "$out/ncu-torch-$key.err"
  done
fi
if [ "$what" = lib-ab ]; then
  for round in 1 2; do
    for v in main .bundle/alt*/; do
      lp="$LD_LIBRARY_PATH"
      [ "$v" != main ] && lp="$PWD/$v:$LD_LIBRARY_PATH"
      echo "== $v, round $round"
      [ "$round" = 1 ] && LD_LIBRARY_PATH="$lp" "$R/bin/rfuse-gpu-tests" --gtest_filter="${RFUSE_GTEST_FILTER:-Gpu.Attention*}" 2>&1 |
        grep -E "PASSED|FAILED|Failure|rror" | head -n 20
      ls .bundle/diag/*.mlir > /dev/null 2>&1 &&
        LD_LIBRARY_PATH="$lp" OUT="$out" "$R/bin/rfuse-step-profile" w5 .bundle/diag/*.mlir 2>&1 | grep -E "^==|attention|matmul" | head -n 20
      command -v Rscript > /dev/null &&
        LD_LIBRARY_PATH="$lp" OUT="$out" timeout 200 Rscript benchmarks/r-bench.R 2>&1 | grep -E "^(W|mm)" | head -n 20
    done
  done
fi
if [ "$what" = r-bench ]; then
  echo "== rfuse-bench (C++)"
  OUT="$out" "$R/bin/rfuse-bench" > "$out/bench.log" 2>&1; grep -E "^(W|mm)" "$out/bench.log"
  if [ "${RFUSE_SKIP_TORCH:-0}" != 1 ]; then
    echo "== PyTorch's best setting (torch_best.py)"
    (cd "$R" && OUT="$out" timeout 300 python3 torch_best.py > "$out/torch-best.log" 2>&1; grep -E "^W[1-7]" "$out/torch-best.log")
  fi
  echo "== rfuse from R (benchmarks/r-bench.R)"
  RFUSE_TORCH_JSON="$out/torch_best.json" RFUSE_BENCH_JSON="$out/rfuse_bench.json" OUT="$out" \
    timeout 500 Rscript benchmarks/r-bench.R 2>&1 | tee "$out/r-bench.log"
fi
# Runs "$@" under each setting of RFUSE_AB (words VAR=VALUE, several joined by commas), alternately,
# RFUSE_AB_ROUNDS times (default 2), with $setting and $round set for the command.
ab_rounds() {
  for round in $(seq "${RFUSE_AB_ROUNDS:-2}"); do
    for setting in ${RFUSE_AB:?RFUSE_AB: the settings to alternate}; do
      echo "== $setting (round $round)"
      "$@"
    done
  done
}
if [ "$what" = bench-ab ]; then
  ab_rounds eval 'env ${setting//,/ } OUT=/tmp timeout 200 "$R/bin/rfuse-bench" 2>&1 | grep -E "^(W|mm)|rror"'
  case "${RFUSE_BENCH_ONLY:-}" in W4*) (cd "$R" && timeout 150 python3 torch_w4.py 2>&1 | grep -E "^W4|Error") ;; esac
fi
if [ "$what" = r-ab ]; then
  ab_rounds eval 'env ${setting//,/ } OUT="$out" timeout 300 Rscript benchmarks/r-bench.R 2>&1 |
    tee "$out/r-ab-${setting//[^A-Za-z0-9]/_}-$round.log" | grep -E "^W|rror"'
fi
if [ "$what" = warm-start ]; then # benchmarks/r-warm-start.R in fresh R processes: cold, then warm cache
  export RFUSE_CACHE_DIR=/tmp/rfuse-warm-start-cache
  export RFUSE_STEP_FILE=/tmp/rfuse-w5-step.rfuse # W5-file: written by its cold run, loaded by the others
  rm -rf "$RFUSE_CACHE_DIR" "$RFUSE_STEP_FILE"
  # RFUSE_WARM_VARIANTS: the warm runs alternate over these RFUSE_WARM_VARIANT settings (a
  # comparison in one call, on one machine; r-warm-start.R says what each is).
  variants="${RFUSE_WARM_VARIANTS:-default}"
  for w in ${RFUSE_WARM_ONLY:-W1 W1-gc W5 W5-file}; do
    for run in cold warm warm; do
      for v in $variants; do
        [ "$run" = cold ] && [ "$v" != "${variants%% *}" ] && continue # (the cold run once)
        echo "== $w, $run program cache, variant $v"
        RFUSE_WARM_VARIANT="$v" RFUSE_WARM_TIMELINE="$out/timeline-$w-$run-$v-$RANDOM.csv" \
          timeout 300 Rscript benchmarks/r-warm-start.R "$w" 2>&1 | tee -a "$out/warm-start.log" | grep -E "^W"
      done
    done
  done
fi
if [ "$what" = r-diag ]; then
  OUT="$out" timeout 500 Rscript benchmarks/r-diag.R 2>&1 | tee "$out/r-diag.log"
fi
if [ "$what" = step-profile ]; then
  OUT="$out" "$R/bin/rfuse-step-profile" w5 .bundle/diag/*.mlir 2>&1 | tee "$out/step-profile.log"
fi
if [ "$what" = quick ] || [ "$what" = rfuse ]; then
  OUT="$out" "$R/bin/rfuse-bench" | tee -a "$out/bench.log"
fi
if [ "$what" = quick ]; then
  (cd "$R" && OUT="$out" timeout 300 python3 torch_extra.py 2>&1 | tail -n 3)
fi
