#' rfuse's settings
#'
#' `rf_options()` lists every setting with its value; `rf_options(name = value, ...)` changes
#' settings and returns their previous values, invisibly, so that `old <- rf_options(...)` then
#' `rf_options(old)` (or `do.call(rf_options, old)`) restores them. A setting applies from the
#' next call of a compiled function on; settings that steer code generation (`row_*`, `lt_*`)
#' apply to programs compiled after the change (see [rf_cache_clear()]).
#'
#' Each setting is also read once, when rfuse first needs it, from its environment variable
#' (`RFUSE_CUDA_GRAPH=0`, ...), and from `options(rfuse.<name> = value)` when the package loads
#' and before each compile (`options(rfuse.device = "cpu")` and `options(rfuse.detect_anomaly =
#' TRUE)` are the R package's own, read by every call). [rf_option_table()] lists the settings, their variables, accepted
#' values and defaults. The R package keeps TF32 matrix products off unless asked
#' (`tf32 = TRUE`, or `RFUSE_ALLOW_TF32=1`).
#'
#' @param ... `name = value` pairs (logical, integer or character values of length one), or one
#'   list of them (as `rf_options()` returned).
#' @return Without arguments: a named list of every setting's value. With arguments: the previous
#'   values of the settings changed, invisibly.
#' @section Errors: an unknown name or a value a setting does not accept raises a condition of
#'   class `rfuse_option_error` naming the setting and what it accepts; nothing is changed then.
#' @examples
#' rf_options()$cuda_graphs
#' old <- rf_options(cpu_threads = 1L)
#' rf_options(old)
#' @export
rf_options <- function(...) {
  args <- list(...)
  if (length(args) == 1L && is.null(names(args)) && is.list(args[[1]])) args <- args[[1]]
  table <- rf_option_table()
  current <- stats::setNames(lapply(seq_len(nrow(table)), function(i) typed_option(table[i, ])), table$name)
  if (!length(args)) return(current)
  nm <- names(args)
  if (is.null(nm) || any(!nzchar(nm)))
    rf_abort("rfuse_option_error", "rf_options() takes name = value pairs, e.g. rf_options(tf32 = TRUE)")
  unknown <- setdiff(nm, table$name)
  if (length(unknown))
    rf_abort("rfuse_option_error", sprintf("unknown rfuse option%s %s; the options are: %s",
                                           if (length(unknown) > 1) "s" else "",
                                           paste0("'", unknown, "'", collapse = ", "),
                                           paste(table$name, collapse = ", ")))
  text <- vapply(nm, function(n) option_text(n, args[[n]], table), "")
  old <- current[nm]
  for (n in nm) rf_guard(.rf_option_set(n, text[[n]]))
  if (any(c("device", "disable_cuda") %in% nm)) .rf_counters$device <- NULL # probe again
  invisible(old)
}

#' @rdname rf_options
#' @return `rf_option_table()`: a data frame with each setting's `name`, `environment` variable,
#'   `accepted` values, `default`, current `value` (as text) and `description`.
#' @export
rf_option_table <- function() rf_guard(.rf_option_table())

typed_option <- function(row) {
  if (row$accepted == "TRUE, FALSE") return(row$value == "TRUE")
  if (startsWith(row$accepted, "an integer")) return(as.integer(row$value))
  row$value
}

option_text <- function(name, value, table) {
  accepted <- table$accepted[table$name == name]
  if (length(value) != 1L || !is.atomic(value) || is.na(value))
    rf_abort("rfuse_option_error", sprintf("rfuse option '%s' takes one value (%s), not %s", name, accepted,
                                           paste(deparse(value, width.cutoff = 40L), collapse = " ")))
  if (accepted == "TRUE, FALSE") {
    if (!is.logical(value))
      rf_abort("rfuse_option_error", sprintf("rfuse option '%s' takes TRUE or FALSE, not %s", name,
                                             deparse(value)))
    return(if (value) "1" else "0")
  }
  if (startsWith(accepted, "an integer")) {
    if (!is.numeric(value) || value != round(value))
      rf_abort("rfuse_option_error", sprintf("rfuse option '%s' takes %s, not %s", name, accepted, deparse(value)))
    return(format(value, scientific = FALSE))
  }
  if (!is.character(value))
    rf_abort("rfuse_option_error", sprintf("rfuse option '%s' takes %s, not %s", name, accepted, deparse(value)))
  value
}

.rf_r_options <- c("device", "detect_anomaly", "cache_limit", "recompile_limit", "data_budget")

# options(rfuse.<name> = value): applied when the package loads and before each compile.
apply_r_options <- function() {
  given <- names(options())
  # rfuse.device, rfuse.detect_anomaly, rfuse.cache_limit, rfuse.recompile_limit and rfuse.data_budget are the R package's own.
  given <- setdiff(substring(given[startsWith(given, "rfuse.")], 7L), .rf_r_options)
  if (length(given)) {
    names <- rf_option_table()$name
    unknown <- setdiff(given, names)
    if (length(unknown))
      rf_abort("rfuse_option_error", sprintf("unknown rfuse option%s %s in options(); the options are: %s",
                                             if (length(unknown) > 1) "s" else "",
                                             paste0("'rfuse.", unknown, "'", collapse = ", "),
                                             paste(names, collapse = ", ")))
    rf_options(stats::setNames(lapply(given, function(n) getOption(paste0("rfuse.", n))), given))
  }
  invisible()
}
