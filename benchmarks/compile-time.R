# Trace + compile time of a straight-line function of n statements (each an op on a vector and
# a number: 3 IR ops), from R with default settings, for n = 1,000 ... 10,000: the time per
# statement should stay flat (issue 14). Usage: Rscript benchmarks/compile-time.R [n ...]
suppressMessages(library(rfuse))
ns <- as.integer(commandArgs(TRUE))
if (!length(ns)) ns <- c(1000L, 2000L, 5000L, 10000L)
cat(sprintf("%8s %12s %12s %14s %12s\n", "statements", "trace (s)", "compile (s)", "total (s)", "ms/stmt"))
for (n in ns) {
  stmts <- lapply(seq_len(n), function(i) if (i %% 2) quote(x <- x * 1.0001) else quote(x <- x + 0.5))
  f <- eval(call("function", as.pairlist(alist(x = )), as.call(c(as.name("{"), stmts, quote(x)))))
  t0 <- proc.time()[[3]]
  tr <- rfuse:::trace_function(f, list(c(1, 2)), "f64", FALSE)
  t1 <- proc.time()[[3]]
  p <- rfuse:::.rf_compile(tr$text, "default")
  t2 <- proc.time()[[3]]
  cat(sprintf("%8d %12.3f %12.3f %14.3f %12.3f\n", n, t1 - t0, t2 - t1, t2 - t0, 1000 * (t2 - t0) / n))
}
