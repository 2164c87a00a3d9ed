# Tracing: evaluate a function on symbolic values with its environment re-parented onto a mask
# that binds rfuse's versions of the base-R functions R 4.2 will not dispatch on S3 objects,
# guards every other function it calls against symbolic arguments, and traces the user's own
# helper functions as functions of their own (func.func + call, inlined later by the compiler).

# Syntax, control flow and functions that are safe (or non-standard-evaluation) with symbolic
# arguments: never wrapped.
passthrough_names <- c(
  "{", "(", "<-", "<<-", "=", "->", "if", "for", "while", "repeat", "function", "return",
  "~", "::", ":::", "alist", "expression", # (their arguments are not evaluated: a guard would force them)
  "invisible", "break", "next", "list", "stop", "warning", "message", "stopifnot", "missing",
  "on.exit", "quote", "bquote", "substitute", "deparse", "force", "is.null", "nrow", "ncol",
  "NROW", "NCOL", "dim", "length", "t", "mean", "sum", "max", "min", "print", "$", "@",
  "library", "require", "requireNamespace", "suppressWarnings", "suppressMessages", "tryCatch",
  "withCallingHandlers", "local", "switch", "match.arg", "eval", "evalq", "lapply", "sapply",
  "vapply", "Map", "Reduce", "Filter", "do.call", "seq_len", "seq_along", ":", "names",
  "%>%", "is.numeric", "is.finite", "is.infinite", "is.nan", "inherits", "identity", "UseMethod", "NextMethod", "sys.call", "sys.function",
  "match.call", "nargs", "interactive", "&&", "||", "::", ":::", "exists", "get", "get0",
  "assign", "sprintf", "paste", "paste0", "is.na", "isTRUE", "isFALSE", "[[", "[[<-", "vector",
  "%<-%", "%->%") # (zeallot's destructuring, common in torch code: it reads its left side unevaluated)

group_generic_names <- c(
  "+", "-", "*", "/", "^", "%%", "%/%", "==", "!=", "<", "<=", ">", ">=", "&", "|", "!",
  "abs", "sign", "sqrt", "floor", "ceiling", "trunc", "round", "signif", "exp", "log", "expm1", "log2", "log10",
  "log1p", "cos", "sin", "tan", "cospi", "sinpi", "tanpi", "acos", "asin", "atan", "cosh",
  "sinh", "tanh", "acosh", "asinh", "atanh", "lgamma", "gamma", "digamma", "trigamma",
  "cumsum", "cumprod", "cummax", "cummin", "all", "any", "prod", "range")

# Names of the functions called anywhere in an expression, and its character constants (each
# without repeats; C++, src/code.cpp: the walk in R was a tenth of a small function's trace).
called_names <- function(expr) .rf_code_names(expr, FALSE)
string_constants <- function(expr) .rf_code_names(expr, TRUE)

# Library functions live directly in a namespace (or base); any other closure is user code —
# defined at top level, in a script, in a test, or inside another function.
is_user_closure <- function(fun) {
  if (!is.function(fun) || is.primitive(fun)) return(FALSE)
  # An S4 generic (rfuse's as.array for rf_tensors) lives in an environment of its own: it
  # dispatches, it is not code to trace.
  if (inherits(fun, "genericFunction")) return(FALSE)
  env <- environment(fun)
  !(isNamespace(env) || identical(env, baseenv()) || identical(env, emptyenv()))
}

rfuse_namespace <- function() environment(rfuse_namespace)

# `why`: the refusal's reason; `deep`: traced values inside list arguments count too
# (unlist(list(x)), paste of a list), otherwise only the arguments themselves.
make_guard <- function(name, fun, why = "it is not supported by rfuse yet", deep = FALSE) {
  force(name); force(fun); force(why); force(deep)
  function(...) {
    for (i in seq_len(...length())) { # empty arguments (x[1, ]) stay unforced
      # An error while forcing an argument is the caller's: it passes through unchanged.
      if (eval(call("missing", as.name(paste0("..", i))))) next
      v <- ...elt(i)
      if (is_sym(v) || (deep && is.list(v) && any(vapply(v, is_sym, TRUE))))
        rf_unsupported(name, sys.call(), why)
    }
    fun(...)
  }
}

