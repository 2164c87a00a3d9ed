# Dynamic batch sizes (rf_jit(dynamic =)): one compiled program for every size of the arguments'
# first dimension.
#
# Calls that differ only in that size form a family. Its first two sizes compile as usual; then
# rfuse::BatchTemplate compares the two compiled programs, and when they are one program up to
# the batch size, every later size is traced (the trace says what R computes at that size, and is
# checked against the template's) and made from the template without running the pass pipeline
# or NVRTC: its kernels take the size as an argument (see BatchTemplate in Engine.h).

check_dynamic <- function(dynamic) {
  if (is.null(dynamic) || identical(dynamic, FALSE)) return(dynamic)
  if (isTRUE(dynamic) || identical(dynamic, "batch")) return("batch")
  rf_abort("rfuse_type_error", sprintf(paste0(
    "`dynamic` must be NULL (one program for every batch size once two have been seen), \"batch\" ",
    "(or TRUE: from the first call) or FALSE (a program per size), not %s"),
    paste(deparse(dynamic, width.cutoff = 60L), collapse = " ")))
}

# An argument's first dimension (an array's or tensor's first dim, a plain vector's length when
# it is longer than one; NA when it has none), and whether it has dims.
batch_dim_of <- function(a) {
  if (is_tensor(a)) {
    e <- attr(a, "env")
    if (!is.null(e$rdim)) return(c(as.integer(e$rdim[1]), 1L))
    return(c(if (isTRUE(e$len > 1)) as.integer(e$len) else NA_integer_, 0L))
  }
  if (!(is.numeric(a) || is.logical(a)) || is.object(a) && !is.array(a)) return(c(NA_integer_, 0L))
  d <- dim(a)
  if (!is.null(d)) c(as.integer(d[1]), 1L) else c(if (length(a) > 1) length(a) else NA_integer_, 0L)
}

# The call's batch: its size and which arguments carry it, or NULL when dynamic = FALSE or there
# is none. With arrays among the traced arguments the batch is their first dimension (they must
# agree), and a plain vector carries it only when its length is that size (`w` in f(x, w) is a
# weight vector); without arrays, vectors of one length. (A model's parameters never carry it.)
# A wrong guess costs a compile, never an answer: every made size's trace is checked.
call_batch <- function(state, args, static) {
  if (identical(state$dynamic, FALSE)) return(NULL)
  n_user <- length(args) - if (is.null(state$model)) 0L else length(state$notes$slots)
  dims <- lapply(seq_len(n_user), function(i)
    if (static[i] || is.null(args[[i]])) c(NA_integer_, 0L) else batch_dim_of(args[[i]]))
  first <- vapply(dims, `[`, 0L, 1L)
  arrays <- vapply(dims, `[`, 0L, 2L) == 1L & !is.na(first)
  cand <- if (any(arrays)) first[arrays] else first[!is.na(first)]
  if (!length(cand) || any(cand != cand[1]) || cand[1] < 1) return(NULL)
  carry <- logical(length(args))
  carry[seq_len(n_user)] <- !is.na(first) & first == cand[1]
  list(size = cand[1], carry = carry)
}

# The family of calls that differ from this one only in the batch size (an environment kept in
# the function's notes): members (compiled sizes: list(size, program)), template, refusals.
batch_family <- function(state, key) {
  if (is.null(state$notes$families)) state$notes$families <- new.env(parent = emptyenv())
  fam <- state$notes$families[[key]]
  if (is.null(fam)) {
    fam <- new.env(parent = emptyenv())
    fam$members <- list()
    fam$template <- NULL
    fam$why <- character()
    assign(key, fam, envir = state$notes$families)
  }
  fam
}

# The family's program at `size` for the trace `tr` made at that size, or NULL (no template yet,
# or this trace depends on the size in another way: a compile of its own, noted once).
specialized_program <- function(state, fam, tr, size) {
  if (is.null(fam$template)) return(NULL)
  p <- rf_guard(.rf_specialize(fam$template, tr$text, size))
  if (!is.character(p)) return(p)
  note_dynamic_refusal(state, fam, p)
  NULL
}

# Adds a compiled size to the family and, once two sizes are compiled, tries to make its
# template from them (pairing the new one with each earlier size, newest first).
add_family_member <- function(state, fam, program, size) {
  if (!is.null(fam$template)) return(invisible())
  for (m in rev(fam$members)) {
    if (m$size == size) next
    t <- rf_guard(.rf_batch_template(m$program, m$size, program, size))
    if (!is.character(t)) {
      fam$template <- t
      fam$members <- list()
      return(invisible())
    }
    note_dynamic_refusal(state, fam, t)
  }
  fam$members <- c(fam$members, list(list(size = size, program = program)))
  invisible()
}

# Why a family cannot share one program: with dynamic = "batch" a warning (once per function)
# says so; otherwise it is kept for rf_cache_info() and rf_explain().
note_dynamic_refusal <- function(state, fam, why) {
  fam$why <- unique(c(fam$why, why))
  if (identical(state$dynamic, "batch") && is.null(state$notes$warned_dynamic)) {
    assign("warned_dynamic", TRUE, envir = state$notes)
    warning(structure(class = c("rfuse_dynamic_warning", "warning", "condition"), list(
      message = paste0("rfuse: dynamic = \"batch\": this function does not compile to one program for every ",
                       "batch size (", why, "); each size that differs so compiles a program of its own"),
      call = NULL)))
  }
}

# Arguments like `args` with the batch size `size` instead: what dynamic = "batch" traces a
# second size with (zeros: tracing reads only dims and types).
with_batch_size <- function(args, carry, size) {
  for (i in which(carry)) {
    a <- args[[i]]
    if (is_tensor(a)) {
      e <- attr(a, "env")
      rdim <- e$rdim
      if (!is.null(rdim)) rdim[1] <- size
      len <- if (is.null(rdim)) size else prod(rdim)
      args[[i]] <- make_tensor(buf = rf_guard(.rf_tensor_empty(tshape(rdim, len), ir_dtype(e$dtype), e$device)),
                               dtype = e$dtype, device = e$device, rdim = rdim, len = len)
    } else {
      d <- dim(a)
      z <- vector(typeof(a), if (is.null(d)) size else size * prod(d[-1]))
      if (!is.null(d)) dim(z) <- c(size, d[-1])
      args[[i]] <- z
    }
  }
  args
}
