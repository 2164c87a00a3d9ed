// The rfuse dialect from C++: parsing, verification, shape functions, the scalar-op table.
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/IR/ShapeFunctions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <set>

using namespace rfuse;

namespace {

struct Parsed {
  std::unique_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string diagnostics;
};

Parsed parse(const std::string &text) {
  Parsed p;
  p.ctx = std::make_unique<mlir::MLIRContext>();
  p.ctx->getOrLoadDialect<RfuseDialect>();
  p.ctx->getOrLoadDialect<mlir::func::FuncDialect>();
  mlir::ScopedDiagnosticHandler h(p.ctx.get(), [&](mlir::Diagnostic &d) {
    p.diagnostics += d.str() + "\n";
    return mlir::success();
  });
  p.module = mlir::parseSourceString<mlir::ModuleOp>(text, p.ctx.get());
  return p;
}

TEST(ShapeFunctions, Matmul) {
  Shape out;
  std::string err;
  ASSERT_TRUE(inferMatmulShape({3, 4}, {4, 5}, false, false, out, err));
  EXPECT_EQ(out, (Shape{3, 5}));
  ASSERT_TRUE(inferMatmulShape({4, 3}, {5, 4}, true, true, out, err));
  EXPECT_EQ(out, (Shape{3, 5}));
  ASSERT_TRUE(inferMatmulShape({7, 3, 4}, {4, 5}, false, false, out, err));
  EXPECT_EQ(out, (Shape{7, 3, 5}));
  EXPECT_FALSE(inferMatmulShape({3, 4}, {5, 2}, false, false, out, err));
  EXPECT_EQ(err, "non-conformable arguments: lhs [3, 4] has 4 columns but rhs [5, 2] has 5 rows");
  EXPECT_FALSE(inferMatmulShape({2, 3, 4}, {3, 4, 5}, false, false, out, err));
  EXPECT_NE(err.find("batch sizes differ"), std::string::npos);
}

TEST(ShapeFunctions, ReduceTransposeBroadcastReshape) {
  Shape out;
  std::string err;
  ASSERT_TRUE(inferReduceShape({2, 3, 4}, {0, 2}, false, out, err));
  EXPECT_EQ(out, (Shape{3}));
  ASSERT_TRUE(inferReduceShape({2, 3, 4}, {1}, true, out, err));
  EXPECT_EQ(out, (Shape{2, 1, 4}));
  EXPECT_FALSE(inferReduceShape({2, 3}, {2}, false, out, err));
  EXPECT_NE(err.find("out of range"), std::string::npos);
  ASSERT_TRUE(inferTransposeShape({2, 3, 4}, {2, 0, 1}, out, err));
  EXPECT_EQ(out, (Shape{4, 2, 3}));
  EXPECT_FALSE(inferTransposeShape({2, 3}, {0, 0}, out, err));
  EXPECT_NE(err.find("appears twice"), std::string::npos);
  EXPECT_TRUE(checkBroadcastInDim({3}, {1}, {4, 3}, err));
  EXPECT_FALSE(checkBroadcastInDim({3}, {0}, {4, 3}, err));
  EXPECT_NE(err.find("cannot be broadcast"), std::string::npos);
  EXPECT_FALSE(checkReshape({2, 3}, {4, 2}, err));
  EXPECT_NE(err.find("6 elements"), std::string::npos);
  ASSERT_TRUE(broadcastShapes({4, 1, 3}, {5, 1}, out, err));
  EXPECT_EQ(out, (Shape{4, 5, 3}));
  EXPECT_FALSE(broadcastShapes({4, 3}, {2}, out, err));
}

TEST(ShapeFunctions, ConvAndPool) {
  Shape out;
  std::string err;
  ASSERT_TRUE(inferConv2dShape({128, 1, 28, 28}, {8, 1, 3, 3}, std::nullopt, {1, 1}, {0, 0, 0, 0},
                               {1, 1}, 1, false, out, err));
  EXPECT_EQ(out, (Shape{128, 8, 26, 26}));
  ASSERT_TRUE(inferConv2dShape({2, 9, 8, 4}, {6, 3, 3, 2}, std::nullopt, {2, 2}, {1, 1, 1, 1},
                               {2, 2}, 2, true, out, err));
  EXPECT_EQ(out, (Shape{2, 4, 3, 6}));
  EXPECT_FALSE(inferConv2dShape({1, 3, 8, 8}, {4, 2, 3, 3}, std::nullopt, {1, 1}, {0, 0, 0, 0},
                                {1, 1}, 1, false, out, err));
  EXPECT_NE(err.find("filter expects 2 input channels per group"), std::string::npos) << err;
  ASSERT_TRUE(inferPool2dShape({128, 8, 26, 26}, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, out, err));
  EXPECT_EQ(out, (Shape{128, 8, 13, 13}));
}

TEST(Dialect, ParsesAndVerifiesEveryOpFamily) {
  Parsed p = parse(R"(
    func.func @f(%x: tensor<2x3xf32>, %m: tensor<2x3xi1>) -> tensor<3x2xf32> {
      %c = rfuse.constant dense<2.0> : tensor<f32>
      %b = rfuse.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
      %0 = rfuse.mul %x, %b : tensor<2x3xf32>
      %1 = rfuse.select %m, %0, %x : tensor<2x3xi1>, tensor<2x3xf32>
      %2 = rfuse.transpose %1, perm = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
      return %2 : tensor<3x2xf32>
    })");
  ASSERT_TRUE(p.module) << p.diagnostics;
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*p.module)));
}

