# rf_jit: trace once per input signature, compile with a fusion pipeline, cache, run.

.rf_caches <- new.env(parent = emptyenv())   # every rf_jit function's program cache, by id
.rf_counters <- new.env(parent = emptyenv())
.rf_counters$compiles <- 0
.rf_counters$hits <- 0
.rf_counters$next_id <- 0
.rf_counters$trace_seconds <- 0

# Names every argument (positional ones by f's formals, as R would match them).
name_args <- function(f, args) {
  nms <- names(args) %||% rep("", length(args))
  free <- setdiff(names(formals(f)), c("...", nms[nms != ""]))
  pos <- which(nms == "")
  take <- seq_len(min(length(pos), length(free)))
  nms[pos[take]] <- free[take]
  names(args) <- nms
  args
}

check_arg <- function(a, name, is_static) {
  if (is_static || is_tensor(a)) return(invisible())
  if (!(is.numeric(a) || is.logical(a)) || is.object(a) && !is.array(a) && !inherits(a, "rf_parameter"))
    rf_abort("rfuse_type_error",
             sprintf("argument '%s' is %s; rf_jit() functions take numeric (or logical) vectors, matrices or arrays%s",
                     name, paste(class(a), collapse = "/"),
                     if (is.character(a) || is.function(a) || is.list(a))
                       " (pass non-numeric settings through `static = \"<name>\"`)" else ""))
}

#' Compile an R function with rfuse
#'
#' `rf_jit()` returns a function that computes the same as `f` on base-R numeric vectors,
#' matrices and arrays. On the first call with a new input signature (argument dims and types)
#' it traces `f` into rfuse's IR, fuses it with `pipeline`, compiles it and caches the result;
#' later calls with the same signature only run the compiled program.
#'
#' Traced base R: arithmetic and comparison operators, `exp log sqrt abs tanh sin cos`,
#' `pmax pmin ifelse`, `\%*\% t crossprod tcrossprod`, `sweep` (one MARGIN, FUN one of
#' `+ - * /`), `rowSums colSums rowMeans colMeans sum mean max min`, `nrow ncol dim length`,
#' `matrix`, `as.vector`, with R's recycling rules. Functions you wrote that `f` calls are traced
#' too. Anything else given a traced value raises an error of class `rfuse_unsupported`.
#'
#' @param f A function of numeric arrays, or a module ([nn_module()]), traced as a whole with its
#'   parameters as inputs.
#' @param dtype `"float32"` or `"float64"` (R's own double arithmetic) for plain R inputs; the
#'   default, `NULL`, is `"float64"` on the CPU (R's doubles are read in place, and the answers
#'   are R's to the last bit where the operations are the same) and `"float32"` on the GPU (half
#'   the bytes to move, and the GPU's fast arithmetic). [rf_tensor] inputs compute in their own
#'   float dtype (float64 if any is, else float32) unless `dtype` is given.
#' @param pipeline Fusion pipeline: `"default"`, `"elementwise-only"` or `"no-fusion"`, or an
#'   MLIR pass pipeline string of registered passes, run exactly as written, e.g.
#'   `"builtin.module(inline, canonicalize, func.func(rfuse-fuse-elementwise), rfuse-outline-kernels)"`
#'   (`rfuse-opt --help` lists the passes). A pipeline that does not outline kernels runs op by op.
#' @param plugins Paths of MLIR pass plugins (shared libraries exporting `mlirGetPassPluginInfo`)
#'   to load first, so `pipeline` can name their passes. A plugin is code that runs in this R
#'   process: load only what you trust. See `examples/pass-plugin` in rfuse's sources.
#' @param dynamic Batch sizes. `NULL` (the default): calls that differ only in the size of their
#'   arguments' first dimension (the batch: an array's first dim, a vector's length) share one
#'   compiled program once two sizes have been compiled, as torch.compile's automatic dynamic
#'   shapes: every later size is traced but runs no pass pipeline and no NVRTC (its GPU kernels
#'   take the size as an argument; the CPU backend JIT-compiles each size's kernels).
#'   `"batch"` (or `TRUE`): the same from the first call, which compiles a second size at once,
#'   and a warning of class `rfuse_dynamic_warning` when the function cannot share one program
#'   (its code depends on the batch size other than through the shapes: a branch on
#'   `nrow(x)`, a constant computed from it as in `x / nrow(x)`, R's recycling of a vector
#'   along the rows); such sizes compile a program each. Reductions over the batch
#'   (`colSums`, `colMeans`) are fine. `FALSE`: a program per size. `rf_cache_info()$specializations` counts the
#'   programs made for a size without compiling.
#' @param static Names of arguments used as R values while tracing (part of the cache key by
#'   value) instead of traced inputs: e.g. a loop count or a string option. Logical scalars are
#'   always static; a plain number argument becomes static by itself when tracing fails without
#'   it (a branch or loop on it, `seq_len(n)`), as torch.compile specializes on Python numbers:
#'   each new value then compiles a program of its own.
#' @section NA and attributes:
#' Calls whose answer the compiled program might not reproduce exactly are evaluated by base R
#' instead (once per function a message of class `rfuse_fallback` says so): inputs holding NA
#' or NaN for programs with comparisons, logical ops, casts or matrix products, or in float32 or on
#' the GPU; inputs holding NA when the compiled result shows a NaN; and inputs with names, dimnames
#' or other attributes. So NA comes back as NA, and names as base R sets them.
#' @return A function with the same arguments as `f`, of class `rf_jit_function`.
#' @examples
#' f <- function(x, a, b) pmax(x * a + b, 0) * (1 / (1 + exp(-x)))
#' jf <- rf_jit(f, dtype = "float64")
#' x <- matrix(rnorm(12), 3)
#' all.equal(jf(x, 2, 0.5), f(x, 2, 0.5))
#' @export
rf_jit <- function(f, dtype = NULL, pipeline = "default", static = character(),
                   plugins = character(), dynamic = NULL) {
  if (inherits(f, "rf_jit_function")) f <- attr(f, "rfuse")$f
  model <- NULL
  if (inherits(f, "nn_module")) {
    model <- f
    f <- model_function(model)
  }
  new_jit(f, model, dtype, pipeline, static, plugins, check_dynamic(dynamic))
}

