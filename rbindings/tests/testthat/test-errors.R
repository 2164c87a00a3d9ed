test_that("untraceable functions are rfuse_unsupported and name the function", {
  x <- rnd(3, 3)
  expect_error(rf_jit(function(x) signif(x))(x), "`signif\\(\\)` in `signif\\(`<traced value>`\\)`",
               class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) x %% 2)(x), "%%", class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) psigamma(x, 2))(x), "psigamma", class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) choose(3, x))(x), "`choose\\(\\)`", class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) x[x[, 1] > 0, ])(x), "`\\[\\(\\)`", class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) rank(x, ties.method = "random"))(x), "rank", class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) apply(x, 3, sum))(x), "apply", class = "rfuse_unsupported")
})

test_that("non-numeric input is a clear rfuse_type_error", {
  expect_error(rf_jit(function(x) x + 1)("a"), "argument 'x' is character",
               class = "rfuse_type_error")
  expect_error(rf_jit(function(x) x + 1)(list(1, 2)), "argument 'x' is list",
               class = "rfuse_type_error")
  expect_error(rf_jit(42), class = "rfuse_type_error")
  expect_error(rf_jit(function(x) x, pipeline = "fastest"), "unknown rfuse pipeline 'fastest'.*default",
               class = "rfuse_error")
})

test_that("every rfuse error is also an rfuse_error, and the session survives", {
  for (f in list(function(x) signif(x), function(x) x %*% c(1, 2))) {
    err <- tryCatch(rf_jit(f)(rnd(3, 3)), error = identity)
    expect_s3_class(err, "rfuse_error")
  }
  expect_equal(rf_jit(function(x) x + 1, dtype = "float64")(1:3), 2:4)
})

test_that("static arguments are R values at trace time", {
  f <- function(x, n, how) { for (i in seq_len(n)) x <- x * 2; if (how == "neg") -x else x }
  jf <- rf_jit(f, dtype = "float64", static = c("n", "how"))
  expect_equal(jf(c(1, 2), 3, "neg"), f(c(1, 2), 3, "neg"))
  expect_equal(jf(c(1, 2), 1, "pos"), f(c(1, 2), 1, "pos"))
})

test_that("a branch or loop on a number argument specializes on its value, as torch.compile does", {
  f <- function(x, n, scale) { for (i in seq_len(n)) x <- x * 2; if (scale > 1) x * scale else x - scale }
  jf <- rf_jit(f, dtype = "float64")
  for (a in list(list(3, 2), list(1, 0.5), list(3, 2)))
    expect_equal(jf(c(1, 2), a[[1]], a[[2]]), f(c(1, 2), a[[1]], a[[2]]))
  expect_identical(length(ls(attr(jf, "rfuse")$cache)), 2L) # two values, two programs
  # A module whose forward loops over a count it is given.
  blocks <- nn_module("blocks", initialize = function() self$fc <- nn_linear(3, 3),
                      forward = function(x, times) { for (i in seq_len(times)) x <- torch_tanh(self$fc(x)); x })
  set.seed(2); m <- blocks()
  x <- matrix(rnorm(12), 4)
  jm <- rf_jit(m, dtype = "float64")
  expect_equal(jm(x, 3), as.array(m(rf_tensor(x, dtype = "float64"), 3)), tolerance = 1e-12)
  expect_equal(jm(x, 1), as.array(m(rf_tensor(x, dtype = "float64"), 1)), tolerance = 1e-12)
  # Not a number's branch: the refusal stands, and the numbers stay traced.
  g <- function(x, k) if (sum(x) > 0) x * k else -x
  expect_error(rf_jit(g)(c(1, 2), 2), class = "rfuse_unsupported", regexp = "its condition is a traced value")
  # Nor when no argument would stay traced (the program would be constants).
  expect_error(rf_jit(function(n) if (n > 1) n * 2 else n)(3), class = "rfuse_unsupported",
               regexp = "its condition is a traced value")
})

