# torch for R's tensor functions and methods: on plain arrays, traced (both dtypes) and on
# rf_tensors, against references written from torch's definitions (row-major order spelled out
# as index tuples, not through the code under test).

# All index tuples of an array of dims d in row-major order (last dim fastest).
rowmajor_index <- function(d) as.matrix(rev(expand.grid(lapply(rev(d), seq_len))))
rowmajor_values <- function(x) x[rowmajor_index(dim(x) %||% length(x))]
from_rowmajor <- function(v, d) {
  if (length(d) == 1) return(v)
  out <- array(0, d)
  out[rowmajor_index(d)] <- v
  out
}
`%||%` <- function(a, b) if (is.null(a)) b else a

expect_traced <- function(f, ..., ref = f(...)) {
  for (dt in c("float64", "float32")) {
    got <- rf_jit(f, dtype = dt)(...)
    expect_identical(dim(got), dim(ref), info = dt)
    expect_lt(rel_err(got, ref), tol[[dt]])
  }
}

test_that("reshape, view and flatten are row-major, as torch's", {
  set.seed(1)
  x <- rnd(2, 3, 4)
  ref <- from_rowmajor(rowmajor_values(x), c(4, 6))
  expect_equal(torch_reshape(x, c(4, -1)), ref)
  expect_traced(function(x) torch_reshape(x, c(4, -1)), x, ref = ref)
  expect_traced(function(x) x$view(4, 6), x, ref = ref)
  expect_traced(function(x) x$view(c(-1, 2, 3))$reshape(24), x, ref = rowmajor_values(x))
  fl <- from_rowmajor(rowmajor_values(x), c(2, 12))
  expect_equal(torch_flatten(x, start_dim = 2), fl)
  expect_traced(function(x) torch_flatten(x, start_dim = 2), x, ref = fl)
  expect_traced(function(x) torch_flatten(x, 1, 2), x, ref = from_rowmajor(rowmajor_values(x), c(6, 4)))
  expect_error(torch_reshape(x, c(5, -1)), class = "rfuse_shape_error")
  expect_error(torch_reshape(x, c(-1, -1)), "only one dimension")
  expect_error(torch_flatten(x, start_dim = 0), "1-based", class = "rfuse_shape_error")
  expect_error(torch_flatten(x, start_dim = 4), "out of range", class = "rfuse_shape_error")
})

test_that("permute, transpose, squeeze, unsqueeze move dims as torch's", {
  set.seed(2)
  x <- rnd(2, 3, 4)
  ref <- array(0, c(4, 2, 3))
  for (i in 1:2) for (j in 1:3) for (k in 1:4) ref[k, i, j] <- x[i, j, k]
  expect_equal(torch_permute(x, c(3, 1, 2)), ref)
  expect_traced(function(x) x$permute(3, 1, 2), x, ref = ref)
  expect_traced(function(x) x$transpose(1, -1), x, ref = aperm(x, c(3, 2, 1)))
  expect_traced(function(x) torch_squeeze(torch_unsqueeze(x, 2), 2), x, ref = x)
  expect_identical(dim(torch_unsqueeze(x, -1)), c(2L, 3L, 4L, 1L))
  expect_identical(dim(torch_unsqueeze(x, 1)), c(1L, 2L, 3L, 4L))
  m <- rnd(3, 5)
  expect_traced(function(m) m$t(), m, ref = t(m))
  expect_error(torch_permute(x, c(1, 1, 2)), class = "rfuse_shape_error")
})

test_that("reductions along dims, keepdim, softmax and log_softmax", {
  set.seed(3)
  x <- rnd(2, 3, 4)
  s2 <- apply(x, c(1, 3), sum)
  expect_equal(torch_sum(x, dim = 2), s2)
  expect_traced(function(x) torch_sum(x, dim = 2), x, ref = s2)
  expect_traced(function(x) x$mean(dim = c(1, 3)), x, ref = apply(x, 2, mean))
  expect_traced(function(x) x$amax(dim = -1, keepdim = TRUE), x, ref = array(apply(x, c(1, 2), max), c(2, 3, 1)))
  expect_traced(function(x) torch_amin(x), x, ref = min(x))
  sm <- x
  for (i in 1:2) for (k in 1:4) sm[i, , k] <- exp(x[i, , k]) / sum(exp(x[i, , k]))
  expect_equal(torch_softmax(x, dim = 2), sm)
  expect_traced(function(x) x$softmax(dim = 2), x, ref = sm)
  expect_traced(function(x) torch_log_softmax(x, 2), x, ref = log(sm))
  big <- matrix(c(1000, 0, 1001, -1000), 2) # stable: no overflow
  expect_equal(rf_jit(function(x) nnf_softmax(x, 2), dtype = "float64")(big), exp(big - apply(big, 1, max)) / rowSums(exp(big - apply(big, 1, max))))
  expect_equal(torch_max(x), max(x))
  mx <- torch_max(x, dim = 2)
  expect_equal(mx[[1]], apply(x, c(1, 3), max))
  expect_identical(mx[[2]], apply(x, c(1, 3), which.max))
  expect_traced(function(x) torch_max(x, dim = 2)[[2]], x, ref = apply(x, c(1, 3), which.max))
  # On rf_tensors: the values and the indices are two recorded operations of one name; each is
  # its own program (they once shared the first one's, and the indices came back as values).
  tx <- rf_tensor(x, dtype = "float64")
  tm <- torch_max(tx, dim = 2)
  expect_equal(as.array(tm[[1]]), apply(x, c(1, 3), max))
  expect_equal(as.array(tm[[2]]), apply(x, c(1, 3), which.max))
  expect_equal(as.array(torch_min(tx, dim = 3)[[2]]), apply(x, c(1, 2), which.min))
  expect_traced(function(x) x$argmin(dim = 3, keepdim = TRUE), x, ref = array(apply(x, c(1, 2), which.min), c(2, 3, 1)))
  # Ties give the first index; a NaN counts as the maximum, as torch.
  tie <- matrix(c(1, 3, 3, 0, NaN, 2), 2, byrow = TRUE)
  expect_identical(torch_argmax(tie, dim = 2), c(2L, 2L))
  got <- rf_jit(function(m) torch_argmax(m, dim = 2), dtype = "float64")(tie)
  expect_identical(got, c(2L, 2L))
})

