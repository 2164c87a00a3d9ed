# Data loading in torch-for-R style: datasets and a dataloader that rf_train() / rf_fit() accept.
# A dataloader's data go to the training device once (when they fit its budget); batches are
# then drawn there, in order or shuffled, without the host.

#' Datasets and data loaders
#'
#' `dataset()` makes a dataset generator, as in torch for R: `initialize` sets up `self`,
#' `.getitem(i)` returns sample `i` (a list of arrays, or one array) and `.length()` the number
#' of samples. `tensor_dataset(...)` is a dataset of arrays (or rf_tensors) whose first index is
#' the sample. `dataloader(ds, batch_size, shuffle, drop_last)` batches a dataset for
#' [rf_train()] and [rf_fit()], which move its data to the device once and draw batches there.
#'
#' @param name A class name for the dataset.
#' @param initialize,.getitem,.length Methods (functions of the dataset's arguments, `i`, none),
#'   called with `self` bound to the dataset.
#' @param ... For `tensor_dataset()`: arrays with the same number of samples (first index),
#'   named or not. For a dataset generator: passed to `initialize`.
#' @param dataset A dataset.
#' @param batch_size Samples per batch.
#' @param shuffle Draw the batches of each epoch in a new random order.
#' @param drop_last Drop a last, smaller batch when `batch_size` does not divide the number of
#'   samples (else `rf_fit()` and `rf_train()` train on it too, with a second compiled step).
#' @return `dataset()`: a generator function; calling it gives a dataset (class `rf_dataset`).
#'   `dataloader()`: an `rf_dataloader`.
#' @examples
#' squares <- dataset("squares",
#'   initialize = function(n) self$x <- seq_len(n),
#'   .getitem = function(i) list(x = self$x[i], y = self$x[i]^2),
#'   .length = function() length(self$x))
#' ds <- squares(10)
#' length(ds)
#' dl <- dataloader(tensor_dataset(x = matrix(1:20, 10), y = 1:10), batch_size = 5, shuffle = TRUE)
#' length(dl)
#' @name rf_data
NULL

#' @rdname rf_data
#' @export
dataset <- function(name = NULL, initialize = function(...) NULL, .getitem, .length) {
  force(initialize); force(.getitem); force(.length)
  function(...) {
    self <- new.env(parent = emptyenv())
    bind <- function(f) { environment(f) <- list2env(list(self = self), parent = environment(f)); f }
    self$.getitem <- bind(.getitem)
    self$.length <- bind(.length)
    bind(initialize)(...)
    structure(list(self = self), class = c(name, "rf_dataset"))
  }
}

#' @rdname rf_data
#' @export
tensor_dataset <- function(...) {
  tensors <- list(...)
  if (!length(tensors)) rf_abort("rfuse_type_error", "tensor_dataset() needs at least one array")
  if (is.null(names(tensors))) names(tensors) <- paste0("x", seq_along(tensors))
  n <- vapply(tensors, function(t) if (is_tensor(t)) (t$shape)[1] else NROW(t), 0)
  if (length(unique(n)) != 1)
    rf_abort("rfuse_shape_error", sprintf("tensor_dataset() arrays have different numbers of samples: %s",
                                          paste(n, collapse = ", ")))
  self <- new.env(parent = emptyenv())
  self$tensors <- tensors
  self$.length <- function() n[[1]]
  self$.getitem <- function(i) lapply(tensors, function(t) take_rows(if (is_tensor(t)) as.array(t) else t, i))
  structure(list(self = self), class = "rf_dataset")
}

#' @export
length.rf_dataset <- function(x) as.integer(unclass(x)$self$.length())

#' @export
`$.rf_dataset` <- function(x, name) get(name, envir = unclass(x)$self)

#' @rdname rf_data
#' @export
dataloader <- function(dataset, batch_size = 1, shuffle = FALSE, drop_last = FALSE) {
  if (!inherits(dataset, "rf_dataset")) rf_abort("rfuse_type_error", "dataloader() needs a dataset()")
  n <- length(dataset)
  if (!is.numeric(batch_size) || length(batch_size) != 1 || batch_size < 1 || batch_size > n)
    rf_abort("rfuse_type_error", sprintf("`batch_size` must be in 1..%d", n))
  if (!is.logical(drop_last) || length(drop_last) != 1 || is.na(drop_last))
    rf_abort("rfuse_type_error", "`drop_last` must be TRUE or FALSE")
  structure(list(dataset = list(tensors = dataset_arrays(dataset)), batch_size = as.integer(batch_size),
                 shuffle = isTRUE(shuffle), drop_last = isTRUE(drop_last), n = n),
            class = "rf_dataloader")
}

