// GraphBuilder: the tracing API. A tracer (the R bindings, a C++ model, a test) calls one method
// per tensor operation; the builder records the op into a func.func of rfuse IR, checks shapes as
// it goes, and hands back the module as text plus a stable signature hash.
//
// This header exposes no MLIR or LLVM types on purpose: the R package and other clients include
// it without MLIR's headers.
#ifndef RFUSE_FRONTEND_GRAPHBUILDER_H
#define RFUSE_FRONTEND_GRAPHBUILDER_H

#include "rfuse/IR/DType.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rfuse {

/// Shapes or dtypes that do not fit the operation. The message names the operation and the
/// offending operand(s), e.g. "matmul: non-conformable arguments: lhs [3, 4] has 4 columns but
/// rhs [5, 2] has 5 rows".
class ShapeError : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

/// Misuse of the builder: a value from another function, recording after finish(), etc.
class TraceError : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

/// A traced tensor value: a handle into the GraphBuilder that made it.
struct TracedValue {
  int id = -1;
  bool valid() const { return id >= 0; }
};

/// A function traced with beginFunction/endFunction, to be called with GraphBuilder::call.
struct TracedFunction {
  int id = -1;
};

enum class ComparePredicate { Eq, Ne, Lt, Le, Gt, Ge };
enum class ImageLayout { NCHW, NHWC };

struct Conv2dParams {
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> padding{0, 0, 0, 0}; ///< top, bottom, left, right
  std::vector<int64_t> dilation{1, 1};
  int64_t groups = 1;
  ImageLayout layout = ImageLayout::NCHW;
};

struct Pool2dParams {
  std::vector<int64_t> kernel{2, 2};
  std::vector<int64_t> strides{2, 2};
  std::vector<int64_t> padding{0, 0, 0, 0}; ///< top, bottom, left, right
  ImageLayout layout = ImageLayout::NCHW;
  bool countIncludePad = true; ///< avg_pool2d only
};

class GraphBuilder {
public:
  /// Starts a module whose entry function is called `entryName`.
  explicit GraphBuilder(const std::string &entryName = "main");
  ~GraphBuilder();
  GraphBuilder(const GraphBuilder &) = delete;
  GraphBuilder &operator=(const GraphBuilder &) = delete;

  // --- Inputs and constants -------------------------------------------------------------------
  /// A new argument of the function being traced. `name` (e.g. the R argument) is kept as the
  /// argument's location so that diagnostics and dumps can name it; it does not change the hash.
  TracedValue input(const std::vector<int64_t> &shape, DType dtype, const std::string &name = "");
  /// A rank-0 constant.
  TracedValue scalar(double value, DType dtype);
  /// A dense constant (row-major values; rounded to dtype).
  TracedValue constant(const std::vector<double> &values, const std::vector<int64_t> &shape,
                       DType dtype);

  // --- Pointwise ----------------------------------------------------------------------------
  // Binary ops broadcast NumPy-style (trailing dimensions aligned, size 1 stretches) and insert
  // explicit rfuse.broadcast_in_dim ops; a rank-0 operand broadcasts to anything. Operands of
  // different dtypes are an error (insert cast() first). Callers with other rules (R's
  // recycling) broadcast explicitly with broadcastInDim() first.
  TracedValue neg(TracedValue x);
  TracedValue abs(TracedValue x);
  TracedValue exp(TracedValue x);
  TracedValue log(TracedValue x);
  TracedValue sqrt(TracedValue x);
  TracedValue rsqrt(TracedValue x);
  TracedValue tanh(TracedValue x);
  TracedValue sigmoid(TracedValue x);
  TracedValue relu(TracedValue x);
  TracedValue gelu(TracedValue x, bool tanhApproximation = false);
  TracedValue sin(TracedValue x);
  TracedValue cos(TracedValue x);
  TracedValue floor(TracedValue x);
  TracedValue erfc(TracedValue x);
  TracedValue roundEven(TracedValue x);
  TracedValue tan(TracedValue x);
  TracedValue atan(TracedValue x);
  TracedValue asin(TracedValue x);
  TracedValue acos(TracedValue x);
  TracedValue tgamma(TracedValue x);
  TracedValue lgamma(TracedValue x);
  TracedValue normalQuantile(TracedValue x); /// (not "qnorm": R's headers define that as a macro)
  TracedValue digammaFunction(TracedValue x);  /// (nor "digamma" or "trigamma")
  TracedValue trigammaFunction(TracedValue x);
  TracedValue logicalNot(TracedValue x);

