# Sorting traced values (rfuse.sort: a stable sort of each line, run on the host by the
# interpreter; its gradient puts each cotangent back where its value came from): base R's sort,
# order, rank, median and quantile, and torch's torch_sort / torch_argsort / torch_topk (and methods).
#
# R's answers where NA is involved: sort() drops NA and NaN by default and median() of a vector
# holding one is NA, so a call whose values hold one is answered by base R (runtime_check); with
# na.last = TRUE the program sorts them last itself, as R does. torch sorts NaN above +Inf.

# The sorted values and the 0-based positions they came from, of `x` flattened (R's sort and
# order see a vector); R integers stay integers, an integer tensor sorts in its own dtype.
sort_flat <- function(x, decreasing, call) {
  s <- reshape_sym(if (is_native_int(x)) x else to_dtype(x, trace_float(), call), NULL, x$len)
  ids <- emit(.rf_b_sort, s$id, 0L, decreasing, FALSE, call = call)
  list(values = new_sym(ids[1], NULL, x$len, s$dtype, if (!is_native_int(x) && is_int_value(x)) int_bound("same", int_ref(x))),
       positions = new_sym(ids[2], NULL, x$len, "i64"))
}

sort_refusals <- function(x, name, call) {
  if (x$dtype == "i1") rf_unsupported(name, call, "of a logical value (sort a number: as.numeric(x))")
  if (!is.null(x$attrs$names)) rf_unsupported(name, call, "of a value with names (the names would follow the data)")
  if (!is.null(x$attrs$class)) rf_unsupported(name, call, sprintf("of a value of class %s", paste(x$attrs$class, collapse = "/")))
}

# `methods`: those that give the stable sort's answer (sort()'s "auto" and "radix"; every method
# of order(), which leaves ties in their original order).
sort_method <- function(method, name, call, methods = c("auto", "radix")) {
  if (is.null(method)) return(invisible())
  if (!is.character(method) || length(method) != 1 || !method %in% methods)
    rf_unsupported(name, call, sprintf("only method = %s (a stable sort) is traced",
                                       paste0("\"", methods, "\"", collapse = " or ")))
}

rf_sort <- function(x, decreasing = FALSE, ...) {
  if (!is_sym(x)) return(base::sort(x, decreasing = decreasing, ...))
  call <- sys.call()
  a <- list(...)
  extra <- setdiff(names(a) %||% rep("", length(a)), c("na.last", "method"))
  if (length(extra))
    rf_unsupported("sort", call, sprintf("sort() of a traced value takes decreasing, na.last and method (not %s)",
                                         paste(sQuote(extra, FALSE), collapse = ", ")))
  decreasing <- flag(decreasing, "decreasing", "sort", call)
  sort_method(a$method, "sort", call)
  na_last <- if ("na.last" %in% names(a)) a$na.last else NA
  if (is_sym(na_last) || !is.logical(na_last) || length(na_last) != 1)
    rf_unsupported("sort", call, "'na.last' must be TRUE, FALSE or NA")
  if (isFALSE(na_last)) rf_unsupported("sort", call, "na.last = FALSE (NA first) is not traced; use na.last = TRUE or NA")
  sort_refusals(x, "sort", call)
  if (is.na(na_last) && !is_native_int(x)) # R drops them: a length the program cannot know
    runtime_check(any_all("any", list(is.na.rf_sym(x)), call), "hold NA or NaN values (sort() drops them)")
  sort_flat(x, decreasing, call)$values
}