test_that("cat, stack, narrow, chunk and split", {
  set.seed(4)
  a <- rnd(2, 3); b <- rnd(2, 2)
  expect_equal(torch_cat(list(a, b), dim = 2), cbind(a, b))
  expect_traced(function(a, b) torch_cat(list(a, b), 2), a, b, ref = cbind(a, b))
  expect_traced(function(a) torch_cat(list(a, a * 2), dim = 1), a, ref = rbind(a, a * 2))
  st <- array(0, c(2, 2, 3)); st[, 1, ] <- a; st[, 2, ] <- a + 1
  expect_equal(torch_stack(list(a, a + 1), dim = 2), st)
  expect_traced(function(a) torch_stack(list(a, a + 1), dim = 2), a, ref = st)
  x <- rnd(3, 5)
  expect_traced(function(x) torch_narrow(x, 2, 2, 3), x, ref = x[, 2:4])
  ch <- torch_chunk(x, 2, dim = 2)
  expect_equal(ch, list(x[, 1:3], x[, 4:5]))
  expect_traced(function(x) { p <- x$chunk(2, dim = 2); p[[1]] * 2 }, x, ref = x[, 1:3] * 2)
  expect_equal(torch_split(x, c(1, 4), dim = 2), list(x[, 1, drop = FALSE], x[, 2:5]))
  expect_error(torch_cat(list(a, rnd(3, 3)), dim = 2), "Sizes of tensors must match", class = "rfuse_shape_error")
  expect_error(torch_split(x, c(1, 1), dim = 2), class = "rfuse_shape_error")
})

test_that("broadcasting arithmetic, where, masked_fill, matmul and bmm follow torch", {
  set.seed(5)
  x <- rnd(4, 3); b <- rnd(3)
  ref <- sweep(x, 2, b, "+") # torch: a length-3 vector broadcasts over rows
  expect_equal(torch_add(x, b), ref)
  expect_traced(function(x, b) torch_add(x, b), x, b, ref = ref)
  expect_traced(function(x, b) x$mul(b), x, b, ref = sweep(x, 2, b, "*"))
  col <- matrix(rnd(4), 4, 1)
  expect_traced(function(x, col) torch_sub(x, col, alpha = 2), x, col, ref = x - 2 * col[, 1])
  expect_traced(function(x) torch_where(x > 0, x, 0), x, ref = pmax(x, 0))
  expect_traced(function(x) x$masked_fill(x < 0, -1), x, ref = ifelse(x < 0, -1, x))
  a <- rnd(2, 3, 4); m <- rnd(4, 5); bb <- rnd(2, 4, 2)
  ref3 <- array(0, c(2, 3, 5)); for (i in 1:2) ref3[i, , ] <- a[i, , ] %*% m
  expect_traced(function(a, m) torch_matmul(a, m), a, m, ref = ref3)
  refb <- array(0, c(2, 3, 2)); for (i in 1:2) refb[i, , ] <- a[i, , ] %*% bb[i, , ]
  expect_equal(torch_bmm(a, bb), refb)
  expect_traced(function(a, bb) a$bmm(bb), a, bb, ref = refb)
  v <- rnd(3)
  expect_traced(function(x, v) torch_matmul(x, v), x, v, ref = as.vector(x %*% v))
  expect_error(torch_add(x, rnd(4)), "must match", class = "rfuse_shape_error")
  expect_error(torch_bmm(a, m), class = "rfuse_shape_error")
})

test_that("tensor methods on rf_tensors run eagerly and lazily like the traced ones", {
  set.seed(6)
  x <- rnd(2, 3, 4)
  for (lazy in c(FALSE, TRUE)) {
    old <- options(gpu.kernel.fusion = lazy)
    t <- rf_tensor(x, dtype = "float64", device = "cpu")
    expect_equal(t$size(), c(2L, 3L, 4L))
    expect_equal(t$size(-1), 4L)
    expect_equal(t$dim(), 3L)
    expect_equal(t$numel(), 24)
    expect_equal(as.array(t$view(4, 6)), from_rowmajor(rowmajor_values(x), c(4, 6)), tolerance = 1e-12)
    expect_equal(as.array(t$sum(dim = 2)), apply(x, c(1, 3), sum), tolerance = 1e-12)
    expect_equal(as.array(torch_cat(list(t, t), dim = 3)), array(c(x, x), c(2, 3, 8)), tolerance = 1e-12)
    p <- t$chunk(2, dim = 3)
    expect_equal(as.array(p[[2]]), x[, , 3:4], tolerance = 1e-12)
    options(old)
  }
  w <- rf_tensor(c(1, 2), dtype = "float64", device = "cpu", requires_grad = TRUE)
  with_no_grad(w$mul_(3))
  expect_equal(as.vector(as.array(w)), c(3, 6))
  expect_error(rf_jit(function(x) { x$add_(1); x })(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) x$item())(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) x$frobnicate())(x), "no tensor method", class = "rfuse_unsupported")
})