# rf_jit's function for `f`; `model`: the module `f` calls (model_function), whose parameters and
# buffers every call passes as inputs (with_parameters), so that a program never keeps stale ones.
new_jit <- function(f, model, dtype, pipeline, static, plugins, dynamic = NULL) {
  if (!is.function(f)) rf_abort("rfuse_type_error", "`f` must be a function")
  if (!is.null(dtype)) dtype <- match.arg(dtype, c("float32", "float64"))
  check_pipeline(pipeline, plugins)
  cache <- new.env(parent = emptyenv())
  .rf_counters$next_id <- .rf_counters$next_id + 1
  assign(as.character(.rf_counters$next_id), cache, envir = .rf_caches)
  fast <- .rf_fast_table()
  state <- list(f = f, formals = names(formals(f)) %||% character(), dots = "..." %in% names(formals(f)),
                dtype = if (is.null(dtype)) NULL else if (dtype == "float32") "f32" else "f64", pipeline = pipeline,
                static = static, dynamic = dynamic, cache = cache, model = model, notes = new.env(parent = emptyenv()), fast = fast)
  # A call on rf_tensors with a signature that ran before is one .Call (fast_call); any other
  # takes the R path, which records the signatures the fast one can take.
  jitted <- function(...) {
    # (the fast path misses inside an autocast region, whose state is part of the program's key,
    # and on list arguments, which are never tensors)
    r <- .rf_fast_call(fast, list(...), .rf_counters, .rf_tensor_prototype, .rf_autocast)
    if (is.character(r)) rf_abort(r[[1]], r[[2]]) # a failure, as .rf_run_tensors reports them
    if (!is.null(r)) return(r)
    # A model's list arguments (an LSTM's hx = list(h, c)): their tensors are the arguments of a
    # program per structure, which rebuilds the lists.
    if (!is.null(model) && has_list_args(list(...))) {
      lists <- flatten_list_args(list(...))
      jf <- state$notes$list_jits[[lists$key]]
      if (is.null(jf)) {
        jf <- new_jit(model_function(model, lists$rebuild), model, dtype, pipeline, character(), plugins, dynamic)
        if (is.null(state$notes$list_jits)) state$notes$list_jits <- new.env(parent = emptyenv())
        assign(lists$key, jf, envir = state$notes$list_jits)
      }
      return(do.call(jf, lists$flat))
    }
    jit_call(state, with_parameters(state, list(...)))
  }
  # When the jitted function goes, its programs go with it (at the next gc).
  reg.finalizer(environment(), cache_dropper(as.character(.rf_counters$next_id)))
  structure(jitted, class = c("rf_jit_function", "function"), rfuse = state)
}

# A finalizer for rf_jit's frame that forgets its program cache; made here so that it does not
# hold the frame itself.
cache_dropper <- function(id) {
  force(id)
  function(e) if (exists(id, envir = .rf_caches, inherits = FALSE)) rm(list = id, envir = .rf_caches)
}

# Loads `plugins`, then checks that `pipeline` is a named pipeline or a pass pipeline string
# that parses: a bad one is an error now, not at the first call.
check_pipeline <- function(pipeline, plugins = character()) {
  if (!is.character(plugins) || anyNA(plugins))
    rf_abort("rfuse_plugin_error", "`plugins` must be paths of pass plugin libraries")
  for (p in plugins) rf_guard(.rf_load_plugin(path.expand(p)))
  if (!is.character(pipeline) || length(pipeline) != 1 || is.na(pipeline))
    rf_abort("rfuse_error", sprintf("`pipeline` must be one string, not %s",
                                    paste(deparse(pipeline, width.cutoff = 60L), collapse = " ")))
  # (checking builds a pass manager, ~2 ms the first time: the built-in default needs none, and a
  # pipeline that passed once passes again)
  if (pipeline == "default" || isTRUE(.rf_checked_pipelines[[pipeline]])) return(invisible(pipeline))
  tryCatch(.rf_check_pipeline(pipeline), error = function(e)
    rf_abort("rfuse_error", sub("^rfuse_[a-z_]+: ", "", conditionMessage(e))))
  assign(pipeline, TRUE, envir = .rf_checked_pipelines)
  invisible(pipeline)
}
.rf_checked_pipelines <- new.env(parent = emptyenv())

# A model's parameters are inputs too: new weights run the same compiled program.
with_parameters <- function(state, args)
  if (is.null(state$model)) args else c(args, model_parameter_values(state$model, state$notes))

