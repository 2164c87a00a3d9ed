# What a new R session waits for (issue 18's warm-start targets): run in a fresh process, once
# with an empty program cache and again with the cache the first run left (RFUSE_CACHE_DIR):
#   Rscript benchmarks/r-warm-start.R W1|W5|W5-file
# W1: library(rfuse), then rf_jit(chain) called once on device tensors (2^20 elements): the
#     trace, the program (compiled, or read from the disk cache) and the run — "warm start of a
#     cached program in a new session: <= 20 ms for W1 (trace included)". W1-gc: the same after
#     gc() has collected the data's garbage (R's collection then is not in the first call).
# W5: nn_resnet18 rf_fit on a batch of 256 (32x32): the time until the first step has run,
#     and the counters — "0 NVRTC compiles, 0 pass-pipeline runs" on the second run.
# W5-file: the same with rf_fit(compiled = RFUSE_STEP_FILE): the first run traces, compiles and
#     writes the step there; later runs load it (no trace, no program, no code generation) —
#     "a fresh R session that loads an exported ResNet-18 training step and runs it".
# Prints one line a measurement and rf_cache_info()'s counters; for W5 and W5-file also the
# start-up timeline of the first step (rfuse/Runtime/Timeline.h: the warming threads, the
# libraries' first calls, the parameters' conversion; the whole of it in RFUSE_WARM_TIMELINE, a
# CSV file, when set). RFUSE_WARM_VARIANT=late-warm: a diagnostic — rf_fit does not start the
# libraries' warming threads itself (they start when the step's program loads), to compare with.
what <- commandArgs(TRUE)[1]
if (is.na(what)) what <- "W1"
t0 <- proc.time()[["elapsed"]]
suppressPackageStartupMessages(library(rfuse))
ms <- function(t) 1000 * (proc.time()[["elapsed"]] - t)
# Where a measured stretch's time went: rfuse's phases (rf_cache_info()$seconds) and R's garbage
# collections (gc.time()'s elapsed), as differences from a mark taken before it.
mark <- function() c(rf_cache_info()$seconds, gc = gc.time()[3])
phases <- function(before) {
  d <- 1000 * (mark() - before)
  paste(sprintf("%s %.1f", c("trace", "program", "plan", "load", "library first calls", "R gc"), d), collapse = ", ")
}
cat(sprintf("%s library(rfuse): %.0f ms\n", what, ms(t0)))
# RFUSE_WARM_FUNCTIONS=jit_entry,trace_function,...: a diagnostic. Those functions of rfuse's
# namespace are wrapped to sum their wall time (inclusive, ms), printed after W1's first call.
fn_ms <- new.env()
for (nm in strsplit(Sys.getenv("RFUSE_WARM_FUNCTIONS"), ",")[[1]]) local({
  ns <- asNamespace("rfuse"); f <- get(nm, ns); name <- nm
  unlockBinding(name, ns)
  assign(name, function(...) {
    t <- Sys.time() # (microseconds, where proc.time() has milliseconds)
    on.exit(assign(name, (if (exists(name, fn_ms, inherits = FALSE)) get(name, fn_ms) else 0) +
                           1000 * as.double(Sys.time() - t, units = "secs"), envir = fn_ms))
    f(...)
  }, envir = ns)
})
dev <- as.vector(rf_default_device())
set.seed(1)
if (what %in% c("W1", "W1-gc")) {
  chain <- function(x, a, b) pmax(x * a + b, 0) * (1 / (1 + exp(-x))) + tanh(b) * 0.5
  n <- 2^20
  xt <- rf_tensor(rnorm(n), device = dev); at <- rf_tensor(rnorm(n), device = dev); bt <- rf_tensor(rnorm(n), device = dev)
  rf_sync(xt + 1) # the device and the tensor path started (not part of the warm start)
  # W1-gc: the data's garbage (24 MB of rnorm() temporaries, which put R's vector heap at its
  # trigger) collected first, so that the first call shows rfuse's time without R's collection.
  if (what == "W1-gc") invisible(gc())
  # Each collection during the first call (gcinfo: its level and the heap's use against the
  # trigger, on stderr): which allocation tips R into a collection there. (No gc() call to see the
  # heap before: it would collect.)
  rm(list = ls(fn_ms, all.names = TRUE), envir = fn_ms)
  m1 <- mark()
  old_gcinfo <- gcinfo(TRUE)
  t1 <- proc.time()[["elapsed"]]
  jf <- rf_jit(chain)
  rf_sync(jf(xt, at, bt))
  first <- ms(t1)
  gcinfo(old_gcinfo)
  where <- phases(m1)
  t2 <- proc.time()[["elapsed"]]
  rf_sync(jf(xt, at, bt))
  cat(sprintf("%s first call (trace + program + run): %.1f ms (%s); second call %.2f ms\n", what, first, where, ms(t2)))
  if (length(ls(fn_ms, all.names = TRUE)))
    cat(sprintf("%s first and second calls' functions: %s\n", what,
                paste(sprintf("%s %.1f", ls(fn_ms, all.names = TRUE), unlist(mget(ls(fn_ms, all.names = TRUE), fn_ms))), collapse = ", ")))
  # A second function in the same session: the warm start without the process's one-time work.
  g <- rf_jit(function(x, a, b) pmax(x * a - b, 0) * (1 / (1 + exp(-x))) + tanh(a) * 0.5)
  m3 <- mark()
  t3 <- proc.time()[["elapsed"]]
  rf_sync(g(xt, at, bt))
  cat(sprintf("%s a second function's first call: %.1f ms (%s)\n", what, ms(t3), phases(m3)))
  # A third, right after a full collection: the first call without one of R's on the way.
  h <- rf_jit(function(x, a, b) pmin(x * b + a, 1) * (1 / (1 + exp(-a))) + tanh(x) * 0.5)
  invisible(gc())
  m4 <- mark()
  t4 <- proc.time()[["elapsed"]]
  rf_sync(h(xt, at, bt))
  cat(sprintf("%s a third function's first call, after gc(): %.1f ms (%s)\n", what, ms(t4), phases(m4)))
}
if (what %in% c("W5", "W5-file")) {
  step_file <- if (what == "W5-file") Sys.getenv("RFUSE_STEP_FILE", file.path(tempdir(), "w5-step.rfuse"))
  existed <- !is.null(step_file) && file.exists(step_file)
  net <- nn_resnet18(num_classes = 10)
  nb <- as.integer(Sys.getenv("RFUSE_W5_BATCH", "256"))
  x <- array(rnorm(nb * 3 * 32 * 32), c(nb, 3, 32, 32)); y <- rf_one_hot(sample.int(10, nb, replace = TRUE), 10)
  m1 <- mark()
  t1 <- proc.time()[["elapsed"]]
  prof <- Sys.getenv("RFUSE_WARM_RPROF") # a file: R's profile of the step (a diagnostic)
  if (nzchar(prof)) Rprof(prof, interval = 0.005)
  if (Sys.getenv("RFUSE_WARM_VARIANT") == "late-warm")
    assignInNamespace(".rf_warm_libraries", function() invisible(), "rfuse")
  fit <- rf_fit(net, x, y, steps = 1, lr = 0.1, momentum = 0.9, progress = FALSE, compiled = step_file)
  tl <- rfuse:::.rf_timeline()
  if (nzchar(prof)) Rprof(NULL)
  how <- if (is.null(step_file)) "trace + program" else if (existed) "step loaded from its file" else
    "trace + program + writing the step file"
  cat(sprintf("%s rf_fit, one step (%s + data upload + step): %.0f ms (%s)\n", what, how, ms(t1), phases(m1)))
  # The trained values stay on the device until R reads them: what the first read of all of them
  # costs (downloaded, converted, filters permuted to R's layout), after the step, as a user who
  # then looks at the weights pays it.
  m2 <- mark()
  t2 <- proc.time()[["elapsed"]]
  total <- sum(vapply(net$parameters, function(p) sum(p), 0))
  cat(sprintf("%s reading every trained parameter in R afterwards: %.0f ms (%s)\n", what, ms(t2), phases(m2)))
}
if (what %in% c("W5", "W5-file")) {
  # The timeline from rf_fit's start: each mark, but the many per-parameter conversions and
  # library first calls as one line each kind (the first begin, the last end, their sum).
  start <- tl$ms[match("rf_fit: the parameters into tensors begin", tl$what)]
  tl <- tl[tl$ms >= start - 1e-9, ]
  tl$ms <- tl$ms - start
  if (nzchar(Sys.getenv("RFUSE_WARM_TIMELINE"))) write.csv(tl, Sys.getenv("RFUSE_WARM_TIMELINE"), row.names = FALSE)
  kind <- sub(" (begin|end)$", "", tl$what)
  many <- names(which(table(kind) > 8))
  for (k in unique(kind)) {
    rows <- tl[kind == k, ]
    b <- rows$ms[grepl(" begin$", rows$what)]; e <- rows$ms[grepl(" end$", rows$what)]
    if (k %in% many && !length(b)) {
      cat(sprintf("%s timeline %8.1f..%8.1f ms  thread %s  %s: %d marks\n", what, min(rows$ms), max(rows$ms),
                  paste(unique(rows$thread), collapse = ","), k, nrow(rows)))
    } else if (k %in% many) {
      cat(sprintf("%s timeline %8.1f..%8.1f ms  thread %s  %s: %d, %.1f ms in all\n", what, min(b), max(e),
                  paste(unique(rows$thread), collapse = ","), k, length(e), sum(e - b[seq_along(e)])))
    } else {
      cat(sprintf("%s timeline %8.1f ms  thread %d  %s %s\n", what, rows$ms, rows$thread, rows$what, rows$detail), sep = "")
    }
  }
}
if (what %in% c("W5", "W5-file") && nzchar(prof)) { # the sampled stacks' innermost frames, most frequent first
  stacks <- vapply(strsplit(readLines(prof)[-1], " "), function(f) paste(head(f, 8), collapse = " "), "")
  top <- head(sort(table(stacks), decreasing = TRUE), 20)
  cat(sprintf("%5d %s\n", as.integer(top), names(top)), sep = "")
}
ci <- rf_cache_info()
lib <- rfuse:::.rf_compile_counts() # the library calls' first runs: of their time, the plans (algorithms chosen)
cat(sprintf(paste("%s counters: pass_runs %d, disk_hits %d, nvrtc_compiles %d, llvm_compiles %d; library first calls %d",
                  "(%.1f ms, plans %.1f ms, the longest %.1f ms; plans recalled %d, of them from disk %d, chosen %d)\n"),
            what, as.integer(ci$pass_runs), as.integer(ci$disk_hits), as.integer(ci$nvrtc_compiles),
            as.integer(ci$llvm_compiles), as.integer(lib[["library_first_calls"]]),
            1000 * lib[["library_seconds"]], 1000 * lib[["library_plan_seconds"]], 1000 * lib[["library_longest_plan_seconds"]],
            as.integer(lib[["library_plans_recalled"]]), as.integer(lib[["library_plans_from_disk"]]),
            as.integer(lib[["library_plans_chosen"]])))
