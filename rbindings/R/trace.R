# Tracing: evaluate a function on symbolic values with its environment re-parented onto a mask
# that binds rfuse's versions of the base-R functions R 4.2 will not dispatch on S3 objects,
# guards every other function it calls against symbolic arguments, and traces the user's own
# helper functions as functions of their own (func.func + call, inlined later by the compiler).

# Syntax, control flow and functions that are safe (or non-standard-evaluation) with symbolic
# arguments: never wrapped.
passthrough_names <- c(
  "{", "(", "<-", "<<-", "=", "->", "if", "for", "while", "repeat", "function", "return",
  "invisible", "break", "next", "list", "stop", "warning", "message", "stopifnot", "missing",
  "on.exit", "quote", "bquote", "substitute", "deparse", "force", "is.null", "nrow", "ncol",
  "NROW", "NCOL", "dim", "length", "t", "mean", "sum", "max", "min", "print", "$", "@",
  "library", "require", "requireNamespace", "suppressWarnings", "suppressMessages", "tryCatch",
  "withCallingHandlers", "local", "switch", "match.arg", "eval", "evalq", "lapply", "sapply",
  "vapply", "Map", "Reduce", "Filter", "do.call", "seq_len", "seq_along", ":", "names",
  "is.numeric", "inherits", "identity", "UseMethod", "NextMethod", "sys.call", "sys.function",
  "match.call", "nargs", "interactive", "&&", "||", "::", ":::", "exists", "get", "get0",
  "assign", "sprintf", "paste", "paste0", "is.na", "isTRUE", "isFALSE", "[[", "[[<-", "vector")

group_generic_names <- c(
  "+", "-", "*", "/", "^", "%%", "%/%", "==", "!=", "<", "<=", ">", ">=", "&", "|", "!",
  "abs", "sign", "sqrt", "floor", "ceiling", "trunc", "round", "signif", "exp", "log", "expm1",
  "log1p", "cos", "sin", "tan", "cospi", "sinpi", "tanpi", "acos", "asin", "atan", "cosh",
  "sinh", "tanh", "acosh", "asinh", "atanh", "lgamma", "gamma", "digamma", "trigamma",
  "cumsum", "cumprod", "cummax", "cummin", "all", "any", "prod", "range")

# Names of the functions called anywhere in an expression.
called_names <- function(expr) {
  out <- character()
  walk <- function(e) {
    if (is.call(e)) {
      if (is.symbol(e[[1]])) out <<- c(out, as.character(e[[1]]))
      for (part in as.list(e)) if (!missing(part)) walk(part)
    } else if (is.pairlist(e) || is.expression(e) || is.list(e)) {
      for (part in as.list(e)) if (!missing(part)) walk(part)
    }
  }
  walk(expr)
  unique(out)
}

# Library functions live directly in a namespace (or base); any other closure is user code —
# defined at top level, in a script, in a test, or inside another function.
is_user_closure <- function(fun) {
  if (!is.function(fun) || is.primitive(fun)) return(FALSE)
  env <- environment(fun)
  !(isNamespace(env) || identical(env, baseenv()) || identical(env, emptyenv()))
}

rfuse_namespace <- function() environment(rfuse_namespace)

make_guard <- function(name, fun) {
  force(name); force(fun)
  function(...) {
    for (i in seq_len(...length())) { # empty arguments (x[1, ]) stay unforced
      v <- tryCatch(...elt(i), error = function(e) NULL)
      if (is_sym(v)) rf_unsupported(name, sys.call())
    }
    fun(...)
  }
}

make_helper <- function(name, fun) {
  force(name); force(fun)
  function(...) trace_helper(name, fun, list(...), sys.call())
}

# A copy of `f` whose environment is a mask over its own: rfuse's traced functions, guards for
# every other function its body calls, helper tracers for the user's own functions.
mask_function <- function(f, side_effect_guards = TRUE) {
  env <- environment(f) %||% globalenv()
  mask <- new.env(parent = env)
  fns <- traced_functions()
  for (nm in names(fns)) assign(nm, fns[[nm]], envir = mask)
  own <- names(formals(f))
  for (nm in setdiff(called_names(body(f)),
                     c(names(fns), passthrough_names, group_generic_names, own))) {
    fun <- get0(nm, envir = env, mode = "function")
    # rfuse's own functions (nnf_*, ...) trace symbolic values themselves.
    if (is.null(fun) || identical(environment(fun), rfuse_namespace())) next
    assign(nm, if (is_user_closure(fun)) make_helper(nm, fun) else make_guard(nm, fun), envir = mask)
  }
  if (side_effect_guards) add_side_effect_guards(mask)
  environment(f) <- mask
  f
}

