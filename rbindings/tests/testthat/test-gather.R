# torch_gather / torch_scatter_add (rfuse.take_along / rfuse.scatter_add): against loops written
# from torch's definition (out[i][j][k] = x[i][index[i][j][k]][k] for dim 2, 1-based as torch
# for R's), on plain arrays, eager tensors and traced code, with gradients.

gather_ref <- function(x, dim, index) {
  di <- dim(index)
  out <- array(0, di)
  for (l in seq_len(prod(di))) {
    at <- arrayInd(l, di)
    src <- at
    src[dim] <- index[l]
    out[l] <- x[src]
  }
  out
}

scatter_add_ref <- function(x, dim, index, src) {
  out <- x
  for (l in seq_along(src)) {
    at <- arrayInd(l, dim(src))
    at[dim] <- index[l]
    out[at] <- out[at] + src[l]
  }
  out
}

test_that("torch_gather equals torch's definition along every dim, with an index smaller than x", {
  set.seed(11)
  x <- array(rnorm(4 * 3 * 5), c(4, 3, 5))
  for (k in 1:3) {
    di <- c(3, 2, 4); di[k] <- 6 # more positions than x has along k, fewer of the others
    index <- array(sample.int(dim(x)[k], prod(di), replace = TRUE), di)
    ref <- gather_ref(x, k, index)
    expect_identical(torch_gather(x, k, index), ref, info = k)
    expect_identical(rf_jit(function(x, i) torch_gather(x, k, i), dtype = "float64")(x, index), ref, info = k)
    got <- rf_tensor(x, dtype = "float64")$gather(k, rf_tensor(index, dtype = "int64"))
    expect_identical(as.array(got), ref, info = k)
    # A negative dim counts from the end.
    expect_identical(torch_gather(x, k - 4L, index), ref, info = k)
  }
  # torch for R's own example.
  t <- matrix(c(1, 2, 3, 4), ncol = 2, byrow = TRUE)
  expect_identical(torch_gather(t, 2, matrix(c(1, 1, 2, 1), ncol = 2, byrow = TRUE)), matrix(c(1, 4, 1, 3), 2))
  # Positions computed in the program (an argsort's) are taken as they come.
  f <- rf_jit(function(x) torch_gather(x, 1, torch_argsort(x, 1)), dtype = "float64")
  expect_identical(f(x[, 1, 1]), sort(x[, 1, 1]))
})

test_that("torch_gather's gradient adds each cotangent back at its position", {
  set.seed(12)
  x <- matrix(rnorm(12), 3)
  index <- matrix(c(1L, 1L, 3L, 2L, 2L, 2L, 3L, 1L), 2) # positions taken twice, and one never
  w <- matrix(rnorm(8), 2)
  expect_grads_match(function(x, w) sum(torch_gather(x, 1, index) * w), list(x = x, w = w), "x")
  g <- rf_value_and_grad(function(x) sum(torch_gather(x, 1, index) * w), dtype = "float64")(x)$grad$x
  ref <- matrix(0, 3, 4)
  for (l in seq_along(index)) ref[index[l], (l - 1) %/% 2 + 1] <- ref[index[l], (l - 1) %/% 2 + 1] + w[l]
  expect_equal(g, ref, tolerance = 1e-12)
  # Through an eager tensor's backward().
  xt <- rf_tensor(x, dtype = "float64", requires_grad = TRUE)
  loss <- (torch_gather(xt, 1, rf_tensor(index, dtype = "int64")) * rf_tensor(w, dtype = "float64"))$sum()
  loss$backward()
  expect_equal(as.array(xt$grad), ref, tolerance = 1e-12)
})

test_that("torch_scatter_add equals torch's definition, and its gradient takes each cotangent from its position", {
  set.seed(13)
  x <- array(rnorm(2 * 4 * 3), c(2, 4, 3))
  src <- array(rnorm(2 * 6 * 3), c(2, 6, 3))
  index <- array(sample.int(4, length(src), replace = TRUE), dim(src))
  ref <- scatter_add_ref(x, 2, index, src)
  expect_equal(torch_scatter_add(x, 2, index, src), ref, tolerance = 1e-15)
  expect_equal(rf_jit(function(x, s) torch_scatter_add(x, 2, index, s), dtype = "float64")(x, src), ref, tolerance = 1e-14)
  expect_equal(as.array(rf_tensor(x, dtype = "float64")$scatter_add(2, rf_tensor(index, dtype = "int64"),
                                                                     rf_tensor(src, dtype = "float64"))),
               ref, tolerance = 1e-14)
  w <- array(rnorm(length(x)), dim(x))
  expect_grads_match(function(x, s) sum(torch_scatter_add(x, 2, index, s) * w), list(x = x, s = src))
})

test_that("bad positions and shapes are torch's errors, and unsupported forms are refused by name", {
  x <- matrix(as.double(1:6), 2)
  expect_error(torch_gather(x, 2, matrix(c(1L, 4L), 2)), class = "rfuse_index_error")
  expect_error(torch_gather(x, 2, matrix(c(0L, 1L), 2)), class = "rfuse_index_error")
  expect_error(torch_gather(x, 2, matrix(1.5, 2)), class = "rfuse_type_error")
  expect_error(torch_gather(x, 2, 1:2), class = "rfuse_shape_error")
  expect_error(torch_gather(x, 2, matrix(1L, 3, 1)), class = "rfuse_shape_error")
  expect_error(torch_gather(x, 3, matrix(1L, 2, 1)), class = "rfuse_shape_error")
  expect_error(torch_gather(x, 2, matrix(1L, 2, 1), sparse_grad = TRUE), class = "rfuse_unsupported")
  # A position the program computes out of range: R answers the call (torch's error).
  f <- rf_jit(function(x, i) torch_gather(x, 2, i + 1L), dtype = "float64")
  expect_identical(f(x, matrix(c(0L, 1L), 2)), gather_ref(x, 2, matrix(c(1L, 2L), 2)))
  expect_error(suppressMessages(f(x, matrix(c(3L, 1L), 2))), class = "rfuse_index_error")
  expect_error(torch_scatter_add(x, 2, matrix(1L, 2, 1), matrix(1, 2, 2)), class = "rfuse_unsupported")
  expect_error(torch_scatter_add(matrix(1L, 2, 2), 2, matrix(1L, 2, 2), matrix(1L, 2, 2)), class = "rfuse_unsupported")
  expect_error(torch_scatter_add(x, 2, matrix(5L, 2, 3), matrix(1, 2, 3)), class = "rfuse_index_error")
})
