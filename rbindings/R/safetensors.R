# Weights on disk in the safetensors format (https://github.com/huggingface/safetensors): an
# 8-byte little-endian header length, a JSON header (per tensor its dtype, shape and byte range;
# "__metadata__" a string map), then the tensors' bytes, row-major and little-endian. PyTorch,
# safetensors' Python package and mlverse torch read and write the same files.
#
# An R array of dim d is the torch tensor of shape d (torch for R's convention: x[i, j] is
# t[i, j]), so its row-major bytes are those of aperm(x); a vector of length n is shape [n].

safetensors_dtypes <- c(F64 = 8L, F32 = 4L, F16 = 2L, BF16 = 2L, I64 = 8L, I32 = 4L, I16 = 2L,
                        I8 = 1L, U8 = 1L, BOOL = 1L)

#' Save and load weights as safetensors
#'
#' `rf_save(model, path)` writes a module's parameters and persistent buffers (its
#' `$state_dict()`, under torch's names: `0.weight`, `fc.bias`, `bn.running_mean`, ...) to a
#' [safetensors](https://github.com/huggingface/safetensors) file, which PyTorch and mlverse torch
#' read as well. `rf_load(path)` reads such a file (written by rfuse, PyTorch or anyone) back as
#' a named list of arrays, a state dict: `model$load_state_dict(rf_load(path))`.
#'
#' Arrays are stored as torch tensors of the same shape (an R matrix `w` with `dim(w) = c(3, 4)`
#' is the tensor of size `[3, 4]` with `t[i, j] = w[i, j]`); floating values in `dtype`, R
#' integers as int64, logicals as bool, and batch norm's `num_batches_tracked` as torch's int64
#' scalar. Reading converts every safetensors dtype (F64, F32, F16, BF16, I64, I32, I16, I8, U8,
#' BOOL) to doubles (integers to R integers where they fit, BOOL to logicals). The file is
#' written to a temporary name and renamed, so a reader never sees half of it.
#'
#' @param model An `nn_module` instance, or a named list of numeric or logical arrays.
#' @param path The file to write or read.
#' @param dtype The floating dtype written: `"float32"` (torch's default) or `"float64"`.
#' @param metadata A named character vector stored as the header's `"__metadata__"`, or `NULL`.
#' @return `rf_save()`: `path`, invisibly. `rf_load()`: a named list of arrays, with the file's
#'   metadata as attribute `"metadata"` (or `NULL`).
#' @examples
#' net <- nn_linear(3, 2)
#' path <- tempfile(fileext = ".safetensors")
#' rf_save(net, path)
#' names(rf_load(path))
#' net$load_state_dict(rf_load(path))
#' @export
rf_save <- function(model, path, dtype = c("float32", "float64"), metadata = NULL) {
  call <- sys.call()
  dtype <- match.arg(dtype)
  if (!is.character(path) || length(path) != 1 || is.na(path))
    rf_abort("rfuse_type_error", "'path' must be a single file name", call)
  if (!dir.exists(dirname(path))) rf_abort("rfuse_type_error", sprintf("no directory '%s' to write '%s' in", dirname(path), basename(path)), call)
  state <- if (is_module(model)) model$state_dict()
           else if (is.list(model) && !is.null(names(model)) && all(nzchar(names(model)))) model
           else rf_abort("rfuse_type_error", "rf_save() takes an nn_module or a named list of arrays (a state dict)", call)
  if (anyDuplicated(names(state))) rf_abort("rfuse_type_error", "the state dict's names must be unique", call)
  if (!is.null(metadata) && (!is.character(metadata) || is.null(names(metadata)) || anyNA(metadata)))
    rf_abort("rfuse_type_error", "'metadata' must be a named character vector", call)
  float <- if (dtype == "float32") "F32" else "F64"
  header <- list()
  blobs <- vector("list", length(state))
  offset <- 0
  for (k in seq_along(state)) {
    nm <- names(state)[k]
    v <- state[[k]]
    if (is_tensor(v)) v <- as.array(v)
    v <- state_value(v)
    if (!(is.numeric(v) || is.logical(v)))
      rf_abort("rfuse_type_error", sprintf("state '%s' is %s, not numbers", nm, class(v)[1]), call)
    shape <- dim(v) %||% length(v)
    st <- if (is.logical(v)) "BOOL" else if (is.integer(v)) "I64" else float
    if (grepl("(^|\\.)num_batches_tracked$", nm) && length(v) == 1) { st <- "I64"; shape <- integer() }
    bytes <- encode_tensor(if (length(dim(v)) > 1) aperm(v, rev(seq_along(dim(v)))) else v, st, nm, call)
    header[[nm]] <- list(dtype = st, shape = I(as.numeric(shape)), data_offsets = I(c(offset, offset + length(bytes))))
    blobs[[k]] <- bytes
    offset <- offset + length(bytes)
  }
  if (!is.null(metadata)) header <- c(list(`__metadata__` = as.list(metadata)), header)
  json <- if (length(header)) jsonlite::toJSON(header, auto_unbox = TRUE, digits = NA) else "{}"
  json <- charToRaw(enc2utf8(as.character(json)))
  json <- c(json, rep(charToRaw(" "), (8 - length(json) %% 8) %% 8)) # the data 8-byte aligned
  tmp <- paste0(path, ".tmp-", Sys.getpid())
  con <- file(tmp, "wb")
  on.exit({ close(con); unlink(tmp) })
  writeBin(u64_bytes(length(json)), con)
  writeBin(json, con)
  for (b in blobs) writeBin(b, con)
  close(con)
  on.exit()
  if (!file.rename(tmp, path)) { unlink(tmp); rf_abort("rfuse_runtime_error", sprintf("cannot write '%s'", path), call) }
  invisible(path)
}