test_that("creation functions: rf_tensors as torch's, constants in traced code, refusals there", {
  z <- torch_zeros(2, 3)
  expect_s4_class(z, "rf_tensor")
  expect_identical(z$dtype, "float32")
  expect_identical(as.array(z), array(0, c(2, 3)))
  expect_identical(as.array(torch_ones(c(2, 2))), array(1, c(2, 2)))
  expect_identical(as.vector(torch_full(c(3), 7)), c(7, 7, 7))
  expect_equal(as.vector(torch_arange(1, 5)), 1:5)
  t <- torch_zeros(2, 2, dtype = "float64", device = "cpu")
  expect_s4_class(t, "rf_tensor")
  expect_identical(t$dtype, "float64")
  expect_identical(as.array(torch_zeros_like(matrix(1:6, 2))), array(0, c(2, 3)))
  # Their methods work outside traced code (torch's idiom for a causal mask).
  mask <- torch_ones(3, 3)$tril()$bool()
  expect_identical(as.array(mask), lower.tri(matrix(0, 3, 3), diag = TRUE))
  # A tensor made outside and read inside traced code is a constant of the program; a new
  # value bound to the name traces again.
  shift <- torch_full(c(2, 2), 3)
  jf <- rf_jit(function(x) x * 2 + shift)
  expect_equal(jf(matrix(1, 2, 2)), matrix(5, 2, 2))
  shift <- torch_full(c(2, 2), -1)
  expect_equal(suppressMessages(jf(matrix(1, 2, 2))), matrix(1, 2, 2))
  expect_equal(rf_jit(function(x) x + torch_ones_like(x))(matrix(1, 2, 2)), matrix(2, 2, 2))
  # Random creation functions draw afresh at every call, what the function draws eagerly.
  rj <- rf_jit(function(x) x + torch_randn(2, 2) + torch_rand_like(x), dtype = "float64")
  set.seed(3); want <- matrix(1, 2, 2) + array(rnorm(4), c(2, 2)) + array(runif(4), c(2, 2))
  set.seed(3); expect_equal(rj(matrix(1, 2, 2)), want, tolerance = 1e-12)
  expect_error(rf_jit(function(x) x + torch_randn(2, 2, dtype = "float16"), dtype = "float32")(matrix(1, 2, 2)),
               class = "rfuse_unsupported", regexp = "dtype")
  # A dtype other than the trace's is refused; the trace's own (torch code's dtype = x$dtype) is what it computes in.
  expect_error(rf_jit(function(x) x + torch_zeros(2, 2, dtype = "float16"), dtype = "float32")(matrix(1, 2, 2)),
               class = "rfuse_unsupported")
  expect_equal(rf_jit(function(x) x + torch_ones(2, 2, dtype = x$dtype)$mul(2), dtype = "float32")(matrix(1, 2, 2)),
               matrix(3, 2, 2))
  expect_identical(torch_device("cpu"), "cpu")
  expect_error(torch_device("cuda:1"), class = "rfuse_unsupported")
  expect_error(torch_zeros(-1), class = "rfuse_type_error")
  # torch_manual_seed() seeds R's generator, which rfuse's random values come from.
  torch_manual_seed(7); a <- as.array(torch_randn(3))
  torch_manual_seed(7); expect_identical(as.array(torch_randn(3)), a)
  expect_error(torch_manual_seed("x"), class = "rfuse_type_error")
})

test_that("in-place methods in a forward: traced (the variable is rebound) and recorded for backward", {
  set.seed(41)
  blk <- nn_module(initialize = function() { self$a <- nn_linear(3, 3); self$d <- nn_linear(3, 3) },
    forward = function(x) { out <- self$a(x); identity <- self$d(x); out$add_(identity); nnf_relu(out) })
  m <- blk()
  x <- matrix(rnorm(12), 4)
  ref <- pmax(x %*% t(m$a$weight) + rep(m$a$bias, each = 4) + x %*% t(m$d$weight) + rep(m$d$bias, each = 4), 0)
  expect_equal(rf_jit(m, dtype = "float64")(x), ref, tolerance = 1e-12, ignore_attr = TRUE)
  # Recorded on rf_tensors: the gradient flows through the in-place add to both layers.
  opt <- optim_sgd(m$parameters, lr = 0.1)
  loss <- sum(m(rf_tensor(x)))
  expect_equal(loss$item(), sum(ref), tolerance = 1e-5)
  loss$backward()
  expect_false(any(vapply(opt$params, function(p) is.null(p$grad), TRUE)))
  # Where torch's change would reach another name, refused.
  on_arg <- nn_module(initialize = function() self$a <- nn_linear(3, 3), forward = function(x) { x$add_(1); self$a(x) })
  expect_error(rf_jit(on_arg())(x), "argument", class = "rfuse_unsupported")
  aliased <- nn_module(initialize = function() self$a <- nn_linear(3, 3),
                       forward = function(x) { y <- self$a(x); z <- y; y$mul_(2); z })
  expect_error(rf_jit(aliased())(x), "also", class = "rfuse_unsupported")
  used <- rf_tensor(x, requires_grad = TRUE) * 2
  keep <- used + 1
  expect_error(used$add_(1), "already used", class = "rfuse_autodiff_error")
  leaf <- rf_tensor(x, requires_grad = TRUE)
  expect_error(leaf$add_(1), "leaf", class = "rfuse_autodiff_error")
})

test_that("dtype conversions, norm and repeat_interleave on traced values and parameters", {
  x <- matrix(c(1.7, -2.5, 3, 0), 2)
  f <- rf_jit(function(x) list(x$to(dtype = torch_long()), x$bool(), x$norm(dim = 2), x$repeat_interleave(2, dim = 1),
                               x$to(device = "cpu")$float()), dtype = "float64")
  r <- f(x)
  expect_equal(r[[1]], trunc(x), ignore_attr = TRUE)                # torch's casts truncate toward zero
  expect_identical(r[[2]], x != 0)
  expect_equal(r[[3]], sqrt(rowSums(x^2)), tolerance = 1e-12)
  expect_equal(r[[4]], x[c(1, 1, 2, 2), ], ignore_attr = TRUE)
  expect_equal(r[[5]], x)
  expect_identical(torch_long(), "int64")
  expect_identical(rf_tensor(1:3, dtype = torch_long())$dtype, "int64")
  expect_equal(torch_divide(x, 2), x / 2)
  p <- nn_linear(2, 2)$weight
  expect_true(is.integer(p$long()) && identical(dim(p$long()), c(2L, 2L)))
  expect_error(f2 <- rf_jit(function(x) x$to(dtype = "complex"))(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) x$norm(p = 1))(x), "2-norm", class = "rfuse_unsupported")
  # 2-d adaptive pooling takes one sample c(C, H, W), as torch.
  a <- array(rnorm(2 * 6 * 4), c(2, 6, 4))
  expect_equal(nnf_adaptive_max_pool2d(a, c(3, 1)), nnf_adaptive_max_pool2d(array(a, c(1, 2, 6, 4)), c(3, 1))[1, , , , drop = TRUE] |>
                 array(c(2, 3, 1)))
})

