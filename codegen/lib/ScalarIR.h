// A scalar type whose arithmetic builds arith/math ops: instantiating ScalarOps.h's templates
// with it emits each op's CPU code from the very definitions the interpreter and the GPU use.
// Constants (T(0.5) in a template) take the type of the scalar function being built, so one
// ScalarIR::Scope is active while an op is emitted.
#ifndef RFUSE_CODEGEN_SCALARIR_H
#define RFUSE_CODEGEN_SCALARIR_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <cmath>
#include <string>

namespace rfuse::cpu::ir {

struct Context {
  mlir::OpBuilder *b;
  mlir::Location loc;
  mlir::Type type;      ///< the type of constants
  mlir::ModuleOp target; ///< where libm declarations go
};

inline thread_local Context *current = nullptr;

/// Makes `c` the context of every IrVal built while it lives.
class Scope {
public:
  explicit Scope(Context &c) : previous(current) { current = &c; }
  ~Scope() { current = previous; }

private:
  Context *previous;
};

struct IrVal {
  mlir::Value v;
  IrVal(mlir::Value v) : v(v) {}
  IrVal(double c) : v(constant(c)) {}
  IrVal(float c) : v(constant((double)c)) {}
  IrVal(int c) : v(constant((double)c)) {}
  bool isFloat() const { return llvm::isa<mlir::FloatType>(v.getType()); }

private:
  static mlir::Value constant(double c) {
    Context &x = *current;
    if (llvm::isa<mlir::FloatType>(x.type))
      return x.b->create<mlir::arith::ConstantOp>(x.loc, x.b->getFloatAttr(x.type, c));
    return x.b->create<mlir::arith::ConstantOp>(x.loc, x.b->getIntegerAttr(x.type, (int64_t)c));
  }
};

inline mlir::OpBuilder &B() { return *current->b; }
inline mlir::Location L() { return current->loc; }

#define RFUSE_IR_ARITH(OPNAME, FOP, IOP)                                                          \
  inline IrVal OPNAME(IrVal a, IrVal b) {                                                         \
    return a.isFloat() ? (mlir::Value)B().create<mlir::arith::FOP>(L(), a.v, b.v)                 \
                       : (mlir::Value)B().create<mlir::arith::IOP>(L(), a.v, b.v);                \
  }
RFUSE_IR_ARITH(operator+, AddFOp, AddIOp)
RFUSE_IR_ARITH(operator-, SubFOp, SubIOp)
RFUSE_IR_ARITH(operator*, MulFOp, MulIOp)
RFUSE_IR_ARITH(operator/, DivFOp, DivSIOp)
#undef RFUSE_IR_ARITH

inline IrVal operator-(IrVal a) {
  if (a.isFloat())
    return (mlir::Value)B().create<mlir::arith::NegFOp>(L(), a.v);
  mlir::Value zero = B().create<mlir::arith::ConstantOp>(L(), B().getIntegerAttr(a.v.getType(), 0));
  return (mlir::Value)B().create<mlir::arith::SubIOp>(L(), zero, a.v);
}

// C++'s comparisons: ordered, except != (true when either side is NaN).
#define RFUSE_IR_CMP(OPNAME, FP, IP)                                                              \
  inline IrVal OPNAME(IrVal a, IrVal b) {                                                         \
    return a.isFloat() ? (mlir::Value)B().create<mlir::arith::CmpFOp>(L(), mlir::arith::CmpFPredicate::FP, a.v, b.v) \
                       : (mlir::Value)B().create<mlir::arith::CmpIOp>(L(), mlir::arith::CmpIPredicate::IP, a.v, b.v); \
  }
RFUSE_IR_CMP(operator==, OEQ, eq)
RFUSE_IR_CMP(operator!=, UNE, ne)
RFUSE_IR_CMP(operator<, OLT, slt)
RFUSE_IR_CMP(operator<=, OLE, sle)
RFUSE_IR_CMP(operator>, OGT, sgt)
RFUSE_IR_CMP(operator>=, OGE, sge)
#undef RFUSE_IR_CMP

// i1 logic (no short circuit: both sides are values already).
inline IrVal operator!(IrVal a) {
  return (mlir::Value)B().create<mlir::arith::XOrIOp>(L(), a.v, B().create<mlir::arith::ConstantOp>(L(), B().getBoolAttr(true)));
}
inline IrVal operator&&(IrVal a, IrVal b) { return (mlir::Value)B().create<mlir::arith::AndIOp>(L(), a.v, b.v); }
inline IrVal operator||(IrVal a, IrVal b) { return (mlir::Value)B().create<mlir::arith::OrIOp>(L(), a.v, b.v); }

// maximum / minimum: arith's NaN-propagating ops (so reductions over them vectorize). They differ
// from the generic rf_maximum only in the sign of a zero result.
inline IrVal rf_maximum(IrVal a, IrVal b) {
  return a.isFloat() ? (mlir::Value)B().create<mlir::arith::MaximumFOp>(L(), a.v, b.v)
                     : (mlir::Value)B().create<mlir::arith::MaxSIOp>(L(), a.v, b.v);
}
inline IrVal rf_minimum(IrVal a, IrVal b) {
  return a.isFloat() ? (mlir::Value)B().create<mlir::arith::MinimumFOp>(L(), a.v, b.v)
                     : (mlir::Value)B().create<mlir::arith::MinSIOp>(L(), a.v, b.v);
}

inline IrVal rf_if(IrVal c, IrVal a, IrVal b) { return (mlir::Value)B().create<mlir::arith::SelectOp>(L(), c.v, a.v, b.v); }

#define RFUSE_IR_MATH1(NAME, OP)                                                                  \
  inline IrVal NAME(IrVal x) { return (mlir::Value)B().create<mlir::math::OP>(L(), x.v); }
RFUSE_IR_MATH1(exp, ExpOp)
RFUSE_IR_MATH1(exp2, Exp2Op)
RFUSE_IR_MATH1(log, LogOp)
RFUSE_IR_MATH1(sqrt, SqrtOp)
RFUSE_IR_MATH1(tanh, TanhOp)
RFUSE_IR_MATH1(sin, SinOp)
RFUSE_IR_MATH1(cos, CosOp)
RFUSE_IR_MATH1(floor, FloorOp)
RFUSE_IR_MATH1(rint, RoundEvenOp)
RFUSE_IR_MATH1(tan, TanOp)
RFUSE_IR_MATH1(atan, AtanOp)
RFUSE_IR_MATH1(asin, AsinOp)
RFUSE_IR_MATH1(acos, AcosOp)
#undef RFUSE_IR_MATH1

inline IrVal atan2(IrVal y, IrVal x) { return (mlir::Value)B().create<mlir::math::Atan2Op>(L(), y.v, x.v); }
inline IrVal fma(IrVal a, IrVal b, IrVal c) { return (mlir::Value)B().create<mlir::math::FmaOp>(L(), a.v, b.v, c.v); }
inline IrVal pow(IrVal a, IrVal b) {
  if (a.isFloat())
    return (mlir::Value)B().create<mlir::math::PowFOp>(L(), a.v, b.v);
  return (mlir::Value)B().create<mlir::math::IPowIOp>(L(), a.v, b.v);
}

/// erfc: ScalarOps.h's rf_erfc_rational in f32 (as on the GPU); libm's erfc in f64 (MLIR 19's
/// math dialect has erf but no erfc) — the function the interpreter's f64 path calls.
IrVal erfc(IrVal x);
/// tgamma and lgamma: libm's (MLIR 19's math dialect has neither), as the interpreter's.
IrVal tgamma(IrVal x);
IrVal lgamma(IrVal x);

} // namespace rfuse::cpu::ir

#endif