# A function of (inputs..., parameters..., buffers...) that runs `model` with its state (see
# state_slots) replaced by the trailing arguments (symbolic values while tracing).
# `rebuild`: the model's own arguments from the flat ones (list arguments' tensors, see
# flatten_list_args).
model_function <- function(model, rebuild = NULL) {
  force(model); force(rebuild)
  function(...) {
    args <- list(...)
    slots <- state_slots(attr(model, "self"))
    n_in <- length(args) - length(slots)
    saved <- slot_values(slots)
    on.exit(set_slots(slots, saved))
    set_slots(slots, args[n_in + seq_along(slots)])
    user <- args[seq_len(n_in)]
    do.call(model, if (is.null(rebuild)) user else rebuild(user))
  }
}

# The cache key of a call: per argument its name (positional ones by f's formals), kind and dims;
# static arguments (named in `static`, and logical scalars) by value. Kept cheap: it runs on
# every call.
call_key <- function(state, args, carry = NULL) {
  nms <- names(args)
  if (is.null(nms) && !state$dots) {
    nms <- state$formals[seq_along(args)]
    nms[is.na(nms)] <- ""
  } else if (is.null(nms) || any(!nzchar(nms))) {
    nms <- names(name_args(state$f, args))
  }
  k <- .rf_call_key(args, nms, state$static, carry)
  # A NULL argument (an optional mask or input left out, as torch models take them) is static:
  # the function sees it as NULL, and the key says so.
  nulls <- vapply(args, is.null, TRUE)
  if (any(nulls)) k$static <- k$static | nulls
  # Number arguments at the positions a failed trace specialized on (jit_entry).
  if (length(state$notes$auto_static)) {
    auto <- seq_along(args) %in% state$notes$auto_static & vapply(args, is_number_arg, TRUE)
    k$static <- k$static | auto
  }
  if (any(k$static))
    k$key <- paste(k$key, paste(vapply(args[k$static], function(a) paste(deparse(a), collapse = ""), ""),
                                collapse = ";"))
  # (the key names an environment entry: R limits names to 10000 bytes, which a model with
  # hundreds of parameters passes)
  if (nchar(k$key, "bytes") > 4000L) k$key <- graph_hash(k$key)
  list(key = k$key, names = nms, static = k$static)
}

# A plain number (not a tensor, array or classed object): what a failed trace may specialize on.
is_number_arg <- function(a) is.numeric(a) && length(a) == 1 && is.null(dim(a)) && !is.object(a)

# The compute dtype of calls on rf_tensors: "f64" if any tensor among `args` is float64, "f32" if
# there are tensors, NULL if there are none.
tensors_dtype <- function(args) {
  found <- NULL
  for (a in args) if (is_tensor(a)) {
    if (identical(attr(a, "env")$dtype, "float64")) return("f64")
    found <- "f32"
  }
  found
}

# The float dtype a call is traced in (see rf_jit's `dtype`).
trace_dtype <- function(state, args, device)
  state$dtype %||% tensors_dtype(args) %||% if (device == "cpu") "f64" else "f32"

# Looks up (or traces and compiles) the program for these arguments.
jit_entry <- function(state, args, dtype = trace_dtype(state, args, current_device())) {
  k <- call_key(state, args)
  device <- call_device(args)
  autocast <- autocast_for(device)
  k$key <- paste0(dtype, "|", k$key, if (!is.null(state$model)) paste0("|", training_signature(state$model, state$notes)),
                  if (nzchar(autocast)) paste0("|autocast ", autocast))
  names(args) <- k$names
  entry <- current_entry(state$cache[[k$key]])
  if (!is.null(entry) && !captures_hold(state, entry$captures)) entry <- NULL # traced again
  if (!is.null(entry)) {
    .rf_counters$hits <- .rf_counters$hits + 1
    order <- state$notes$order
    if (length(order) > 1 && order[length(order)] != k$key) # least recently used goes first
      state$notes$order <- c(order[order != k$key], k$key)
    return(list(entry = entry, args = args))
  }
  for (i in seq_along(args))
    check_arg(args[[i]], if (nzchar(k$names[i])) k$names[i] else paste0("#", i), k$static[i])
  # While a retry is possible (below), the first attempt's warnings wait: a retry that succeeds
  # would otherwise show the failed attempt's (seq_len(<traced>)'s "first element used").
  numbers <- which(!k$static & vapply(args, is_number_arg, TRUE))
  held <- list()
  first_try <- function() {
    if (!length(numbers)) return(trace_function(state$f, args, dtype, k$static, device))
    withCallingHandlers(trace_function(state$f, args, dtype, k$static, device), warning = function(w) {
      held[[length(held) + 1L]] <<- w
      invokeRestart("muffleWarning")
    })
  }
  tr <- tryCatch(first_try(), error = function(e) {
    # Tracing failed (a branch or loop on a traced value, seq_len(n), a size from a number):
    # when the call has number arguments (a step count, a flag given as 0/1, torch code's
    # `if (n > 1)`), their values become part of the program's key and the function is traced
    # again with them as R values (as torch.compile specializes on Python numbers); if that
    # fails too, the first error stands.
    # (and only while another argument stays traced: a program of constants alone is R's work)
    fail <- function() { for (w in held) warning(w); stop(e) }
    if (!length(numbers) || all(k$static | seq_along(args) %in% numbers)) fail()
    state$notes$auto_static <- c(state$notes$auto_static, numbers)
    tryCatch(jit_entry(state, args, dtype), error = function(e2) {
      state$notes$auto_static <- setdiff(state$notes$auto_static, numbers)
      fail()
    })
  })
  if (!is.null(tr[["entry"]])) return(tr) # traced again with number arguments static
  for (w in held) warning(w)
  apply_r_options()
  # A size of a family that shares one program (dynamic shapes) is made from its template.
  batch <- call_batch(state, args, k$static)
  fam <- if (!is.null(batch)) batch_family(state, paste0(dtype, "|", family_key(state, args, batch$carry, k$key, autocast)))
  program <- if (!is.null(fam)) specialized_program(state, fam, tr, batch$size)
  specialized <- !is.null(program)
  if (!specialized) program <- rf_guard(.rf_compile(tr$text, state$pipeline))
  entry <- list(program = program, trace = tr, na_sensitive = na_sensitive(tr, dtype),
                rdtypes = r_dtype(tr$out$dtypes),
                captures = if (is.null(state$model)) tr$captures, made = specialized)
  assign(k$key, entry, envir = state$cache)
  bound_cache(state, k$key)
  if (!specialized) {
    .rf_counters$compiles <- .rf_counters$compiles + 1
    count_recompiles(state, k$key)
    if (!is.null(fam)) {
      add_family_member(state, fam, program, batch$size)
      # dynamic = "batch": a second size now, so that no later size compiles.
      if (identical(state$dynamic, "batch") && is.null(fam$template) && length(fam$members) == 1)
        compile_second_size(state, fam, args, batch, dtype, k)
    }
  }
  list(entry = entry, args = args)
}