test_that("a reduction over every dim of an rf_tensor feeds the next op (torch_sum, $sum(), $mean())", {
  set.seed(42)
  for (rg in c(FALSE, TRUE)) {
    a <- rf_tensor(matrix(runif(6), 2), requires_grad = rg)
    v <- as.array(a)
    s <- (a * 2)$sum()
    expect_equal(as.numeric(2 * s + 1), 2 * sum(v * 2) + 1, tolerance = 1e-5)
    expect_equal(as.numeric(torch_mean(a) / torch_sum(a)), mean(v) / sum(v), tolerance = 1e-5)
  }
})

test_that("a user's module is torch code: R's operators broadcast as torch's, eager, on rf_tensors and jitted", {
  set.seed(7)
  m <- nn_module(
    initialize = function() {
      self$b <- nn_parameter(c(1, 2, 3))
      self$pe <- matrix(1:4, 4, 1) * c(10, 20, 30) # (4, 1) * (3): torch's (4, 3) outer product
    },
    forward = function(x, mask) list(x + self$b, x * mask, x - torch_mean(x, dim = 2, keepdim = TRUE), x > self$b))()
  x <- matrix(rnorm(6), 2, 3)
  mask <- matrix(c(0, 1), 2, 1)
  # Independent expectations in base R (sweep over columns, recycling over rows).
  want <- list(sweep(x, 2, c(1, 2, 3), "+"), x * as.vector(mask), x - rowMeans(x), sweep(x, 2, c(1, 2, 3), ">"))
  expect_equal(m$pe, outer(1:4, c(10, 20, 30)))
  eager <- m(x, mask)
  for (i in 1:4) expect_equal(eager[[i]], want[[i]], ignore_attr = TRUE)
  jitted <- rf_jit(m)(x, mask)
  for (i in 1:3) expect_equal(jitted[[i]], want[[i]], tolerance = 1e-6, ignore_attr = TRUE)
  expect_equal(as.vector(jitted[[4]]), as.vector(want[[4]]))
  tens <- m(rf_tensor(x, dtype = "float64"), rf_tensor(mask, dtype = "float64"))
  for (i in 1:3) expect_equal(as.array(tens[[i]]), want[[i]], tolerance = 1e-12, ignore_attr = TRUE)
  # Where torch has no broadcast (a vector of the array's length, a vector along rows), R's rules stay.
  r <- nn_module(forward = function(x) list(x * rep(c(1, 2), 3), x * c(1, 2)))()(x)
  expect_equal(r[[1]], x * rep(c(1, 2), 3))
  expect_equal(r[[2]], x * c(1, 2))
  # Outside modules R's operators are R's: a vector recycles down the columns.
  expect_equal(x + c(1, 2, 3), x + rep(c(1, 2, 3), length.out = 6))
})

test_that("torch's indexing in a module's methods: single indices drop only their dim, negatives count from the end, `..`", {
  m <- nn_module(forward = function(x) list(x[, 2], x[, -1], x[1, , drop = FALSE], x[.., 1], x[2:1, -2:-1], x[-1]))()
  x <- array(as.numeric(1:24), c(2, 3, 4))
  want <- list(x[, 2, ], x[, 3, ], x[1, , , drop = FALSE], x[, , 1], x[2:1, 2:3, , drop = FALSE], x[2, , ])
  for (got in list(m(x), lapply(m(rf_tensor(x, dtype = "float64")), as.array), rf_jit(m)(x)))
    for (i in seq_along(want)) expect_equal(got[[i]], want[[i]], ignore_attr = TRUE, info = paste("index", i))
  # A single row of a c(1, 3, 4) array stays 3-d under torch's rule (R's drop would make it c(3, 4)).
  y <- array(as.numeric(1:12), c(1, 3, 4))
  expect_identical(dim(nn_module(forward = function(x) x[, 1, ])()(y)), c(1L, 4L))
  # Shapes and lists index as R's.
  expect_identical(nn_module(forward = function(x) dim(x)[-1])()(x), c(3L, 4L))
  expect_error(m(array(0, c(1, 3, 4))), class = "rfuse_shape_error")             # x[2:1, ...] out of bounds
  expect_error(nn_module(forward = function(x) x[0])()(x), "starts at 1", class = "rfuse_shape_error")
})

test_that("x[i, j] <- value on rf_tensors is a recorded op: the result has the value, the gradient reaches it", {
  out <- torch_zeros(2, 3, dtype = "float64")
  out[, 2] <- c(5, 6)
  expect_equal(as.array(out), cbind(0, c(5, 6), 0))
  v <- rf_tensor(c(1, 2), dtype = "float64", requires_grad = TRUE)
  y <- torch_zeros(2, 3, dtype = "float64")
  y[, 3] <- v * 3
  loss <- (y * y)$sum()
  loss$backward()
  expect_equal(as.vector(as.array(v$grad)), 2 * 3 * 3 * c(1, 2))
  expect_error(y[, -1] <- 0, class = "rfuse_unsupported")
})

test_that("rf_tensors of different dims broadcast as torch's where R has no answer (non-conformable arrays)", {
  p <- matrix(c(1, 2, 3, 4, 5, 6), 2)
  t <- rf_tensor(p, dtype = "float64")
  expect_equal(as.array(t / t$sum(dim = 2, keepdim = TRUE)), p / rowSums(p), ignore_attr = TRUE)
  expect_equal(as.array(t - rf_tensor(matrix(c(1, 2, 3), 1), dtype = "float64")), sweep(p, 2, c(1, 2, 3)), ignore_attr = TRUE)
  expect_error(as.array(t + rf_tensor(matrix(1:6, 3), dtype = "float64")), "non-conformable")
})

