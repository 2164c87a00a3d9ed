#' Export a compiled function or model, and load it back without compiling
#'
#' `rf_export()` traces and compiles `f` (a function from [rf_jit()], or an `nn_module`) for the
#' example inputs in `...`, and writes the result as one ahead-of-time artifact at `path`: the
#' execution plan for each GPU architecture in `archs`, the kernels as cubins (plus PTX of the
#' newest, which the driver compiles for newer GPUs), constants, and the R call's signature. A
#' model's parameters and buffers are stored in it as they are now (a model exports in
#' `$eval()` mode: batch statistics are not updated by an artifact).
#'
#' `rf_load_compiled()` loads such a file through rfuse's runtime library (rfuse_rt, which has
#' no tracer and no compiler: no MLIR, LLVM or NVRTC) and returns a function taking the same
#' arguments as the exported call, of the same shapes, and returning what it returned. The same
#' file runs without R through `rfuse-aot-run` or rfuse_rt's C API (`rfuse/rfuse_rt.h`).
#'
#' A loaded function runs on the GPU when there is one (and the artifact has code for it), else
#' on the CPU program. What R does differently from the compiled program is refused rather
#' than run: a function whose trace draws random numbers, checks its values at each call (e.g.
#' `which.max`) or updates R state (batch norm in training mode) does not export
#' (`rfuse_unsupported`), and a loaded function given `NA` values (or `NaN`, where R's answer
#' would differ) stops with `rfuse_unsupported` instead of answering differently from R.
#'
#' @param f A function from [rf_jit()], or an `nn_module` (jitted for the export).
#' @param path The file to write (by convention `*.rfuse`); written whole or not at all.
#' @param ... Example arguments, as `f` is called (their shapes and types are the artifact's).
#' @param archs GPU architectures to compile for.
#' @param ptx Also store PTX of the newest architecture, for GPUs newer than every one in `archs`.
#' @param cpu Also store a program for the host CPU (its kernels compiled for this machine's CPU
#'   and linked into a shared library with the system's C compiler, which exporting then needs):
#'   `rf_load_compiled()` runs it where there is no GPU. `archs = character()` exports for the CPU
#'   alone (traced in float64, as `rf_jit` computes on the CPU; with GPUs, float32).
#' @return `rf_export()`: invisibly, a list with the architectures, the number of kernels and
#'   steps and the file's size in bytes. `rf_load_compiled()`: a function of class
#'   `rf_compiled_function`.
#' @examples
#' \dontrun{
#' f <- rf_jit(function(x, w) tanh(x %*% w))
#' rf_export(f, "f.rfuse", matrix(rnorm(64), 8), matrix(rnorm(32), 8))
#' g <- rf_load_compiled("f.rfuse") # in any R session with a GPU
#' g(matrix(rnorm(64), 8), matrix(rnorm(32), 8))
#' }
#' @export
rf_export <- function(f, path, ..., archs = c("sm_86", "sm_89", "sm_90"), ptx = TRUE, cpu = TRUE) {
  if (inherits(f, "nn_module")) f <- rf_jit(f)
  state <- if (inherits(f, "rf_jit_function")) attr(f, "rfuse")
  if (is.null(state))
    rf_abort("rfuse_type_error", "rf_export() takes a function from rf_jit() or an nn_module")
  if (!is.character(path) || length(path) != 1 || is.na(path) || !nzchar(path))
    rf_abort("rfuse_type_error", "`path` must be one file name")
  if (!is.character(archs) || anyNA(archs) || !all(grepl("^sm_[0-9]+$", archs)))
    rf_abort("rfuse_type_error", "`archs` must name GPU architectures such as \"sm_90\" (or be character(0))")
  if (!is.logical(ptx) || length(ptx) != 1 || is.na(ptx)) rf_abort("rfuse_type_error", "`ptx` must be TRUE or FALSE")
  if (!is.logical(cpu) || length(cpu) != 1 || is.na(cpu)) rf_abort("rfuse_type_error", "`cpu` must be TRUE or FALSE")
  if (!length(archs) && !cpu) rf_abort("rfuse_type_error", "an artifact for no GPU (`archs`) and not the CPU holds nothing")
  user <- list(...)
  if (!length(user)) rf_abort("rfuse_type_error", "rf_export() needs example arguments to trace `f` with")
  for (i in seq_along(user)) if (is_tensor(user[[i]]))
    rf_abort("rfuse_type_error", sprintf("example argument %d is an rf_tensor: pass R arrays (as.array())", i))
  if (!is.null(state$model) && isTRUE(attr(state$model, "self")$training))
    rf_abort("rfuse_unsupported", "the model is in training mode: call $eval() before rf_export()")
  args <- with_parameters(state, user)
  # One program for every target: traced in the GPU's default float dtype (float32) when it is
  # for GPUs, else in the CPU's (float64); rf_jit(f, dtype = ) decides otherwise.
  je <- jit_entry(state, args, trace_dtype(state, args, if (length(archs)) "cuda" else "cpu"))
  tr <- je$entry$trace
  refuse <- function(why) rf_abort("rfuse_unsupported", sprintf("this function cannot be exported: %s", why))
  if (length(tr$random)) refuse("it draws random numbers at each call")
  if (length(tr$aux)) refuse("it checks its values or updates R state at each call (batch statistics, which.max, ...)")
  n_user <- length(user)
  signature <- list(
    format = 1L, n_args = n_user, arg_names = names(user),
    parameters = if (n_user < length(args)) unname(args[-seq_len(n_user)]),
    input_index = tr$input_index, input_dtypes = tr$input_dtypes, input_rdims = lapply(args[tr$input_index], dim),
    input_lens = vapply(args[tr$input_index], length, 1),
    int_guard = tr$int_guard, label_checks = tr$label_checks, warnings = tr$warnings,
    na_sensitive = je$entry$na_sensitive %||% "", out = tr$out)
  meta <- serialize(signature, NULL, xdr = TRUE)
  invisible(rf_guard(.rf_export_program(je$entry$program, path.expand(path), archs, ptx, cpu, list("r/signature.rds" = meta))))
}