# A family's key: the call's, with the batch dimension of the arguments that carry it left out
# (and the same model, autocast and static values as `key` has).
family_key <- function(state, args, carry, key, autocast) {
  g <- call_key(state, args, carry)$key
  paste0(g, if (!is.null(state$model)) paste0("|", training_signature(state$model, state$notes)),
         if (nzchar(autocast)) paste0("|autocast ", autocast))
}

# dynamic = "batch" at a family's first call: traces and compiles the function at a second batch
# size (one more), so that the template exists before another size is called.
compile_second_size <- function(state, fam, args, batch, dtype, k) {
  size <- batch$size + 1L
  tr <- trace_function(state$f, with_batch_size(args, batch$carry, size), dtype, k$static, call_device(args))
  program <- rf_guard(.rf_compile(tr$text, state$pipeline))
  .rf_counters$compiles <- .rf_counters$compiles + 1
  count_recompiles(state, paste0(k$key, " (batch ", size, ", for dynamic = \"batch\")"))
  add_family_member(state, fam, program, size)
}

# Each new argument signature compiles a program of its own (shapes are static). Past
# getOption("rfuse.recompile_limit", 8) programs for one function, a warning (once per
# function) names the signatures that caused them, as torch.compile's recompile limit does.
count_recompiles <- function(state, key) {
  if (isTRUE(state$notes$internal)) return(invisible()) # rfuse's own programs (eager ops, models called on tensors)
  limit <- getOption("rfuse.recompile_limit", 8L)
  if (!is.numeric(limit) || length(limit) != 1 || is.na(limit) || limit < 1)
    rf_abort("rfuse_option_error", "options(rfuse.recompile_limit) must be a positive number of compilations")
  state$notes$compiled <- c(state$notes$compiled, key)
  n <- length(state$notes$compiled)
  if (n > limit && is.null(state$notes$warned_recompile_limit)) {
    assign("warned_recompile_limit", TRUE, envir = state$notes)
    warning(structure(class = c("rfuse_recompile_warning", "warning", "condition"), list(
      message = sprintf(paste0("rfuse: this function has been compiled %d times (options(rfuse.recompile_limit) = %d): ",
                               "every new argument shape, type or static value compiles a program of its own. ",
                               "The signatures: %s"),
                        n, as.integer(limit), paste(unique(state$notes$compiled), collapse = " | ")),
      call = NULL)))
  }
}

# A cached entry, or NULL when its program's handle is empty: a jitted function saved and
# restored (serialization keeps no C++ object) compiles again.
current_entry <- function(entry)
  if (is.null(entry) || !identical(entry$program, .rf_counters$null_handle)) entry

# Numbers a traced function (or a helper of the user's it calls) reads from outside itself are
# constants of the compiled program. Each entry records the ones read while tracing
# (watch_outside_numbers), and a call whose lookups now find other values traces again (R would
# use the new ones), with a note once.
captures_hold <- function(state, captures) {
  for (c in captures)
    if (!identical(get0(c$name, envir = c$lookup, inherits = TRUE), c$value)) {
      if (is.null(state$notes$captures_changed)) {
        assign("captures_changed", TRUE, envir = state$notes)
        message(structure(class = c("rfuse_retrace", "message", "condition"), list(
          message = sprintf(paste0("rfuse: `%s`, which the function reads from outside itself, has changed since ",
                                   "it was traced: tracing again (pass values that change as arguments; this ",
                                   "note is shown once per function)\n"), c$name), call = NULL)))
      }
      return(FALSE)
    }
  TRUE
}