test_that("branches and loops on traced values are classed refusals that say why", {
  expect_error(rf_jit(function(x) if (x > 0) x else -x)(c(1, 2)), class = "rfuse_unsupported",
               regexp = "`if\\(\\)` in `x > 0`: its condition is a traced value")
  expect_error(rf_jit(function(x) { while (sum(x) > 1) x <- x / 2; x })(c(1, 2)), class = "rfuse_unsupported",
               regexp = "`while\\(\\)`")
  expect_error(rf_jit(function(x) { s <- 0; for (v in x) s <- s + v; s })(c(1, 2)), class = "rfuse_unsupported",
               regexp = "loops over the elements of a traced value")
  expect_error(rf_jit(function(x) if (TRUE && x) 1 else 2)(c(1, 2)), class = "rfuse_unsupported",
               regexp = "`&&\\(\\)`")
  # Branches and loops on R values trace as before (next and break included).
  f <- function(x) { y <- 0; for (i in seq_len(3)) { if (i == 2) next; y <- y + x * i }; if (length(x) > 1 && TRUE) y else -y }
  expect_identical(rf_jit(f, dtype = "float64")(c(1, 2)), f(c(1, 2)))
})

test_that("a deeply nested expression that base R evaluates traces too", {
  ex <- quote(x)
  for (i in 1:2000) ex <- call("+", ex, 1)
  f <- eval(call("function", as.pairlist(alist(x = )), ex))
  expect_identical(rf_jit(f, dtype = "float64")(c(1, 2)), f(c(1, 2)))
})

test_that("a call's text cuts calls nested three deep and names traced values put into it", {
  call_text <- rfuse:::call_text
  expect_identical(call_text(quote(f(g(h(k(x)), y), 2))), "f(g(h(...), y), 2)")
  expect_identical(call_text(quote(a + b * (c - exp(d)))), "a + b * (...)") # (parentheses are a call)
  s <- rfuse:::new_sym(1L, NULL, 3L, "f32")
  cl <- as.call(list(as.name("round"), s, 2))
  expect_identical(call_text(cl), "round(`<traced value>`, 2)")
  expect_identical(deparse(cl[[2]]$len), "3L") # (the call itself is left as it was)
  # The texts of errors name the user's call.
  expect_error(rf_jit(function(x) foo_not_here(exp(x)))(1), regexp = "foo_not_here")
})

test_that("the names a body calls and its strings are found however deep or wide it is", {
  called <- rfuse:::called_names; strings <- rfuse:::string_constants
  expect_setequal(called(quote({ y <- f(x); g(h(y), "k")[[1]]; do.call("pmax", list(x, 1)) })),
                  c("{", "<-", "f", "g", "h", "[[", "do.call", "list"))
  expect_setequal(strings(quote(sapply(l, "[", list(a = "b", c(d = "e"))))), c("[", "b", "e"))
  expect_identical(called(quote(x)), character())
  deep <- quote(x)
  for (i in 1:50000) deep <- call("f", deep)
  expect_identical(called(deep), "f")
  expect_setequal(strings(as.call(c(as.name("c"), as.list(letters)))), letters)
})

test_that("a torch function rfuse does not have is a classed refusal naming it, eager or traced", {
  expect_error(torch_median(rf_tensor(c(3, 1, 2))), class = "rfuse_unsupported", regexp = "`torch_median\\(\\)` is a torch function rfuse does not have")
  expect_error(rf_jit(function(x) torch_cummax(x, 1))(c(3, 1, 2)), class = "rfuse_unsupported", regexp = "torch_cummax")
  expect_error(torch_tensor(1:3), class = "rfuse_unsupported", regexp = "rf_tensor\\(\\)")
  expect_error(nn_prelu(), class = "rfuse_unsupported", regexp = "nn_prelu")
  # None of them shadows a name rfuse has, and as_array() is one it has.
  ns <- asNamespace("rfuse")
  stubs <- rfuse:::torch_names_not_in_rfuse
  expect_gt(length(stubs), 200)
  expect_true(all(vapply(stubs, function(n) identical(environment(get(n, ns))$name, n), TRUE)))
  expect_equal(as_array(rf_tensor(matrix(1:4, 2))), matrix(1:4, 2))
})
