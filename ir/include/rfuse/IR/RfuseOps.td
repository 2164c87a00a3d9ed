//===- RfuseOps.td - rfuse operations ---------------------------*- tablegen -*-===//
#ifndef RFUSE_OPS_TD
#define RFUSE_OPS_TD

include "rfuse/IR/RfuseBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"

class Rfuse_Op<string mnemonic, list<Trait> traits = []>
    : Op<Rfuse_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Rfuse_ConstantOp : Rfuse_Op<"constant", [ConstantLike, Pure, InferTypeOpAdaptor, Rfuse_VjpOpInterface]> {
  let summary = "A tensor constant (splat or dense).";
  let description = [{
    Materializes a constant tensor. R scalars that appear in traced code (`x * 2`) become
    rank-0 constants that are then broadcast explicitly.

    Example:
    ```mlir
    %c = rfuse.constant dense<2.0> : tensor<f32>
    %m = rfuse.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pointwise unary
//===----------------------------------------------------------------------===//

class Rfuse_UnaryOp<string mnemonic, string kind, Type T, string what>
    : Rfuse_Op<mnemonic, [Pure, SameOperandsAndResultType, Rfuse_PointwiseOpInterface,
                          Rfuse_VjpOpInterface]> {
  let summary = "Elementwise " # what # ".";
  let description = "Applies " # what # " to every element; the result has the operand's "
    # "type. Scalar semantics: `" # kind # "` in ScalarOps.h.\n\nExample:\n```mlir\n%y = rfuse."
    # mnemonic # " %x : tensor<4x8xf32>\n```";
  let arguments = (ins T:$operand);
  let results = (outs T:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let extraClassDeclaration = "::rfuse::ScalarOpKind getScalarOp() { return ::rfuse::ScalarOpKind::"
    # kind # "; }";
}

def Rfuse_NegOp : Rfuse_UnaryOp<"neg", "Neg", Rfuse_NumericTensor, "negation (-x)">;
def Rfuse_AbsOp : Rfuse_UnaryOp<"abs", "Abs", Rfuse_NumericTensor, "absolute value">;
def Rfuse_ExpOp : Rfuse_UnaryOp<"exp", "Exp", Rfuse_FloatTensor, "the exponential e^x">;
def Rfuse_LogOp : Rfuse_UnaryOp<"log", "Log", Rfuse_FloatTensor, "the natural logarithm">;
def Rfuse_SqrtOp : Rfuse_UnaryOp<"sqrt", "Sqrt", Rfuse_FloatTensor, "the square root">;
def Rfuse_RsqrtOp : Rfuse_UnaryOp<"rsqrt", "Rsqrt", Rfuse_FloatTensor,
                                  "the reciprocal square root 1/sqrt(x)">;
def Rfuse_TanhOp : Rfuse_UnaryOp<"tanh", "Tanh", Rfuse_FloatTensor, "the hyperbolic tangent">;
def Rfuse_SigmoidOp : Rfuse_UnaryOp<"sigmoid", "Sigmoid", Rfuse_FloatTensor,
                                    "the logistic sigmoid 1/(1+exp(-x))">;
def Rfuse_ReluOp : Rfuse_UnaryOp<"relu", "Relu", Rfuse_NumericTensor, "max(x, 0)">;
def Rfuse_SinOp : Rfuse_UnaryOp<"sin", "Sin", Rfuse_FloatTensor, "the sine">;
def Rfuse_CosOp : Rfuse_UnaryOp<"cos", "Cos", Rfuse_FloatTensor, "the cosine">;
def Rfuse_FloorOp : Rfuse_UnaryOp<"floor", "Floor", Rfuse_FloatTensor,
                                  "the largest integer not greater than x">;
def Rfuse_ErfcOp : Rfuse_UnaryOp<"erfc", "Erfc", Rfuse_FloatTensor,
                                 "the complementary error function 1 - erf(x)">;
def Rfuse_RoundEvenOp : Rfuse_UnaryOp<"round_even", "RoundEven", Rfuse_FloatTensor,
                                      "the nearest integer, ties to even">;
def Rfuse_TanOp : Rfuse_UnaryOp<"tan", "Tan", Rfuse_FloatTensor, "the tangent">;
def Rfuse_AtanOp : Rfuse_UnaryOp<"atan", "Atan", Rfuse_FloatTensor, "the arc tangent">;
def Rfuse_AsinOp : Rfuse_UnaryOp<"asin", "Asin", Rfuse_FloatTensor, "the arc sine">;
def Rfuse_AcosOp : Rfuse_UnaryOp<"acos", "Acos", Rfuse_FloatTensor, "the arc cosine">;
def Rfuse_TgammaOp : Rfuse_UnaryOp<"tgamma", "Tgamma", Rfuse_FloatTensor, "the gamma function">;
def Rfuse_LgammaOp : Rfuse_UnaryOp<"lgamma", "Lgamma", Rfuse_FloatTensor,
                                   "the logarithm of the absolute value of the gamma function">;
def Rfuse_QnormOp : Rfuse_UnaryOp<"qnorm", "Qnorm", Rfuse_FloatTensor,
                                  "the standard normal quantile (Wichura's AS 241, as R's qnorm)">;
def Rfuse_DigammaOp : Rfuse_UnaryOp<"digamma", "Digamma", Rfuse_FloatTensor,
                                    "the digamma function, the derivative of lgamma">;
def Rfuse_TrigammaOp : Rfuse_UnaryOp<"trigamma", "Trigamma", Rfuse_FloatTensor,
                                     "the trigamma function, the derivative of digamma">;

def Rfuse_NotOp : Rfuse_Op<"not", [Pure, SameOperandsAndResultType, Rfuse_PointwiseOpInterface,
                                   Rfuse_VjpOpInterface]> {
  let summary = "Elementwise logical negation of a mask.";
  let description = [{
    Example:
    ```mlir
    %n = rfuse.not %mask : tensor<4xi1>
    ```
  }];
  let arguments = (ins Rfuse_BoolTensor:$operand);
  let results = (outs Rfuse_BoolTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
  let extraClassDeclaration = [{
    ::rfuse::ScalarOpKind getScalarOp() { return ::rfuse::ScalarOpKind::Not; }
  }];
}

def Rfuse_GeluOp : Rfuse_Op<"gelu", [Pure, SameOperandsAndResultType, Rfuse_PointwiseOpInterface,
                                     Rfuse_VjpOpInterface]> {
  let summary = "Elementwise GELU, exact (erf) or tanh-approximated.";
  let description = [{
    `approximate = none` computes x * Phi(x) through erf; `approximate = tanh` uses
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), matching PyTorch's `approximate` argument.

    Example:
    ```mlir
    %y = rfuse.gelu %x approximate = tanh : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Rfuse_FloatTensor:$operand,
                   DefaultValuedAttr<Rfuse_GeluApproxAttr, "::rfuse::GeluApproximation::none">:$approximate);
  let results = (outs Rfuse_FloatTensor:$result);
  let assemblyFormat = "$operand (`approximate` `=` $approximate^)? attr-dict `:` type($result)";
  let extraClassDeclaration = [{
    ::rfuse::ScalarOpKind getScalarOp() {
      return getApproximate() == ::rfuse::GeluApproximation::tanh
                 ? ::rfuse::ScalarOpKind::GeluTanh : ::rfuse::ScalarOpKind::GeluErf;
    }
  }];
}

def Rfuse_GeluGradOp : Rfuse_Op<"gelu_grad", [Pure, SameOperandsAndResultType,
                                              Rfuse_PointwiseOpInterface]> {
  let summary = "Elementwise derivative of GELU, d gelu(x) / dx.";
  let description = [{
    The derivative of `rfuse.gelu` with the same `approximate`: Phi(x) + x phi(x) (erf), or the
    derivative of the tanh form. Made by `rfuse-autodiff` for GELU's vector-Jacobian product.

    Example:
    ```mlir
    %d = rfuse.gelu_grad %x approximate = tanh : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Rfuse_FloatTensor:$operand,
                   DefaultValuedAttr<Rfuse_GeluApproxAttr, "::rfuse::GeluApproximation::none">:$approximate);
  let results = (outs Rfuse_FloatTensor:$result);
  let assemblyFormat = "$operand (`approximate` `=` $approximate^)? attr-dict `:` type($result)";
  let extraClassDeclaration = [{
    ::rfuse::ScalarOpKind getScalarOp() {
      return getApproximate() == ::rfuse::GeluApproximation::tanh
                 ? ::rfuse::ScalarOpKind::GeluTanhGrad : ::rfuse::ScalarOpKind::GeluErfGrad;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Pointwise binary
//===----------------------------------------------------------------------===//

class Rfuse_BinaryOp<string mnemonic, string kind, Type T, string what>
    : Rfuse_Op<mnemonic, [Pure, SameOperandsAndResultType, Rfuse_PointwiseOpInterface,
                          Rfuse_VjpOpInterface]> {
  let summary = "Elementwise " # what # ".";
  let description = "Computes " # what # " element by element. Operands and result share one "
    # "type: broadcasting is explicit (`rfuse.broadcast_in_dim`). Scalar semantics: `" # kind
    # "` in ScalarOps.h.\n\nExample:\n```mlir\n%z = rfuse." # mnemonic
    # " %x, %y : tensor<4x8xf32>\n```";
  let arguments = (ins T:$lhs, T:$rhs);
  let results = (outs T:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
  let extraClassDeclaration = "::rfuse::ScalarOpKind getScalarOp() { return ::rfuse::ScalarOpKind::"
    # kind # "; }";
}

def Rfuse_AddOp : Rfuse_BinaryOp<"add", "Add", Rfuse_NumericTensor, "addition (lhs + rhs)"> {
  let hasFolder = 1;
}
def Rfuse_SubOp : Rfuse_BinaryOp<"sub", "Sub", Rfuse_NumericTensor, "subtraction (lhs - rhs)"> {
  let hasFolder = 1;
}
def Rfuse_MulOp : Rfuse_BinaryOp<"mul", "Mul", Rfuse_NumericTensor, "multiplication (lhs * rhs)"> {
  let hasFolder = 1;
}
def Rfuse_DivOp : Rfuse_BinaryOp<"div", "Div", Rfuse_FloatTensor, "division (lhs / rhs)"> {
  let hasFolder = 1;
}
def Rfuse_PowOp : Rfuse_BinaryOp<"pow", "Pow", Rfuse_FloatTensor, "power (lhs ^ rhs)"> {
  // x ^ 2 -> x * x (exact: R's R_pow computes it so); in f32, x ^ 3 and x ^ 4 -> products.
  let hasCanonicalizer = 1;
}
def Rfuse_Atan2Op : Rfuse_BinaryOp<"atan2", "Atan2", Rfuse_FloatTensor,
                                   "the angle of the point (rhs, lhs): atan2(lhs, rhs)">;
def Rfuse_MaxOp : Rfuse_BinaryOp<"max", "Max", Rfuse_NumericTensor,
                                 "maximum, propagating NaN (R's pmax)">;
def Rfuse_MinOp : Rfuse_BinaryOp<"min", "Min", Rfuse_NumericTensor,
                                 "minimum, propagating NaN (R's pmin)">;
def Rfuse_AndOp : Rfuse_BinaryOp<"and", "And", Rfuse_BoolTensor, "logical and of masks">;
def Rfuse_OrOp : Rfuse_BinaryOp<"or", "Or", Rfuse_BoolTensor, "logical or of masks">;

def Rfuse_CompareOp : Rfuse_Op<"compare", [Pure, SameTypeOperands, InferTypeOpAdaptor,
                                           Rfuse_PointwiseOpInterface, Rfuse_VjpOpInterface]> {
  let summary = "Elementwise comparison producing an i1 mask.";
  let description = [{
    Compares `lhs` and `rhs` element by element with the predicate `eq`, `ne`, `lt`, `le`, `gt`
    or `ge`; the result has the operands' shape and element type i1. Comparisons with NaN are
    false, except `ne`, which is true (IEEE).

    Example:
    ```mlir
    %m = rfuse.compare lt, %x, %y : tensor<4xf32>
    ```
  }];
  let arguments = (ins Rfuse_CmpPredicateAttr:$predicate, Rfuse_Tensor:$lhs, Rfuse_Tensor:$rhs);
  let results = (outs Rfuse_BoolTensor:$result);
  let assemblyFormat = "$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs)";
  let extraClassDeclaration = [{ ::rfuse::ScalarOpKind getScalarOp(); }];
}

def Rfuse_SelectOp : Rfuse_Op<"select", [Pure, AllTypesMatch<["on_true", "on_false", "result"]>,
                                         Rfuse_PointwiseOpInterface, Rfuse_VjpOpInterface]> {
  let summary = "Elementwise choice between two tensors by a mask (R's ifelse).";
  let description = [{
    `result[i] = cond[i] ? on_true[i] : on_false[i]`. All operands have one shape.

    Example:
    ```mlir
    %r = rfuse.select %mask, %x, %y : tensor<4xi1>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Rfuse_BoolTensor:$cond, Rfuse_Tensor:$on_true, Rfuse_Tensor:$on_false);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$cond `,` $on_true `,` $on_false attr-dict `:` type($cond) `,` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::rfuse::ScalarOpKind getScalarOp() { return ::rfuse::ScalarOpKind::Select; }
  }];
}

def Rfuse_CastOp : Rfuse_Op<"cast", [Pure, Rfuse_VjpOpInterface]> {
  let summary = "Elementwise conversion to another element type.";
  let description = [{
    Converts each element: float to float rounds to nearest even; float to integer truncates
    toward zero; to i1 is `x != 0`; i1 to numbers is 0 or 1. Shapes must match.

    Example:
    ```mlir
    %h = rfuse.cast %x : tensor<4xf32> to tensor<4xf16>
    ```
  }];
  let arguments = (ins Rfuse_Tensor:$input);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Rfuse_BroadcastInDimOp : Rfuse_Op<"broadcast_in_dim", [Pure, Rfuse_VjpOpInterface]> {
  let summary = "Explicit broadcast: operand dimension i maps to result dimension dims[i].";
  let description = [{
    Each operand dimension `i` becomes result dimension `dims[i]` (strictly increasing); an
    operand dimension of size 1 is repeated to the result's size, any other must equal it. Result
    dimensions not in `dims` are new. R's recycling rules are resolved into this op by the
    frontend, so every later pass sees a plain iteration space.

    Example: a length-3 vector recycled down the columns of a 3x4 R matrix, i.e. a row-major
    tensor<4x3>:
    ```mlir
    %b = rfuse.broadcast_in_dim %v, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Rfuse_Tensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$input `,` `dims` `=` $dims attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Rfuse_TransposeOp : Rfuse_Op<"transpose", [Pure, InferTypeOpAdaptor, Rfuse_VjpOpInterface]> {
  let summary = "Permutes dimensions: result dimension i is operand dimension perm[i].";
  let description = [{
    Example:
    ```mlir
    %t = rfuse.transpose %x, perm = [1, 0] : (tensor<3x4xf32>) -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Rfuse_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$input `,` `perm` `=` $perm attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Rfuse_ReshapeOp : Rfuse_Op<"reshape", [Pure, Rfuse_VjpOpInterface]> {
  let summary = "Reinterprets a row-major tensor with a new shape of the same element count.";
  let description = [{
    Example:
    ```mlir
    %r = rfuse.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
    ```
  }];
  let arguments = (ins Rfuse_Tensor:$input);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Indexing: static slices, reversal, padding, concatenation and gathers. Codegen reads them as
// index maps (a kernel computes the element it needs at the mapped position), never as copies.
//===----------------------------------------------------------------------===//

def Rfuse_SliceOp : Rfuse_Op<"slice", [Pure, InferTypeOpAdaptor, Rfuse_VjpOpInterface]> {
  let summary = "A static strided slice: result[i] = input[start + i * strides].";
  let description = [{
    Along each dimension d takes the elements start[d], start[d] + strides[d], ... below
    limit[d] (0 <= start <= limit <= size, strides >= 1); the result has
    ceil((limit - start) / strides) elements there. R's `x[2:5]`, `X[, j]` and `x[-1]` are
    slices (0-based here).

    Example (R's `x[2:4]` of a length-6 vector):
    ```mlir
    %s = rfuse.slice %x {start = array<i64: 1>, limit = array<i64: 4>, strides = array<i64: 1>} : (tensor<6xf32>) -> tensor<3xf32>
    ```
  }];
  let arguments = (ins Rfuse_Tensor:$input, DenseI64ArrayAttr:$start, DenseI64ArrayAttr:$limit,
                   DenseI64ArrayAttr:$strides);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Rfuse_ReverseOp : Rfuse_Op<"reverse", [Pure, SameOperandsAndResultType, Rfuse_VjpOpInterface]> {
  let summary = "Reverses the order of elements along the given dimensions.";
  let description = [{
    result[..., i, ...] = input[..., n - 1 - i, ...] along every dimension in `dims` (unique,
    in range). R's `rev(x)`.

    Example:
    ```mlir
    %r = rfuse.reverse %x, dims = [0] : tensor<6xf32>
    ```
  }];
  let arguments = (ins Rfuse_Tensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$input `,` `dims` `=` $dims attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Rfuse_PadOp : Rfuse_Op<"pad", [Pure, InferTypeOpAdaptor, Rfuse_VjpOpInterface]> {
  let summary = "Pads with a constant: `low` before, `high` after, `interior` between elements.";
  let description = [{
    Along each dimension d the result holds low[d] copies of `value`, then the input's elements
    with interior[d] copies of `value` between neighbours, then high[d] copies (all >= 0): a
    result size of low + high + n + (n - 1) * interior (low + high when n = 0). The gradient of
    a strided slice; R's `c(0, x)` of a traced `x`.

    Example:
    ```mlir
    %p = rfuse.pad %x {low = array<i64: 1>, high = array<i64: 0>, interior = array<i64: 0>, value = 0.0 : f64} : (tensor<5xf32>) -> tensor<6xf32>
    ```
  }];
  let arguments = (ins Rfuse_Tensor:$input, DenseI64ArrayAttr:$low, DenseI64ArrayAttr:$high,
                   DenseI64ArrayAttr:$interior, F64Attr:$value);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Rfuse_ConcatOp : Rfuse_Op<"concat", [Pure, SameOperandsElementType, InferTypeOpAdaptor,
                                         Rfuse_VjpOpInterface]> {
  let summary = "Concatenates tensors of one rank along dimension `dim`.";
  let description = [{
    Every other dimension must agree; the result's `dim` is the sum of the operands'. R's
    `c()`, `cbind()` and `rbind()` of traced values.

    Example:
    ```mlir
    %c = rfuse.concat(%a, %b) dim = 0 : (tensor<2xf32>, tensor<3xf32>) -> tensor<5xf32>
    ```
  }];
  let arguments = (ins Variadic<Rfuse_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "`(` $inputs `)` `dim` `=` $dim attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Rfuse_GatherOp : Rfuse_Op<"gather", [Pure, InferTypeOpAdaptor, Rfuse_VjpOpInterface]> {
  let summary = "Selects entries along one dimension by an index vector.";
  let description = [{
    result[..., i, ...] = input[..., indices[i], ...] along dimension `dim`; `indices` is a
    1-D i32 or i64 tensor of 0-based positions. A constant index vector out of range is a
    verifier error; a computed one is clamped to [0, n - 1] (rfuse's frontend never passes
    one it has not checked). R's `x[c(3, 1)]`, `X[, c(1, 1, 2)]`, `x[-c(2, 4)]`, `diag(X)`.

    Example:
    ```mlir
    %i = rfuse.constant dense<[2, 0]> : tensor<2xi64>
    %g = rfuse.gather %x, %i, dim = 0 : (tensor<6xf32>, tensor<2xi64>) -> tensor<2xf32>
    ```
  }];
  let arguments = (ins Rfuse_Tensor:$input, StaticShapeTensorOf<[I32, I64]>:$indices, I64Attr:$dim);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$input `,` $indices `,` `dim` `=` $dim attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Rfuse_SortOp : Rfuse_Op<"sort", [Pure, InferTypeOpAdaptor, Rfuse_VjpOpInterface]> {
  let summary = "Sorts each line along one dimension: the values, and where each came from.";
  let description = [{
    Each line along `dim` sorted ascending (or with `descending`, descending); `indices` holds,
    for each result position, the 0-based position along `dim` of the input element it holds.
    Stable: equal elements keep their input order, in either direction (R's radix sort, and
    torch's `stable = TRUE`). NaN: with `nan_largest` NaN is above +Inf (torch: last ascending,
    first descending); without it NaN goes last in either direction (R's `na.last = TRUE`).
    -0 and +0 are equal. Its gradient puts each cotangent back where its value came from (a
    take_along by the inverse permutation). Run on the host by the interpreter (a host step).

    Example (R's `sort(x, decreasing = TRUE, na.last = TRUE)`):
    ```mlir
    %v, %i = rfuse.sort %x, dim = 0 {descending} : tensor<6xf64>
    ```
  }];
  let arguments = (ins Rfuse_NumericTensor:$input, I64Attr:$dim, UnitAttr:$descending, UnitAttr:$nan_largest);
  let results = (outs Rfuse_NumericTensor:$values, StaticShapeTensorOf<[I64]>:$indices);
  let assemblyFormat = "$input `,` `dim` `=` $dim attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Rfuse_TakeAlongOp : Rfuse_Op<"take_along", [Pure, Rfuse_VjpOpInterface]> {
  let summary = "Selects entries of each line along one dimension by a tensor of positions.";
  let description = [{
    result[..., i, ...] = input[..., indices[..., i, ...], ...] along `dim`: `indices` (i32 or
    i64, 0-based) has the input's rank and its sizes in every other dim; the result has the
    indices' shape. A computed position out of range is clamped to [0, n - 1] (the frontend
    checks what it passes). torch's `torch_gather(x, dim, index)` / `take_along_dim`; the
    gradient of rfuse.sort. Its own gradient adds each cotangent back at its position
    (rfuse.scatter_add). Run on the host by the interpreter (a host step).

    Example:
    ```mlir
    %t = rfuse.take_along %x, %i, dim = 1 : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Rfuse_Tensor:$input, StaticShapeTensorOf<[I32, I64]>:$indices, I64Attr:$dim);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$input `,` $indices `,` `dim` `=` $dim attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Rfuse_ScatterAddOp : Rfuse_Op<"scatter_add", [Pure, Rfuse_VjpOpInterface]> {
  let summary = "Adds the entries of each line along one dimension at a tensor of positions.";
  let description = [{
    result = zeros; result[..., indices[..., i, ...], ...] += src[..., i, ...] along `dim`:
    `indices` (i32 or i64, 0-based) has the source's shape; the result has the source's sizes in
    every other dim and its own length along `dim` (its type says it). Entries at the same
    position add up in source order. A computed position out of range is clamped to [0, n - 1],
    as rfuse.take_along's. The gradient of rfuse.take_along (torch's `torch_gather`), and
    torch's `scatter_add` into zeros; its own gradient takes each cotangent from its position
    (rfuse.take_along). Run on the host by the interpreter (a host step).

    Example:
    ```mlir
    %s = rfuse.scatter_add %g, %i, dim = 1 : (tensor<2x2xf32>, tensor<2x2xi64>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Rfuse_FloatTensor:$src, StaticShapeTensorOf<[I32, I64]>:$indices, I64Attr:$dim);
  let results = (outs Rfuse_FloatTensor:$result);
  let assemblyFormat = "$src `,` $indices `,` `dim` `=` $dim attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Rfuse_ScanOp : Rfuse_Op<"scan", [Pure, SameOperandsAndResultType, Rfuse_VjpOpInterface]> {
  let summary = "Cumulative sum, product, maximum or minimum along one dimension.";
  let description = [{
    result[..., i, ...] = input[..., 0, ...] op ... op input[..., i, ...] along `dim`. Float sums
    and products accumulate in f64 (R's cumsum / cumprod accumulate in long double); max and min
    propagate NaN from where it appears on, as R's cummax / cummin do. A kernel of its own: one
    sequential pass per line.

    Example (R's cumsum of a vector):
    ```mlir
    %c = rfuse.scan %x, dim = 0, kind = sum : tensor<6xf64>
    ```
  }];
  let arguments = (ins Rfuse_NumericTensor:$input, I64Attr:$dim, Rfuse_ScanKindAttr:$kind);
  let results = (outs Rfuse_NumericTensor:$result);
  let assemblyFormat = "$input `,` `dim` `=` $dim `,` `kind` `=` $kind attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Rfuse_RandomUniformOp : Rfuse_Op<"random_uniform", [Pure, Rfuse_VjpOpInterface]> {
  let summary = "Uniform random numbers on [0, 1) from a counter-based generator and a seed.";
  let description = [{
    Element `i` (its row-major flat index) is the first 32-bit word of Philox4x32-10 (Salmon et
    al., SC'11; the generator of cuRAND and PyTorch) at counter `(i mod 2^32, i div 2^32, 0, 0)`
    under the key `seed` (two i32 words), its top 24 bits times 2^-24. The numbers depend only
    on the seed and the position: every backend and every split of the work gives the same ones.
    Pure in `seed`: a program draws afresh by taking a new seed at each call (dropout masks: the
    seed comes from R's generator, so `set.seed` reproduces a run). A kernel of its own; no
    gradient.

    Example (the draws of a dropout mask):
    ```mlir
    %u = rfuse.random_uniform %seed : tensor<2xi32> -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[I32]>:$seed);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "$seed attr-dict `:` type($seed) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// Pure: every rank runs the same program through the same passes, so a transformation that
// moves, merges or drops an all-reduce does so on every rank alike.
def Rfuse_AllReduceOp : Rfuse_Op<"all_reduce", [Pure, InferTypeOpAdaptor]> {
  let summary = "The sum or mean of each operand over the ranks of the process group.";
  let description = [{
    Result k is operand k summed (or averaged) element by element over every rank of the
    process group the runtime has started (data-parallel training: the gradients of each rank's
    shard of the batch, averaged). With no group, or a group of one, it is the identity. Several
    operands make one bucket: one grouped collective (NCCL's group call) on the GPU, run on a
    communication stream of its own so that it overlaps the steps after it until a result is
    needed. Operands may differ in type; each result has its operand's type.

    Example:
    ```mlir
    %g:2 = rfuse.all_reduce %dw, %db reduction = mean : tensor<64x32xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<Rfuse_FloatTensor>:$inputs, Rfuse_CollectiveReductionAttr:$reduction);
  let results = (outs Variadic<Rfuse_FloatTensor>:$results);
  let assemblyFormat = "$inputs `reduction` `=` $reduction attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Rfuse_ReduceOp<string mnemonic, Type T, string what>
    : Rfuse_Op<mnemonic, [Pure, InferTypeOpAdaptor, Rfuse_VjpOpInterface]> {
  let summary = "The " # what # " over the given dimensions.";
  let description = "Reduces `input` over the dimensions listed in `dims` (unique, in range) "
    # "to their " # what # ". With `keep_dims` the reduced dimensions stay as size 1. "
    # "\n\nExample (R's rowSums of a 3x4 R matrix, i.e. a tensor<4x3> in rfuse's view):\n"
    # "```mlir\n%s = rfuse." # mnemonic
    # " %x, dims = [0] : (tensor<4x3xf32>) -> tensor<3xf32>\n```";
  let arguments = (ins T:$input, DenseI64ArrayAttr:$dims,
                   DefaultValuedAttr<BoolAttr, "false">:$keep_dims);
  let results = (outs T:$result);
  let assemblyFormat = "$input `,` `dims` `=` $dims attr-dict `:` functional-type(operands, results)";
}

def Rfuse_ReduceSumOp : Rfuse_ReduceOp<"reduce_sum", Rfuse_NumericTensor, "sum">;
def Rfuse_ReduceMeanOp : Rfuse_ReduceOp<"reduce_mean", Rfuse_FloatTensor, "arithmetic mean">;
def Rfuse_ReduceMaxOp : Rfuse_ReduceOp<"reduce_max", Rfuse_NumericTensor, "maximum">;
def Rfuse_ReduceMinOp : Rfuse_ReduceOp<"reduce_min", Rfuse_NumericTensor, "minimum">;

//===----------------------------------------------------------------------===//
// Contractions, convolution, pooling
//===----------------------------------------------------------------------===//

def Rfuse_SolveOp : Rfuse_Op<"solve", [Pure, Rfuse_VjpOpInterface]> {
  let summary = "Solves a square linear system as R's solve() does (LAPACK's dgesv and dgecon).";
  let description = [{
    `x · a = b` for a square `a` [n, n] and `b` [k, n]: x = b a^-1. In R's layout (an R n x n
    matrix A is the tensor A^T) this is R's `solve(A, B)`, X = A^-1 B, with a = A^T, b = B^T and
    x = X^T; so LAPACK's column-major dgesv (LU with partial pivoting) runs on the tensors' data
    as they are, exactly as R's `solve` runs it. Where R's `solve` stops with an error — `a`
    exactly singular, or, for `tolerance` > 0, the reciprocal condition number (dgecon's 1-norm
    estimate) below `tolerance` — every element of `x` is NaN: the R package checks for it and
    lets base R answer (with R's error). Computed in f64 whatever the element type, on the host
    (the interpreter, on either backend).

    Example:
    ```mlir
    %x = rfuse.solve %a, %b tolerance = 2.220446e-16 : (tensor<3x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
    ```
  }];
  let arguments = (ins Rfuse_FloatTensor:$a, Rfuse_FloatTensor:$b, F64Attr:$tolerance);
  let results = (outs Rfuse_FloatTensor:$result);
  let assemblyFormat = "$a `,` $b `tolerance` `=` $tolerance attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Rfuse_CholeskyOp : Rfuse_Op<"cholesky", [Pure, SameOperandsAndResultType]> {
  let summary = "The Cholesky factor, as R's chol() computes it (LAPACK's dpotrf).";
  let description = [{
    For R's symmetric positive definite n x n matrix A (the tensor `a` = A^T), R's `chol(A)`: the
    upper triangular U with U^T U = A, read from A's upper triangle, as the tensor U^T (zeros on
    the other side). LAPACK's dpotrf runs on the tensor's data as R's column-major matrix, as R's
    chol does. Where R's `chol` stops (a leading minor not positive), every element is NaN: the
    R package lets base R answer, with R's error. In f64 whatever the element type, on the host.
  }];
  let arguments = (ins Rfuse_FloatTensor:$input);
  let results = (outs Rfuse_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Rfuse_LogDeterminantOp : Rfuse_Op<"log_determinant", [Pure]> {
  let summary = "log |det| and the sign of a square matrix, as R's determinant() (LAPACK's dgetrf).";
  let description = [{
    For a square `a` [n, n], a [2] tensor: the logarithm of the modulus of its determinant and the
    determinant's sign (+-1), as R's `determinant(A, logarithm = TRUE)` computes them from the LU
    factorization with partial pivoting (LAPACK's dgetrf on the data as R's column-major A = a^T,
    whose determinant is a's); a singular matrix gives -Inf and sign 1, as R's. R's `det(A)` is
    sign * exp(modulus). In f64 whatever the element type, on the host.
  }];
  let arguments = (ins Rfuse_FloatTensor:$input);
  let results = (outs Rfuse_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Rfuse_MatmulOp : Rfuse_Op<"matmul", [Pure, InferTypeOpAdaptor, Rfuse_VjpOpInterface]> {
  let summary = "Matrix product, optionally batched, with transpose flags.";
  let description = [{
    `lhs` is [B?, M, K] (or [B?, K, M] with `transpose_a`), `rhs` is [B?, K, N] (or
    [B?, N, K] with `transpose_b`); the result is [B?, M, N]. A rank-2 operand is broadcast over
    the other's batch. Element types must match; accumulation is in at least f32.

    Example:
    ```mlir
    %c = rfuse.matmul %a, %b {transpose_b = true} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Rfuse_NumericTensor:$lhs, Rfuse_NumericTensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Rfuse_NumericTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Rfuse_AttentionOp : Rfuse_Op<"attention", [Pure, AttrSizedOperandSegments, Rfuse_VjpOpInterface]> {
  let summary = "Scaled dot-product attention in one kernel: softmax(scale q k^T) v, and each row's log-sum-exp.";
  let description = [{
    `q` [B, L, D], `k` [B, S, D], `v` [B, S, Dv] of one float type. `out` [B, L, Dv] (q's type)
    is softmax(scale q k^T) v, the softmax over S in f32 and its probabilities rounded to q's
    type before the product with `v` (as an autocast program rounds them); `lse` [B, L] (f32) is
    log sum_s exp(scale q_l . k_s), what the gradient recomputes the probabilities from.
    rfuse-fuse-attention makes it from the softmax of a bf16 / f16 product and its product with
    `v`. On the GPU one generated kernel runs it (bf16 / f16, D = Dv a multiple of 16 up to 128:
    tensor-core products, the scores never in memory); otherwise the interpreter.

    Masks: a score (l, s) is masked when `causal` is set and s > l (torch's `is_causal`, aligned
    at the top left), or where the optional `mask` (i1, [B or 1, L or 1, S or 1], a size-1 dim
    spread over the others) is true. A masked score is `mask_value` (absent: -inf), as
    `masked_fill(scores, mask, value)` after the scale makes it: a row with every score masked at
    -inf gives NaN, as the softmax written out does.

    Dropout on the probabilities: with `dropout_seed` (two i32 words, rfuse.random_uniform's key)
    probability (b, l, s) is kept, times `dropout_scale`, where the uniform draw at flat index
    b * dropout_strides[0] + l * dropout_strides[1] + s * dropout_strides[2] (rfuse.random_uniform's
    element there) is at least `dropout_threshold`, and is 0 otherwise: `P * (u >= threshold) *
    scale` as the program written out computes it (in f32, before the rounding to q's type), with
    its draws in that program's layout. `lse` stays the undropped softmax's.

    Example:
    ```mlir
    %o, %lse = rfuse.attention %q, %k, %v scale = 1.250000e-01 : (tensor<16x256x64xbf16>, tensor<16x256x64xbf16>, tensor<16x256x64xbf16>) -> (tensor<16x256x64xbf16>, tensor<16x256xf32>)
    %o2, %lse2 = rfuse.attention %q, %k, %v mask %pad scale = 1.250000e-01 causal : (tensor<16x256x64xbf16>, tensor<16x256x64xbf16>, tensor<16x256x64xbf16>, tensor<16x1x256xi1>) -> (tensor<16x256x64xbf16>, tensor<16x256xf32>)
    %o3, %lse3 = rfuse.attention %q, %k, %v dropout %seed scale = 1.250000e-01 {dropout_scale = 1.1111111640930176 : f64, dropout_strides = array<i64: 65536, 256, 1>, dropout_threshold = 0.10000002384185791 : f64} : (tensor<16x256x64xbf16>, tensor<16x256x64xbf16>, tensor<16x256x64xbf16>, tensor<2xi32>) -> (tensor<16x256x64xbf16>, tensor<16x256xf32>)
    ```
  }];
  let arguments = (ins Rfuse_FloatTensor:$q, Rfuse_FloatTensor:$k, Rfuse_FloatTensor:$v,
                   Optional<Rfuse_BoolTensor>:$mask, Optional<StaticShapeTensorOf<[I32]>>:$dropout_seed,
                   F64Attr:$scale, UnitAttr:$causal, OptionalAttr<F64Attr>:$mask_value,
                   OptionalAttr<F64Attr>:$dropout_threshold, OptionalAttr<F64Attr>:$dropout_scale,
                   OptionalAttr<DenseI64ArrayAttr>:$dropout_strides);
  let results = (outs Rfuse_FloatTensor:$out, Rfuse_FloatTensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` $mask^)? (`dropout` $dropout_seed^)? `scale` `=` $scale (`causal` $causal^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Rfuse_AttentionBackwardOp : Rfuse_Op<"attention_backward", [Pure, AttrSizedOperandSegments]> {
  let summary = "The gradients of rfuse.attention's q, k and v, in one kernel.";
  let description = [{
    From the forward's operands, the output's cotangent `grad_out` [B, L, D], the forward's `lse`
    [B, L] and `delta` [B, L] = sum_d grad_out * out (both f32): the probabilities are
    recomputed from `lse`, dS = P (grad_out v^T - delta), and `grad_q` = scale dS k, `grad_k` =
    scale dS^T q, `grad_v` = P^T grad_out, each accumulated in f32 and returned in q's type (P and
    dS rounded to q's type before their products, as in the forward). `mask`, `causal` and
    `mask_value` are the forward's, and so is its dropout (the same draws): with P' the kept
    probabilities times `dropout_scale`, `grad_v` = P'^T grad_out and dS = P (dP' D - delta),
    D the kept positions times the scale (delta = sum_d grad_out * out is then still sum_s P dP).
  }];
  let arguments = (ins Rfuse_FloatTensor:$q, Rfuse_FloatTensor:$k, Rfuse_FloatTensor:$v,
                   Rfuse_FloatTensor:$grad_out, Rfuse_FloatTensor:$lse, Rfuse_FloatTensor:$delta,
                   Optional<Rfuse_BoolTensor>:$mask, Optional<StaticShapeTensorOf<[I32]>>:$dropout_seed,
                   F64Attr:$scale, UnitAttr:$causal, OptionalAttr<F64Attr>:$mask_value,
                   OptionalAttr<F64Attr>:$dropout_threshold, OptionalAttr<F64Attr>:$dropout_scale,
                   OptionalAttr<DenseI64ArrayAttr>:$dropout_strides);
  let results = (outs Rfuse_FloatTensor:$grad_q, Rfuse_FloatTensor:$grad_k, Rfuse_FloatTensor:$grad_v);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $grad_out `,` $lse `,` $delta (`mask` $mask^)? (`dropout` $dropout_seed^)? `scale` `=` $scale (`causal` $causal^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Rfuse_RecurrentOp : Rfuse_Op<"recurrent", [Pure, DeclareOpInterfaceMethods<Rfuse_VjpOpInterface, ["buildVjp"]>]> {
  let summary = "One recurrent layer (LSTM, GRU or Elman RNN) over a whole sequence, one direction.";
  let description = [{
    torch's `nn_lstm` / `nn_gru` / `nn_rnn` layer for one direction: `x` [T, B, I] (time
    first, as cuDNN reads it fastest), the initial state `h0` [B, H] (and, for an LSTM, `c0` [B,
    H]), weights `w_ih` [G H, I] and `w_hh` [G H, H] and biases `b_ih`, `b_hh` [G H], G = 4
    (gates i, f, g, o), 3 (r, z, n) or 1, laid out as torch's. Results: every step's hidden
    state `y` [T, B, H], the last `h_n` [B, H] (and the LSTM's last cell state `c_n`). One float
    type throughout.
    GRU: n = tanh(x W_in + b_in + r (h W_hn + b_hn)), as torch and cuDNN compute it.

    On the GPU one cuDNN RNN call runs it (cudnnRNNForward; its gradient cudnnRNNBackwardData_v8 /
    cudnnRNNBackwardWeights_v8); otherwise the interpreter. The R frontend records it for
    programs traced for a GPU; for the CPU it writes the steps out (a product and a fused cell
    kernel per step).

    Example:
    ```mlir
    %y, %hn, %cn = rfuse.recurrent %x, %h0 cell %c0 weights %wih, %whh, %bih, %bhh mode = lstm : (tensor<5x8x3xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<16x3xf32>, tensor<16x4xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<5x8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>)
    ```
  }];
  let arguments = (ins Rfuse_RecurrentModeAttr:$mode, Rfuse_FloatTensor:$x, Rfuse_FloatTensor:$h0,
                   Optional<Rfuse_FloatTensor>:$c0, Rfuse_FloatTensor:$w_ih, Rfuse_FloatTensor:$w_hh,
                   Rfuse_FloatTensor:$b_ih, Rfuse_FloatTensor:$b_hh);
  let results = (outs Rfuse_FloatTensor:$y, Rfuse_FloatTensor:$h_n, Optional<Rfuse_FloatTensor>:$c_n);
  let assemblyFormat = [{
    $x `,` $h0 (`cell` $c0^)? `weights` $w_ih `,` $w_hh `,` $b_ih `,` $b_hh `mode` `=` $mode attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Rfuse_RecurrentBackwardOp : Rfuse_Op<"recurrent_backward", [Pure, AttrSizedOperandSegments]> {
  let summary = "The gradients of rfuse.recurrent's input, initial state, weights and biases.";
  let description = [{
    From the forward's operands and the cotangents of its results (`grad_y` [T, B, H], `grad_h_n`
    [B, H] and, for an LSTM, `grad_c_n`): `grad_x`, `grad_h0` (`grad_c0`), `grad_w_ih`,
    `grad_w_hh`, `grad_b_ih`, `grad_b_hh`, each of its operand's type (backpropagation through
    time; `grad_b_ih` equals `grad_b_hh` except for the GRU's n gate). On the GPU the forward is
    run again in training mode for cuDNN's reserve space, then cuDNN's backward calls.
  }];
  let arguments = (ins Rfuse_RecurrentModeAttr:$mode, Rfuse_FloatTensor:$x, Rfuse_FloatTensor:$h0,
                   Optional<Rfuse_FloatTensor>:$c0, Rfuse_FloatTensor:$w_ih, Rfuse_FloatTensor:$w_hh,
                   Rfuse_FloatTensor:$b_ih, Rfuse_FloatTensor:$b_hh, Rfuse_FloatTensor:$grad_y,
                   Rfuse_FloatTensor:$grad_h_n, Optional<Rfuse_FloatTensor>:$grad_c_n);
  let results = (outs Rfuse_FloatTensor:$grad_x, Rfuse_FloatTensor:$grad_h0, Optional<Rfuse_FloatTensor>:$grad_c0,
                 Rfuse_FloatTensor:$grad_w_ih, Rfuse_FloatTensor:$grad_w_hh, Rfuse_FloatTensor:$grad_b_ih,
                 Rfuse_FloatTensor:$grad_b_hh);
  let assemblyFormat = [{
    $x `,` $h0 (`cell` $c0^)? `weights` $w_ih `,` $w_hh `,` $b_ih `,` $b_hh `grads` $grad_y `,` $grad_h_n (`cell_grad` $grad_c_n^)? `mode` `=` $mode attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Rfuse_Conv2dOp : Rfuse_Op<"conv2d", [Pure, InferTypeOpAdaptor, Rfuse_VjpOpInterface]> {
  let summary = "2-D convolution (cross-correlation) with stride, padding, dilation, groups.";
  let description = [{
    NCHW: input [N, C, H, W], filter [O, C/groups, KH, KW], result [N, O, OH, OW].
    NHWC: input [N, H, W, C], filter [O, KH, KW, C/groups], result [N, OH, OW, O].
    `padding` is [top, bottom, left, right]; OH = (H + top + bottom - dilation_h (KH - 1) - 1)
    / stride_h + 1, likewise OW. The optional `bias` has shape [O].

    Example:
    ```mlir
    %y = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
           dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
         : (tensor<128x1x28x28xf32>, tensor<8x1x3x3xf32>, tensor<8xf32>) -> tensor<128x8x26x26xf32>
    ```
  }];
  let arguments = (ins Rfuse_FloatTensor:$input, Rfuse_FloatTensor:$filter,
                   Optional<Rfuse_FloatTensor>:$bias,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilation, I64Attr:$groups, Rfuse_LayoutAttr:$layout);
  let results = (outs Rfuse_FloatTensor:$result);
  let assemblyFormat = "$input `,` $filter (`,` $bias^)? attr-dict `:` functional-type(operands, results)";
}

class Rfuse_Pool2dOp<string mnemonic, string what, dag extraArgs>
    : Rfuse_Op<mnemonic, [Pure, InferTypeOpAdaptor, Rfuse_VjpOpInterface]> {
  let summary = "2-D " # what # " pooling.";
  let description = "Pools windows of size `kernel` ([KH, KW]) moved by `strides`, after "
    # "`padding` ([top, bottom, left, right]), per channel; layout NCHW or NHWC. "
    # "OH = (H + top + bottom - KH) / stride_h + 1.\n\nExample:\n```mlir\n%p = rfuse." # mnemonic
    # " %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>,"
    # " layout = #rfuse.layout<NCHW>} : (tensor<1x8x26x26xf32>) -> tensor<1x8x13x13xf32>\n```";
  let arguments = !con((ins Rfuse_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                        DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                        Rfuse_LayoutAttr:$layout), extraArgs);
  let results = (outs Rfuse_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Rfuse_MaxPool2dOp : Rfuse_Pool2dOp<"max_pool2d", "max",
    (ins)>;
def Rfuse_AvgPool2dOp : Rfuse_Pool2dOp<"avg_pool2d", "average",
    (ins DefaultValuedAttr<BoolAttr, "true">:$count_include_pad)>;

//===----------------------------------------------------------------------===//
// Gradients of the library ops (what their vector-Jacobian products emit)
//===----------------------------------------------------------------------===//

class Rfuse_ConvBackwardOp<string mnemonic, string what, dag operands>
    : Rfuse_Op<mnemonic, [Pure]> {
  let summary = "Gradient of rfuse.conv2d with respect to its " # what # ".";
  let description = "The attributes are the forward convolution's; the result has the type of "
    # "the forward " # what # ", which (with the other operand) fixes the forward geometry. "
    # "cuDNN's backward-" # what # " call on the GPU, im2col and BLAS on the CPU.\n\nExample:\n"
    # "```mlir\n%d = rfuse." # mnemonic # " %a, %b {strides = array<i64: 2, 2>, "
    # "padding = array<i64: 1, 1, 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, "
    # "layout = #rfuse.layout<NCHW>} : (...) -> ...\n```";
  let arguments = !con(operands, (ins DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                                      DenseI64ArrayAttr:$dilation, I64Attr:$groups,
                                      Rfuse_LayoutAttr:$layout));
  let results = (outs Rfuse_FloatTensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Rfuse_Conv2dBackwardInputOp : Rfuse_ConvBackwardOp<"conv2d_backward_input", "input",
    (ins Rfuse_FloatTensor:$grad_output, Rfuse_FloatTensor:$filter)>;
def Rfuse_Conv2dBackwardFilterOp : Rfuse_ConvBackwardOp<"conv2d_backward_filter", "filter",
    (ins Rfuse_FloatTensor:$input, Rfuse_FloatTensor:$grad_output)>;

class Rfuse_PoolBackwardOp<string mnemonic, string what, dag operands, dag extraArgs>
    : Rfuse_Op<mnemonic, [Pure]> {
  let summary = "Gradient of rfuse." # what # "_pool2d with respect to its input.";
  let description = "The attributes are the forward pooling's; the result has the forward "
    # "input's type. Max pooling sends each window's gradient to the window's first maximum "
    # "(PyTorch's rule), taken from the forward input and output.";
  let arguments = !con(operands, (ins DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                                      DenseI64ArrayAttr:$padding, Rfuse_LayoutAttr:$layout),
                       extraArgs);
  let results = (outs Rfuse_FloatTensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Rfuse_MaxPool2dBackwardOp : Rfuse_PoolBackwardOp<"max_pool2d_backward", "max",
    (ins Rfuse_FloatTensor:$input, Rfuse_FloatTensor:$output, Rfuse_FloatTensor:$grad_output), (ins)>;
def Rfuse_AvgPool2dBackwardOp : Rfuse_PoolBackwardOp<"avg_pool2d_backward", "avg",
    (ins Rfuse_FloatTensor:$grad_output),
    (ins DefaultValuedAttr<BoolAttr, "true">:$count_include_pad)>;

def Rfuse_StopGradientOp : Rfuse_Op<"stop_gradient", [Pure, SameOperandsAndResultType, Rfuse_VjpOpInterface]> {
  let summary = "Its operand, through which no gradient flows (torch's `detach()`).";
  let description = [{
    The value of `input`, unchanged; `rfuse-autodiff` sends its operand no cotangent. Torch for
    R's `$detach()` on a traced value, and the maximum a softmax subtracts (its value does not
    change the softmax, so its gradient is zero and computing it would cost a full pass). After
    differentiation `rfuse-drop-stop-gradients` (first in every pipeline) replaces each by its
    operand; it has no folder, so that the canonicalizations run before differentiation keep it.

    Example:
    ```mlir
    %m = rfuse.stop_gradient %x : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Rfuse_Tensor:$input);
  let results = (outs Rfuse_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Custom gradients
//===----------------------------------------------------------------------===//

def Rfuse_CustomVjpOp : Rfuse_Op<"custom_vjp", [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Rfuse_VjpOpInterface, ["buildVjp"]>]> {
  let summary = "A function applied with its own vector-Jacobian product (torch's autograd_function).";
  let description = [{
    Calls the function `forward` on `inputs`; its results are this op's. The first `num_outputs`
    are the values the program uses (float tensors); the rest are residuals: what the backward
    function reads (torch's `ctx$save_for_backward`). `rfuse-autodiff` differentiates through the
    op by calling `backward` on the residuals followed by the cotangent of each output (zeros
    where an output has none); `backward` returns the cotangent of each float input, in the
    inputs' order. What `forward` computes is not differentiated: the user's backward replaces
    it. `rfuse-expand-custom-vjp`, first in every pipeline, replaces the op by a call of
    `forward` (which the inliner then inlines), after the gradient was built.

    Example (a clamp whose gradient passes straight through):
    ```mlir
    %r:2 = rfuse.custom_vjp @clamp_fwd, @clamp_bwd (%x) {num_outputs = 1 : i64}
        : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$forward, FlatSymbolRefAttr:$backward, I64Attr:$num_outputs,
                       Variadic<Rfuse_Tensor>:$inputs);
  let results = (outs Variadic<Rfuse_Tensor>:$results);
  let assemblyFormat = "$forward `,` $backward `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion regions
//===----------------------------------------------------------------------===//

def Rfuse_FusionOp : Rfuse_Op<"fusion", [IsolatedFromAbove, SingleBlock,
                                         RecursiveMemoryEffects]> {
  let summary = "A region of ops that codegen turns into one kernel.";
  let description = [{
    The body's block arguments are the `inputs`, in order and of the same types; the body ends
    in `rfuse.yield` of values with the result types. The region is isolated from above, so a
    fusion op is self-contained: codegen, caching (by the region's canonical text) and the
    interpreter can treat it alone. `kind` tells codegen which kernel template applies, and the
    verifier holds the body to it: `pointwise` holds no reduction, contraction or pooling;
    `reduction` at least one reduction and no contraction; `matmul_epilogue` exactly one matmul,
    `conv_epilogue` exactly one conv2d, neither with a reduction; pooling appears in none.

    Example:
    ```mlir
    %r = rfuse.fusion pointwise (%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %s = rfuse.add %a, %b : tensor<4xf32>
      %e = rfuse.exp %s : tensor<4xf32>
      rfuse.yield %e : tensor<4xf32>
    }
    ```
  }];
  let arguments = (ins Rfuse_FusionKindAttr:$kind, Variadic<Rfuse_Tensor>:$inputs);
  let results = (outs Variadic<Rfuse_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$kind `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body";
  let hasRegionVerifier = 1;
}

def Rfuse_YieldOp : Rfuse_Op<"yield", [Pure, Terminator, ReturnLike, HasParent<"FusionOp">]> {
  let summary = "Terminates a fusion region, returning its results.";
  let description = [{
    Example:
    ```mlir
    rfuse.yield %a, %b : tensor<4xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Rfuse_Tensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // RFUSE_OPS_TD