#' @rdname rf_export
#' @export
rf_load_compiled <- function(path) {
  if (!is.character(path) || length(path) != 1 || is.na(path))
    rf_abort("rfuse_type_error", "`path` must be one file name")
  loaded <- rf_guard(.rf_load_artifact(path.expand(path)))
  sig <- artifact_signature(loaded, path)
  if (identical(sig$kind, "training step"))
    rf_abort("rfuse_artifact_error", sprintf(
      "%s holds a training step: train with it through rf_fit(..., compiled = ) or rf_train(..., compiled = )", path))
  handle <- loaded$handle
  f <- function(...) {
    user <- list(...)
    if (length(user) != sig$n_args)
      rf_abort("rfuse_type_error", sprintf("this compiled function takes %d arguments, got %d", sig$n_args, length(user)))
    args <- c(user, sig$parameters)
    values <- args[sig$input_index]
    for (k in seq_along(values)) {
      v <- values[[k]]
      if (is_tensor(v)) v <- values[[k]] <- as.array(v)
      what <- sprintf("argument %d", sig$input_index[k])
      if (!is.numeric(v) && !is.logical(v)) rf_abort("rfuse_type_error", sprintf("%s is not numbers", what))
      if (!identical(dim(v), sig$input_rdims[[k]]) || length(v) != sig$input_lens[k])
        rf_abort("rfuse_shape_error", sprintf("%s has dims %s; the compiled function takes %s", what,
                                              dims_text(dim(v), length(v)), dims_text(sig$input_rdims[[k]], sig$input_lens[k])))
      if ((sig$na_sensitive == "nan" && anyNA(v)) || has_true_na(list(v)))
        rf_abort("rfuse_unsupported", sprintf("%s holds NA values, which the compiled program does not treat as R does", what))
    }
    check_traced_labels(sig, args)
    if (!is.null(sig$int_guard) && !int_guard_holds(sig$int_guard, args))
      rf_abort("rfuse_unsupported", "these integer arguments could take R's integers out of their range (or divide one by 0) in the compiled program")
    outs <- rf_guard(.rf_run_artifact(handle, unname(values)))
    for (k in seq_along(outs)) if (!is.null(d <- sig$out$rdims[[k]])) dim(outs[[k]]) <- d
    for (k in which(sig$out$int)) storage.mode(outs[[k]]) <- "integer"
    for (k in seq_along(sig$out$attrs)) if (length(a <- sig$out$attrs[[k]])) attributes(outs[[k]]) <- c(attributes(outs[[k]]), a)
    for (w in sig$warnings) warning(w, call. = FALSE)
    fill_outputs(sig$out, outs)
  }
  structure(f, class = c("rf_compiled_function", "function"), description = loaded$description, path = path)
}

# The R signature an artifact loaded by .rf_load_artifact() holds (a classed error when it has none
# or one this rfuse cannot read).
artifact_signature <- function(loaded, path) {
  if (!length(loaded$signature))
    rf_abort("rfuse_artifact_error", sprintf("%s was not exported from R (no R signature): run it with rfuse-aot-run", path))
  sig <- tryCatch(unserialize(loaded$signature), error = function(e)
    rf_abort("rfuse_artifact_error", sprintf("%s has an unreadable R signature: %s", path, conditionMessage(e))))
  if (!identical(sig$format, 1L))
    rf_abort("rfuse_artifact_error", sprintf("%s has an R signature of another rfuse version", path))
  sig
}