make_helper <- function(name, fun, torch_ops = FALSE) {
  force(name); force(fun); force(torch_ops)
  function(...) trace_helper(name, fun, list(...), sys.call(), torch_ops)
}

# The traced functions that keep, set or drop names, dimnames and class as R does; the others
# refuse a value that has them (attrs_guard).
attrs_aware <- c("[", "[[", "[<-", "[[<-", "%*%", "crossprod", "tcrossprod", "cbind", "rbind", "as.vector",
                 "as.numeric", "as.double", "is.matrix", "is.array", "is.double", "is.integer", "is.logical",
                 "I", "drop", "as.matrix", "unname", "sapply", "vapply", "lapply", "Map", "Filter", "Reduce",
                 "diag<-", "ifelse", "paste", "paste0", "sprintf", "which", "sort", "median", "var", "sd", "cov", "cor", "scale", "norm",
                 "rowSums", "colSums", "rowMeans", "colMeans", "head", "tail", "solve", "chol", "det", "try")
attrs_guarded <- function(name, f) {
  body(f) <- call("{", call("attrs_guard", name, quote(environment())), body(f))
  f
}

# Traced function `nm` as a mask binds it: rfuse's version, attributes guarded unless
# attrs_aware; made once a session.
.rf_masked_traced <- new.env(parent = emptyenv())
masked_traced_function <- function(nm) {
  f <- .rf_masked_traced[[nm]]
  if (is.null(f)) {
    f <- eval(traced_function_exprs[[nm]], rfuse_namespace())
    if (!nm %in% attrs_aware) f <- attrs_guarded(nm, f)
    assign(nm, f, envir = .rf_masked_traced)
  }
  f
}

# The names through which `f`'s code can reach a function: the symbols and the string constants
# (do.call("pmax", ...), sapply(l, "[", 1)) of its body and its arguments' defaults, and the
# replacement functions of the symbols. NULL (any name) where the code can look a function up by
# a name it computes.
computed_lookup_names <- c("eval", "evalq", "eval.parent", "parse", "str2lang", "str2expression",
                           "get", "get0", "mget", "match.fun", "getFunction", "do.call")
reachable_names <- function(f) {
  code <- as.call(c(as.name("{"), body(f), as.list(formals(f)))) # (an empty default is an empty argument)
  syms <- unique(all.names(code))
  if (any(computed_lookup_names %in% syms)) return(NULL)
  # An assignment to `f(x)` (x[i] <- v, dim(y) <- d) calls `f<-`, which the code does not name.
  c(syms, paste0(syms, "<-"), string_constants(code))
}

# A copy of `f` whose environment is a mask over its own: rfuse's traced functions, guards for
# every other function its body calls, helper tracers for the user's own functions.
# `torch_ops`: the function is torch code (a user's module method, or a function one calls): its
# operators broadcast as torch's (torch_operator).
mask_function <- function(f, side_effect_guards = TRUE, torch_ops = FALSE) {
  env <- environment(f) %||% globalenv()
  mask <- new.env(parent = env)
  traced <- names(traced_function_exprs)
  # Only the traced functions the code can reach (a trace's cost grew with all of them).
  reach <- reachable_names(f)
  for (nm in if (is.null(reach)) traced else intersect(reach, traced))
    assign(nm, masked_traced_function(nm), envir = mask)
  own <- names(formals(f))
  for (nm in setdiff(called_names(body(f)),
                     c(traced, passthrough_names, group_generic_names, own))) {
    fun <- get0(nm, envir = env, mode = "function")
    # rfuse's own functions (nnf_*, ...) trace symbolic values themselves.
    # Modules are called as they are: their methods are masked already.
    if (is.null(fun) || identical(topenv(environment(fun)), rfuse_namespace()) || inherits(fun, "nn_module")) next
    assign(nm, if (is_user_closure(fun)) make_helper(nm, fun, torch_ops) else make_guard(nm, fun), envir = mask)
  }
  if (side_effect_guards) {
    add_side_effect_guards(mask)
    watch_outside_numbers(mask, env, setdiff(all.names(body(f)), c(ls(mask, all.names = TRUE, sorted = FALSE), own)))
  }
  add_control_flow_guards(mask)
  if (torch_ops) list2env(torch_operators(), envir = mask)
  if (any(c("if", "while", "for") %in% all.names(body(f)))) body(f) <- guard_control_flow(body(f))
  environment(f) <- mask
  f
}