# Each jitted function keeps at most getOption("rfuse.cache_limit", 64) compiled signatures,
# dropping the least recently used; the first drop warns once, naming the signatures.
bound_cache <- function(state, key) {
  order <- c(setdiff(intersect(state$notes$order, ls(state$cache, all.names = TRUE)), key), key) # after rf_cache_clear()
  limit <- getOption("rfuse.cache_limit", 64L)
  if (!is.numeric(limit) || length(limit) != 1 || is.na(limit) || limit < 1)
    rf_abort("rfuse_option_error", "options(rfuse.cache_limit) must be a positive number of programs")
  if (length(order) > limit) {
    drop <- order[seq_len(length(order) - limit)]
    # (a size made from a batch template is made again, without compiling: no warning)
    compiled <- !vapply(drop, function(k) isTRUE(state$cache[[k]]$made), TRUE)
    rm(list = drop, envir = state$cache)
    order <- order[-seq_along(drop)]
    # (rfuse's own programs — eager ops, recorded graphs — serve every shape: no warning)
    if (any(compiled) && is.null(state$notes$warned_recompiles) && !isTRUE(state$notes$internal)) {
      assign("warned_recompiles", TRUE, envir = state$notes)
      warning(structure(class = c("rfuse_recompile_warning", "warning", "condition"), list(
        message = sprintf(paste0("rfuse: this function has been compiled for more than %d argument signatures ",
                                 "(options(rfuse.cache_limit)); the least recently used are dropped and will ",
                                 "compile again. Recent signatures: %s"),
                          as.integer(limit), paste(utils::tail(order, 3), collapse = " | ")),
        call = NULL)))
    }
  }
  state$notes$order <- order
}

# R's NA semantics, exactly. A compiled program computes NaN where R computes NA or NaN only
# through IEEE arithmetic in float64 on the CPU: NA's payload survives additions, products,
# math functions and reductions there, and every NA or NaN operand gives NaN. It does not
# survive float32, the GPU, comparisons and logical ops (which have no NA), casts, or BLAS
# (which may skip a NaN times 0). So for the calls where an NA could be answered differently —
# an input holding an NA, or NaN, in an NA-sensitive program, or an NA input behind a NaN in the
# output of any other — base R evaluates the function instead: the answer is R's own. Inputs
# with names, dimnames or other attributes likewise (the compiled program returns dims only).
# "nan": any NaN input may be answered differently (comparisons, logical ops, casts and BLAS have
# no NA, and a NaN times 0 may be skipped); "na": NaN propagates, but an NA would come back as
# NaN (float32); "": neither (float64 arithmetic on the CPU keeps NA's payload).
na_sensitive <- function(tr, dtype)
  if (grepl("rfuse\\.(compare|select|and|or|not|cast|matmul|conv2d)", tr$text)) "nan" else
    if (dtype != "f64" || any(tr$input_dtypes != "f64")) "na" else ""

has_true_na <- function(values) any(vapply(values, function(v) anyNA(v) && any(is.na(v) & !is.nan(v)), TRUE))

carries_attributes <- function(args)
  any(vapply(args, function(a) !is.null(names(a)) || !is.null(dimnames(a)) ||
                     length(setdiff(names(attributes(a)), "dim")) > 0, TRUE))

# Evaluates the call in base R, or returns NULL when that is not possible: for a model (its
# forward is traced code), and for functions whose base-R evaluation comes back to this jitted
# function (rfuse's eager convolutions and pools, which base R has not): those run compiled.
base_r_call <- function(state, args, why) {
  if (!is.null(state$model))
    rf_abort("rfuse_unsupported", paste0("the inputs of this jitted model ", why,
                                         ", which rfuse does not reproduce exactly; remove them first"))
  if (isTRUE(state$notes$in_base_r) || isTRUE(state$notes$no_base_r)) return(NULL)
  if (is.null(state$notes[[why]])) {
    assign(why, TRUE, envir = state$notes)
    message(structure(class = c("rfuse_fallback", "message", "condition"),
                      list(message = paste0("rfuse: base R evaluated this call, since its inputs ", why,
                                            " (the compiled program would not reproduce R's answer exactly; ",
                                            "this note is shown once per function)\n"), call = NULL)))
  }
  state$notes$in_base_r <- TRUE
  on.exit(state$notes$in_base_r <- FALSE)
  list(value = do.call(state$f, args))
}

jit_call <- function(state, args) {
  for (a in args) if (is_tensor(a)) return(jit_call_tensors(state, args))
  user_args <- if (is.null(state$model)) args else args[seq_len(length(args) - length(state$notes$slots))]
  if (carries_attributes(user_args) &&
      !is.null(r <- base_r_call(state, args, "carry names, dimnames or other attributes"))) return(r$value)
  device <- current_device()
  je <- jit_entry(state, args, trace_dtype(state, args, device))
  tr <- je$entry$trace
  inputs <- call_inputs(tr, je$args)
  numeric_inputs <- Filter(function(v) is.numeric(v) || is.logical(v), user_args)
  # The GPU keeps no NaN payload either: there an NA, never a NaN, needs base R.
  level <- je$entry$na_sensitive
  if (level == "" && device == "cuda") level <- "na"
  inputs_scanned <- level != ""
  if (level == "nan" && any(vapply(numeric_inputs, anyNA, TRUE)) &&
      !is.null(r <- base_r_call(state, args, "hold NA or NaN values"))) return(r$value)
  if (level == "na" && has_true_na(numeric_inputs) &&
      !is.null(r <- base_r_call(state, args, "hold NA values"))) return(r$value)
  if (!is.null(tr$int_guard) && !int_guard_holds(tr$int_guard, je$args) &&
      !is.null(r <- base_r_call(state, args, "could take R's integers out of their range (or divide one by 0)")))
    return(r$value)
  outs <- .rf_run(je$entry$program, inputs$values, inputs$dtypes, tr$out$rdims, device)
  if (inherits(outs, "rfuse_failure")) rf_abort(outs[[1]], outs[[2]])
  # Inputs not scanned before the run: an NA among them shows as a NaN in the results.
  if (!inputs_scanned && any(vapply(outs, function(o) is.double(o) && anyNA(o), TRUE)) &&
      has_true_na(numeric_inputs) &&
      !is.null(r <- base_r_call(state, args, "hold NA values"))) return(r$value)
  if (!is.null(why <- failed_check(tr, outs, length(tr$out$ids)))) {
    r <- base_r_call(state, args, why)
    if (is.null(r)) rf_abort("rfuse_unsupported", paste0("the inputs of this call ", why, ", which the compiled program does not reproduce"))
    return(r$value)
  }
  computed_attrs <- attribute_outputs(tr, outs, length(tr$out$ids))
  outs <- apply_aux(tr, outs, length(tr$out$ids))
  for (k in which(tr$out$int)) storage.mode(outs[[k]]) <- "integer"
  for (k in seq_along(tr$out$attrs)) if (length(a <- tr$out$attrs[[k]])) attributes(outs[[k]]) <- c(attributes(outs[[k]]), a)
  for (ca in computed_attrs) attr(outs[[ca$of]], ca$name) <- ca$value
  for (w in tr$warnings) warning(w, call. = FALSE)
  fill_outputs(tr$out, outs)
}