# A training loop's step kept in an artifact (rf_train(compiled = path)): loaded from `path` when
# the file exists, after checking that it was exported for a call like this one (`key`: the
# parameters', data batches' and buffers' names, dtypes and dims, the optimizer's settings, the
# precision); else made (`make()`: traced and compiled) and exported there. With `make_tail` (the
# epoch's smaller last batch) the file holds that step too, as an artifact inside its metadata
# ("r/tail.rfuse"). Returns what grad_entry() does for each (`main`, `tail`): the program (here a
# loaded artifact's handle, which the training loop runs as it runs a compiled program) and the
# parts of the trace the loop reads.
compiled_step <- function(path, key, make, device, make_tail = NULL) {
  file <- path.expand(path)
  if (file.exists(file)) {
    loaded <- rf_guard(.rf_load_artifact(file))
    sig <- artifact_signature(loaded, path)
    if (!identical(sig$kind, "training step"))
      rf_abort("rfuse_artifact_error", sprintf("%s holds a compiled function, not a training step (rf_load_compiled() runs it)", path))
    on_gpu <- startsWith(loaded$description, "cuda")
    if (on_gpu != (device == "cuda"))
      rf_abort("rfuse_artifact_error", sprintf("the training step in %s runs on the %s here (%s), but this loop trains on the %s",
                                               path, if (on_gpu) "GPU" else "CPU", loaded$description,
                                               if (device == "cuda") "GPU" else "CPU"))
    why <- key_difference(sig$key, key)
    if (!is.null(why))
      rf_abort("rfuse_artifact_error", sprintf(
        "the training step in %s was exported for another call: %s (remove the file to compile this call's step there)", path, why))
    tail <- NULL
    if (!is.null(make_tail)) {
      name <- sprintf("%s (the last batch's step)", path)
      bytes <- rf_guard(.rf_artifact_metadata(loaded$handle, "r/tail.rfuse"))
      if (is.null(bytes)) rf_abort("rfuse_artifact_error", sprintf("%s has no step for the epoch's last batch", path))
      inner <- rf_guard(.rf_load_artifact_memory(bytes, name))
      tail <- list(program = inner$handle, trace = artifact_signature(inner, name)$trace)
    }
    return(list(main = list(program = loaded$handle, trace = sig$trace), tail = tail))
  }
  steps <- list(main = make(), tail = if (!is.null(make_tail)) make_tail())
  for (entry in Filter(Negate(is.null), steps))
    if (any(vapply(entry$trace$aux, function(a) is.null(a$replaces), TRUE)))
      rf_abort("rfuse_unsupported", paste0("this training step cannot be exported: R updates its batch norms' running ",
                                           "statistics after each step (momentum = NULL)"))
  archs <- if (device == "cuda") .rf_sitrep_info()$arch else character()
  signature <- function(entry) serialize(list(format = 1L, kind = "training step", key = key,
                                              trace = entry$trace[c("input_index", "input_ids", "random", "label_checks", "aux")]),
                                         NULL, xdr = TRUE)
  meta <- list("r/signature.rds" = signature(steps$main))
  if (!is.null(steps$tail)) { # written alone first, then kept inside the main artifact
    inner <- tempfile(fileext = ".rfuse")
    on.exit(unlink(inner), add = TRUE)
    rf_guard(.rf_export_program(steps$tail$program, inner, archs, TRUE, device != "cuda",
                                list("r/signature.rds" = signature(steps$tail))))
    meta[["r/tail.rfuse"]] <- readBin(inner, "raw", file.size(inner))
  }
  rf_guard(.rf_export_program(steps$main$program, file, archs, TRUE, device != "cuda", meta))
  steps
}

# What a training step's key (see train_loop) says of its call: parameter, data and buffer names,
# dtypes and dims, and the step's settings.
step_key <- function(mode, dtype, params, batch, buffers, last_batch = NULL) {
  shapes <- function(ts) lapply(ts, function(t) list(dtype = t@env$dtype, dim = t@env$rdim, length = t@env$len))
  list(dtype = dtype, settings = mode[c("optimizer", "momentum", "weight_decay", "betas", "eps", "tf32", "autocast",
                                       "loss_scale", "all_reduce")],
       params = shapes(params), data = shapes(batch), buffers = shapes(buffers),
       last_batch = if (!is.null(last_batch)) shapes(last_batch))
}

# The first way `now` differs from `saved` (two step keys), in words; NULL when they agree.
key_difference <- function(saved, now, where = character()) {
  name <- function() if (length(where)) paste(where, collapse = " ") else "the call"
  text <- function(v) if (is.null(v)) "none" else if (is.list(v)) "one" else if (is.numeric(v) && length(v) > 1)
    paste0("c(", paste(v, collapse = ", "), ")") else paste(deparse(v, width.cutoff = 500L), collapse = "")
  if (is.list(saved) && is.list(now)) {
    if (!identical(names(saved), names(now)))
      return(sprintf("%s: %s there, %s here", name(), text(names(saved)), text(names(now))))
    if (length(saved) != length(now))
      return(sprintf("%s: %d entries there, %d here", name(), length(saved), length(now)))
    for (k in if (is.null(names(saved))) seq_along(saved) else names(saved)) {
      why <- key_difference(saved[[k]], now[[k]], c(where, k))
      if (!is.null(why)) return(why)
    }
    return(NULL)
  }
  if (identical(saved, now)) NULL else sprintf("%s: %s there, %s here", name(), text(saved), text(now))
}

dims_text <- function(d, len) if (is.null(d)) sprintf("length %d", as.integer(len)) else paste0("c(", paste(d, collapse = ", "), ")")

#' @export
print.rf_compiled_function <- function(x, ...) {
  cat(sprintf("<rfuse compiled function from %s: %s>\n", attr(x, "path"), attr(x, "description")))
  invisible(x)
}