rf_order <- function(..., na.last = TRUE, decreasing = FALSE, method = c("auto", "shell", "radix")) {
  keys <- list(...)
  if (!any(vapply(keys, is_sym, TRUE)))
    return(base::order(..., na.last = na.last, decreasing = decreasing, method = method))
  call <- sys.call()
  if (length(keys) != 1) rf_unsupported("order", call, "order() of several keys (ties broken by the next) is not traced")
  x <- keys[[1]]
  decreasing <- flag(decreasing, "decreasing", "order", call)
  if (!isTRUE(na.last)) rf_unsupported("order", call, "only na.last = TRUE (NA last, as R's default) is traced")
  if (!missing(method)) sort_method(method, "order", call, c("auto", "shell", "radix"))
  sort_refusals(x, "order", call)
  p <- sort_flat(x, decreasing, call)$positions
  r <- to_dtype(p, trace_float(), call) + 1
  r$ib <- int_bound("const", v = x$len) # an R integer (1..n)
  r
}

# rank(x, na.last = TRUE, ties.method): the positions of x's values in sorted order, ties given
# the mean ("average"), least ("min") or greatest ("max") of their positions, or those positions in
# the order of appearance ("first") or its reverse ("last"); a vector without dims, double for
# "average" and integer otherwise, as R's. Each tie group's first and last sorted positions come
# from running maxima and minima over where the sorted values change; the ranks go back to the
# values' places by rfuse.scatter_add (each place once). NA: R's na.last rules, so a call whose
# values hold one is answered by base R.
rf_rank <- function(x, na.last = TRUE, ties.method = c("average", "first", "last", "random", "max", "min")) {
  if (!is_sym(x)) return(base::rank(x, na.last = na.last, ties.method = ties.method))
  call <- sys.call()
  if (is_sym(ties.method) || !is.character(ties.method)) rf_unsupported("rank", call, "'ties.method' must be a name")
  ties <- match.arg(ties.method, c("average", "first", "last", "random", "max", "min"))
  if (ties == "random") rf_unsupported("rank", call, "ties.method = \"random\" (R draws the order of ties)")
  if (is_sym(na.last) || !(isTRUE(na.last) || isFALSE(na.last) || identical(na.last, NA) || identical(na.last, "keep")))
    rf_unsupported("rank", call, "'na.last' must be TRUE, FALSE, NA or \"keep\"")
  sort_refusals(x, "rank", call)
  runtime_check(any_all("any", list(is.na.rf_sym(x)), call), "hold NA or NaN values (R ranks them by na.last)")
  n <- x$len
  if (n == 0) return(if (ties == "average") numeric() else integer())
  s <- sort_flat(x, FALSE, call)
  v <- s$values
  j <- seq_len(n)
  if (n > 1) {
    differs <- rf_index(v, -1L) != rf_index(v, -n)
    first_of <- cummax(rf_ifelse(rf_c(TRUE, differs), j, 0))                  # each tie group's first position
    last_of <- rf_rev(cummin(rf_rev(rf_ifelse(rf_c(differs, TRUE), j, n + 1)))) # and its last
  } else first_of <- last_of <- 1
  r <- switch(ties, average = (first_of + last_of) / 2, min = first_of, max = last_of, first = j,
              last = first_of + last_of - j)
  r <- to_dtype(as_sym(r, call), trace_float(), call)
  out <- new_sym(emit(.rf_b_scatter_add, r$id, s$positions$id, 0L, as.integer(n), call = call), NULL, n, r$dtype)
  if (ties != "average") out$ib <- int_bound("const", v = n) # an R integer (1..n)
  out
}

rf_median <- function(x, na.rm = FALSE, ...) {
  if (!is_sym(x)) return(stats::median(x, na.rm = na.rm, ...))
  call <- sys.call()
  if (...length()) rf_unsupported("median", call, "median() of a traced value takes only na.rm")
  na_rm <- flag(na.rm, "na.rm", "median", call)
  sort_refusals(x, "median", call)
  n <- x$len
  if (n == 0) rf_unsupported("median", call, "of a length-0 value (R's answer is NA)")
  if (na_rm) {
    if (is_int_value(x)) rf_unsupported("median", call, "na.rm = TRUE of integers (R's answer is an integer or a double as the count of NAs is odd or even)")
    return(median_of_present(x, call))
  }
  # R: NA when any value is NA (or NaN); else the middle of the sorted values.
  runtime_check(any_all("any", list(is.na.rf_sym(x)), call), "hold NA or NaN values (R's median is then NA)")
  v <- sort_flat(x, FALSE, call)$values
  half <- (n + 1L) %/% 2L
  if (n %% 2L == 1L) return(v[half])
  (to_dtype(v[half], trace_float(), call) + to_dtype(v[half + 1L], trace_float(), call)) / 2
}