# A call with rf_tensor arguments: runs on their device, on their memory, and returns rf_tensors
# there (plain R arguments among them are copied over first). A model's parameters are kept on
# the device between calls, as long as they are the same R objects (R copies a parameter that
# is modified, so a changed one is a new object and goes over again).
jit_call_tensors <- function(state, args) {
  device <- NULL
  for (a in args) if (is_tensor(a)) { # computed, on one device
    e <- attr(a, "env")
    if (is.null(e$buf)) materialize(a)
    if (is.null(device)) device <- e$device
    else if (e$device != device) common_device(Filter(is_tensor, args))
  }
  if (!is.null(state$model)) {
    n <- length(state$notes$slots)
    # Parameters go over in the dtype the inputs make the program compute in (float64 tensors:
    # float64), so a model called on float64 tensors is not rounded through float32.
    dt <- trace_dtype(state, args[seq_len(length(args) - n)], device)
    args[length(args) - n + seq_len(n)] <- device_parameters(state, args[length(args) - n + seq_len(n)], device,
                                                             if (dt == "f64") "float64" else "float32")
  }
  je <- jit_entry(state, args, trace_dtype(state, args, device))
  tr <- je$entry$trace
  inputs <- call_inputs(tr, je$args)
  values <- inputs$values
  for (i in seq_along(values)) if (is_tensor(values[[i]])) values[[i]] <- attr(values[[i]], "env")$buf
  outs <- .rf_run_tensors(je$entry$program, values, inputs$dtypes, device, NULL)
  if (inherits(outs, "rfuse_failure")) rf_abort(outs[[1]], outs[[2]])
  collect_if_pressed(outs)
  n_main <- length(tr$out$ids)
  rdtypes <- je$entry$rdtypes %||% r_dtype(tr$out$dtypes)
  main <- vector("list", n_main)
  for (k in seq_len(n_main))
    main[[k]] <- make_tensor(buf = outs[[k]], dtype = rdtypes[k], device = device, rdim = tr$out$rdims[[k]],
                             len = tr$out$lens[k])
  if (length(outs) > n_main) { # auxiliary outputs (batch statistics, checks) update R state: as R values
    all_outs <- c(main, lapply(outs[-seq_len(n_main)], function(b) rf_guard(.rf_tensor_to_r(b, NULL))))
    if (!is.null(why <- failed_check(tr, all_outs, n_main)))
      rf_abort("rfuse_unsupported", paste0("the inputs of this call ", why, ", which the compiled program does not reproduce"))
    apply_aux(tr, all_outs, n_main)
  }
  if (tr$out$single && n_main == 1) {
    record_fast_call(state, args, je, inputs$dtypes, device, rdtypes[1])
    return(main[[1]])
  }
  fill_outputs(tr$out, main)
}

# Records a call that the fast path (fastcall.cpp) can repeat: every argument an rf_tensor, a
# single result, and nothing R does around the program run (random inputs, batch statistics,
# warnings, numbers read from outside, static arguments, label checks).
record_fast_call <- function(state, args, je, dtypes, device, rdtype) {
  tr <- je$entry$trace
  n_params <- if (is.null(state$model)) 0L else length(state$notes$slots)
  user <- args[seq_len(length(args) - n_params)]
  if (autocast_active() || length(tr$random) || length(tr$aux) || length(tr$warnings) || length(je$entry$captures) || length(tr$label_checks) ||
      length(state$static) || length(state$notes$auto_static) || !all(vapply(user, is_tensor, TRUE)))
    return(invisible())
  nms <- names(user)
  if (!is.null(nms) && !any(nzchar(nms))) nms <- NULL
  # A model's parameters: where each lives, the R object it is now, and its device tensor in this
  # call (the fast path reuses the tensor while the module holds that same object).
  # Parameters an optimizer took are tensors whose values change in place (same R object, new
  # buffer), which the fast path's identity test would not see: such models take the R path.
  if (any(vapply(state$notes$slots[seq_len(n_params)], function(s) is_tensor(get(s[[2]], envir = s[[1]])), TRUE)))
    return(invisible())
  slots <- lapply(seq_len(n_params), function(i) {
    s <- state$notes$slots[[i]]
    list(s[[1]], s[[2]], get(s[[2]], envir = s[[1]]), tensor_buffer(args[[length(user) + i]]))
  })
  rdim <- tr$out$rdims[[1]]
  .rf_fast_record(state$fast, nms, user, slots, .rf_counters$module_version %||% 0, je$entry$program,
                  as.integer(tr$input_index - 1L), dtypes, device, rdtype, device,
                  if (is.null(rdim)) NULL else as.integer(rdim), as.double(tr$out$lens[1]))
}