# Numbers (and rf_tensors) the traced code reads from outside itself become constants of the
# program: each such name gets an active binding in the mask that records the value read (in .rf_state$captures;
# the call checks it, see captures_hold) and returns it. Reads of the function's own variables
# never reach the mask.
watch_outside_numbers <- function(mask, env, names) {
  for (nm in names) {
    where <- env
    while (!identical(where, emptyenv()) && !exists(nm, envir = where, inherits = FALSE)) where <- parent.env(where)
    if (identical(where, emptyenv()) || isNamespace(where) || identical(where, baseenv())) next
    v <- get(nm, envir = where)
    if (!((is.numeric(v) || is.logical(v)) && !is.object(v) || is_tensor(v))) next
    local({
      name <- nm
      makeActiveBinding(name, function(value) {
        if (!missing(value))
          rf_unsupported("<<-", NULL, sprintf("`%s <<- ...` assigns outside the traced function", name))
        current <- get(name, envir = env)
        .rf_state$captures[[length(.rf_state$captures) + 1L]] <- list(name = name, lookup = env, value = current)
        current
      }, mask)
    })
  }
}

# One program serves every value of a traced argument, so a branch or a loop cannot depend on
# one. R's own errors for that ("the condition has length > 1", "invalid 'x' type in 'x && y'")
# do not say so: the traced body's if/while conditions and for sequences are wrapped in guards
# that name the construct in a classed rfuse_unsupported error, and && / || refuse traced values.
guard_control_flow <- function(expr) {
  rewrite <- function(e) {
    head <- e[[1]]
    if (is.symbol(head) && as.character(head) %in% c("quote", "bquote", "~", "substitute")) return(e)
    for (i in seq_along(e)[-1]) if (is.call(e[[i]])) e[[i]] <- rewrite(e[[i]])
    if (identical(head, quote(`if`)) || identical(head, quote(`while`)))
      e[[2]] <- call(".rfuse_condition", e[[2]], as.character(head))
    else if (identical(head, quote(`for`)))
      e[[3]] <- call(".rfuse_for_sequence", e[[3]])
    e
  }
  # A body nested too deeply for this recursion keeps R's own messages.
  if (!is.call(expr)) return(expr)
  tryCatch(rewrite(expr), error = function(e) expr)
}

add_control_flow_guards <- function(mask) {
  branch <- "rfuse compiles one program for every value of the traced arguments, so a branch cannot depend on their values"
  hint <- "use ifelse() or pmax()/pmin(), or make the value a static argument (rf_jit(static = ...))"
  # Classed rfuse_value_branch too: rf_jit then specializes on its number arguments (jit_entry).
  refuse <- function(fname, call, why)
    rf_abort(c("rfuse_value_branch", "rfuse_unsupported"),
             sprintf("rfuse cannot trace `%s()` in `%s`: %s", fname, call_text(call), why), call)
  assign(".rfuse_condition", function(value, construct) {
    if (is_sym(value))
      refuse(construct, substitute(value), paste0("its condition is a traced value: ", branch, "; ", hint))
    value
  }, envir = mask)
  assign(".rfuse_for_sequence", function(value) {
    if (is_sym(value))
      refuse("for", substitute(value), paste0("it loops over the elements of a traced value: rfuse ",
                                              "compiles one program for every value of the traced ",
                                              "arguments, so a loop cannot run over their values; ",
                                              "write it as vector operations"))
    value
  }, envir = mask)
  for (op in c("&&", "||")) assign(op, local({
    op <- op; base_op <- get(op, baseenv())
    function(x, y) {
      if (is_sym(x)) refuse(op, sys.call(), paste0("its operand is a traced value: ", branch, "; use & or |"))
      base_op(x, if (is_sym(y)) refuse(op, sys.call(), paste0("its operand is a traced value: ", branch, "; use & or |")) else y)
    }
  }), envir = mask)
  invisible(mask)
}

