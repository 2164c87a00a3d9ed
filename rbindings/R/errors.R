# Classed conditions. Every error rfuse raises inherits from "rfuse_error"; the specific classes
# are rfuse_unsupported, rfuse_shape_error, rfuse_type_error, rfuse_trace_error, rfuse_format_error (a file that is not what it claims),
# rfuse_compile_error, rfuse_runtime_error and rfuse_index_error (a position out of range).

rf_abort <- function(class, message, call = NULL) {
  stop(structure(class = c(class, "rfuse_error", "error", "condition"),
                 list(message = message, call = call)))
}

# The C++ glue's failures (src/glue.h's fail()): a classed condition whose call is the R call a
# traced op came from (emit sets .rf_state$glue_call around its glue call), or none.
rf_glue_failure <- function(class, text) {
  call <- .rf_state$glue_call
  .rf_state$glue_call <- NULL
  rf_abort(class, text, call)
}

# Runs `expr` (a call into the C++ glue, whose failures are classed conditions already) and names
# `call` in the condition that has no call. Without a call, nothing to add: no handler (tracing
# makes hundreds of glue calls).
rf_guard <- function(expr, call = NULL) {
  if (is.null(call)) return(expr)
  tryCatch(expr, rfuse_error = function(e) {
    if (is.null(conditionCall(e))) e$call <- call
    stop(e)
  })
}

# The condition class and text of the glue's "rfuse_class: text" messages; NULL for others.
classed_failure <- function(msg) {
  m <- regmatches(msg, regexec("^(rfuse_[a-z_]+): (.*)$", msg))[[1]]
  if (length(m) == 3) list(class = m[2], text = m[3])
}

# A call as text for messages and source locations: sub-calls nested deeper than `depth` show
# as `...`, so the text of each op of a deeply nested expression costs O(1), not its whole depth
# (deparsing every op's full call made tracing quadratic).
call_text <- function(call, depth = 3L) {
  e <- .rf_shorten_call(call, depth)
  # (deparse's own default for `backtick`, without mode(): half of deparse's time for a call)
  paste(deparse(e, width.cutoff = 60L, backtick = is.call(e) || is.expression(e) || is.function(e), nlines = 3L),
        collapse = " ")
}

rf_unsupported <- function(fname, call = NULL, why = "it is not supported by rfuse yet") {
  where <- if (is.null(call)) "" else paste0(" in `", call_text(call), "`")
  rf_abort("rfuse_unsupported",
           sprintf("rfuse cannot trace `%s()`%s: %s", fname, where, why), call)
}

rf_shape_error <- function(message, call = NULL) rf_abort("rfuse_shape_error", message, call)

# Trained values (rf_fit's deferred parameters) that could not be read from their tensor when R
# first asked for them; `message` is the runtime's ("class: text").
deferred_values_failed <- function(message) {
  f <- classed_failure(message) %||% list(class = "rfuse_error", text = message)
  rf_abort(f$class, paste("the trained values of a parameter could not be read from the device:", f$text))
}
