# Data-parallel training's launcher: one R process per GPU, with the environment torchrun gives
# its workers (rf_train()'s strategy = "ddp" reads it).

#' Run an R script as the ranks of a data-parallel group
#'
#' Starts `devices` R processes running `script`, each with the environment a data-parallel
#' worker reads (torchrun's): `WORLD_SIZE`, `RANK` and `LOCAL_RANK` (0-based), `MASTER_ADDR`,
#' `MASTER_PORT`, and `CUDA_VISIBLE_DEVICES` naming one GPU per rank (the `rank + 1`-th of the
#' GPUs `CUDA_VISIBLE_DEVICES` lists here, or GPU `rank`). NCCL's variables (`NCCL_*`) and every
#' other variable pass to the ranks unchanged. In the script, `rf_fit(..., strategy = "ddp")`
#' trains on the rank's shard and averages gradients over the ranks.
#'
#' Waits for every rank. When one fails, the others are stopped at once (a rank waiting in a
#' collective for a dead peer would wait forever) and the error names the rank, its exit
#' status and the end of its output. Each rank's output (stdout and stderr) goes to its own log;
#' rank 0's is printed when it ends.
#'
#' @param script Path of the R script every rank runs.
#' @param devices Number of ranks (processes, one GPU each).
#' @param args Further command-line arguments for the script (`commandArgs(TRUE)` there).
#' @param master_addr,master_port Where rank 0 listens for the other ranks' rendezvous.
#' @param timeout Seconds after which every rank still running is stopped and an error raised
#'   (`Inf`: no limit).
#' @param log_dir Directory for the ranks' logs (`rank0.log`, ...).
#' @return Invisibly, a list: `status` (exit status per rank, all 0) and `logs` (paths).
#' @examples
#' \dontrun{
#' # train.R:  fit <- rf_fit(model, x, y, strategy = "ddp", device = "cuda")
#' rf_launch("train.R", devices = 4)
#' }
#' @export
rf_launch <- function(script, devices = 1L, args = character(), master_addr = "127.0.0.1",
                      master_port = 29500L, timeout = Inf, log_dir = tempfile("rf_launch")) {
  if (!is.character(script) || length(script) != 1 || !file.exists(script))
    rf_abort("rfuse_type_error", sprintf("`script` must be the path of an R script; '%s' does not exist",
                                         paste(script, collapse = " ")))
  if (!is.numeric(devices) || length(devices) != 1 || is.na(devices) || devices < 1 || devices != round(devices))
    rf_abort("rfuse_type_error", "`devices` must be a positive whole number")
  if (!is.character(args)) rf_abort("rfuse_type_error", "`args` must be a character vector")
  if (!is.character(master_addr) || length(master_addr) != 1 || !nzchar(master_addr))
    rf_abort("rfuse_type_error", "`master_addr` must be a host name or address")
  if (!is.numeric(master_port) || length(master_port) != 1 || is.na(master_port) || master_port < 1 ||
      master_port > 65535 || master_port != round(master_port))
    rf_abort("rfuse_type_error", "`master_port` must be a port number in 1..65535")
  if (!is.numeric(timeout) || length(timeout) != 1 || is.na(timeout) || timeout <= 0)
    rf_abort("rfuse_type_error", "`timeout` must be a positive number of seconds (or Inf)")
  devices <- as.integer(devices)
  visible <- Sys.getenv("CUDA_VISIBLE_DEVICES", unset = NA)
  gpus <- if (is.na(visible)) as.character(seq_len(devices) - 1L) else strsplit(visible, ",")[[1]]
  if (length(gpus) < devices)
    rf_abort("rfuse_distributed_error", sprintf("devices = %d, but CUDA_VISIBLE_DEVICES ('%s') lists %d GPU%s",
                                                devices, visible, length(gpus), if (length(gpus) == 1) "" else "s"))
  dir.create(log_dir, showWarnings = FALSE, recursive = TRUE)
  rscript <- file.path(R.home("bin"), "Rscript")
  file_of <- function(kind, r) file.path(log_dir, sprintf("rank%d.%s", r, kind))
  ranks <- seq_len(devices) - 1L
  for (r in ranks) unlink(c(file_of("pid", r), file_of("status", r)))
  for (r in ranks) {
    env <- c(WORLD_SIZE = devices, RANK = r, LOCAL_RANK = r, MASTER_ADDR = master_addr,
             MASTER_PORT = as.integer(master_port), CUDA_VISIBLE_DEVICES = gpus[r + 1L])
    # The shell keeps the rank's pid (to stop it) and writes its exit status when it ends.
    cmd <- sprintf("%s > %s 2>&1 & echo $! > %s; wait $! 2>/dev/null; echo $? > %s.tmp; mv %s.tmp %s",
                   paste(shQuote(c(rscript, script, args)), collapse = " "), shQuote(file_of("log", r)),
                   shQuote(file_of("pid", r)), shQuote(file_of("status", r)), shQuote(file_of("status", r)),
                   shQuote(file_of("status", r)))
    system2("sh", c("-c", shQuote(cmd)), env = paste0(names(env), "=", shQuote(env)), wait = FALSE,
            stdout = FALSE, stderr = FALSE)
  }
  pid_of <- function(r) {
    f <- file_of("pid", r)
    if (file.exists(f)) suppressWarnings(as.integer(readLines(f, warn = FALSE)[1])) else NA_integer_
  }
  status_of <- function(r) {
    f <- file_of("status", r)
    if (file.exists(f)) suppressWarnings(as.integer(readLines(f, warn = FALSE)[1])) else NA_integer_
  }
  stop_ranks <- function() for (r in ranks) {
    p <- pid_of(r)
    if (!is.na(p) && is.na(status_of(r))) tools::pskill(p, tools::SIGTERM)
  }
  tail_of <- function(r, n = 15) {
    lines <- if (file.exists(file_of("log", r))) readLines(file_of("log", r), warn = FALSE) else character()
    paste(utils::tail(lines, n), collapse = "\n")
  }
  on.exit(stop_ranks(), add = TRUE) # an interrupt (or an error here) stops the ranks too
  started <- Sys.time()
  repeat {
    status <- vapply(ranks, status_of, 0L)
    failed <- which(!is.na(status) & status != 0L)
    if (length(failed)) {
      r <- ranks[failed[1]]
      stop_ranks()
      rf_abort("rfuse_distributed_error", sprintf(
        "rank %d of %d failed (exit status %d); the other ranks were stopped. The end of its output (%s):\n%s",
        r, devices, status[failed[1]], file_of("log", r), tail_of(r)))
    }
    if (!anyNA(status)) break
    if (as.double(difftime(Sys.time(), started, units = "secs")) > timeout) {
      running <- ranks[is.na(status)]
      stop_ranks()
      rf_abort("rfuse_distributed_error", sprintf("rank%s %s still running after %g s: stopped",
                                                  if (length(running) > 1) "s" else "", paste(running, collapse = ", "), timeout))
    }
    Sys.sleep(0.05)
  }
  log0 <- readLines(file_of("log", 0L), warn = FALSE)
  if (length(log0)) cat(log0, sep = "\n")
  invisible(list(status = stats::setNames(status, paste0("rank", ranks)),
                 logs = vapply(ranks, function(r) file_of("log", r), "")))
}