  TracedValue add(TracedValue a, TracedValue b);
  TracedValue sub(TracedValue a, TracedValue b);
  TracedValue mul(TracedValue a, TracedValue b);
  TracedValue div(TracedValue a, TracedValue b);
  TracedValue pow(TracedValue a, TracedValue b);
  TracedValue atan2(TracedValue y, TracedValue x);
  TracedValue maximum(TracedValue a, TracedValue b);
  TracedValue minimum(TracedValue a, TracedValue b);
  TracedValue logicalAnd(TracedValue a, TracedValue b);
  TracedValue logicalOr(TracedValue a, TracedValue b);
  TracedValue compare(ComparePredicate p, TracedValue a, TracedValue b);
  /// cond ? onTrue : onFalse, all three broadcast together.
  TracedValue select(TracedValue cond, TracedValue onTrue, TracedValue onFalse);
  TracedValue cast(TracedValue x, DType to);
  // x itself, through which differentiation sends no gradient (torch's detach()).
  TracedValue stopGradient(TracedValue x);

  // --- Data movement ------------------------------------------------------------------------
  /// Operand dimension i becomes result dimension dims[i] (strictly increasing).
  TracedValue broadcastInDim(TracedValue x, const std::vector<int64_t> &shape,
                             const std::vector<int64_t> &dims);
  /// NumPy-style broadcast to `shape`.
  TracedValue broadcastTo(TracedValue x, const std::vector<int64_t> &shape);
  TracedValue transpose(TracedValue x, const std::vector<int64_t> &perm);
  TracedValue reshape(TracedValue x, const std::vector<int64_t> &shape);

  // Indexing (0-based, static): see the ops' descriptions in RfuseOps.td.
  TracedValue slice(TracedValue x, const std::vector<int64_t> &start, const std::vector<int64_t> &limit,
                    const std::vector<int64_t> &strides);
  TracedValue reverse(TracedValue x, const std::vector<int64_t> &dims);
  TracedValue pad(TracedValue x, const std::vector<int64_t> &low, const std::vector<int64_t> &high,
                  const std::vector<int64_t> &interior, double value);
  TracedValue concat(const std::vector<TracedValue> &xs, int64_t dim);
  /// Cumulative "sum", "prod", "max" or "min" along `dim`.
  TracedValue scan(TracedValue x, int64_t dim, const std::string &kind);
  /// Uniform draws on [0, 1) (f32) of `shape` from rfuse.random_uniform's generator, keyed by
  /// `seed` (an i32 value of shape [2]: a program input, new at each call).
  TracedValue randomUniform(TracedValue seed, const std::vector<int64_t> &shape);
  /// x's entries along `dim` at the given positions (each in [0, size)).
  TracedValue gather(TracedValue x, const std::vector<int64_t> &indices, int64_t dim);
  /// x's entries along `dim` at computed 0-based positions (a vector, cast to i64 by truncation;
  /// the op clamps them into range: the caller checks them).
  TracedValue gatherAt(TracedValue x, TracedValue indices, int64_t dim);
  /// One recurrent layer over the whole sequence (rfuse.recurrent): `mode` is "lstm", "gru",
  /// "rnn_tanh" or "rnn_relu"; x [T, B, I], h0 [B, H], c0 (an LSTM's only; else empty), torch's
  /// weights and biases. Returns y [T, B, H], h_n (and c_n).
  std::vector<TracedValue> recurrent(const std::string &mode, TracedValue x, TracedValue h0, TracedValue c0,
                                     TracedValue wIh, TracedValue wHh, TracedValue bIh, TracedValue bHh);
  /// x sorted along `dim` (stable; NaN last, or above +Inf with nanLargest: rfuse.sort) and the
  /// 0-based positions (i64) along `dim` the values came from.
  std::pair<TracedValue, TracedValue> sort(TracedValue x, int64_t dim, bool descending, bool nanLargest);
  /// x's entries of each line along `dim` at the positions `indices` holds (x's rank and sizes
  /// but along `dim`; cast to i64 by truncation; the op clamps them into range: the caller
  /// checks them).
  TracedValue takeAlong(TracedValue x, TracedValue indices, int64_t dim);
  /// zeros of x's shape with `size` along `dim`, plus each entry of x at its position in
  /// `indices` (0-based, x's shape) along `dim` (rfuse.scatter_add; x a float value).
  TracedValue scatterAdd(TracedValue x, TracedValue indices, int64_t dim, int64_t size);
  /// x with x · a = b (rfuse.solve: R's solve(A, B) on a = A^T, b = B^T, LAPACK's dgesv); NaN
  /// everywhere where R's solve would stop (singular, or reciprocal condition below tolerance).
  TracedValue solve(TracedValue a, TracedValue b, double tolerance);
  /// R's chol() of the R matrix whose tensor is `a` (rfuse.cholesky); NaN where R's chol stops.
  TracedValue cholesky(TracedValue a);
  /// [log |det a|, sign] (rfuse.log_determinant: R's determinant(logarithm = TRUE)).
  TracedValue logDeterminant(TracedValue a);