# Side effects run once, while tracing, not on every call of the compiled function (and an
# assignment outside would leak a symbolic value): `<<-` and assign() into an environment
# outside the traced code, and printing, are refused at trace time. `<<-` to a variable of the
# traced function itself (a local closure's counter) is fine. (Module methods, masked once when a
# module is made and run eagerly too, are not guarded: their state lives in `self`.)
rng_names <- c("rnorm", "runif", "rbinom", "rpois", "rexp", "rgamma", "rbeta", "rt", "rchisq", "rlogis",
               "rcauchy", "rweibull", "rlnorm", "rgeom", "rhyper", "rnbinom", "rmultinom", "rsignrank",
               "rwilcox", "sample", "sample.int", "set.seed")
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
  # Random numbers drawn while tracing would be constants of the program: the same "random"
  # values on every call, where R draws new ones.
  for (nm in setdiff(rng_names, c("rnorm", "runif")))
    assign(nm, local({ nm <- nm; function(...) refuse(nm, sys.call(), sprintf("`%s()` draws random numbers", nm)) }),
           envir = mask)
  # rnorm() and runif() draw afresh at every call: an input of the program (traced_random).
  assign("rnorm", function(n, mean = 0, sd = 1) traced_draw("rnorm", "normal", n, mean, sd, sys.call()), envir = mask)
  assign("runif", function(n, min = 0, max = 1) traced_draw("runif", "uniform", n, min, max, sys.call()), envir = mask)
  invisible(mask)
}

# rnorm(n, mean, sd) / runif(n, min, max) in traced code: n standard draws, an input of the
# program (see traced_random), then mean + sd * z (min + (max - min) * u), as R computes them.
# The parameters must be numbers for which R draws numbers (finite, sd >= 0, min <= max;
# length 1 or n, recycled as R does): R's NaN-with-a-warning cases are refused. Outside a trace
# (a module method run eagerly), R's own function.
traced_draw <- function(name, kind, n, a, b, call) {
  if (!in_trace()) return(if (kind == "normal") stats::rnorm(n, a, b) else stats::runif(n, a, b))
  if (is_sym(n) || !is.numeric(n) || anyNA(n))
    rf_unsupported(name, call, "`n` must be a number known while tracing (length(x) is)")
  if (length(n) > 1) n <- length(n) # R's rule: a vector n means length(n) draws
  if (!is.finite(n) || n < 0 || n != round(n)) rf_abort("rfuse_type_error", sprintf("invalid `n` for %s(): %s", name, format(n)), call)
  n <- as.integer(n)
  ok <- function(p) !is_sym(p) && is.numeric(p) && length(p) %in% c(1L, n) && all(is.finite(p))
  if (!ok(a) || !ok(b) || (kind == "normal" && any(b < 0)) || (kind == "uniform" && any(rep_len(b, n) < rep_len(a, n))))
    rf_unsupported(name, call, sprintf(paste0("parameters that are numbers of length 1 or n (%d) for which R draws ",
                                              "numbers (finite; sd >= 0; min <= max)"), n))
  z <- traced_random(name, kind, NULL, n, trace_float(), call)
  if (all(a == 0) && all(b == 1)) return(z)
  if (kind == "normal") a + b * z else a + (b - a) * z
}

