# The package's own R-object utilities (hash, identity, weak references, deep copies) and what
# library(rfuse) loads.
test_that(".rf_hash: equal values hash equal, any difference changes the hash", {
  h <- rfuse:::.rf_hash
  expect_match(h(1:3), "^[0-9a-f]{32}$")
  expect_identical(h(list(a = 1, b = "x")), h(list(a = 1, b = "x")))
  expect_false(identical(h(c(1, 2)), h(c(1, 2 + 1e-15))))
  expect_false(identical(h(1L), h(1)))
  expect_false(identical(h(list(a = 1)), h(list(b = 1))))
  expect_false(identical(h(quote(x + y)), h(quote(x * y))))
  # A value built another way, equal: the same hash (no address or session state in it).
  expect_identical(h(seq(1, 5, by = 1)), h(c(1, 2, 3, 4, 5)))
  # The same in another R process: the hash does not depend on the session.
  script <- tempfile(fileext = ".R")
  writeLines('cat(rfuse:::.rf_hash(list(w = c(1.5, NA), f = quote(a + b))))', script)
  other <- system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE)
  expect_identical(other, h(list(w = c(1.5, NA), f = quote(a + b))))
})

test_that("weak references do not keep a module alive; identity is the object's own", {
  e <- new.env()
  w <- rfuse:::.rf_new_weakref(e)
  expect_identical(rfuse:::.rf_weakref_key(w), e)
  rm(e); invisible(gc())
  expect_null(rfuse:::.rf_weakref_key(w))
  expect_error(rfuse:::.rf_new_weakref(1), "environment or an external pointer")
  expect_error(rfuse:::.rf_weakref_key(1), "not a weak reference")
  a <- c(1, 2, 3); b <- a
  expect_identical(rfuse:::.rf_obj_address(a), rfuse:::.rf_obj_address(b)) # shared until modified
  d <- rfuse:::.rf_duplicate(a)
  expect_identical(d, a)
  expect_false(identical(rfuse:::.rf_obj_address(d), rfuse:::.rf_obj_address(a)))
})

test_that("library(rfuse) loads neither rlang nor cli; code that splices with !!! loads rlang", {
  script <- tempfile(fileext = ".R")
  writeLines(c(
    'suppressPackageStartupMessages(library(rfuse))',
    'a <- any(c("rlang", "cli") %in% loadedNamespaces())',
    'net <- nn_sequential(nn_linear(2, 2), nn_relu())',
    'b <- "rlang" %in% loadedNamespaces()',
    'net <- nn_sequential(!!!list(nn_linear(2, 2)))',
    'cat(a, b, "rlang" %in% loadedNamespaces(), length(net))'), script)
  out <- system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE)
  expect_identical(out, "FALSE FALSE TRUE 1")
})