#' @rdname rf_save
#' @export
rf_load <- function(path) {
  call <- sys.call()
  if (!is.character(path) || length(path) != 1 || is.na(path))
    rf_abort("rfuse_type_error", "'path' must be a single file name", call)
  bad <- function(why) rf_abort("rfuse_format_error", sprintf("'%s' is not a valid safetensors file: %s", path, why), call)
  if (!file.exists(path)) rf_abort("rfuse_type_error", sprintf("no such file: '%s'", path), call)
  size <- file.size(path)
  if (size < 8) bad("it is shorter than its 8-byte header length")
  con <- file(path, "rb")
  on.exit(close(con))
  n <- sum(as.double(readBin(con, "raw", 8)) * 256^(0:7))
  if (n > size - 8) bad(sprintf("its header length (%.0f bytes) runs past the end of the file (%.0f bytes)", n, size))
  text <- rawToChar(readBin(con, "raw", n))
  header <- tryCatch(jsonlite::fromJSON(text, simplifyVector = FALSE), error = function(e) bad(paste("its header is not JSON:", conditionMessage(e))))
  if (!is.list(header) || (length(header) && is.null(names(header)))) bad("its header is not a JSON object")
  data <- readBin(con, "raw", size - 8 - n)
  meta <- header[["__metadata__"]]
  header[["__metadata__"]] <- NULL
  out <- vector("list", length(header))
  names(out) <- names(header)
  for (nm in names(header)) {
    h <- header[[nm]]
    st <- h$dtype
    if (!is.character(st) || length(st) != 1 || !st %in% names(safetensors_dtypes))
      bad(sprintf("tensor '%s' has dtype %s (rfuse reads %s)", nm, deparse1(st), paste(names(safetensors_dtypes), collapse = ", ")))
    shape <- as.numeric(unlist(h$shape))
    offs <- as.numeric(unlist(h$data_offsets))
    if (length(offs) != 2 || anyNA(shape) || any(shape < 0) || any(shape != floor(shape)))
      bad(sprintf("tensor '%s' has no valid shape and data_offsets", nm))
    count <- prod(shape)
    if (offs[1] < 0 || offs[2] > length(data) || offs[2] - offs[1] != count * safetensors_dtypes[[st]])
      bad(sprintf("tensor '%s' (%s, shape [%s]) has data_offsets [%.0f, %.0f] that do not hold its %.0f bytes within the %.0f of data",
                  nm, st, paste(shape, collapse = ", "), offs[1], offs[2], count * safetensors_dtypes[[st]], length(data)))
    v <- decode_tensor(data[seq_len(offs[2] - offs[1]) + offs[1]], st, count)
    out[[nm]] <- if (length(shape) > 1) aperm(array(v, rev(shape)), rev(seq_along(shape))) else v
  }
  attr(out, "metadata") <- if (!is.null(meta)) unlist(meta)
  out
}

