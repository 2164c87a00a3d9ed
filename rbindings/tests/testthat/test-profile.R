# rf_profile() and rf_sitrep() (issue 13).

test_that("rf_profile records each step with its time, bytes and R source, on every backend", {
  x <- rf_tensor(matrix(runif(4000), 200), device = "cpu")
  f <- rf_jit(function(x) { e <- exp(x); e / rowSums(e) })
  f(x)
  p <- rf_profile(f(x))
  expect_s3_class(p, "rf_profile")
  expect_gte(nrow(p$steps), 1)
  expect_true(all(p$steps$device == "cpu"))
  expect_true(all(p$steps$ms >= 0))
  expect_equal(sum(p$steps$bytes), 2 * 4000 * 4) # the kernel reads x and writes the result
  expect_true(any(grepl("rowSums(e)", p$steps$source, fixed = TRUE)))
  expect_true(is.finite(p$summary[["wall_ms"]]) && p$summary[["wall_ms"]] >= p$summary[["device_ms"]])
  expect_equal(p$transfers[["host_to_device_bytes"]], 0) # host tensors never cross
  expect_true(methods::is(p$value, "rf_tensor"))
  expect_output(print(p), "rf_profile: 1 steps")
  # Nothing is recorded outside a profile.
  p2 <- rf_profile(NULL)
  expect_equal(nrow(p2$steps), 0)
  # An error inside closes the profile.
  expect_error(rf_profile(stop("boom")), "boom")
  expect_equal(nrow(rf_profile(1)$steps), 0)
})

test_that("rf_profile counts a GPU program's transfers and device steps", {
  skip_if(as.vector(rf_default_device()) != "cuda", paste("no usable GPU:", attr(rf_default_device(), "description")))
  x <- matrix(runif(4096), 64)
  f <- rf_jit(function(x) tanh(x) * 2)
  f(x)
  p <- rf_profile(f(x)) # plain R arrays: up and down once each
  expect_equal(p$transfers[["host_to_device_bytes"]], 4096 * 4)
  expect_equal(p$transfers[["device_to_host_bytes"]], 4096 * 4)
  expect_true(all(p$steps$device == "cuda"))
  expect_gt(p$summary[["transfer_ms"]], 0)
})

test_that("rf_sitrep says which device is used and why", {
  s <- rf_sitrep()
  expect_s3_class(s, "rf_sitrep")
  expect_identical(s$device, as.vector(rf_default_device()))
  expect_true(nzchar(s$why))
  expect_identical(s$supported_archs, c("sm_86", "sm_89", "sm_90"))
  if (!s$gpu_available) expect_match(s$why, "no usable GPU")
  else expect_gt(s$memory_total, 0)
  expect_output(print(s), "rfuse situation report")
  old <- options(rfuse.device = "cpu")
  expect_match(rf_sitrep()$why, "rfuse.device")
  options(old)
})