# The R-level structure of a traced result: a symbolic value, a constant, or a list of those.
# A result's attributes that are traced values (scale()'s "scaled:center") become auxiliary
# outputs of a main program (`main`); a helper's results cannot carry them.
collect_outputs <- function(res, main = TRUE) {
  items <- if (is_sym(res) || !is.list(res)) list(res) else res
  # Nested lists (torch's list(output, list(h, c))): their leaves, and the structure to rebuild.
  nested <- !is_sym(res) && is.list(res) && any(vapply(res, function(v) !is_sym(v) && is.list(v), TRUE))
  if (nested) items <- output_leaves(res)
  syms <- Filter(is_sym, items)
  for (k in seq_along(syms)) {
    a <- syms[[k]]$attrs
    computed <- names(a)[vapply(a, is_sym, TRUE)]
    if (!length(computed)) next
    if (!main) rf_unsupported("<helper>", NULL, sprintf("a helper function's result with the computed attribute %s; call it from the traced function itself",
                                                         sQuote(computed[1], FALSE)))
    for (nm in computed) {
      v <- a[[nm]]
      if (any(vapply(v$attrs, is_sym, TRUE))) rf_unsupported("<attributes>", NULL, "an attribute whose own attributes are computed")
      .rf_state$aux[[length(.rf_state$aux) + 1L]] <- list(ids = as.integer(v$id), attr_of = k, name = nm,
                                                           attrs = v$attrs, int = !is.null(v$ib))
    }
    syms[[k]]$attrs <- a[setdiff(names(a), computed)]
  }
  list(single = is_sym(res) || !is.list(res), items = items,
       ids = vapply(syms, function(s) as.integer(s$id), integer(1)),
       rdims = lapply(syms, function(s) if (is.null(s$rdim)) NULL else as.integer(s$rdim)),
       lens = vapply(syms, function(s) as.double(s$len), 0),
       dtypes = vapply(syms, function(s) s$dtype, ""),
       int = vapply(syms, function(s) !is.null(s$ib), TRUE), # R integers: converted back
       attrs = lapply(syms, function(s) s$attrs), # names, dimnames, class: set on the results
       skeleton = if (nested) res)
}

output_leaves <- function(x) if (is_sym(x) || !is.list(x)) list(x) else do.call(c, c(list(list()), lapply(unname(x), output_leaves)))

# A call's results in the traced function's structure: `values` replace its symbolic leaves in order.
fill_outputs <- function(out, values) {
  k <- 0
  fill <- function(x) {
    if (is_sym(x)) { k <<- k + 1; return(values[[k]]) }
    if (is.list(x)) { for (i in seq_along(x)) { v <- fill(x[[i]]); x[i] <- list(v) }; return(x) }
    x
  }
  if (!is.null(out$skeleton)) return(fill(out$skeleton))
  items <- fill(out$items)
  if (out$single) items[[1]] else items
}

# A condition the compiled program computes on every call (a scalar logical) under which R's
# answer is not what the program returns (which.max of values all NA has length 0): a call that
# meets it is answered by base R (see jit_call), an auxiliary output carries it.
runtime_check <- function(cond, why) {
  if (isTRUE(.rf_state$in_helper))
    rf_unsupported("<helper>", NULL, sprintf("a helper function's values that %s are checked on every call; call it from the traced function itself", why))
  .rf_state$aux[[length(.rf_state$aux) + 1L]] <- list(ids = as.integer(cond$id), check = why)
}
# Helpers whose body calls these are traced inline (their checks must reach the call).
checked_names <- c("which.max", "which.min", "rnorm", "runif", "torch_randn", "torch_rand", "torch_randn_like",
                   "torch_rand_like", "nnf_dropout", "nn_dropout")

# The attributes computed by the program (collect_outputs): for each, the result it belongs to,
# its name and its value.
attribute_outputs <- function(tr, outs, n_main) {
  k <- n_main; found <- list()
  for (a in tr$aux) {
    if (!is.null(a$attr_of)) {
      v <- outs[[k + 1L]]
      if (a$int) storage.mode(v) <- "integer"
      if (length(a$attrs)) attributes(v) <- c(attributes(v), a$attrs)
      found[[length(found) + 1L]] <- list(of = a$attr_of, name = a$name, value = v)
    }
    k <- k + length(a$ids)
  }
  found
}

# The reason of the first runtime check a call's outputs (the auxiliary ones after `n_main`) meet.
failed_check <- function(tr, outs, n_main) {
  k <- n_main
  for (a in tr$aux) {
    if (!is.null(a$check) && isTRUE(as.logical(outs[[k + 1L]])[1])) return(a$check)
    k <- k + length(a$ids)
  }
  NULL
}

