# Device-resident rf_tensors (issue 13): round trips for every dtype and device, ops and jitted
# functions on tensors equal base R, lazy equals eager, values stay on the device (the transfer
# counters), training with data on the device equals training from R memory, bad input is a
# classed error, and memory does not grow. GPU-only parts skip with the reason on a CPU machine.

devices <- function() c("cpu", if (as.vector(rf_default_device()) == "cuda") "cuda")
skip_without_gpu <- function()
  if (as.vector(rf_default_device()) != "cuda")
    skip(paste("no usable GPU:", attr(rf_default_device(), "description")))
transfers <- function() rfuse:::.rf_transfer_stats()

test_that("every dtype round-trips on every device", {
  set.seed(31)
  x <- matrix(c(rnorm(11) * 100, 0.5, -2.5, 65504, 1e-3, 7), 4)
  for (device in devices()) {
    for (dt in c("float64", "float32", "float16", "bfloat16")) {
      t <- rf_tensor(x, dtype = dt, device = device)
      expect_identical(t$dtype, dt)
      expect_identical(t$device, device)
      expect_identical(t$shape, dim(x))
      back <- as.array(t)
      tolerance <- c(float64 = 0, float32 = 1e-7, float16 = 1e-3, bfloat16 = 8e-3)[[dt]]
      expect_lte(max(abs(back - x) / pmax(abs(x), 1e-3)), tolerance)
      expect_identical(dim(back), dim(x))
    }
    i <- rf_tensor(c(3L, -7L, 2147483647L), dtype = "int32", device = device)
    expect_identical(as.vector(i), c(3L, -7L, 2147483647L))
    expect_identical(as.vector(rf_tensor(c(2.9, -2.9), dtype = "int64", device = device)), c(2, -2))
    b <- rf_tensor(c(TRUE, FALSE, TRUE), device = device)
    expect_identical(b$dtype, "bool")
    expect_identical(as.vector(b), c(TRUE, FALSE, TRUE))
    # R's NA is refused (tensors hold NaN, not NA), with the element named; NaN is a value.
    expect_error(rf_tensor(c(1, NA), device = device), "element 2 is NA", class = "rfuse_type_error")
    expect_true(is.nan(as.vector(rf_tensor(c(1, NaN), device = device))[2]))
    expect_error(rf_tensor(c(1L, NA), dtype = "int32", device = device), "element 2", class = "rfuse_type_error")
  }
  expect_error(rf_tensor(1:3, dtype = "complex64"), "unknown dtype", class = "rfuse_type_error")
})

test_that("$to, $cpu and $cuda copy between devices and dtypes", {
  x <- matrix(rnorm(6), 2)
  t <- rf_tensor(x, dtype = "float64", device = "cpu")
  f <- t$to(dtype = "float32")
  expect_identical(f$dtype, "float32")
  expect_equal(as.array(f), x, tolerance = 1e-6)
  expect_identical(t$cpu(), t) # nothing to do: the same tensor
  skip_without_gpu()
  g <- t$cuda()
  expect_identical(g$device, "cuda")
  expect_identical(as.array(g), x)
  expect_identical(as.array(g$to(device = "cpu", dtype = "float32")), as.array(f))
})

test_that("ops and jitted functions on tensors equal base R, on every device, eager and lazy", {
  set.seed(32)
  x <- matrix(rnorm(60), 12); y <- matrix(rnorm(60), 12); v <- rnorm(5)
  f <- function(x, y, v) {
    h <- pmax(x * 2 - y, 0) + ifelse(x > y, exp(x / 3), -abs(y))
    s <- sweep(h, 2, v, "*")
    list(s = s, r = rowSums(s) + rowMeans(x), c = colSums(tanh(s)), cp = crossprod(s, y), m = max(s) + mean(s))
  }
  ref <- f(x, y, v)
  for (device in devices()) for (dt in c("float64", "float32")) {
    eager <- NULL
    for (lazy in c(FALSE, TRUE)) {
      old <- options(gpu.kernel.fusion = lazy)
      got <- f(rf_tensor(x, dt, device), rf_tensor(y, dt, device), rf_tensor(v, dt, device))
      options(old)
      for (nm in names(ref)) {
        expect_true(methods::is(got[[nm]], "rf_tensor"), info = nm)
        expect_identical(got[[nm]]$device, device)
        expect_lt(rel_err(as.array(got[[nm]]), as.array(ref[[nm]])), if (dt == "float64") 1e-12 else 1e-5)
      }
      # Lazy (one fused program) equals eager (a program per op) up to rounding order.
      if (lazy) for (nm in names(ref))
        expect_lt(rel_err(as.array(got[[nm]]), as.array(eager[[nm]])), if (dt == "float64") 1e-13 else 1e-6)
      eager <- got
    }
    jf <- rf_jit(f)
    got <- jf(rf_tensor(x, dt, device), rf_tensor(y, dt, device), rf_tensor(v, dt, device))
    expect_true(methods::is(got$s, "rf_tensor"))
    expect_lt(rel_err(as.array(got$cp), ref$cp), if (dt == "float64") 1e-12 else 1e-5)
  }
})