# median(x, na.rm = TRUE): NaN sorts last, so the m values that are not NA come first; the middle
# of those at computed positions. R's answer for m = 0 is NA: base R gives it.
median_of_present <- function(x, call) {
  s <- sort_flat(to_dtype(x, trace_float(), call), FALSE, call)$values
  m <- reduce_all("sum", !is.na.rf_sym(x), call)
  runtime_check(m < 1, "hold only NA values (R's median is then NA)")
  at <- function(p) new_sym(emit(.rf_b_gather_at, s$id, (p - 1)$id, 0L, call = call), NULL, 1L, s$dtype)
  lo <- floor((m + 1) / 2) # 1-based: (m + 1) %/% 2 and m %/% 2 + 1
  hi <- floor(m / 2) + 1
  (at(lo) + at(hi)) / 2
}

# torch_sort(x, dim = -1, descending = FALSE, stable = FALSE): list(values, indices), the indices
# 1-based int64 as torch for R's; NaN sorts above +Inf. Stable always (a valid answer for
# stable = FALSE too).
t_sort <- function(x, dim, descending, call) {
  d <- t_size(x); n <- length(d)
  k <- t_dim(dim, n, call)
  if (!is.logical(descending) || length(descending) != 1 || is.na(descending))
    rf_abort("rfuse_type_error", "`descending` must be TRUE or FALSE", call)
  if (!is_sym(x)) { # plain arrays: base R, line by line along k (radix: stable; NaN above all)
    l <- lines_along(x, d, k)
    o <- matrix(apply(l$m, 2, function(v) order(v, decreasing = descending, na.last = !descending, method = "radix")), d[k])
    v <- l$m[cbind(as.vector(o), rep(seq_len(ncol(l$m)), each = d[k]))]
    return(list(l$back(v), l$back(o)))
  }
  s <- if (x$dtype %in% c("i1")) to_dtype(x, trace_float(), call) else x
  ids <- emit(.rf_b_sort, s$id, as.integer(n - k), descending, TRUE, call = call)
  rdim <- if (n <= 1) NULL else d
  list(new_sym(ids[1], rdim, prod(d), s$dtype), new_sym(ids[2], rdim, prod(d), "i64") + 1L)
}

#' @rdname torch_functions
#' @export
torch_sort <- function(self, dim = -1L, descending = FALSE, stable = FALSE) {
  call <- sys.call()
  if (!is.logical(stable) || length(stable) != 1 || is.na(stable))
    rf_abort("rfuse_type_error", "`stable` must be TRUE or FALSE", call)
  if (is_tensor(self))
    return(list(record("torch_sort", function(x, dim, descending) t_sort(x, dim, descending, call)[[1]],
                       list(self, dim = dim, descending = descending), c("dim", "descending")),
                record("torch_argsort", function(x, dim, descending) t_sort(x, dim, descending, call)[[2]],
                       list(self, dim = dim, descending = descending), c("dim", "descending"))))
  t_sort(self, dim, descending, call)
}

#' @rdname torch_functions
#' @export
torch_argsort <- function(self, dim = -1L, descending = FALSE, stable = FALSE) torch_sort(self, dim, descending, stable)[[2]]

