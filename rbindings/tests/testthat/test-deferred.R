# rf_fit's trained values stay in the last step's tensors until R reads them (doubles of an
# ALTREP class, made on first read; filters then in R's layout), and a later rf_fit starts from
# those tensors: on the device the model does not come back through the host between fits.

deferred_net <- function() {
  torch_manual_seed(3)
  nn_sequential(nn_conv2d(2, 3, 3, padding = 1), nn_relu(), nn_flatten(), nn_linear(3 * 4 * 4, 2))
}
deferred_data <- local({
  set.seed(4)
  list(x = array(rnorm(8 * 2 * 4 * 4), c(8, 2, 4, 4)), y = rep(1:2, 4))
})
fit_steps <- function(net, steps) # full batches: the order of the samples does not matter
  rf_fit(net, deferred_data$x, deferred_data$y, steps = steps, lr = 0.1, progress = FALSE,
         device = rf_default_device())
pending <- function(x) rfuse:::.rf_deferred_pending(x)

test_that("a fit's trained values are read from the device only when R asks for them", {
  net <- deferred_net()
  w0 <- as.array(net[[1]]$weight) + 0
  fit <- fit_steps(net, 1)
  w <- net$parameters[["0.weight"]]
  expect_true(pending(w))
  expect_true(pending(net$parameters[["3.weight"]]))
  # What R sees without reading the values: length, dims, class, attributes.
  expect_identical(dim(w), dim(w0))
  expect_identical(length(w), length(w0))
  expect_s3_class(w, "rf_parameter")
  expect_true(pending(w))
  expect_identical(fit$params[["0.weight"]], w)
  # A copy without the attributes is another view of the tensor; reading w itself makes its values
  # (once). They differ from the initial ones.
  expect_false(isTRUE(all.equal(as.vector(w), as.vector(w0))))
  expect_true(pending(w))
  s <- sum(w)
  expect_false(pending(w))
  expect_equal(s, sum(as.vector(w)))
  expect_false(isTRUE(all.equal(s, sum(w0))))
})

test_that("fits in several calls start from the last one's tensors and equal one fit of all the steps", {
  ref <- deferred_net()
  fit_steps(ref, 3)
  net <- deferred_net()
  fit_steps(net, 1)
  after_one <- net$parameters
  fit_steps(net, 1)
  # The second fit took the first one's tensors without reading them, and trained a copy: the
  # values the model held after one step are still those.
  for (p in names(after_one)) expect_true(pending(after_one[[p]]), info = p)
  fit_steps(net, 1)
  for (p in names(ref$parameters))
    expect_lt(rel_err(as.array(net$parameters[[p]]), as.array(ref$parameters[[p]])), 1e-5)
  once <- deferred_net()
  fit_steps(once, 1)
  for (p in names(after_one))
    expect_lt(rel_err(unclass(after_one[[p]]), unclass(once$parameters[[p]])), 1e-6)
})

test_that("deferred values copy, change, serialize and print as R's doubles", {
  net <- deferred_net()
  fit_steps(net, 2)
  w <- net$parameters[["0.weight"]]
  v <- w # a copy not yet made is another view of the same tensor
  v[1] <- 0
  expect_identical(v[1], 0)
  expect_true(pending(w))
  expect_false(w[1] == 0)
  expect_identical(dim(v), dim(w))
  b <- net$parameters[["0.bias"]]
  back <- unserialize(serialize(b, NULL))
  expect_false(pending(back))
  expect_identical(attributes(back), attributes(b))
  expect_identical(as.vector(back), as.vector(b))
  expect_output(print(unclass(net$parameters[["3.bias"]])), "\\[1\\]")
  # The model predicts with them (the values read where the forward needs them).
  out <- rf_jit(net)(deferred_data$x)
  expect_identical(dim(as.array(out)), c(8L, 2L))
  expect_true(all(is.finite(as.array(out))))
})

test_that("the start-up timeline shows a fit's phases in order", {
  net <- deferred_net()
  fit_steps(net, 1)
  tl <- rfuse:::.rf_timeline()
  expect_named(tl, c("ms", "thread", "what", "detail"))
  at <- function(what) tail(which(tl$what == what), 1)
  conv_begin <- at("rf_fit: the parameters into tensors begin")
  conv_end <- at("rf_fit: the parameters into tensors end")
  run_begin <- at("training loop run begin")
  run_end <- at("training loop run end")
  expect_length(c(conv_begin, conv_end, run_begin, run_end), 4)
  expect_true(conv_begin < conv_end && conv_end < run_begin && run_begin < run_end)
  expect_true(all(diff(tl$ms) >= 0))
  # The conv filter went in permuted, within the conversion.
  permuted <- which(tl$what == "R values into a tensor, permuted begin")
  expect_true(any(permuted > conv_begin & permuted < conv_end))
})