test_that("a chain of programs on device tensors moves nothing through the host", {
  skip_without_gpu()
  x <- rf_tensor(matrix(rnorm(4096), 64), device = "cuda")
  jf <- rf_jit(function(x) tanh(x * 2) + 1)
  y <- jf(jf(x)) # warm: compiled, first runs
  before <- transfers()
  for (i in 1:10) y <- jf(y)
  rf_sync(y)
  after <- transfers()
  expect_identical(after[["host_to_device_bytes"]], before[["host_to_device_bytes"]])
  expect_identical(after[["device_to_host_bytes"]], before[["device_to_host_bytes"]])
  v <- as.array(y) # and back when R asks: one download of exactly its bytes
  expect_identical(transfers()[["device_to_host_bytes"]] - after[["device_to_host_bytes"]], 4096 * 4)
})

test_that("tensors on different devices in one op are a classed error naming both", {
  skip_without_gpu()
  a <- rf_tensor(1:4, device = "cpu"); b <- rf_tensor(1:4, device = "cuda")
  expect_error(a + b, "cpu and cuda", class = "rfuse_device_error")
  expect_error(rf_jit(function(x, y) x * y)(a, b), class = "rfuse_device_error")
})

test_that("a tensor restored in a new session is a classed error, never a crash", {
  t <- rf_tensor(c(1, 2, 3), device = "cpu")
  restored <- unserialize(serialize(t, NULL)) # what save()/load() across sessions gives
  expect_error(as.vector(restored), "memory is gone", class = "rfuse_invalid_tensor")
  expect_error(restored + 1, class = "rfuse_invalid_tensor")
  expect_equal(as.vector(t), c(1, 2, 3)) # the original is untouched
})

test_that("training with data on the device equals training from R memory", {
  set.seed(33)
  x <- matrix(rnorm(400), 100); y <- x %*% c(1, -2, 0.5, 3) + 0.1
  loss <- function(w, b, x, y) nnf_mse_loss(x %*% w + b, y)
  p0 <- list(w = matrix(0, 4, 1), b = 0)
  for (device in devices()) {
    on_device <- rf_train(loss, p0, list(x = x, y = y), steps = 40, batch_size = 25, lr = 0.05, momentum = 0.9,
                          dtype = "float64", device = device, progress = FALSE)
    old <- options(rfuse.data_budget = 0) # streamed from R memory, batch by batch
    streamed <- rf_train(loss, p0, list(x = x, y = y), steps = 40, batch_size = 25, lr = 0.05, momentum = 0.9,
                         dtype = "float64", device = device, progress = FALSE)
    options(old)
    expect_equal(on_device$params, streamed$params, tolerance = 1e-12)
    expect_equal(on_device$history, streamed$history, tolerance = 1e-12)
    # SGD with momentum by its definition, in base R, on the same batches.
    w <- p0$w; b <- 0; vw <- 0 * w; vb <- 0
    for (s in 1:40) {
      rows <- ((s - 1) %% 4) * 25 + 1:25
      r <- x[rows, ] %*% w + b - y[rows]
      gw <- 2 * crossprod(x[rows, ], r) / 25; gb <- 2 * mean(r)
      vw <- 0.9 * vw + gw; vb <- 0.9 * vb + gb
      w <- w - 0.05 * vw; b <- b - 0.05 * vb
    }
    expect_equal(on_device$params$w, w, tolerance = 1e-10)
    expect_equal(on_device$params$b, b, tolerance = 1e-10)
  }
})