#' @export
length.rf_dataloader <- function(x) as.integer(x$n %/% x$batch_size + (!x$drop_last && x$n %% x$batch_size != 0))

#' @export
print.rf_dataloader <- function(x, ...) {
  cat(sprintf("<rf_dataloader: %d samples of %s, batches of %d%s%s>\n", x$n,
              paste(names(x$dataset$tensors), collapse = ", "), x$batch_size,
              if (x$shuffle) ", shuffled" else "", if (x$drop_last) ", last partial batch dropped" else ""))
  invisible(x)
}

#' Iterate over a dataloader's batches, torch for R style
#'
#' For the loops torch code writes by hand: `dataloader_make_iter(dl)` and
#' `dataloader_next(it)` (which returns `completed`, `NULL` by default, after the last batch),
#' `enumerate(dl)` and `as.list(dl)` (every batch of one epoch, for `for (b in enumerate(dl))`).
#' A batch is a list (named as the dataset's fields) of [rf_tensor]s on [rf_default_device()]:
#' doubles as float32, integers (class labels) as int64, logicals as bool, as torch's
#' default tensors. Each new iteration is a new epoch: with `shuffle = TRUE`, a new order.
#' (`coro::loop()` needs the coro package, which rfuse does not use.)
#'
#' @param dataloader,x A dataloader made by [dataloader()].
#' @param iter An iterator from `dataloader_make_iter()`.
#' @param completed What `dataloader_next()` returns once the batches are exhausted.
#' @param ... Unused (as.list's).
#' @return A batch, a list of batches, or an iterator.
#' @examples
#' dl <- dataloader(tensor_dataset(x = matrix(rnorm(20), 10), y = rep(1:2, 5)), batch_size = 5)
#' for (b in enumerate(dl)) print(b$x$shape)
#' it <- dataloader_make_iter(dl)
#' while (!is.null(b <- dataloader_next(it))) print(as.array(b$y))
#' @name rf_batches
NULL

#' @rdname rf_batches
#' @export
dataloader_make_iter <- function(dataloader) {
  if (!inherits(dataloader, "rf_dataloader")) rf_abort("rfuse_type_error", "dataloader_make_iter() needs a dataloader()")
  it <- new.env(parent = emptyenv())
  it$loader <- dataloader
  it$order <- if (dataloader$shuffle) sample.int(dataloader$n) else seq_len(dataloader$n)
  it$batch <- 0L
  structure(it, class = "rf_dataloader_iter")
}

#' @rdname rf_batches
#' @export
dataloader_next <- function(iter, completed = NULL) {
  if (!inherits(iter, "rf_dataloader_iter")) rf_abort("rfuse_type_error", "dataloader_next() needs dataloader_make_iter()'s iterator")
  dl <- iter$loader
  if (iter$batch >= length(dl)) return(completed)
  iter$batch <- iter$batch + 1L
  rows <- iter$order[seq((iter$batch - 1L) * dl$batch_size + 1L, min(iter$batch * dl$batch_size, dl$n))]
  lapply(dl$dataset$tensors, function(a) batch_tensor(take_rows(a, rows)))
}

#' @rdname rf_batches
#' @export
enumerate <- function(x) {
  if (!inherits(x, "rf_dataloader")) rf_abort("rfuse_type_error", "enumerate() takes a dataloader()", sys.call())
  it <- dataloader_make_iter(x)
  lapply(seq_len(length(x)), function(i) dataloader_next(it))
}

#' @rdname rf_batches
#' @export
as.list.rf_dataloader <- function(x, ...) enumerate(x)

# One field of a batch as torch's default tensor of its R type.
batch_tensor <- function(a) {
  if (is_tensor(a)) return(a)
  if (is.factor(a)) a <- as.integer(a) # class labels 1..K
  rf_tensor(a, dtype = if (is.logical(a)) "bool" else if (is.integer(a)) "int64" else "float32")
}

# A dataset's samples as arrays whose first index is the sample: a tensor_dataset's own, or
# every .getitem(i) stacked (once).
dataset_arrays <- function(ds) {
  if (!is.null(unclass(ds)$self$tensors)) return(unclass(ds)$self$tensors)
  n <- length(ds)
  items <- lapply(seq_len(n), function(i) { it <- ds$.getitem(i); if (is.list(it)) it else list(it) })
  fields <- names(items[[1]]) %||% paste0("x", seq_along(items[[1]]))
  out <- lapply(seq_along(fields), function(f) {
    vals <- lapply(items, function(it) it[[f]])
    d <- dim(vals[[1]]) %||% length(vals[[1]])
    flat <- do.call(rbind, lapply(vals, as.vector))
    if (length(d) == 1 && d == 1) as.vector(flat) else array(flat, c(n, d))
  })
  stats::setNames(out, fields)
}
