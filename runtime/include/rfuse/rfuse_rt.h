/* rfuse_rt: run an ahead-of-time compiled rfuse program (an artifact written by `rfusec -o
 * model.rfuse` or rf_export()) with nothing but the CUDA driver and, for library steps, cuBLASLt
 * and cuDNN — all loaded with dlopen. No MLIR, LLVM or NVRTC.
 *
 *   rfuse_rt_program *p;
 *   if (rfuse_rt_load("model.rfuse", &p) != RFUSE_RT_OK) { puts(rfuse_rt_last_error()); ... }
 *   rfuse_rt_set_input(p, 0, RFUSE_RT_F32, x_shape, 2, x, x_bytes);  ...  rfuse_rt_run(p);
 *   rfuse_rt_get_output(p, 0, y, y_bytes);  rfuse_rt_free(p);
 *
 * Every call returns a status; on failure rfuse_rt_last_error() says what was wrong (on the
 * calling thread, until its next call). A program is used by one thread at a time. */
#ifndef RFUSE_RT_H
#define RFUSE_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  RFUSE_RT_OK = 0,
  RFUSE_RT_ERROR_INVALID_ARGUMENT = 1, /* a null pointer, an index out of range */
  RFUSE_RT_ERROR_IO = 2,               /* the file cannot be opened or read */
  RFUSE_RT_ERROR_CORRUPT = 3,          /* not an artifact, truncated, a checksum mismatch */
  RFUSE_RT_ERROR_VERSION = 4,          /* another artifact format or rfuse version */
  RFUSE_RT_ERROR_ARCHITECTURE = 5,     /* no kernels (cubin or PTX) this GPU can run */
  RFUSE_RT_ERROR_NO_DEVICE = 6,        /* no usable CUDA driver and device */
  RFUSE_RT_ERROR_SHAPE = 7,            /* an input or output buffer of the wrong size */
  RFUSE_RT_ERROR_DTYPE = 8,            /* an input of the wrong dtype */
  RFUSE_RT_ERROR_OUT_OF_MEMORY = 9,
  RFUSE_RT_ERROR_RUNTIME = 10,         /* the driver or a library failed */
  RFUSE_RT_ERROR_UNSUPPORTED = 11      /* the artifact needs what this runtime lacks */
} rfuse_rt_status;

/* Element types, as rfuse names them: f32 f64 f16 bf16 i1 (one byte per element) i32 i64. */
typedef enum {
  RFUSE_RT_F32 = 0, RFUSE_RT_F64 = 1, RFUSE_RT_F16 = 2, RFUSE_RT_BF16 = 3,
  RFUSE_RT_I1 = 4, RFUSE_RT_I32 = 5, RFUSE_RT_I64 = 6
} rfuse_rt_dtype;

typedef struct rfuse_rt_program rfuse_rt_program;

/* Loads the artifact at `path` for the GPU of this process (device 0): its cubins for this
 * architecture, else its PTX compiled by the driver. */
rfuse_rt_status rfuse_rt_load(const char *path, rfuse_rt_program **out);
/* The same from an artifact's bytes in memory (`size` of them at `data`, copied; `name` names it
 * in messages): an artifact embedded in a binary, or inside another artifact. */
rfuse_rt_status rfuse_rt_load_memory(const void *data, size_t size, const char *name, rfuse_rt_program **out);
void rfuse_rt_free(rfuse_rt_program *p);

/* The message of this thread's last failure ("" after a success). */
const char *rfuse_rt_last_error(void);
/* "corrupt artifact", ... */
const char *rfuse_rt_status_name(rfuse_rt_status s);
/* The artifact format this runtime reads, and rfuse's version. */
uint32_t rfuse_rt_format_version(void);
const char *rfuse_rt_version(void);

/* The program's signature. `shape` points into the program (valid while it lives). */
size_t rfuse_rt_num_inputs(const rfuse_rt_program *p);
size_t rfuse_rt_num_outputs(const rfuse_rt_program *p);
rfuse_rt_status rfuse_rt_input_type(const rfuse_rt_program *p, size_t i, rfuse_rt_dtype *dtype, size_t *rank,
                                    const int64_t **shape);
rfuse_rt_status rfuse_rt_output_type(const rfuse_rt_program *p, size_t i, rfuse_rt_dtype *dtype, size_t *rank,
                                     const int64_t **shape);
/* Bytes of input / output i (elements times the dtype's size). */
size_t rfuse_rt_input_bytes(const rfuse_rt_program *p, size_t i);
size_t rfuse_rt_output_bytes(const rfuse_rt_program *p, size_t i);
/* How the program runs: "cuda sm_90 (cubins)", "cuda sm_100 (PTX for sm_90, compiled by the driver)". */
const char *rfuse_rt_describe(const rfuse_rt_program *p);

/* A metadata entry the exporter stored (a front end's own: rf_export's R signature), or
 * RFUSE_RT_ERROR_INVALID_ARGUMENT when there is none. `data` points into the program. */
rfuse_rt_status rfuse_rt_metadata(const rfuse_rt_program *p, const char *name, const void **data, size_t *size);

/* Input i from host memory, of the dtype and shape given (which must be the input's: else
 * RFUSE_RT_ERROR_DTYPE / _SHAPE naming both) and `bytes` = rfuse_rt_input_bytes; copied to the device. */
rfuse_rt_status rfuse_rt_set_input(rfuse_rt_program *p, size_t i, rfuse_rt_dtype dtype, const int64_t *shape,
                                   size_t rank, const void *data, size_t bytes);
/* Runs the program on the inputs set last (each must have been set once). */
rfuse_rt_status rfuse_rt_run(rfuse_rt_program *p);
/* Output i of the last run into host memory (waits for the run). */
rfuse_rt_status rfuse_rt_get_output(rfuse_rt_program *p, size_t i, void *data, size_t bytes);

/* The same on device memory the caller owns (CUdeviceptr values, one per input and per output,
 * outputs not overlapping inputs): queued on the runtime's stream, returns without waiting;
 * rfuse_rt_synchronize waits. */
rfuse_rt_status rfuse_rt_run_device(rfuse_rt_program *p, const uint64_t *inputs, const uint64_t *outputs);
rfuse_rt_status rfuse_rt_synchronize(void);

#ifdef __cplusplus
}
#endif

#endif