test_that("a training step moves only its batch, and nothing when the data live on the device", {
  skip_without_gpu()
  x <- matrix(rnorm(512 * 8), 512); y <- matrix(rnorm(512), 512)
  loss <- function(w, x, y) nnf_mse_loss(x %*% w, y)
  p0 <- list(w = matrix(0, 8, 1))
  run <- function(steps, shuffle = FALSE) {
    before <- transfers()
    rf_train(loss, p0, list(x = x, y = y), steps = steps, batch_size = 64, lr = 0.01, device = "cuda",
             progress = FALSE, shuffle = shuffle)
    transfers() - before
  }
  # The difference between 30 and 10 steps is what 20 steps move (the data, the parameters, the
  # sample order and the history cross once per run either way): with the data on the device,
  # nothing but the longer loss history; shuffled, also each new epoch's order of the samples
  # (512 int32; 8 batches an epoch: 4 epochs begun against 2).
  d <- run(30) - run(10)
  expect_equal(d[["host_to_device_bytes"]], 0)
  expect_equal(d[["device_to_host_bytes"]], 20 * 4) # only the longer loss history
  d <- run(30, shuffle = TRUE) - run(10, shuffle = TRUE)
  expect_equal(d[["host_to_device_bytes"]], 2 * 512 * 4)
  expect_equal(d[["device_to_host_bytes"]], 20 * 4)
  old <- options(rfuse.data_budget = 0)
  d <- run(30) - run(10)
  options(old)
  expect_equal(d[["host_to_device_bytes"]], 20 * 64 * (8 + 1) * 4) # exactly 20 batches, float32
})

test_that("rf_fit takes a dataloader and shuffles on the device", {
  set.seed(34)
  x <- matrix(rnorm(400), 200); lab <- ifelse(x[, 1] + x[, 2] > 0, 1, 2)
  net <- nn_sequential(nn_linear(2, 16), nn_relu(), nn_linear(16, 2))
  dl <- dataloader(tensor_dataset(x = x, y = lab), batch_size = 50, shuffle = TRUE, drop_last = TRUE)
  expect_length(dl, 4)
  fit <- rf_fit(net, dl, steps = 200, lr = 0.3, progress = FALSE)
  expect_gt(mean(max.col(net(x)) == lab), 0.9)
  expect_lt(fit$history[200], fit$history[1])
  # 200 samples in batches of 30: six of 30 and a last one of 20 (a second compiled step).
  dl30 <- dataloader(tensor_dataset(x = x, y = lab), batch_size = 30, shuffle = TRUE)
  expect_length(dl30, 7)
  fit30 <- rf_fit(net, dl30, steps = 14, lr = 0.1, progress = FALSE)
  expect_length(fit30$history, 14)
  expect_true(all(is.finite(fit30$history)))
  sq <- dataset("squares", initialize = function(n) self$n <- n,
                .getitem = function(i) list(x = c(i, -i), y = i^2), .length = function() self$n)
  dls <- dataloader(sq(6), batch_size = 3)
  expect_equal(dls$dataset$tensors$x, cbind(1:6, -(1:6)))
  expect_equal(dls$dataset$tensors$y, (1:6)^2)
})

test_that("an interrupted fit leaves the model with the last completed step's weights", {
  set.seed(35)
  x <- matrix(rnorm(2000), 1000); lab <- rep(1:2, 500)
  net <- nn_sequential(nn_linear(2, 16), nn_relu(), nn_linear(16, 2))
  w0 <- net$parameters
  rf_fit(net, x, lab, steps = 2, lr = 0.1, progress = FALSE) # compiled: the next fit only runs
  w1 <- net$parameters
  # An elapsed-time limit raises an error at R's next interrupt check, as Ctrl-C does.
  err <- tryCatch({
    setTimeLimit(elapsed = 1.5, transient = TRUE)
    rf_fit(net, x, lab, steps = 1e7, lr = 0.1, progress = FALSE)
  }, error = function(e) e, finally = setTimeLimit())
  expect_s3_class(err, "error")
  w2 <- net$parameters
  expect_identical(names(w2), names(w0))
  expect_false(identical(w2, w1)) # steps were taken and written back
  expect_true(all(vapply(w2, function(p) all(is.finite(p)), TRUE)))
  expect_identical(lapply(w2, dim), lapply(w0, dim))
})

