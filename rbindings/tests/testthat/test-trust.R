# The kernel cache holds code that runs in the user's process: a directory another user owns or
# can write to is never read, with one warning. A second, unprivileged user (nobody) runs the
# compiler that fills the cache (rfusec, the same code the R package runs on a GPU).
run_as_nobody <- function(cache_dir, model, out) {
  rfusec <- file.path(rfuse:::.rf_build_dir(), "bin", "rfusec")
  system2("runuser", c("-u", "nobody", "--", "env", paste0("RFUSE_CACHE_DIR=", cache_dir), "HOME=/tmp",
                       rfusec, model, "--arch=sm_90", "-o", out), stdout = TRUE, stderr = TRUE)
}

test_that("a cache directory writable by others, or another user's, is never read", {
  skip_if_not(identical(unname(Sys.info()[["effective_user"]]), "root"), "needs root to run a second, unprivileged user")
  skip_if(!nzchar(Sys.which("runuser")), "runuser is missing")
  skip_if_not(file.exists(file.path(rfuse:::.rf_build_dir(), "bin", "rfusec")), "the C++ build (rfusec) is missing")
  skip_if(system2("id", "nobody", stdout = FALSE, stderr = FALSE) != 0, "no user 'nobody'")
  base <- tempfile("rfuse-trust-", tmpdir = "/tmp")
  dir.create(base, mode = "0755")
  on.exit(unlink(base, recursive = TRUE), add = TRUE)
  Sys.chmod(base, "0755", use_umask = FALSE)
  model <- file.path(base, "model.mlir")
  writeLines(c("func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {",
               "  %y = rfuse.exp %x : tensor<8xf32>",
               "  %z = rfuse.add %y, %x : tensor<8xf32>",
               "  return %z : tensor<8xf32>", "}"), model)
  Sys.chmod(model, "0644", use_umask = FALSE)
  out <- file.path(base, "out"); dir.create(out); Sys.chmod(out, "0777", use_umask = FALSE)

  # nobody's own directory (missing: rfuse makes it, 0700): used, and a second run compiles nothing.
  home <- file.path(base, "home"); dir.create(home); system2("chown", c("nobody", home))
  own <- file.path(home, "cache")
  first <- run_as_nobody(own, model, file.path(out, "a"))
  expect_match(paste(first, collapse = "\n"), "compiled 1, from cache 0")
  expect_identical(file.info(own)$mode, as.octmode("700"))
  expect_match(paste(run_as_nobody(own, model, file.path(out, "b")), collapse = "\n"), "compiled 0, from cache 1")
  # (the kernel's cubin, and the compiled program's entry)
  expect_setequal(tools::file_ext(list.files(own)), c("cubin", "program"))
  entry <- list.files(own, pattern = "[.]cubin$", full.names = TRUE)
  expect_length(entry, 1)

  # A shared directory another user (root) made writable by all, with that valid entry planted
  # in it: refused with a warning, the entry not read, nothing written.
  shared <- file.path(base, "shared"); dir.create(shared); Sys.chmod(shared, "0777", use_umask = FALSE)
  file.copy(entry, shared)
  log <- paste(run_as_nobody(shared, model, file.path(out, "c")), collapse = "\n")
  expect_match(log, "cache directory .* belongs to another user; not using it")
  expect_match(log, "compiled 1, from cache 0")
  expect_identical(list.files(shared), basename(entry))

  # nobody's own directory, but writable by others: refused too.
  system2("chown", c("nobody", shared))
  log <- paste(run_as_nobody(shared, model, file.path(out, "d")), collapse = "\n")
  expect_match(log, "is writable by group or others; not using it")
  expect_match(log, "compiled 1, from cache 0")
})