  // --- Reductions ---------------------------------------------------------------------------
  TracedValue reduceSum(TracedValue x, const std::vector<int64_t> &dims, bool keepDims = false);
  TracedValue reduceMean(TracedValue x, const std::vector<int64_t> &dims, bool keepDims = false);
  TracedValue reduceMax(TracedValue x, const std::vector<int64_t> &dims, bool keepDims = false);
  TracedValue reduceMin(TracedValue x, const std::vector<int64_t> &dims, bool keepDims = false);

  // --- Contractions, convolution, pooling ------------------------------------------------------
  TracedValue matmul(TracedValue a, TracedValue b, bool transposeA = false,
                     bool transposeB = false);
  /// `bias` may be an invalid (default) TracedValue for none.
  TracedValue conv2d(TracedValue input, TracedValue filter, TracedValue bias,
                     const Conv2dParams &params = {});
  TracedValue maxPool2d(TracedValue input, const Pool2dParams &params = {});
  TracedValue avgPool2d(TracedValue input, const Pool2dParams &params = {});

  // --- Helper functions (traced R helpers become func.func + func.call) -------------------------
  /// Starts tracing a new function; input() then adds its arguments. Values of the enclosing
  /// function cannot be used until endFunction().
  void beginFunction(const std::string &name);
  TracedFunction endFunction(const std::vector<TracedValue> &results);
  std::vector<TracedValue> call(TracedFunction fn, const std::vector<TracedValue> &args);
  /// `forward` applied to `args` with `backward` as its vector-Jacobian product (rfuse.custom_vjp,
  /// torch's autograd_function): forward's first `numOutputs` results are the outputs, the rest
  /// residuals; backward takes the residuals and the outputs' cotangents and returns the float
  /// arguments' cotangents. Returns all of forward's results.
  std::vector<TracedValue> customVjp(TracedFunction forward, TracedFunction backward,
                                     const std::vector<TracedValue> &args, int64_t numOutputs);

  // --- Finishing ----------------------------------------------------------------------------
  /// Sets the entry function's results and verifies the module. Recording stops.
  void finish(const std::vector<TracedValue> &results);
  /// The module as MLIR text (pretty form; with locations when `withLocations`).
  std::string moduleText(bool withLocations = false) const;
  /// A stable 64-bit hash of the graph's structure, shapes and dtypes (input names and source
  /// locations excluded), for compile caches. Equal graphs hash equal across processes.
  uint64_t signatureHash() const;
  /// signatureHash() of a module's text without locations (moduleText(false)), printed once.
  static uint64_t signatureHashOf(const std::string &moduleText);

  // --- Introspection ------------------------------------------------------------------------
  std::vector<int64_t> shape(TracedValue v) const;
  DType dtype(TracedValue v) const;
  /// Source description attached to ops recorded from now on (e.g. the R call being traced);
  /// it becomes the ops' location. Empty clears it.
  void setSourceLocation(const std::string &description);
  /// "bf16" / "f16": float32 matmuls and convolutions recorded from now on carry an
  /// `rfuse.autocast` mark of that dtype (the rfuse-autocast pass runs them in it); "" stops.
  void setAutocast(const std::string &dtype);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// Starts (once a process) a thread that builds, verifies and prints a small graph: the first
/// GraphBuilder of a process pays for its MLIR context's dialect registration and for paging in
/// MLIR's code (~4 ms on these machines), which the R package's load hands to that thread instead
/// of the first trace. Failures are ignored (the first real builder reports them). The thread is
/// joined when the library unloads.
void warmGraphBuilderInBackground();

} // namespace rfuse

#endif