# Results that are dropped wait for R's garbage collector to give their memory back; R does not
# see device memory, so after every few hundred megabytes of new tensors (the runtime counts
# them) a minor collection runs: the dropped results of earlier calls go back to the allocator's
# cache, and the next calls reuse them instead of asking the driver.
collect_if_pressed <- function(outs) if (isTRUE(attr(outs, "collect"))) gc(verbose = FALSE, full = FALSE)

# A model's parameters as tensors on `device`, made once per parameter object.
device_parameters <- function(state, params, device, dtype = "float32") {
  cache <- state$notes$device_params
  if (is.null(cache) || cache$device != device || !identical(cache$dtype, dtype))
    cache <- list(device = device, dtype = dtype, objs = list(), tensors = list())
  out <- vector("list", length(params))
  for (i in seq_along(params)) {
    p <- params[[i]]
    if (is_tensor(p)) { out[[i]] <- p; next }
    if (i <= length(cache$objs) && identical(cache$objs[[i]], p)) { out[[i]] <- cache$tensors[[i]]; next }
    cache$objs[i] <- list(p)
    cache$tensors[i] <- list(rf_tensor(state_value(p), dtype = dtype, device = device))
    out[[i]] <- cache$tensors[[i]]
  }
  state$notes$device_params <- cache
  out
}

#' @export
print.rf_jit_function <- function(x, ...) {
  st <- attr(x, "rfuse")
  cat(sprintf("<rfuse jitted function: dtype %s, pipeline '%s', %d compiled signature(s)>\n",
              if (is.null(st$dtype)) "float64 on the CPU, float32 on the GPU" else if (st$dtype == "f32") "float32" else "float64", st$pipeline,
              length(ls(st$cache, all.names = TRUE))))
  print(st$f)
  invisible(x)
}

#' Show what rfuse makes of a function
#'
#' Traces and compiles `f` for the given arguments (without running it) and returns the IR
#' before and after fusion, the generated kernels and the library calls.
#'
#' @param f A function or an [rf_jit()] function.
#' @param ... Arguments as you would pass them to `f`.
#' @param pipeline Fusion pipeline (for a function not yet jitted; a jitted `f` keeps its own).
#' @param after_each_pass `TRUE`: also return `passes`, a named list of the module's text after
#'   each pass of the pipeline, then after the lowering stages (`rfuse-emit-cuda`,
#'   `rfuse-lower-kernels-to-cpu`), named `"01 inline"`, `"02 canonicalize"`, ...
#' @return A list with `traced` and `fused` (MLIR text), `kernels` (named character vector: the
#'   generated CUDA C++ source of each kernel, generated with or without a GPU),
#'   `kernel_names` (the outlined kernel functions, named by kind), `library_calls`
#'   (character: the cuBLASLt/cuDNN calls), `gpu_fallbacks` (steps that would run on the host
#'   on a GPU, with the reason), `gpu_plan` (the GPU execution plan, a line per step: launch
#'   grid, block and vector width, or the cuBLASLt / cuDNN call and its epilogue, for the GPU
#'   at hand or an sm_90 with 132 SMs), `cpu_steps` (how each step runs on the CPU backend: compiled,
#'   BLAS, or interpreted with the reason), and the cost model's `kernel_count` and
#'   `bytes_moved`.
#' @examples
#' x <- matrix(runif(6), 2)
#' ex <- rf_explain(function(x) { e <- exp(x); e / rowSums(e) }, x)
#' cat(ex$fused)
#' ex$kernel_count
#' @export
rf_explain <- function(f, ..., pipeline = "default", after_each_pass = FALSE) {
  if (inherits(f, "rf_jit_function") && !missing(pipeline))
    rf_abort("rfuse_error", "`pipeline` is given to rf_jit() for a jitted function, not to rf_explain()")
  if (!is.logical(after_each_pass) || length(after_each_pass) != 1 || is.na(after_each_pass))
    rf_abort("rfuse_error", "`after_each_pass` must be TRUE or FALSE")
  jf <- if (inherits(f, "rf_jit_function")) f else rf_jit(f, pipeline = pipeline)
  state <- attr(jf, "rfuse")
  je <- jit_entry(state, with_parameters(state, list(...)))
  program <- je$entry$program
  if (after_each_pass) program <- rf_guard(.rf_compile(je$entry$trace$text, state$pipeline, TRUE))
  info <- rf_guard(.rf_program_info(program))
  out <- list(traced = info$traced, fused = info$fused, kernels = info$cuda,
       kernel_names = info$kernels, library_calls = info$library_calls,
       gpu_fallbacks = info$gpu_fallbacks, gpu_plan = info$gpu_plan, cpu_steps = info$cpu_steps,
       kernel_count = info$kernel_count, bytes_moved = info$bytes_moved,
       pipeline = info$pipeline)
  if (after_each_pass) out$passes <- as.list(info$passes)
  out
}