# Side effects run once, while tracing, not on every call of the compiled function (and an
# assignment outside would leak a symbolic value): `<<-` and assign() into an environment
# outside the traced code, and printing, are refused at trace time. `<<-` to a variable of the
# traced function itself (a local closure's counter) is fine. (Module methods, masked once when a
# module is made and run eagerly too, are not guarded: their state lives in `self`.)
add_side_effect_guards <- function(mask) {
  inside <- function(e) { # whether `mask` is a proper ancestor of environment `e`
    while (!identical(e, emptyenv())) {
      e <- parent.env(e)
      if (identical(e, mask)) return(TRUE)
    }
    FALSE
  }
  refuse <- function(name, call, why)
    rf_unsupported(name, call, paste0(why, ": it would run once, while rfuse traces the function, ",
                                      "and not on every call"))
  super_assign <- base::`<<-`
  assign("<<-", function(x, value) {
    call <- sys.call()
    target <- substitute(x)
    while (is.call(target)) target <- target[[2]] # a$b, a[i], names(a): the variable is a
    where <- parent.env(parent.frame())
    name <- as.character(target)
    while (!identical(where, mask) && !identical(where, emptyenv()) && !exists(name, envir = where, inherits = FALSE))
      where <- parent.env(where)
    if (identical(where, mask) || identical(where, emptyenv()) || !inside(where))
      refuse("<<-", call, sprintf("`%s <<- ...` assigns outside the traced function", name))
    eval(as.call(list(super_assign, substitute(x), substitute(value))), parent.frame())
  }, envir = mask)
  base_assign <- base::assign
  assign("assign", function(x, value, pos = -1, envir = as.environment(pos), inherits = FALSE, immediate = TRUE) {
    if (missing(envir) && missing(pos)) envir <- parent.frame()
    if (!inside(envir) || isTRUE(inherits))
      refuse("assign", sys.call(), "assign() into an environment outside the traced function")
    base_assign(x, value, envir = envir)
  }, envir = mask)
  for (nm in c("print", "cat", "message", "warning", "writeLines", "show", "str", "plot"))
    assign(nm, local({ nm <- nm; function(...) refuse(nm, sys.call(), sprintf("`%s()` is a side effect", nm)) }),
           envir = mask)
  invisible(mask)
}

# The R-level structure of a traced result: a symbolic value, a constant, or a list of those.
collect_outputs <- function(res) {
  items <- if (is_sym(res) || !is.list(res)) list(res) else res
  syms <- Filter(is_sym, items)
  list(single = is_sym(res) || !is.list(res), items = items,
       ids = vapply(syms, function(s) as.integer(s$id), integer(1)),
       rdims = lapply(syms, function(s) if (is.null(s$rdim)) NULL else as.integer(s$rdim)),
       lens = vapply(syms, function(s) as.double(s$len), 0),
       dtypes = vapply(syms, function(s) s$dtype, ""))
}

