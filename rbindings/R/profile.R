# rf_profile(): where the time of an R expression goes, step by step; rf_sitrep(): what rfuse
# found on this machine and why it uses the GPU or not.

#' Profile the rfuse programs an expression runs
#'
#' Evaluates `expr` and records every step of every rfuse program run meanwhile: each generated
#' kernel, cuBLASLt/cuDNN call or host step, its time (CUDA events on the GPU, host timers on
#' the CPU), the bytes it reads and writes, the achieved GB/s (and TFLOP/s for matrix products
#' and convolutions), and the R expressions it came from. While profiling, each step is timed
#' alone (CUDA graphs are off, the device is waited for after every step), so the total is the
#' device time of the work, not of a replayed graph. The summary splits the wall time into time
#' on the device, in host-device transfers (with their bytes) and in R.
#'
#' @param expr An R expression (evaluated in the caller's environment).
#' @return An `rf_profile`: `steps` (a data frame: program, step, how, source, device, ms, bytes,
#'   gb_per_s, tflop_per_s), `summary` (wall_ms, device_ms, transfer_ms, r_ms), `transfers`
#'   (bytes and copies each way) and `value` (what `expr` returned). `print()` shows the slowest
#'   steps and the summary.
#' @examples
#' x <- rf_tensor(matrix(rnorm(2e4), 200))
#' p <- rf_profile(rf_jit(function(x) exp(x) / rowSums(exp(x)))(x))
#' p
#' @export
rf_profile <- function(expr) {
  stats0 <- .rf_transfer_stats()
  .rf_profile_start()
  on.exit(if (!stopped) .rf_profile_stop())
  stopped <- FALSE
  t0 <- as.double(Sys.time()) # microseconds, where proc.time() has milliseconds
  value <- expr
  rf_sync(value)
  wall <- 1000 * (as.double(Sys.time()) - t0)
  steps <- .rf_profile_stop()
  stopped <- TRUE
  moved <- .rf_transfer_stats() - stats0
  steps$gb_per_s <- ifelse(steps$ms > 0, steps$bytes / steps$ms / 1e6, NA)
  steps$tflop_per_s <- ifelse(steps$ms > 0 & steps$flops > 0, steps$flops / steps$ms / 1e9, NA)
  transfer_ms <- 1000 * (moved[["host_to_device_seconds"]] + moved[["device_to_host_seconds"]])
  device_ms <- sum(steps$ms)
  structure(list(steps = steps,
                 summary = c(wall_ms = wall, device_ms = device_ms, transfer_ms = transfer_ms,
                             r_ms = max(0, wall - device_ms - transfer_ms)),
                 transfers = moved[c("host_to_device_bytes", "device_to_host_bytes",
                                     "host_to_device_copies", "device_to_host_copies")],
                 value = value),
            class = "rf_profile")
}

#' @export
print.rf_profile <- function(x, n = 10, ...) {
  s <- x$summary
  cat(sprintf("<rf_profile: %d steps; wall %.3f ms = device %.3f + transfers %.3f + R %.3f>\n",
              nrow(x$steps), s[["wall_ms"]], s[["device_ms"]], s[["transfer_ms"]], s[["r_ms"]]))
  cat(sprintf("transfers: %.0f bytes to the device (%d copies), %.0f bytes back (%d copies)\n",
              x$transfers[["host_to_device_bytes"]], as.integer(x$transfers[["host_to_device_copies"]]),
              x$transfers[["device_to_host_bytes"]], as.integer(x$transfers[["device_to_host_copies"]])))
  if (nrow(x$steps)) {
    top <- x$steps[order(-x$steps$ms), , drop = FALSE][seq_len(min(n, nrow(x$steps))), , drop = FALSE]
    for (i in seq_len(nrow(top)))
      cat(sprintf("  %9.4f ms %8s  %-28s %s%s\n", top$ms[i],
                  if (is.na(top$tflop_per_s[i])) sprintf("%.0f GB/s", top$gb_per_s[i]) else sprintf("%.1f TF/s", top$tflop_per_s[i]),
                  top$step[i], top$how[i], if (nzchar(top$source[i])) paste0("  <- ", top$source[i]) else ""))
  }
  invisible(x)
}

#' What rfuse found on this machine
#'
#' Reports the CUDA driver, NVRTC, cuBLASLt and cuDNN versions rfuse loaded (or why it could
#' not), the GPU (name, architecture, memory) and whether rfuse's kernels support its
#' architecture, which device rfuse uses and why, and the kernel cache directory with its size.
#'
#' @return A list (class `rf_sitrep`), printed as a report.
#' @examples
#' rf_sitrep()
#' @export
rf_sitrep <- function() {
  i <- .rf_sitrep_info()
  files <- if (dir.exists(i$cache_dir)) list.files(i$cache_dir, full.names = TRUE, recursive = TRUE) else character()
  i$cache_files <- length(files)
  i$cache_bytes <- sum(file.size(files))
  i$device <- current_device()
  i$why <- if (identical(getOption("rfuse.device"), "cpu")) "options(rfuse.device = \"cpu\")"
    else if (i$option_device == "cpu") "the device option is \"cpu\" (rf_options(device = ...))"
    else if (!i$gpu_available) paste("no usable GPU:", i$gpu_reason)
    else if (!i$arch_supported) sprintf("%s is not among the architectures rfuse supports (%s)", i$arch,
                                        paste(i$supported_archs, collapse = ", "))
    else "a supported GPU was found"
  structure(i, class = "rf_sitrep")
}

#' @export
print.rf_sitrep <- function(x, ...) {
  ver <- function(v, err, fmt) if (v > 0) fmt(v) else paste("not found:", err)
  cat("rfuse situation report\n")
  cat(sprintf("  device used:  %s (%s)\n", x$device, x$why))
  if (x$gpu_available)
    cat(sprintf("  GPU:          %s, %s, %d SMs, %.1f of %.1f GiB free (rfuse holds %.2f GiB, %.2f GiB cached)\n",
                x$gpu_name, x$arch, as.integer(x$multiprocessors), x$memory_free / 2^30, x$memory_total / 2^30,
                x$memory_in_use / 2^30, x$memory_cached / 2^30))
  else cat(sprintf("  GPU:          none (%s)\n", x$gpu_reason))
  cat(sprintf("  supported:    %s%s\n", paste(x$supported_archs, collapse = ", "),
              if (x$gpu_available) if (x$arch_supported) " (this GPU: yes)" else " (this GPU: no)" else ""))
  cat(sprintf("  CUDA driver:  %s\n", ver(x$driver, x$driver_error, function(v) sprintf("%d.%d", v %/% 1000, (v %% 1000) %/% 10))))
  cat(sprintf("  NVRTC:        %s\n", ver(x$nvrtc, x$nvrtc_error, function(v) sprintf("%d.%d", v %/% 1000, (v %% 1000) %/% 10))))
  cat(sprintf("  cuBLASLt:     %s\n", ver(x$cublaslt, x$cublaslt_error, function(v) format(v, scientific = FALSE))))
  cat(sprintf("  cuDNN:        %s\n", ver(x$cudnn, x$cudnn_error, function(v) format(v, scientific = FALSE))))
  cat(sprintf("  kernel cache: %s (%d files, %.1f MiB)\n", x$cache_dir, as.integer(x$cache_files), x$cache_bytes / 2^20))
  invisible(x)
}
