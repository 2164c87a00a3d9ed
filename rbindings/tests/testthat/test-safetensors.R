# rf_save / rf_load: safetensors files that an independent reader and writer (Python's json and
# struct, nothing of rfuse's) agree with, models restored exactly, bad files refused by name.

python <- Sys.which("python3")

test_that("a model's state round-trips and restores its outputs", {
  set.seed(401)
  net <- nn_sequential(nn_linear(5, 8), nn_relu(), nn_batch_norm1d(8), nn_linear(8, 3))
  x <- matrix(rnorm(40), 8, 5)
  net$train(); invisible(net(x)) # moves the batch-norm statistics off their initial values
  net$eval()
  want <- as.array(net(x))
  p <- tempfile(fileext = ".safetensors")
  expect_identical(rf_save(net, p, dtype = "float64"), p)
  back <- rf_load(p)
  expect_identical(names(back), names(net$state_dict()))
  fresh <- nn_sequential(nn_linear(5, 8), nn_relu(), nn_batch_norm1d(8), nn_linear(8, 3))
  fresh$load_state_dict(back)
  fresh$eval()
  expect_identical(as.array(fresh(x)), want) # float64: exactly
  for (nm in names(back)) expect_equal(as.vector(back[[nm]]), as.vector(unclass(net$state_dict()[[nm]])), info = nm)
  # float32 (the default): within float32's rounding.
  rf_save(net, p)
  fresh$load_state_dict(rf_load(p))
  expect_lt(max(abs(as.array(fresh(x)) - want)), 1e-5)
  expect_identical(dim(rf_load(p)[["0.weight"]]), c(8L, 5L)) # torch's [out, in]
})

test_that("Python's json and struct read what rf_save writes", {
  skip_if(!nzchar(python), "python3 is not on the PATH")
  p <- tempfile(fileext = ".safetensors")
  w <- matrix(c(1.5, -2, 3.25, 4, 5.5, -6), 2, 3)
  a <- array(seq_len(24) / 8, c(2, 3, 4))
  rf_save(list(w = w, a = a, n = c(7L, -3L, 1073741824L), mask = c(TRUE, FALSE, TRUE), bn.num_batches_tracked = 12),
          p, dtype = "float64", metadata = c(format = "pt", who = "rfuse"))
  reader <- tempfile(fileext = ".py")
  writeLines(c(
    "import json, struct, sys",
    "b = open(sys.argv[1], 'rb').read()",
    "n = struct.unpack('<Q', b[:8])[0]",
    "h = json.loads(b[8:8 + n])",
    "data = b[8 + n:]",
    "fmt = {'F64': 'd', 'F32': 'f', 'I64': 'q', 'BOOL': '?'}",
    "out = {'__metadata__': h.pop('__metadata__')}",
    "for k, t in h.items():",
    "    s, e = t['data_offsets']",
    "    c = e - s",
    "    f = fmt[t['dtype']]",
    "    out[k] = {'dtype': t['dtype'], 'shape': t['shape'], 'values': list(struct.unpack('<%d%s' % (c // struct.calcsize(f), f), data[s:e]))}",
    "print(json.dumps(out))"), reader)
  got <- jsonlite::fromJSON(system2(python, c(reader, p), stdout = TRUE))
  expect_identical(got[["__metadata__"]], list(format = "pt", who = "rfuse"))
  expect_identical(got$w$shape, c(2L, 3L))
  expect_identical(got$w$values, as.vector(t(w))) # row-major: w[1, ], then w[2, ]
  expect_identical(got$a$shape, c(2L, 3L, 4L))
  expect_identical(got$a$values, as.vector(aperm(a, 3:1)))
  expect_identical(got$n$dtype, "I64")
  expect_identical(got$n$values, c(7L, -3L, 1073741824L))
  expect_identical(got$mask$values, c(TRUE, FALSE, TRUE))
  expect_identical(got$bn.num_batches_tracked$dtype, "I64")
  expect_identical(length(got$bn.num_batches_tracked$shape), 0L) # torch's scalar
  expect_identical(got$bn.num_batches_tracked$values, 12L)
})