test_that("torch:: in ported code resolves to rfuse's functions while torch is not installed", {
  skip_if(nzchar(system.file(package = "torch")), "the torch package is installed: torch:: is torch's")
  code <- "torch::torch_ones(2)$sum()$item() + stats::sd(c(1, 3))"
  expect_equal(eval(parse(text = code), new.env(parent = globalenv())), 2 + sd(c(1, 3)))
  expect_identical(eval(quote(torch::torch_tensor), globalenv()), rf_tensor)
  expect_error(eval(quote(torch::torch_no_such_function), globalenv()), "torch::torch_no_such_function",
               class = "rfuse_unsupported")
})

test_that("torch_randint, torch_linspace, torch_outer, N-d torch_matmul, dtype names as strings", {
  set.seed(3)
  r <- torch_randint(2, 5, size = c(200))
  expect_identical(r$dtype, "int64")
  v <- as.array(r)
  expect_true(all(v %in% 2:4) && all(2:4 %in% v))
  expect_identical(torch_randint(3, size = 4)$shape, 4L)
  expect_error(torch_randint(5, 2, size = 3), class = "rfuse_type_error")
  expect_equal(as.vector(as.array(torch_linspace(0, 1, 5, dtype = "float64"))), seq(0, 1, 0.25))
  expect_equal(as.array(torch_outer(torch_arange(1, 3, dtype = "float64"), torch_arange(1, 2, dtype = "float64"))),
               outer(1:3, 1:2), ignore_attr = TRUE)
  a <- array(rnorm(2 * 3 * 4 * 5), c(2, 3, 4, 5)); b <- array(rnorm(3 * 5 * 2), c(3, 5, 2))
  want <- array(0, c(2, 3, 4, 2))
  for (i in 1:2) for (j in 1:3) want[i, j, , ] <- a[i, j, , ] %*% b[j, , ]
  expect_equal(torch_matmul(a, b), want, tolerance = 1e-12)
  expect_equal(as.array(torch_matmul(rf_tensor(a, dtype = "float64"), rf_tensor(b, dtype = "float64"))), want, tolerance = 1e-12)
  expect_equal(rf_jit(function(a, b) torch_matmul(a, b), dtype = "float64")(a, b), want, tolerance = 1e-12)
  vec <- rnorm(5)
  want_v <- apply(a, c(1, 2, 3), function(r) sum(r * vec))
  expect_equal(torch_matmul(a, vec), want_v, tolerance = 1e-12)
  expect_identical(rf_tensor(1:3, dtype = "long")$dtype, "int64")
  expect_identical(rf_tensor(1:3, dtype = "int")$dtype, "int32")
  expect_identical(rf_tensor(1:3, dtype = "double")$dtype, "float64")
})

test_that("nn_init_trunc_normal_ stays within its bounds; dropout2d on c(N, C); conv padding as a list; m[[1]] of a module", {
  set.seed(5)
  w <- torch_zeros(2000, dtype = "float64")
  nn_init_trunc_normal_(w, mean = 1, std = 2, a = 0, b = 1.5)
  v <- as.array(w)
  expect_true(all(v >= 0 & v <= 1.5))
  expect_gt(sd(v), 0.3)
  expect_error(nn_init_trunc_normal_(w, a = 1, b = 0), class = "rfuse_type_error")
  x <- matrix(1, 50, 40)
  d <- nnf_dropout2d(x, p = 0.5)
  expect_true(all(d %in% c(0, 2)) && any(d == 0) && any(d == 2))
  conv <- nn_conv2d(1, 1, kernel_size = list(1, 3), padding = list(0, 1), bias = FALSE)
  img <- array(rnorm(12), c(1, 1, 3, 4))
  k <- conv$weight[1, 1, 1, ]
  padded <- cbind(0, img[1, 1, , ], 0)
  want <- sapply(1:4, function(j) padded[, j:(j + 2)] %*% k)
  expect_equal(conv(img)[1, 1, , ], want, tolerance = 1e-6)
  g <- nn_module(initialize = function() self$main <- nn_sequential(nn_linear(2, 2)))()
  expect_true(inherits(g[[1]], "nn_sequential"))
})

test_that("torch indexing: N is the dim's size, a:b slices count negative ends from the end, NULL adds a dim; x[...] <- v likewise", {
  m <- nn_module(forward = function(x) { n <- 2; list(x[, 2:N], x[, -n:N], x[.., N], x[-2:-1, 1], x[NULL], x[, NULL, 2]) })()
  x <- matrix(as.numeric(1:12), 3)
  want <- list(x[, 2:4], x[, 3:4], x[, 4], x[2:3, 1], array(x, c(1, 3, 4)), matrix(x[, 2], 3, 1))
  # (1-d results compared as vectors: as.array() of a 1-d tensor has a dim)
  flat1 <- function(v) if (length(dim(v)) <= 1) as.vector(v) else v
  for (got in list(m(x), rf_jit(m)(x), lapply(m(rf_tensor(x, dtype = "float64")), as.array)))
    for (i in seq_along(want)) expect_equal(flat1(got[[i]]), flat1(want[[i]]), ignore_attr = TRUE, info = paste("index", i))
  # Assignment into a parameter from initialize, the value broadcast over the block as torch's.
  m2 <- nn_module(initialize = function() {
    self$w <- nn_parameter(matrix(0, 3, 4))
    self$w[.., 2:3] <- matrix(c(1, 2, 3), 3, 1)
    self$w[, -1] <- 9
  }, forward = function(x) { x[, -1] <- 0; x })()
  expect_equal(unclass(m2$w), cbind(0, 1:3, 1:3, 9), ignore_attr = TRUE)
  expect_equal(m2(x), cbind(x[, 1:3], 0))
  expect_equal(rf_jit(m2)(x), cbind(x[, 1:3], 0))
})