# A user helper called with symbolic arguments: traced once per argument signature as its own
# function, then called. With constant arguments mixed in it is traced inline instead.
trace_helper <- function(name, fun, args, call, torch_ops = FALSE) {
  syms <- vapply(args, is_sym, logical(1))
  if (!any(syms)) {
    if (torch_ops) environment(fun) <- list2env(torch_operators(), envir = new.env(parent = environment(fun)))
    return(do.call(fun, args))
  }
  masked <- mask_function(fun, torch_ops = torch_ops)
  if (!all(syms) || any(checked_names %in% called_names(body(fun)))) return(do.call(masked, args))
  # An integer argument's bound entry is part of the key: the helper's own bounds refer to it.
  key <- paste(if (torch_ops) "torch" else "", name, vapply(args, function(a) paste(a$dtype, paste(sym_tshape(a), collapse = "x"), a$ib %||% "",
                                                     if (length(a$attrs)) deparse1(a$attrs) else ""), ""),
               collapse = "|")
  entry <- .rf_state$helpers[[key]]
  b <- current_builder()
  if (is.null(entry)) {
    .rf_state$nhelpers <- .rf_state$nhelpers + 1L
    fname <- paste0(gsub("[^A-Za-z0-9_]", "_", name), "_", .rf_state$nhelpers)
    traced <- trace_scoped_function(b, fname, args, function(inner) {
      out <- collect_outputs(do.call(masked, inner), main = FALSE)
      if (!all(vapply(out$items, is_sym, logical(1))))
        rf_unsupported(name, call, "a traced helper must return symbolic values only")
      list(ids = out$ids, value = out)
    }, call)
    out <- traced$value
    entry <- list(fid = traced$fid, single = out$single,
                  structure = lapply(out$items, function(s) unclass(s)[c("rdim", "len", "dtype", "ib", "attrs")]),
                  names = names(out$items), label_checks = traced$label_checks)
    .rf_state$helpers[[key]] <- entry
  }
  # Arguments the helper takes class labels in: this call's are labels to check too.
  for (c in entry$label_checks) note_labels(args[[c$pos]], c$classes, call)
  ids <- rf_guard(.rf_b_call(b, entry$fid, vapply(args, function(a) as.integer(a$id), integer(1))), call)
  outs <- Map(function(id, s) with_attrs(new_sym(id, s$rdim, s$len, s$dtype, s$ib), s$attrs), ids, entry$structure)
  if (entry$single) outs[[1]] else stats::setNames(outs, entry$names)
}

# Traces a function `fname` of fresh inputs shaped like the symbolic values `inputs`: `body(inner)`
# (inner: those inputs) returns list(ids = its results' ids, value = anything), traced in the
# inputs' own scope (a helper's: values of the enclosing function cannot be used, see in_helper).
# Returns the function's id, `value`, and the class-label checks made inside (by input position).
trace_scoped_function <- function(b, fname, inputs, body, call) {
  rf_guard(.rf_b_begin_function(b, fname), call)
  inner <- lapply(inputs, function(a)
    with_attrs(new_sym(rf_guard(.rf_b_input(b, sym_tshape(a), a$dtype, ""), call), a$rdim, a$len, a$dtype, a$ib),
               a$attrs))
  outer <- list(helper = .rf_state$in_helper, ids = .rf_state$scope_ids, checks = .rf_state$scope_label_checks)
  .rf_state$in_helper <- TRUE
  .rf_state$scope_ids <- vapply(inner, function(s) as.integer(s$id), 0L)
  .rf_state$scope_label_checks <- list()
  on.exit({
    .rf_state$in_helper <- outer$helper
    .rf_state$scope_ids <- outer$ids
    .rf_state$scope_label_checks <- outer$checks
  })
  out <- body(inner)
  list(fid = rf_guard(.rf_b_end_function(b, out$ids), call), value = out$value,
       label_checks = .rf_state$scope_label_checks)
}