# quantile(x, probs, names = TRUE, type = 7): R's type 7 at positions 1 + (n - 1) * p of the
# sorted values (known when the function is traced), interpolated as R does (not where the two
# neighbours are equal: Inf stays Inf). A value holding NA or NaN is R's error: base R answers.
rf_quantile <- function(x, probs = seq(0, 1, 0.25), na.rm = FALSE, names = TRUE, type = 7, ...) {
  if (!is_sym(x)) return(stats::quantile(x, probs = probs, na.rm = na.rm, names = names, type = type, ...))
  call <- sys.call()
  if (...length()) rf_unsupported("quantile", call, "quantile() of a traced value takes probs, na.rm, names and type")
  if (!identical(type, 7) && !identical(type, 7L)) rf_unsupported("quantile", call, "only type = 7 (R's default) is traced")
  if (is_sym(probs) || !is.numeric(probs)) rf_unsupported("quantile", call, "'probs' must be numbers that are not traced")
  if (flag(na.rm, "na.rm", "quantile", call))
    rf_unsupported("quantile", call, "na.rm = TRUE (the positions would depend on how many values are NA)")
  names <- flag(names, "names", "quantile", call)
  # R's own checks of probs, and its names for them ("25%").
  labels <- names(stats::quantile(c(0, 1), probs = probs, names = TRUE))
  sort_refusals(x, "quantile", call)
  n <- x$len
  if (n == 0) rf_unsupported("quantile", call, "of a length-0 value (R's answer is NA)")
  runtime_check(any_all("any", list(is.na.rf_sym(x)), call), "hold NA or NaN values (R's quantile() stops)")
  v <- to_dtype(sort_flat(x, FALSE, call)$values, trace_float(), call)
  if (anyNA(probs)) rf_unsupported("quantile", call, "NA in 'probs'")
  index <- 1 + (n - 1) * pmax(0, pmin(1, probs))
  lo <- floor(index); hi <- ceiling(index); h <- index - lo
  ql <- v[lo]; qh <- v[hi]
  mixed <- rf_ifelse(qh != ql, (1 - h) * ql + h * qh, ql)
  q <- if (any(h > 0)) rf_ifelse(lift_constant(h > 0, call), mixed, ql) else ql
  if (names) with_attrs(q, list(names = labels)) else q
}

# torch_topk(x, k, dim = -1, largest = TRUE, sorted = TRUE): the first k of torch_sort along dim
# (descending for the largest), values and 1-based indices; NaN counts as the largest, as torch.
#' @rdname torch_functions
#' @export
torch_topk <- function(self, k, dim = -1L, largest = TRUE, sorted = TRUE) {
  call <- sys.call()
  if (!is.numeric(k) || length(k) != 1 || is.na(k) || k != round(k) || k < 0)
    rf_abort("rfuse_type_error", "`k` must be one whole number >= 0", call)
  for (nm in c("largest", "sorted")) {
    v <- get(nm)
    if (!is.logical(v) || length(v) != 1 || is.na(v)) rf_abort("rfuse_type_error", sprintf("`%s` must be TRUE or FALSE", nm), call)
  }
  d <- t_size(self)
  kd <- t_dim(dim, length(d), call)
  if (k > d[kd]) rf_shape_error(sprintf("selected index k = %d is out of range (dim %d has %d elements)", as.integer(k), kd, d[kd]), call)
  # (sorted = FALSE lets torch return them in any order: sorted is one of those)
  top <- function(x, dim, k, largest, which) t_narrow(t_sort(x, dim, largest, call)[[which]], dim, 1L, as.integer(k), call)
  if (is_tensor(self))
    return(list(record("torch_topk", function(x, dim, k, largest) top(x, dim, k, largest, 1L),
                       list(self, dim = dim, k = k, largest = largest), c("dim", "k", "largest")),
                record("torch_topk_indices", function(x, dim, k, largest) top(x, dim, k, largest, 2L),
                       list(self, dim = dim, k = k, largest = largest), c("dim", "k", "largest"))))
  list(top(self, dim, k, largest, 1L), top(self, dim, k, largest, 2L))
}