TEST(Dialect, InferredResultTypeMismatchIsRejected) {
  Parsed p = parse(R"(
    func.func @f(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = rfuse.transpose %x, perm = [1, 0] : (tensor<2x3xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    })");
  EXPECT_FALSE(p.module);
  EXPECT_NE(p.diagnostics.find("inferred type(s)"), std::string::npos) << p.diagnostics;
}

TEST(Dialect, PointwiseInterfaceReportsScalarKinds) {
  Parsed p = parse(R"(
    func.func @f(%x: tensor<4xf32>) -> tensor<4xi1> {
      %0 = rfuse.gelu %x approximate = tanh : tensor<4xf32>
      %1 = rfuse.sigmoid %0 : tensor<4xf32>
      %2 = rfuse.compare ge, %1, %x : tensor<4xf32>
      return %2 : tensor<4xi1>
    })");
  ASSERT_TRUE(p.module) << p.diagnostics;
  std::vector<ScalarOpKind> kinds;
  p.module->walk([&](PointwiseOpInterface op) { kinds.push_back(op.getScalarOp()); });
  EXPECT_EQ(kinds, (std::vector<ScalarOpKind>{ScalarOpKind::GeluTanh, ScalarOpKind::Sigmoid,
                                               ScalarOpKind::Ge}));
}

TEST(Dialect, ScalarOpTableIsComplete) {
  // Every kind has a function name and an arity, and the names are distinct.
  std::set<std::string> names;
  for (int k = 0; k <= (int)ScalarOpKind::Select; ++k) {
    std::string name = scalarFunctionName((ScalarOpKind)k);
    EXPECT_EQ(name.rfind("rf_", 0), 0u) << k;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_EQ(scalarArity(ScalarOpKind::Exp), ScalarArity::Unary);
  EXPECT_EQ(scalarArity(ScalarOpKind::Pow), ScalarArity::Binary);
  EXPECT_EQ(scalarArity(ScalarOpKind::Lt), ScalarArity::Compare);
  EXPECT_EQ(scalarArity(ScalarOpKind::Not), ScalarArity::Logic1);
  EXPECT_EQ(scalarArity(ScalarOpKind::Select), ScalarArity::Select);
}

TEST(Dialect, DTypeNames) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I1, DType::I32, DType::I64}) {
    DType back;
    ASSERT_TRUE(parseDType(dtypeName(t), back));
    EXPECT_EQ(back, t);
  }
  DType d;
  EXPECT_TRUE(parseDType("float64", d));
  EXPECT_EQ(d, DType::F64);
  EXPECT_FALSE(parseDType("complex", d));
  EXPECT_EQ(dtypeSize(DType::BF16), 2);
}

TEST(Dialect, FusionRegionVerifier) {
  Parsed p = parse(R"(
    func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = rfuse.fusion reduction (%x) : (tensor<4xf32>) -> tensor<4xf32> {
      ^bb0(%a: tensor<4xf32>):
        %r = rfuse.reduce_sum %a, dims = [0] : (tensor<4xf32>) -> tensor<f32>
        rfuse.yield %r : tensor<f32>
      }
      return %0 : tensor<4xf32>
    })");
  EXPECT_FALSE(p.module);
  EXPECT_NE(p.diagnostics.find("yielded value #0 has type 'tensor<f32>' but result #0"),
            std::string::npos)
      << p.diagnostics;
}

TEST(Dialect, FusionKindMustMatchTheBody) {
  Parsed p = parse(R"(
    func.func @f(%x: tensor<4xf32>) -> tensor<f32> {
      %0 = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<f32> {
      ^bb0(%a: tensor<4xf32>):
        %r = rfuse.reduce_sum %a, dims = [0] : (tensor<4xf32>) -> tensor<f32>
        rfuse.yield %r : tensor<f32>
      }
      return %0 : tensor<f32>
    })");
  EXPECT_FALSE(p.module);
  EXPECT_NE(p.diagnostics.find("a pointwise region cannot contain reductions"), std::string::npos)
      << p.diagnostics;
}

} // namespace
