# The product's benchmark script (benchmarks/r-bench.R, issue 13) runs here too, briefly: small
# shapes on the CPU (or the GPU, where there is one), two timed calls a row. It checks every
# workload against base R or eager code as it goes (an error stops it), so this test fails when a
# benchmarked path computes something else or breaks, not on any timing.

test_that("benchmarks/r-bench.R runs every workload and writes its JSON", {
  script <- normalizePath(file.path("..", "..", "..", "benchmarks", "r-bench.R"), mustWork = FALSE)
  skip_if_not(file.exists(script), "benchmarks/r-bench.R is not beside these tests (R CMD check's copy of the package)")
  out <- tempfile("r-bench-")
  dir.create(out)
  env <- c(sprintf("OUT=%s", out), "RFUSE_BENCH_SMALL=1", "RFUSE_BENCH_ITERS=2", "RFUSE_BENCH_ONLY=")
  lines <- suppressWarnings(system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE,
                                    stderr = TRUE, env = env))
  status <- attr(lines, "status")
  expect_true(is.null(status) || identical(status, 0L), info = paste(utils::tail(lines, 20), collapse = "\n"))
  rows <- grep("^W[0-9]", lines, value = TRUE)
  for (w in c("W1", "W4", "W3", "W2", "W2bf16", "W5", "W5bf16", "W6", "W6step", "W0"))
    expect_true(any(startsWith(rows, paste0(w, " "))), info = w)
  ms <- as.numeric(sub("^W[0-9a-z]+ +.*? ([0-9.]+) ms.*$", "\\1", rows))
  expect_true(all(is.finite(ms) & ms > 0), info = paste(rows, collapse = "\n"))
  json <- jsonlite::fromJSON(file.path(out, "r_bench.json"))
  expect_true(all(c("W1", "W4", "W3", "W2", "W5", "W6") %in% names(json)))
})
