test_that("a pass pipeline string runs exactly the passes it names", {
  f <- function(x) exp(x) * 2 + 1
  x <- c(0.5, -1, 2)
  only_elementwise <- "builtin.module(inline, canonicalize, func.func(rfuse-fuse-elementwise), rfuse-outline-kernels)"
  jf <- rf_jit(f, dtype = "float64", pipeline = only_elementwise)
  expect_equal(jf(x), f(x), tolerance = 1e-12)
  ex <- rf_explain(jf, x)
  expect_equal(ex$kernel_count, 1)
  expect_identical(ex$pipeline, only_elementwise)
  # Without outlining, every op is a step of its own.
  unfused <- rf_explain(f, x, pipeline = "builtin.module(canonicalize)")
  expect_gt(length(unfused$cpu_steps), 1)
})

test_that("a bad pipeline is an error at rf_jit(), naming what is wrong", {
  expect_error(rf_jit(function(x) x, pipeline = "fastest"), "unknown rfuse pipeline 'fastest'")
  expect_error(rf_jit(function(x) x, pipeline = "fastest"), "unknown rfuse pipeline 'fastest'") # (only passes are remembered)
  expect_error(rf_jit(function(x) x, pipeline = "builtin.module(no-such-pass)"), "does not parse")
  expect_error(rf_jit(function(x) x, pipeline = "builtin.module(canonicalize"), "builtin.module")
  expect_error(rf_jit(function(x) x, pipeline = c("default", "no-fusion")), "one string")
  expect_error(rf_grad(function(x) sum(x), pipeline = "bogus"), class = "rfuse_error")
})

test_that("rf_explain(after_each_pass = TRUE) returns the IR after every pass and lowering stage", {
  ex <- rf_explain(function(x) { e <- exp(x); e / sum(e) }, c(1, 2, 3), after_each_pass = TRUE)
  p <- ex$passes
  expect_type(p, "list")
  expect_match(names(p)[1], "^01 ")
  expect_true(any(grepl("^[0-9]+ inline$", names(p))))
  expect_true(any(grepl("rfuse-fuse-elementwise$", names(p))))
  expect_match(names(p)[length(p) - 1], "rfuse-emit-cuda$")
  expect_match(names(p)[length(p)], "rfuse-lower-kernels-to-cpu$")
  expect_match(p[[length(p) - 1]], "rfuse.cuda_source", fixed = TRUE)
  expect_match(p[[length(p)]], "linalg.generic|scf.for")
  expect_null(rf_explain(function(x) x + 1, 1)$passes)
  expect_error(rf_explain(function(x) x, 1, after_each_pass = NA), "TRUE or FALSE")
})

test_that("a pass plugin's passes can be named in a pipeline", {
  plugin <- file.path(rfuse:::.rf_build_dir(), "lib", "libRfuseExamplePlugin.so")
  # The package knows the build it was installed from; a bundle installed elsewhere (the GPU
  # box) has no build tree.
  skip_if_not(dir.exists(rfuse:::.rf_build_dir()), "rfuse's build directory is not on this machine")
  expect_true(file.exists(plugin), info = plugin)
  f <- function(x) log(exp(x)) * 3
  x <- c(1000, -2, 0.5) # exp(1000) overflows: only the rewritten program gets 3000
  pipe <- "builtin.module(inline, func.func(rfuse-example-fold-log-exp), canonicalize, func.func(rfuse-fuse-elementwise), rfuse-outline-kernels)"
  jf <- rf_jit(f, dtype = "float64", pipeline = pipe, plugins = plugin)
  expect_equal(jf(x), x * 3)
  expect_false(grepl("rfuse.exp", rf_explain(jf, x)$fused, fixed = TRUE))
  expect_equal(rf_jit(f, dtype = "float64")(x)[1], Inf) # as base R
  # Loading it again does nothing; a copy registers the same pass name: refused, session lives.
  expect_silent(rf_jit(f, pipeline = pipe, plugins = plugin))
  copy <- tempfile(fileext = ".so")
  file.copy(plugin, copy)
  expect_error(rf_jit(f, pipeline = pipe, plugins = copy), class = "rfuse_plugin_error")
  expect_error(rf_jit(f, pipeline = pipe, plugins = copy), "already has")
  expect_error(rf_jit(f, plugins = tempfile()), "does not exist")
  expect_error(rf_jit(f, plugins = NA_character_), class = "rfuse_plugin_error")
  expect_equal(jf(x), x * 3) # still works
})