test_that("a module's list arguments (an LSTM's hx = list(h, c)) run compiled and record for backward()", {
  set.seed(11)
  lstm <- nn_lstm(3, 4, batch_first = TRUE)
  x <- array(rnorm(2 * 5 * 3), c(2, 5, 3)); h0 <- array(rnorm(8), c(1, 2, 4)); c0 <- array(rnorm(8), c(1, 2, 4))
  ref <- lstm(x, list(h0, c0)) # R arrays: the layer's own R code
  tx <- lapply(list(x, h0, c0), rf_tensor, dtype = "float64")
  got <- lstm(tx[[1]], list(tx[[2]], tx[[3]]))
  expect_equal(as.array(got[[1]]), ref[[1]], tolerance = 1e-10)
  expect_equal(as.array(got[[2]][[2]]), ref[[2]][[2]], tolerance = 1e-10)
  opt <- optim_sgd(lstm$parameters, lr = 0.1)
  h <- rf_tensor(h0, requires_grad = TRUE)
  out <- lstm(rf_tensor(x), list(h, rf_tensor(c0)))
  loss <- out[[1]]$sum()
  loss$backward()
  expect_identical(dim(as.array(h$grad)), dim(h0))
  expect_gt(max(abs(as.array(h$grad))), 0)
  # After the step the compiled program sees the new weights (they are its inputs, never constants):
  # against a fresh layer given them, on R arrays (the layer's own R code).
  opt$step()
  after <- lstm(rf_tensor(x), list(rf_tensor(h0), rf_tensor(c0)))
  fresh <- nn_lstm(3, 4, batch_first = TRUE)
  fresh$load_state_dict(lapply(lstm$state_dict(), function(v) if (inherits(v, "rf_tensor")) as.array(v) else v))
  want <- fresh(x, list(h0, c0))
  expect_equal(as.array(after[[1]]), want[[1]], tolerance = 1e-5)
  expect_equal(as.array(rf_jit(lstm)(rf_tensor(x), list(rf_tensor(h0), rf_tensor(c0)))[[1]]), want[[1]], tolerance = 1e-5)
})

test_that("nnf_one_hot, torch_max(other =), nnf_triplet_margin_loss against base R", {
  lab <- c(2, 1, 3, 3)
  expect_equal(nnf_one_hot(lab), outer(lab, 1:3, "==") * 1)
  expect_equal(rf_jit(function(x) nnf_one_hot(x, 4))(lab), outer(lab, 1:4, "==") * 1)
  oh <- nnf_one_hot(rf_tensor(lab, dtype = "int64"), 3)
  expect_identical(oh$dtype, "int64")
  expect_error(rf_jit(function(x) nnf_one_hot(x))(lab), class = "rfuse_unsupported")
  expect_equal(as.vector(as.array(torch_max(rf_tensor(c(-1, 2), dtype = "float64"), other = torch_zeros(2, dtype = "float64")))),
               c(0, 2))
  set.seed(2)
  a <- matrix(rnorm(12), 4); p <- matrix(rnorm(12), 4); n <- matrix(rnorm(12), 4)
  d <- function(x, y) sqrt(rowSums((x - y + 1e-6)^2))
  want <- mean(pmax(d(a, p) - d(a, n) + 1, 0))
  expect_equal(nnf_triplet_margin_loss(a, p, n), want, tolerance = 1e-12)
  expect_equal(nn_triplet_margin_loss(margin = 0.5, reduction = "sum")(a, p, n), sum(pmax(d(a, p) - d(a, n) + 0.5, 0)),
               tolerance = 1e-12)
  ta <- rf_tensor(a, dtype = "float64", requires_grad = TRUE)
  l <- nnf_triplet_margin_loss(ta, rf_tensor(p, dtype = "float64"), rf_tensor(n, dtype = "float64"))
  expect_equal(l$item(), want, tolerance = 1e-12)
  l$backward()
  eps <- 1e-6; k <- 5
  a2 <- a; a2[k] <- a2[k] + eps; a1 <- a; a1[k] <- a1[k] - eps
  fd <- (mean(pmax(d(a2, p) - d(a2, n) + 1, 0)) - mean(pmax(d(a1, p) - d(a1, n) + 1, 0))) / (2 * eps)
  expect_equal(as.array(ta$grad)[k], fd, tolerance = 1e-6)
  expect_error(nnf_triplet_margin_loss(a, p, n[1:3, ]), class = "rfuse_shape_error")
})

test_that("an initializer given a parameter through a helper or named_parameters() fills the module's own", {
  init_helper <- function(x, s) nn_init_constant_(x, s)
  m <- nn_module(initialize = function() {
    self$fc <- nn_linear(2, 3)
    init_helper(self$fc$weight, 0.5)
  }, forward = function(x) self$fc(x))()
  expect_true(all(unclass(m$fc$weight) == 0.5))
  ps <- m$named_parameters()
  for (nm in names(ps)) nn_init_constant_(ps[[nm]], 2)
  expect_true(all(unclass(m$fc$weight) == 2) && all(unclass(m$fc$bias) == 2))
  # An equal copy that is not the module's object has nowhere to go: refused.
  copy <- nn_parameter(matrix(0, 2, 2))
  expect_error(for (p in list(copy)) nn_init_zeros_(p), class = "rfuse_unsupported")
})