# A user helper called with symbolic arguments: traced once per argument signature as its own
# function, then called. With constant arguments mixed in it is traced inline instead.
trace_helper <- function(name, fun, args, call) {
  syms <- vapply(args, is_sym, logical(1))
  if (!any(syms)) return(do.call(fun, args))
  masked <- mask_function(fun)
  if (!all(syms)) return(do.call(masked, args))
  key <- paste(name, vapply(args, function(a) paste(a$dtype, paste(sym_tshape(a), collapse = "x")), ""),
               collapse = "|")
  entry <- .rf_state$helpers[[key]]
  b <- current_builder()
  if (is.null(entry)) {
    .rf_state$nhelpers <- .rf_state$nhelpers + 1L
    fname <- paste0(gsub("[^A-Za-z0-9_]", "_", name), "_", .rf_state$nhelpers)
    rf_guard(.rf_b_begin_function(b, fname), call)
    inner <- lapply(args, function(a)
      new_sym(rf_guard(.rf_b_input(b, sym_tshape(a), a$dtype, ""), call), a$rdim, a$len, a$dtype))
    outer <- .rf_state$in_helper
    .rf_state$in_helper <- TRUE
    out <- collect_outputs(do.call(masked, inner))
    .rf_state$in_helper <- outer
    if (!all(vapply(out$items, is_sym, logical(1))))
      rf_unsupported(name, call, "a traced helper must return symbolic values only")
    fid <- rf_guard(.rf_b_end_function(b, out$ids), call)
    entry <- list(fid = fid, single = out$single,
                  structure = lapply(out$items, function(s) s[c("rdim", "len", "dtype")]),
                  names = names(out$items))
    .rf_state$helpers[[key]] <- entry
  }
  ids <- rf_guard(.rf_b_call(b, entry$fid, vapply(args, function(a) as.integer(a$id), integer(1))), call)
  outs <- Map(function(id, s) new_sym(id, s$rdim, s$len, s$dtype), ids, entry$structure)
  if (entry$single) outs[[1]] else stats::setNames(outs, entry$names)
}

# Traces `f` on the given arguments: numeric/logical arrays become symbolic inputs, `static`
# arguments stay R values. Returns the module text and how to map results back.
trace_function <- function(f, args, dtype, static_args) {
  saved <- as.list(.rf_state)
  on.exit({
    rm(list = ls(.rf_state, all.names = TRUE), envir = .rf_state)
    for (nm in names(saved)) assign(nm, saved[[nm]], envir = .rf_state)
  })
  b <- .rf_builder_new("main")
  .rf_state$builder <- b
  .rf_state$dtype <- dtype
  .rf_state$helpers <- new.env(parent = emptyenv())
  .rf_state$nhelpers <- 0L
  .rf_state$in_helper <- FALSE
  .rf_state$random <- list() # inputs drawn from R's RNG at each call (dropout masks)
  .rf_state$aux <- list()    # extra outputs applied to R state after each call (batch statistics)
  sym_args <- args
  input_index <- integer()
  input_dtypes <- character()
  for (i in seq_along(args)) {
    if (static_args[i]) next
    a <- args[[i]]
    # An rf_tensor comes in its own dtype; floats of another precision and integers compute in
    # the trace's float dtype.
    dt <- if (is_tensor(a)) ir_dtype(a@env$dtype) else if (is.logical(a)) "i1" else dtype
    id <- rf_guard(.rf_b_input(b, tshape(dim(a), length(a)), dt, names(args)[i] %||% ""))
    s <- new_sym(id, dim(a), length(a), dt)
    if (dt != "i1" && dt != dtype) s <- cast_sym(s, dtype)
    sym_args[i] <- list(s)
    input_index <- c(input_index, i)
    input_dtypes <- c(input_dtypes, dt)
  }
  res <- do.call(mask_function(f), sym_args)
  out <- collect_outputs(res)
  aux <- .rf_state$aux
  aux_ids <- as.integer(unlist(lapply(aux, function(a) a$ids)))
  fin <- rf_guard(.rf_b_finish(b, c(out$ids, aux_ids)))
  list(text = fin$located, hash = fin$hash, input_index = input_index,
       input_dtypes = input_dtypes, out = out, random = .rf_state$random, aux = aux)
}

# Hands a call's auxiliary outputs (after the `n_main` others) to the state updates recorded
# while tracing, and returns the other outputs.
apply_aux <- function(tr, outs, n_main) {
  k <- n_main
  for (a in tr$aux) {
    a$update(outs[k + seq_along(a$ids)])
    k <- k + length(a$ids)
  }
  outs[seq_len(n_main)]
}

# The traced function's inputs for one call: its arguments, then fresh random inputs (they
# follow the arguments in the traced function's signature).
call_inputs <- function(tr, args) {
  masks <- lapply(tr$random, function(r) {
    m <- dropout_mask(r$len, r$p)
    if (length(r$rdim) > 1) dim(m) <- r$rdim
    m
  })
  list(values = c(args[tr$input_index], masks),
       dtypes = c(tr$input_dtypes, vapply(tr$random, function(r) r$dtype, "")))
}
