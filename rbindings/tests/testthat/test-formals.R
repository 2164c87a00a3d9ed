# No silently ignored arguments: every argument of every exported function (and of every
# method of every exported module generator) is used by its body, as a variable or by name.

body_names <- function(f) {
  out <- character()
  walk <- function(e) {
    if (is.symbol(e)) out <<- c(out, as.character(e))
    else if (is.character(e)) out <<- c(out, e)
    else if (is.call(e) || is.pairlist(e) || is.expression(e) || is.list(e)) for (p in as.list(e)) if (!missing(p)) walk(p)
  }
  walk(body(f))
  # Defaults of other arguments may use an argument too (device = rf_default_device()).
  for (d in formals(f)) if (!missing(d)) walk(d)
  unique(out)
}

# A function that always refuses (its body is one rf_abort() call) ignores nothing.
refuses <- function(f) {
  b <- body(f)
  if (is.call(b) && identical(b[[1]], as.name("{")) && length(b) == 2) b <- b[[2]]
  is.call(b) && as.character(b[[1]])[1] %in% c("rf_abort", "rf_unsupported", "stop")
}

unused_formals <- function(f) {
  if (!is.function(f) || is.primitive(f) || refuses(f)) return(character())
  used <- body_names(f)
  args <- names(formals(f))
  dots <- "..." %in% args && !any(c("...", "..1", "...length", "...elt", "...names") %in% used)
  c(setdiff(setdiff(args, "..."), used), if (dots) "...")
}

test_that("every exported function uses every argument it takes", {
  ns <- asNamespace("rfuse")
  problems <- character()
  for (nm in getNamespaceExports("rfuse")) {
    f <- get(nm, envir = ns)
    if (!is.function(f)) next
    if (methods::is(f, "genericFunction")) next # S4 generics: their rf_tensor methods are below
    if (inherits(f, "nn_module_generator")) {
      def <- attr(f, "rfuse_module")
      for (m in names(def$members)) if (is.function(def$members[[m]])) {
        u <- unused_formals(def$members[[m]])
        if (length(u)) problems <- c(problems, sprintf("%s$%s: %s", nm, m, paste(u, collapse = ", ")))
      }
      next
    }
    u <- unused_formals(f)
    if (length(u)) problems <- c(problems, sprintf("%s: %s", nm, paste(u, collapse = ", ")))
  }
  # rf_tensor's S4 methods.
  for (g in c("Ops", "Arith", "Logic", "Math", "Math2", "Summary", "%*%", "!", "as.array", "as.vector",
              "as.numeric", "as.logical", "[", "$", "dim", "length", "mean", "show", "t")) {
    ms <- methods::findMethods(g, classes = "rf_tensor")
    for (sig in names(ms)) {
      u <- unused_formals(methods::unRematchDefinition(ms[[sig]]))
      if (length(u)) problems <- c(problems, sprintf("%s(%s) method: %s", g, sig, paste(u, collapse = ", ")))
    }
  }
  expect_identical(problems, character())
  expect_gt(length(getNamespaceExports("rfuse")), 150)
})

test_that("the check itself finds an ignored argument", {
  expect_identical(unused_formals(function(x, y = 2) x + 1), "y")
  expect_identical(unused_formals(function(x, ...) x), "...")
  expect_identical(unused_formals(function(x, ...) list(x, ...)), character())
})
