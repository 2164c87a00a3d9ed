#!/usr/bin/env bash
# The sanitizer and fuzzing part of the test command (scripts/test.sh runs it):
#   1. rfuse's code built with clang, AddressSanitizer and UndefinedBehaviorSanitizer in
#      build-sanitize/ (-DRFUSE_SANITIZE=address,undefined -DRFUSE_FUZZERS=ON);
#   2. the unit tests run there (RFUSE_SANITIZE_FILTER: a gtest filter, default all);
#   3. each libFuzzer target (tests/fuzz) for RFUSE_FUZZ_SECONDS (default 60) on its seed corpus,
#      new inputs kept under build-sanitize/fuzz/, a finding's input there too.
# Installs what is missing (clang, its sanitizer runtimes).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-missing.sh clang libclang-rt-14-dev
b=build-sanitize
if [ ! -f $b/build.ninja ]; then
  CC=clang CXX=clang++ cmake -G Ninja -S . -B $b -DCMAKE_BUILD_TYPE=Release \
    -DRFUSE_SANITIZE=address,undefined -DRFUSE_FUZZERS=ON > $b.configure.log 2>&1 || { cat $b.configure.log; exit 1; }
fi
fuzzers=(mlir-parser npy call-key)
echo "== sanitizer build (clang, ASan + UBSan)"
ninja -C $b -j"${RFUSE_JOBS:-$(nproc)}" rfuse-unit-tests "${fuzzers[@]/#/rfuse-fuzz-}"

# Leaks are reported too; MLIR's and LLVM's process-lifetime singletons are not leaks.
# allow_user_poisoning=0: LLVM's allocator poisons from header code inlined into our instrumented
# code but not in Debian's uninstrumented libMLIR, which reads as use-after-poison.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:allow_user_poisoning=0"
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
echo "== unit tests under ASan + UBSan"
run_unit_tests() {
  $b/bin/rfuse-unit-tests --gtest_filter="${RFUSE_SANITIZE_FILTER:-*}" --gtest_brief=1 > $b/unit-tests.log 2>&1
  local st=$?; tail -n 30 $b/unit-tests.log; return $st
}
status=0; run_unit_tests || status=$?
# LeakSanitizer's own tracer can crash at exit ("LeakSanitizer has encountered a fatal error",
# seen once in a fresh-clone run after every test had passed): that is the tool failing, not a
# leak found (a leak reads "detected memory leaks"), so the run is repeated once.
if [ "$status" -ne 0 ] && grep -q "LeakSanitizer has encountered a fatal error" $b/unit-tests.log &&
   ! grep -q "detected memory leaks" $b/unit-tests.log; then
  echo "== LeakSanitizer itself failed at exit; running the unit tests again"
  status=0; run_unit_tests || status=$?
fi
[ "$status" -eq 0 ] || { echo "unit tests under sanitizers failed ($status)"; exit 1; }

for f in "${fuzzers[@]}"; do
  echo "== fuzzing $f for ${RFUSE_FUZZ_SECONDS:-60} s"
  work=$b/fuzz/$f
  mkdir -p "$work"
  $b/bin/rfuse-fuzz-$f -max_total_time="${RFUSE_FUZZ_SECONDS:-60}" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$work/" -print_final_stats=1 "$work" tests/fuzz/corpus/$f > "$work.log" 2>&1 || {
    tail -n 40 "$work.log"; echo "fuzzer $f found a problem: its input is in $work/"; exit 1; }
  grep -E "^(stat::number_of_executed_units|stat::new_units_added)" "$work.log" | tr '\n' ' '; echo
done
echo "== sanitizers and fuzzers: clean"