test_that("torch_meshgrid builds torch's grids (ij and xy) on R vectors, rf_tensors and in traced code", {
  a <- c(1.5, -2, 3); b <- c(10, 20); cc <- c(-1, 0, 1, 2)
  # The independent construction: grid k holds x_k's element at its index along dim `pos`.
  grid <- function(x, shape, pos) array(x[slice.index(array(0, shape), pos)], shape)
  g <- torch_meshgrid(list(a, b, cc))
  expect_identical(length(g), 3L)
  expect_equal(g[[1]], grid(a, c(3, 2, 4), 1))
  expect_equal(g[[2]], grid(b, c(3, 2, 4), 2))
  expect_equal(g[[3]], grid(cc, c(3, 2, 4), 3))
  x <- torch_meshgrid(list(a, b), indexing = "xy")
  expect_equal(x[[1]], grid(a, c(2, 3), 2))
  expect_equal(x[[2]], grid(b, c(2, 3), 1))
  t <- torch_meshgrid(list(rf_tensor(a, dtype = "float64"), rf_tensor(b, dtype = "float64")))
  expect_equal(as.array(t[[2]]), grid(b, c(3, 2), 2))
  # In a module's forward: a coordinate grid from the input's size, added to the input.
  coords <- nn_module("coords", initialize = function() NULL, forward = function(x) {
    g <- torch_meshgrid(list(torch_arange(1, x$size(2)), torch_arange(1, x$size(3))), indexing = "ij")
    x + g[[1]] * 10 + g[[2]]
  })
  m <- coords()
  x3 <- array(rnorm(2 * 3 * 4), c(2, 3, 4))
  want <- x3 + aperm(array(rep(grid(1:3, c(3, 4), 1) * 10 + grid(1:4, c(3, 4), 2), 2), c(3, 4, 2)), c(3, 1, 2))
  expect_equal(rf_jit(m, dtype = "float64")(x3), want, tolerance = 1e-12)
  expect_error(torch_meshgrid(list(a, matrix(1, 2, 2))), class = "rfuse_shape_error", regexp = "1-d")
  expect_error(torch_meshgrid(list(a, b), indexing = "yx"), class = "rfuse_type_error")
  expect_error(torch_meshgrid(a), class = "rfuse_type_error", regexp = "a list")
})

test_that("torch code's masked assignment, buffers used in initialize, nnf_normalize, torch_gelu and torch_acos", {
  # x[mask] <- v with a boolean mask of x's shape is torch's masked fill; x keeps its dtype.
  M <- nn_module(
    initialize = function(n) {
      self$freq <- nn_buffer(torch_exp(torch_linspace(0, 1, n)))
      self$speed <- nn_buffer(2 * pi * self$freq) # a buffer computed from another in initialize
      # ... and passed to a tensor method there (minhub's llama: freqs$outer(self$inv_freq))
      self$table <- nn_buffer(torch_arange(1, 3)$float()$outer(self$freq))
      # ... and indexed there (minhub's llama returns self$cos[, , 1:t, ] from its cache filler)
      self$first_two <- self$table[, 1:2]
      self$n_table <- length(self$table)
    },
    forward = function(x) {
      causal <- torch_zeros(3, 3, dtype = torch_bool())
      causal[upper.tri(causal)] <- 1
      x[x > 0] <- 0
      list(causal = causal, x = x, speed = self$speed)
    })
  m <- M(4)
  expect_equal(as.array(m$table), outer(1:3, exp(seq(0, 1, length.out = 4))), tolerance = 1e-6)
  expect_equal(m$first_two, outer(1:3, exp(seq(0, 1, length.out = 4)))[, 1:2], tolerance = 1e-6)
  expect_identical(m$n_table, 12L)
  out <- m(matrix(c(-1, 2, 3, -4), 2))
  expect_identical(out$causal$dtype, "bool")
  expect_identical(as.array(out$causal) != 0, upper.tri(matrix(0, 3, 3)))
  expect_identical(out$x, matrix(c(-1, 0, 0, -4), 2))
  # Traced, the mask x > 0 is a traced boolean of x's shape: the same masked assignment.
  jout <- rf_jit(m)(matrix(c(-1, 2, 3, -4), 2))
  expect_equal(as.array(jout$x), out$x, tolerance = 1e-6)
  expect_identical(as.array(jout$causal) != 0, upper.tri(matrix(0, 3, 3)))
  expect_equal(as.vector(as.array(m$speed)), 2 * pi * exp(seq(0, 1, length.out = 4)), tolerance = 1e-6)
  expect_true("speed" %in% names(m$state_dict()))
  set.seed(4)
  x <- matrix(rnorm(12), 3)
  expect_equal(nnf_normalize(x), x / sqrt(rowSums(x^2)), tolerance = 1e-12)
  expect_equal(nnf_normalize(x, p = Inf, dim = 1), sweep(x, 2, apply(abs(x), 2, max), "/"), tolerance = 1e-12)
  expect_equal(as.array(nnf_normalize(rf_tensor(x), p = 1)), x / rowSums(abs(x)), tolerance = 1e-6)
  expect_error(nnf_normalize(x, out = x), class = "rfuse_unsupported")
  expect_equal(as.array(torch_gelu(rf_tensor(x))), x * pnorm(x), tolerance = 1e-6)
  expect_equal(as.array(torch_gelu(rf_tensor(x), approximate = "tanh")),
               0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), tolerance = 1e-6)
  v <- c(-0.5, 0.25, 0.9)
  expect_equal(as.vector(as.array(torch_acos(rf_tensor(v)))), acos(v), tolerance = 1e-6)
  expect_equal(as.vector(as.array(torch_asin(rf_tensor(v)))), asin(v), tolerance = 1e-6)
})

test_that("traced torch code creates integer and boolean constants, and upper.tri() reads a traced matrix's shape", {
  M <- nn_module(initialize = function() { self$pe <- nn_embedding(6, 3) }, forward = function(x) {
    pos <- torch_arange(1, 4, dtype = torch_long())$unsqueeze(1) # positions for an embedding
    mask <- torch_zeros(4, 4, dtype = torch_bool())
    mask[upper.tri(mask)] <- 1                                  # a causal mask, kept boolean
    list(self$pe(pos), torch_masked_fill(x, mask, 0), x * upper.tri(x))
  })
  set.seed(5)
  m <- M(); x <- matrix(rnorm(16), 4)
  eager <- m(x); jitted <- rf_jit(m)(x)
  for (k in 1:3) expect_lt(max(abs(as.array(jitted[[k]]) - as.array(eager[[k]]))), 1e-6)
  expect_identical(dim(as.array(jitted[[1]])), c(1L, 4L, 3L))
  expect_equal(as.array(jitted[[2]]), x * !upper.tri(x), tolerance = 1e-6)
  f <- rf_jit(function(x) x * (row(x) >= col(x)), dtype = "float64")
  expect_identical(f(x), x * lower.tri(x, diag = TRUE))
})