#' rfuse's compile cache
#'
#' `rf_cache_info()` reports how many programs are cached in this session and how many calls
#' compiled versus hit the cache; `rf_cache_clear()` empties every cache, the process's compiled-code
#' caches with them, and runs `gc()`. Each jitted function keeps at most
#' `getOption("rfuse.cache_limit", 64)` signatures, the least recently used dropped (with one
#' warning of class `rfuse_recompile_warning` when a compiled one goes; a batch size made from
#' a dynamic-shape template is made again without compiling).
#'
#' Compiled programs (the IR after the pass pipeline) are also kept on disk, under
#' `rf_options()`'s `cache_dir` with the GPU kernels and the CPU backend's compiled functions
#' (object code for this machine's CPU), keyed by the traced program, the pipeline and rfuse's
#' build: a new R session that traces the same function runs no passes, its GPU kernels come from
#' the kernel cache (no NVRTC) and its CPU functions from their objects (no LLVM codegen).
#'
#' @return `rf_cache_info()`: a list with `programs` (cached in this session), `compiles`
#'   (signatures traced and compiled), `hits`, and this process's `pass_runs` (programs whose pass
#'   pipeline ran), `disk_hits` (programs read back from the disk cache instead),
#'   `specializations` (programs made for a batch size from a dynamic-shape template, see
#'   [rf_jit()]'s `dynamic`), `nvrtc_compiles`, `llvm_compiles` (LLVM codegen runs) and `llvm_disk_hits` (CPU functions
#'   loaded from the disk cache instead), and `seconds`: where first calls' time went in this
#'   process (wall seconds, summed) --- `trace` (running R code to record programs), `program`
#'   (reading compiled programs from the disk cache, or running the pass pipeline), `plan`
#'   (planning their steps) and `load` (preparing a program for its device on its first run:
#'   kernels loaded, the CPU backend's functions compiled or read back) and `library` (the first
#'   run of each cuBLASLt product and cuDNN convolution: its algorithm chosen, the library's
#'   kernels loaded).
#'   `rf_cache_clear()`: the number of programs removed, invisibly.
#' @examples
#' rf_cache_info()
#' @export
rf_cache_info <- function() {
  # A jitted function's finalizer may drop its cache meanwhile (a collection can run at any
  # allocation): an id whose cache is gone counts nothing.
  programs <- sum(vapply(ls(.rf_caches), function(id) {
    e <- .rf_caches[[id]]
    if (is.null(e)) 0L else length(ls(e, all.names = TRUE))
  }, integer(1)))
  counts <- .rf_compile_counts()
  list(programs = programs, compiles = .rf_counters$compiles, hits = .rf_counters$hits + .rf_fast_hits(),
       pass_runs = counts[["pass_runs"]], disk_hits = counts[["disk_hits"]],
       specializations = counts[["specializations"]],
       nvrtc_compiles = counts[["nvrtc_compiles"]], llvm_compiles = counts[["llvm_compiles"]],
       llvm_disk_hits = counts[["llvm_disk_hits"]],
       seconds = c(trace = .rf_counters$trace_seconds, program = counts[["program_seconds"]],
                   plan = counts[["plan_seconds"]], load = counts[["load_seconds"]],
                   library = counts[["library_seconds"]]))
}

#' @rdname rf_cache_info
#' @export
rf_cache_clear <- function() {
  n <- rf_cache_info()$programs
  for (id in ls(.rf_caches)) {
    e <- .rf_caches[[id]]
    if (!is.null(e)) rm(list = ls(e, all.names = TRUE), envir = e)
  }
  for (nm in ls(eager_cache)) { # rfuse's own eager programs too
    st <- attr(eager_cache[[nm]], "rfuse")
    rm(list = ls(st$cache, all.names = TRUE), envir = st$cache)
  }
  .rf_fast_forget() # and the fast path's records of them
  .rf_clear_compiled_caches()
  gc(verbose = FALSE) # the programs' finalizers give their memory back to the allocators,
  .rf_release_cached_memory() # which give it back to the system
  invisible(n)
}

#' The device rfuse runs on
#'
#' `"cuda"` when a usable NVIDIA GPU is found (driver, device and NVRTC; the CUDA libraries are
#' loaded on first use, so machines without them work unchanged), else `"cpu"`.
#' `options(rfuse.device = "cpu")` forces the CPU. On the GPU, fused kernels are generated CUDA
#' C++ compiled with NVRTC, matrix products run through cuBLASLt and convolutions through cuDNN;
#' on the CPU fused regions are compiled through MLIR and LLVM (products and convolutions through
#' the BLAS R uses), and what the CPU backend does not compile runs on the reference interpreter.
#'
#' @return `"cpu"` or `"cuda"`; its attribute `"description"` names the GPU (or why there is none).
#' @examples
#' rf_default_device()
#' @export
rf_default_device <- function() structure(current_device(), description = .rf_device_description())

# Where a call on `args` runs: its rf_tensors' device, else the session's.
call_device <- function(args) {
  tensors <- Filter(is_tensor, args)
  if (length(tensors)) common_device(tensors) else current_device()
}

current_device <- function() {
  if (identical(getOption("rfuse.device"), "cpu")) return("cpu")
  .rf_counters$device %||% (.rf_counters$device <- .rf_device()) # probed once per session
}