test_that("memory stays flat over 10,000 create/drop cycles of tensors", {
  rss <- function() {
    s <- tryCatch(readLines("/proc/self/status"), error = function(e) character())
    v <- grep("^VmRSS:", s, value = TRUE)
    if (!length(v)) return(NA)
    as.numeric(gsub("[^0-9]", "", v)) * 1024
  }
  skip_if(is.na(rss()), "no /proc/self/status")
  device <- utils::tail(devices(), 1)
  x <- rnorm(4096)
  cycle <- function(n) for (i in seq_len(n)) { t <- rf_tensor(x, device = device); u <- t * 2; rm(t, u) }
  cycle(2000); invisible(gc())
  # Three windows of 10,000 cycles: a leak grows every window (10,000 x 32 KiB would be 320 MiB);
  # R's heap settling once (up to ~20 MiB after the training tests before this one) grows one.
  growth <- vapply(1:3, function(w) { before <- rss(); cycle(10000); invisible(gc()); rss() - before }, 0)
  expect_lt(median(growth), 4 * 2^20, label = paste("MiB per window:", paste(round(growth / 2^20, 1), collapse = ", ")))
})

test_that("device out of memory is rfuse_oom, saying how much, and the session goes on", {
  skip_without_gpu()
  expect_error(rfuse:::rf_guard(rfuse:::.rf_tensor_empty(c(2^20, 2^20, 16L), "f32", "cuda")), "asked for",
               class = "rfuse_oom")
  expect_equal(as.vector(rf_tensor(c(1, 2), device = "cuda") * 2), c(2, 4))
})

test_that("a learning-rate schedule is an input of the one compiled step and follows SGD's definition", {
  set.seed(36)
  x <- matrix(rnorm(60), 20); y <- x %*% c(1, -1, 2)
  loss <- function(w, x, y) nnf_mse_loss(x %*% w, y)
  sched <- function(s) 0.1 / s
  fit <- rf_train(loss, list(w = matrix(0, 3, 1)), list(x = x, y = y), steps = 5, lr = sched,
                  dtype = "float64", device = "cpu", progress = FALSE)
  w <- matrix(0, 3, 1)
  for (s in 1:5) w <- w - sched(s) * 2 * crossprod(x, x %*% w - y) / 20
  expect_equal(fit$params$w, w, tolerance = 1e-12)
  # optim_sgd: opt$lr takes effect at the next step, through the same compiled update.
  tw <- rf_tensor(matrix(0, 3, 1), dtype = "float64", device = "cpu", requires_grad = TRUE)
  opt <- optim_sgd(tw, lr = 0.1)
  w <- matrix(0, 3, 1)
  for (s in 1:3) {
    opt$zero_grad()
    l <- mean((x %*% tw - y)^2)
    l$backward()
    opt$lr <- 0.1 / s
    opt$step()
    w <- w - (0.1 / s) * 2 * crossprod(x, x %*% w - y) / 20
  }
  expect_equal(as.array(tw), w, tolerance = 1e-12)
  expect_error(rf_train(loss, list(w = matrix(0, 3, 1)), list(x = x, y = y), steps = 2, lr = -1, progress = FALSE),
               class = "rfuse_type_error")
})

test_that("rfuse's base-R functions cost base R one test and keep its laziness", {
  expect_identical(ifelse(TRUE, 1, stop("ifelse must not evaluate its unused branch")), 1)
  expect_identical(pmax(c(1, 5), 3), base::pmax(c(1, 5), 3))
  expect_identical(pmin(c(1, NA), 3, na.rm = TRUE), base::pmin(c(1, NA), 3, na.rm = TRUE))
  m <- matrix(1:6, 2)
  expect_identical(sweep(m, 2, 1:3), base::sweep(m, 2, 1:3))
  expect_identical(rowSums(m), base::rowSums(m))
  expect_identical(crossprod(m), base::crossprod(m))
  t <- rf_tensor(matrix(c(-1, 2, 3, -4), 2), device = "cpu")
  expect_identical(as.vector(ifelse(t > 0, t, 0)), c(0, 2, 3, 0))
  expect_identical(as.vector(sweep(t, 2, c(1, 2))), c(-2, 1, 1, -6))
})