test_that("rf_fit trains conv filters in the convolution's layout and gives them back in R's", {
  set.seed(7)
  net <- nn_sequential(nn_conv2d(2, 3, 3), nn_flatten(), nn_linear(12, 2))
  w0 <- as.array(net[[1]]$weight)
  x <- array(rnorm(8 * 2 * 4 * 4), c(8, 2, 4, 4)); y <- rep(1:2, 4)
  fit <- rf_fit(net, x, y, steps = 2, lr = 0.1, progress = FALSE, device = "cpu")
  expect_identical(dim(as.array(net[[1]]$weight)), dim(w0))
  expect_identical(dim(fit$params[["0.weight"]]), dim(w0))
  expect_equal(fit$params[["0.weight"]], unclass(as.array(net[[1]]$weight)), ignore_attr = "class")
  expect_false(isTRUE(all.equal(fit$params[["0.weight"]], unclass(w0), check.attributes = FALSE)))
})

test_that("torch_remainder has the divisor's sign, eager, traced and on integer tensors", {
  a <- c(-3.5, 2.5, 7, 5, -1e-3)
  b <- c(2, -2, 3, -2.5, 2 * pi)
  # (values where R's long-double %% and torch's float formula agree exactly: torch gives
  # 0.5 -1.5 1 0 and 2*pi - 1e-3)
  expect_equal(torch_remainder(a, b), a %% b, tolerance = 1e-15)
  expect_equal(as.vector(as.array(torch_remainder(rf_tensor(a, dtype = "float64"), rf_tensor(b, dtype = "float64")))),
               a %% b, tolerance = 1e-15)
  h <- seq(-7, 7, length.out = 29)
  f <- rf_jit(function(h) torch_remainder(-h, 2 * pi))
  expect_equal(as.vector(f(h)), -h - 2 * pi * floor(-h / (2 * pi)), tolerance = 1e-6)
  expect_true(all(as.vector(f(h)) >= 0 & as.vector(f(h)) < 2 * pi + 1e-6))
  x <- rf_tensor(c(-7L, 7L, -1L), dtype = "int32")
  r <- x$remainder(3L)
  expect_identical(r$dtype, "int32")
  expect_identical(as.vector(as.array(r)), c(2L, 1L, 2L))
})

test_that("try() in a traced forward gives its expression's value; one that fails while tracing is refused", {
  # The ETM topic model's idiom: logit <- try(...), then a branch on inherits(logit, "try-error").
  M <- nn_module(
    initialize = function() {
      self$alphas <- nn_linear(4, 2, bias = FALSE)
      self$rho <- nn_linear(4, 3)
    },
    forward = function(x) {
      logit <- try(self$alphas(self$rho$weight))
      if (inherits(logit, "try-error")) logit <- self$alphas(self$rho)
      x %*% nnf_softmax(logit, dim = 1)
    })
  set.seed(2)
  m <- M()
  x <- matrix(rnorm(6), 2)
  expect_equal(as.array(rf_jit(m)(x)), as.array(m(x)), tolerance = 1e-6)
  f <- rf_jit(function(x) {
    r <- try(x %*% matrix(1, 5, 5), silent = TRUE)
    if (inherits(r, "try-error")) x * 2 else r
  })
  expect_error(f(x), class = "rfuse_unsupported", regexp = "fails while tracing \\(non-conformable")
  expect_equal(rf_jit(function(x) try(x + 1))(x), x + 1, tolerance = 1e-6)
})

test_that("torch_scalar_tensor() and casts to a traced value's own dtype", {
  s <- torch_scalar_tensor(-Inf)
  expect_identical(s$dtype, "float32")
  expect_identical(as.vector(as.array(s)), -Inf)
  expect_identical(torch_scalar_tensor(TRUE)$dtype, "bool")
  expect_identical(torch_scalar_tensor(3L, dtype = torch_long())$dtype, "int64")
  expect_error(torch_scalar_tensor(1:2), class = "rfuse_type_error", regexp = "one number")
  expect_error(torch_scalar_tensor("a"), class = "rfuse_type_error")
  # minhub's llama: (self$weight * x)$to(dtype = dtype) with dtype <- x$dtype read in forward
  f <- rf_jit(function(x) {
    dtype <- x$dtype
    (2 * x)$to(dtype = "float")$to(dtype = dtype)
  })
  x <- matrix(c(1, -2, 3, 4), 2)
  expect_equal(f(x), 2 * x, tolerance = 1e-6)
})

test_that("$repeat tiles as torch's, eager and traced", {
  m <- matrix(1:6, 2)
  x <- rf_tensor(m, dtype = "float64")
  expect_identical(as.array(x$`repeat`(c(2, 1))), rbind(m, m) + 0)
  expect_identical(as.array(x$`repeat`(c(1, 3))), cbind(m, m, m) + 0)
  three <- as.array(x$`repeat`(c(2, 1, 1))) # a new leading dim
  expect_identical(dim(three), c(2L, 2L, 3L))
  expect_identical(three[2, , ], m + 0)
  expect_identical(as.vector(as.array(rf_tensor(c(1, 2, 3))$`repeat`(2))), c(1, 2, 3, 1, 2, 3))
  expect_equal(rf_jit(function(a) a$`repeat`(c(2, 2)))(m), rbind(cbind(m, m), cbind(m, m)), tolerance = 1e-6)
  expect_error(x$`repeat`(2), class = "rfuse_shape_error", regexp = "can not be smaller")
  expect_error(x$`repeat`(c(0, 1)), class = "rfuse_unsupported", regexp = "0 repeats")
  expect_error(x$`repeat`(c(-1, 1)), class = "rfuse_type_error", regexp = "non-negative")
})