# Traces `f` on the given arguments: numeric/logical arrays become symbolic inputs, `static`
# arguments stay R values. Returns the module text and how to map results back.
trace_function <- function(f, args, dtype, static_args, device = current_device()) {
  saved <- as.list(.rf_state)
  started <- if (is.null(saved$builder)) Sys.time() # the outermost trace's time (rf_cache_info)
  on.exit({
    rm(list = ls(.rf_state, all.names = TRUE, sorted = FALSE), envir = .rf_state)
    for (nm in names(saved)) assign(nm, saved[[nm]], envir = .rf_state)
    if (!is.null(started))
      .rf_counters$trace_seconds <- .rf_counters$trace_seconds + as.numeric(Sys.time() - started, units = "secs")
  })
  b <- .rf_builder_new("main")
  .rf_state$builder <- b
  .rf_state$dtype <- dtype
  .rf_state$device <- device # (with_autocast regions apply to their device type's programs)
  .rf_state$builder_autocast <- ""
  .rf_state$helpers <- new.env(parent = emptyenv())
  .rf_state$nhelpers <- 0L
  .rf_state$in_helper <- FALSE
  .rf_state$random <- list() # inputs drawn from R's RNG at each call (dropout masks)
  .rf_state$aux <- list()    # extra outputs applied to R state after each call (batch statistics)
  .rf_state$int_bounds <- list() # the integer guard's entries (int_bound)
  .rf_state$warnings <- character() # R's warnings the traced code gives on every call
  .rf_state$captures <- list() # numbers read from outside (watch_outside_numbers)
  .rf_state$label_checks <- list() # arguments holding class labels (class_targets)
  sym_args <- args
  tensor_call <- any(vapply(args, is_tensor, TRUE))
  input_index <- integer()
  input_dtypes <- character()
  for (i in seq_along(args)) {
    if (static_args[i]) next
    a <- args[[i]]
    # An rf_tensor comes in its own dtype; floats of another precision compute in the trace's
    # float dtype, integer tensors in their own (see native_int_dtype); R's integers in the float
    # dtype under the integer guard, except beside tensors, where they are int32 tensors too.
    dt <- if (is_tensor(a)) ir_dtype(a@env$dtype) else if (is.logical(a)) "i1"
          else if (is.integer(a) && tensor_call) "i32" else dtype
    id <- rf_guard(.rf_b_input(b, tshape(dim(a), length(a)), dt, names(args)[i] %||% ""))
    s <- new_sym(id, dim(a), length(a), dt, if (is.integer(a) && !tensor_call) int_bound("input", i = i))
    if (!dt %in% c("i1", int_dtypes) && dt != dtype) s <- cast_sym(s, dtype)
    sym_args[i] <- list(s)
    input_index <- c(input_index, i)
    input_dtypes <- c(input_dtypes, dt)
  }
  # The inputs as the body sees them, and their argument positions (note_labels).
  .rf_state$scope_ids <- vapply(sym_args[input_index], function(s) as.integer(s$id), 0L)
  .rf_state$input_args <- input_index
  res <- do.call(mask_function(f), sym_args)
  out <- collect_outputs(res)
  aux <- .rf_state$aux
  aux_ids <- as.integer(unlist(lapply(aux, function(a) a$ids)))
  fin <- rf_guard(.rf_b_finish(b, c(out$ids, aux_ids)))
  int_guard <- if (length(.rf_state$int_bounds)) list(entries = .rf_state$int_bounds, limit = int_limit(dtype))
  list(text = fin$located, hash = fin$hash, input_index = input_index,
       input_ids = .rf_state$scope_ids, # as the body sees them
       input_dtypes = input_dtypes, out = out, random = .rf_state$random, aux = aux, int_guard = int_guard,
       warnings = .rf_state$warnings, captures = unique(.rf_state$captures), label_checks = .rf_state$label_checks)
}

# Hands a call's auxiliary outputs (after the `n_main` others) to the state updates recorded
# while tracing, and returns the other outputs.
apply_aux <- function(tr, outs, n_main) {
  k <- n_main
  for (a in tr$aux) {
    if (!is.null(a$update)) a$update(outs[k + seq_along(a$ids)])
    k <- k + length(a$ids)
  }
  outs[seq_len(n_main)]
}

# The traced function's inputs for one call: its arguments, then fresh random inputs (they
# follow the arguments in the traced function's signature).
call_inputs <- function(tr, args) {
  check_traced_labels(tr, args)
  masks <- lapply(tr$random, draw_random)
  list(values = c(args[tr$input_index], masks),
       dtypes = c(tr$input_dtypes, vapply(tr$random, function(r) r$dtype, "")))
}