# An unsigned 64-bit integer (< 2^53) as 8 little-endian bytes.
u64_bytes <- function(n) as.raw(floor(n / 256^(0:7)) %% 256)

encode_tensor <- function(v, st, nm, call) {
  v <- as.vector(v)
  switch(st,
    F64 = writeBin(as.double(v), raw(), size = 8, endian = "little"),
    F32 = writeBin(as.double(v), raw(), size = 4, endian = "little"),
    BOOL = {
      if (anyNA(v)) rf_abort("rfuse_type_error", sprintf("state '%s' holds NA, which bool cannot", nm), call)
      as.raw(as.integer(v))
    },
    I64 = {
      v <- as.double(v)
      if (anyNA(v) || any(v != floor(v)) || any(abs(v) >= 2^53))
        rf_abort("rfuse_type_error", sprintf("state '%s' is not all whole numbers below 2^53", nm), call)
      hi <- floor(v / 2^32); lo <- v - hi * 2^32 # two's complement words, exact below 2^53
      hi <- ifelse(hi < 0, hi + 2^32, hi)
      as.vector(rbind(matrix(as.raw(floor(rep(lo, each = 4) / 256^(0:3)) %% 256), 4),
                      matrix(as.raw(floor(rep(hi, each = 4) / 256^(0:3)) %% 256), 4)))
    })
}

decode_tensor <- function(bytes, st, count) {
  if (count == 0) return(if (st == "BOOL") logical() else if (st %in% c("F64", "F32", "F16", "BF16")) numeric() else integer())
  ints <- function(size, signed) {
    v <- readBin(bytes, "integer", n = count, size = size, signed = signed, endian = "little")
    v
  }
  switch(st,
    F64 = readBin(bytes, "double", n = count, size = 8, endian = "little"),
    F32 = readBin(bytes, "double", n = count, size = 4, endian = "little"),
    BF16 = { # the upper half of a float32
      u <- readBin(bytes, "integer", n = count, size = 2, signed = FALSE, endian = "little")
      f <- raw(4 * count)
      f[4 * seq_len(count) - 1] <- as.raw(u %% 256)
      f[4 * seq_len(count)] <- as.raw(u %/% 256)
      readBin(f, "double", n = count, size = 4, endian = "little")
    },
    F16 = {
      u <- readBin(bytes, "integer", n = count, size = 2, signed = FALSE, endian = "little")
      s <- ifelse(u >= 32768, -1, 1); e <- (u %/% 1024) %% 32; m <- u %% 1024
      ifelse(e == 0, s * m * 2^-24, ifelse(e == 31, ifelse(m == 0, s * Inf, NaN), s * (1 + m / 1024) * 2^(e - 15)))
    },
    I64 = {
      w <- matrix(readBin(bytes, "integer", n = 2 * count, size = 4, signed = TRUE, endian = "little"), 2)
      lo <- ifelse(w[1, ] < 0, w[1, ] + 2^32, w[1, ]) # unsigned low word
      v <- lo + w[2, ] * 2^32
      if (all(abs(v) <= .Machine$integer.max)) as.integer(v) else v
    },
    I32 = ints(4, TRUE), I16 = ints(2, TRUE), I8 = ints(1, TRUE), U8 = ints(1, FALSE),
    BOOL = as.logical(as.integer(bytes)))
}
