//===- RfuseBase.td - rfuse dialect, types, enums, interfaces ---*- tablegen -*-===//
#ifndef RFUSE_BASE_TD
#define RFUSE_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Rfuse_Dialect : Dialect {
  let name = "rfuse";
  let cppNamespace = "::rfuse";
  let summary = "Tensor ops traced from R code, and the fusion regions built from them.";
  let description = [{
    The `rfuse` dialect holds the operations that rfuse's frontend records when it traces R
    code: value-semantics ops on statically shaped, ranked builtin tensors. Broadcasting is
    explicit (`rfuse.broadcast_in_dim`), so every pointwise op sees operands of one shape, and
    fusion, codegen and autodiff see plain iteration spaces. `rfuse.fusion` groups ops into one
    region that codegen turns into one kernel.

    Element types: f32, f64, f16, bf16, i1 (masks), i32, i64.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Rfuse_FloatElement : AnyTypeOf<[F16, BF16, F32, F64]>;
def Rfuse_Element : AnyTypeOf<[F16, BF16, F32, F64, I1, I32, I64]>;

def Rfuse_Tensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I1, I32, I64]>;
def Rfuse_FloatTensor : StaticShapeTensorOf<[F16, BF16, F32, F64]>;
def Rfuse_NumericTensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I32, I64]>;
def Rfuse_BoolTensor : StaticShapeTensorOf<[I1]>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Rfuse_CmpPredicate : I32EnumAttr<"CmpPredicate", "comparison predicate", [
    I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>, I32EnumAttrCase<"lt", 2>,
    I32EnumAttrCase<"le", 3>, I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::rfuse";
  let genSpecializedAttr = 0;
}
def Rfuse_CmpPredicateAttr : EnumAttr<Rfuse_Dialect, Rfuse_CmpPredicate, "cmp_predicate">;

def Rfuse_GeluApprox : I32EnumAttr<"GeluApproximation", "gelu approximation", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::rfuse";
  let genSpecializedAttr = 0;
}
def Rfuse_GeluApproxAttr : EnumAttr<Rfuse_Dialect, Rfuse_GeluApprox, "gelu_approximation">;

def Rfuse_ScanKind : I32EnumAttr<"ScanKind", "cumulative operation", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"prod", 1>, I32EnumAttrCase<"max", 2>,
    I32EnumAttrCase<"min", 3>]> {
  let cppNamespace = "::rfuse";
  let genSpecializedAttr = 0;
}
def Rfuse_ScanKindAttr : EnumAttr<Rfuse_Dialect, Rfuse_ScanKind, "scan_kind">;

def Rfuse_RecurrentMode : I32EnumAttr<"RecurrentMode", "a recurrent layer's cell", [
    I32EnumAttrCase<"lstm", 0>, I32EnumAttrCase<"gru", 1>, I32EnumAttrCase<"rnn_tanh", 2>,
    I32EnumAttrCase<"rnn_relu", 3>]> {
  let cppNamespace = "::rfuse";
  let genSpecializedAttr = 0;
}
def Rfuse_RecurrentModeAttr : EnumAttr<Rfuse_Dialect, Rfuse_RecurrentMode, "recurrent_mode">;

def Rfuse_CollectiveReduction : I32EnumAttr<"CollectiveReduction", "how an all-reduce combines the ranks' values", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>]> {
  let cppNamespace = "::rfuse";
  let genSpecializedAttr = 0;
}
def Rfuse_CollectiveReductionAttr : EnumAttr<Rfuse_Dialect, Rfuse_CollectiveReduction, "collective_reduction">;

def Rfuse_Layout : I32EnumAttr<"Layout", "image tensor layout", [
    I32EnumAttrCase<"NCHW", 0>, I32EnumAttrCase<"NHWC", 1>]> {
  let cppNamespace = "::rfuse";
  let genSpecializedAttr = 0;
}
// Printed inside attribute dictionaries (conv2d, pools), hence the <> form: #rfuse.layout<NCHW>.
def Rfuse_LayoutAttr : EnumAttr<Rfuse_Dialect, Rfuse_Layout, "layout"> {
  let assemblyFormat = "`<` $value `>`";
}

def Rfuse_FusionKind : I32EnumAttr<"FusionKind", "what a fusion region computes", [
    I32EnumAttrCase<"pointwise", 0>, I32EnumAttrCase<"reduction", 1>,
    I32EnumAttrCase<"matmul_epilogue", 2>, I32EnumAttrCase<"conv_epilogue", 3>]> {
  let cppNamespace = "::rfuse";
  let genSpecializedAttr = 0;
}
def Rfuse_FusionKindAttr : EnumAttr<Rfuse_Dialect, Rfuse_FusionKind, "fusion_kind">;

include "rfuse/IR/RfuseInterfaces.td"

#endif // RFUSE_BASE_TD
