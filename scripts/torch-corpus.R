# Runs a corpus of ported torch-for-R model files (each defines `model`, `input` — a list of
# forward's arguments —, `target` and `loss_fn(out, target)`, see docs/r-package.md) and reports,
# per file, the stages issue 16 measures:
#   define  the file runs (the model is built);
#   loop    one torch-style step: optim_sgd(model$parameters); loss$backward(); opt$step();
#   eager   forward in eval mode on the inputs (rf_tensors), op by op (the parameters record);
#   jit     rf_jit(model) on the same inputs equals eager (1e-4 relative, float32);
#   fit     one rf_fit() step (single-input models with an array target).
# Usage: Rscript scripts/torch-corpus.R DIR [pattern]   (prints a table; exit status 0)
args <- commandArgs(trailingOnly = TRUE)
dir <- args[1]
pattern <- if (length(args) > 1) args[2] else "[.]R$"
suppressPackageStartupMessages(library(rfuse))
files <- sort(list.files(dir, pattern = pattern, full.names = TRUE))

first_line <- function(e) substr(gsub("\\s+", " ", conditionMessage(e)), 1, 110)
as_plain <- function(v) if (inherits(v, "rf_tensor")) as.array(v) else if (is.list(v)) lapply(v, as_plain) else v
leaves <- function(v) if (is.list(v)) unlist(lapply(v, leaves), recursive = FALSE) else list(as.vector(as_plain(v)))
rel_diff <- function(a, b) {
  a <- leaves(a); b <- leaves(b)
  if (length(a) != length(b)) return(Inf)
  max(vapply(seq_along(a), function(i) {
    if (length(a[[i]]) != length(b[[i]])) return(Inf)
    max(abs(a[[i]] - b[[i]])) / max(1, max(abs(b[[i]])))
  }, 0))
}

run_file <- function(f) {
  res <- list(file = basename(f), define = NA, eager = NA, jit = NA, loop = NA, fit = NA, why = "")
  stage <- function(name, expr) {
    r <- tryCatch({ force(expr); TRUE }, error = function(e) { res$why <<- paste0(res$why, name, ": ", first_line(e), "; "); FALSE },
                  warning = function(w) { res$why <<- paste0(res$why, name, " warned: ", first_line(w), "; "); FALSE })
    res[[name]] <<- r
    r
  }
  env <- new.env(parent = globalenv())
  if (!stage("define", suppressMessages(sys.source(f, envir = env)))) return(res)
  model <- env$model; input <- env$input
  # The loop step first: the optimizer takes the parameters, so the forward below runs op by op
  # (recorded on rf_tensors), the eager reference the jitted model is compared with.
  stage("loop", {
    model$train()
    before <- model$state_dict()
    opt <- optim_sgd(model$parameters, lr = 0.01)
    loss <- env$loss_fn(do.call(model, input), env$target)
    loss$backward()
    opt$step()
    if (!is.finite(loss$item())) stop("the loss is not finite")
    after <- model$state_dict()
    if (!any(vapply(names(before), function(p) any(after[[p]] != before[[p]]), TRUE))) stop("no parameter changed")
  })
  if (!res$loop) try(optim_sgd(model$parameters, lr = 0), silent = TRUE)
  # (the same seed before both: a forward that draws noise, a VAE's, draws the same numbers)
  if (stage("eager", { model$eval(); set.seed(2); ref <- do.call(model, input) })) {
    stage("jit", {
      jm <- rf_jit(model)
      set.seed(2)
      got <- with_no_grad(do.call(jm, input))
      d <- rel_diff(got, ref)
      if (!(d < 1e-4)) stop(sprintf("rf_jit(model) differs from eager by %.3g", d))
    })
  }
  if (length(input) == 1 && !is.null(env$target)) {
    stage("fit", {
      env2 <- new.env(parent = globalenv())
      suppressMessages(sys.source(f, envir = env2))
      fit <- rf_fit(env2$model, as_plain(env2$input[[1]]), as_plain(env2$target), loss = env2$loss_fn,
                    steps = 1, lr = 0.01, progress = FALSE)
      if (!all(is.finite(fit$history))) stop("the loss is not finite")
    })
  }
  res
}

# Each file's row as soon as it is done (a run cut short by a time limit still reports those).
rows <- lapply(files, function(f) {
  set.seed(1)
  r <- run_file(f)
  cat(sprintf("done %-36s define=%s eager=%s jit=%s loop=%s fit=%s %s\n", r$file, r$define, r$eager, r$jit, r$loop, r$fit,
              substr(r$why, 1, 160)))
  r
})
tab <- do.call(rbind, lapply(rows, function(r) data.frame(r[c("file", "define", "eager", "jit", "loop", "fit")])))
print(tab, row.names = FALSE)
cat("\nWhy (first failing stage):\n")
for (r in rows) if (nzchar(r$why)) cat(sprintf("  %-36s %s\n", r$file, r$why))
n <- nrow(tab)
cat(sprintf("\n%d files: define %d, eager %d, jit==eager %d, loop step %d, rf_fit step %d (of %d single-input)\n", n,
            sum(tab$define, na.rm = TRUE), sum(tab$eager, na.rm = TRUE), sum(tab$jit, na.rm = TRUE),
            sum(tab$loop, na.rm = TRUE), sum(tab$fit, na.rm = TRUE), sum(!is.na(tab$fit))))
cat(sprintf("forward under rf_jit equal to eager and one training step (loop or rf_fit): %d of %d\n",
            sum(tab$jit %in% TRUE & (tab$loop %in% TRUE | tab$fit %in% TRUE)), n))
