# Side effects inside traced code would run once, at trace time: refused, never leaked.
test_that("<<- to a variable outside the traced function is refused, and nothing leaks", {
  acc <- NULL
  f <- function(x) { acc <<- x * 2; acc + 1 }
  expect_error(rf_jit(f, dtype = "float64")(c(1, 2, 3)), class = "rfuse_unsupported")
  expect_error(rf_jit(f, dtype = "float64")(c(1, 2, 3)), "assigns outside the traced function")
  expect_null(acc)
  acc2 <- 0
  g <- function(x) { acc2 <<- 1; x }
  expect_error(rf_jit(g, dtype = "float64")(1:3 + 0.5), "runs once|run once")
  expect_identical(acc2, 0)
})

test_that("<<- to the traced function's own variables works as in R", {
  f <- function(x) {
    total <- 0
    add <- function(v) total <<- total + v
    add(x)
    add(x * 2)
    total
  }
  x <- c(1, 2, 3)
  expect_equal(rf_jit(f, dtype = "float64")(x), f(x))
})

test_that("assign() outside and printing are refused at trace time; local assign() is fine", {
  e <- new.env()
  f <- function(x) { assign("y", x, envir = e); x }
  expect_error(rf_jit(f, dtype = "float64")(c(1, 2)), class = "rfuse_unsupported")
  expect_false(exists("y", envir = e))
  g <- function(x) { assign("y", x * 2); y + 1 }
  expect_equal(rf_jit(g, dtype = "float64")(c(1, 2)), g(c(1, 2)))
  for (h in list(function(x) { print(x); x }, function(x) { cat("hi\n"); x },
                 function(x) { message("hi"); x }, function(x) { warning("careful"); x }))
    expect_error(rf_jit(h, dtype = "float64")(c(1, 2)), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) { print(x); x }, dtype = "float64")(c(1, 2)), "print")
})

test_that("rnorm() and runif() inside a traced function draw afresh at every call, as the function does", {
  x <- rnd(5)
  f <- function(x) x + rnorm(length(x)) * 0.5 + runif(1, -1, 2) + rnorm(5, mean = 1:5, sd = 3)
  jf <- rf_jit(f, dtype = "float64")
  for (seed in 1:3) {
    set.seed(seed); want <- f(x)
    set.seed(seed); got <- jf(x)
    expect_equal(got, want, tolerance = 1e-12)
  }
  set.seed(9); a <- jf(x); b <- jf(x)
  expect_false(isTRUE(all.equal(a, b))) # new draws per call, not constants of the program
  # R's NaN-with-a-warning parameters, and traced ones, are refused.
  for (h in list(function(x) x + rnorm(length(x), sd = -1), function(x) x + runif(5, 2, 1),
                 function(x) rnorm(5, mean = x), function(x) x + rnorm(5, sd = c(1, 2))))
    expect_error(rf_jit(h, dtype = "float64")(x), class = "rfuse_unsupported", regexp = "length 1 or n")
})

test_that("other random draws inside a traced function are refused (they would be baked in)", {
  x <- rnd(5)
  for (f in list(function(x) x[sample(length(x))], function(x) x * rexp(1),
                 function(x) { set.seed(1); x + rnorm(5) })) {
    err <- expect_error(rf_jit(f, dtype = "float64")(x), class = "rfuse_unsupported")
    expect_match(conditionMessage(err), "random numbers")
  }
  # Random inputs drawn outside are ordinary arguments.
  expect_equal(rf_jit(function(x, e) x + e, dtype = "float64")(x, rep(0.5, 5)), x + 0.5)
})