test_that("rf_load reads every dtype a Python writer produces", {
  skip_if(!nzchar(python), "python3 is not on the PATH")
  p <- tempfile(fileext = ".safetensors")
  writer <- tempfile(fileext = ".py")
  writeLines(c(
    "import json, struct, sys",
    "def f16(x): return struct.pack('<e', x)",
    "def bf16(x): return struct.pack('<f', x)[2:]",
    "parts = {",
    "  'f32': ('F32', [2, 2], b''.join(struct.pack('<f', v) for v in [1.5, -2.25, 3.0, 0.1])),",
    "  'f16': ('F16', [5], b''.join(f16(v) for v in [1.0, -0.5, 65504.0, 2.0**-24, float('inf')])),",
    "  'bf16': ('BF16', [3], b''.join(bf16(v) for v in [1.0, -3.5, 2.0**100])),",
    "  'i64': ('I64', [3], struct.pack('<3q', -5, 0, 2**40)),",
    "  'i32': ('I32', [2], struct.pack('<2i', -7, 9)),",
    "  'u8': ('U8', [2], bytes([0, 255])),",
    "  'b': ('BOOL', [2], bytes([1, 0])),",
    "  'scalar': ('F64', [], struct.pack('<d', 2.5)),",
    "  'empty': ('F32', [0, 3], b''),",
    "}",
    "h, data = {}, b''",
    "for k, (dt, shape, raw) in parts.items():",
    "    h[k] = {'dtype': dt, 'shape': shape, 'data_offsets': [len(data), len(data) + len(raw)]}",
    "    data += raw",
    "hj = json.dumps(h).encode()",
    "open(sys.argv[1], 'wb').write(struct.pack('<Q', len(hj)) + hj + data)"), writer)
  expect_identical(system2(python, c(writer, p)), 0L)
  s <- rf_load(p)
  expect_identical(s$f32, matrix(c(1.5, 3, -2.25, as.numeric(readBin(writeBin(0.1, raw(), size = 4), "double", size = 4))), 2, 2))
  expect_identical(s$f16, c(1, -0.5, 65504, 2^-24, Inf))
  expect_identical(s$bf16, c(1, -3.5, 2^100))
  expect_identical(s$i64, c(-5, 0, 2^40)) # beyond R's integers: doubles
  expect_identical(s$i32, c(-7L, 9L))
  expect_identical(s$u8, c(0L, 255L))
  expect_identical(s$b, c(TRUE, FALSE))
  expect_identical(s$scalar, 2.5)
  expect_identical(length(s$empty), 0L)
})

test_that("bad files and arguments are classed errors naming what is wrong", {
  p <- tempfile(fileext = ".safetensors")
  rf_save(list(w = matrix(1:6 + 0.5, 2)), p)
  b <- readBin(p, "raw", file.size(p))
  put <- function(bytes) { q <- tempfile(); writeBin(bytes, q); q }
  expect_error(rf_load(put(b[1:5])), "shorter", class = "rfuse_format_error")
  expect_error(rf_load(put(b[1:20])), "header length", class = "rfuse_format_error")
  expect_error(rf_load(put(b[-length(b)])), "'w'.*data_offsets", class = "rfuse_format_error")
  bad_json <- b; bad_json[9] <- charToRaw("[")
  expect_error(rf_load(put(bad_json)), "not JSON|not a JSON object", class = "rfuse_format_error")
  h <- gsub("F32", "Q99", rawToChar(b[9:(8 + sum(as.double(b[1:8]) * 256^(0:7)))]))
  expect_error(rf_load(put(c(b[1:8], charToRaw(h), b[-(1:(8 + nchar(h)))]))), "'w' has dtype", class = "rfuse_format_error")
  expect_error(rf_load(file.path(tempdir(), "no-such-file.safetensors")), "no such file", class = "rfuse_type_error")
  expect_error(rf_save(list(1, 2), p), "named list", class = "rfuse_type_error")
  expect_error(rf_save(list(w = "a"), p), "'w' is character", class = "rfuse_type_error")
  expect_error(rf_save(list(w = 1), file.path(tempdir(), "nope", "x.safetensors")), "no directory", class = "rfuse_type_error")
  expect_error(rf_save(list(w = 1), p, dtype = "float16"), "should be one of")
  # A failed save leaves the old file whole.
  expect_identical(readBin(p, "raw", file.size(p)), b)
})
