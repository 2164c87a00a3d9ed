// ScalarOpKind: the enum of pointwise scalar operations, generated from ScalarOps.def.
// Free of MLIR types so that frontend and runtime headers may use it.
#ifndef RFUSE_IR_SCALAROPKIND_H
#define RFUSE_IR_SCALAROPKIND_H

namespace rfuse {

enum class ScalarOpKind {
#define RFUSE_UNARY(K, FN) K,
#define RFUSE_BINARY(K, FN) K,
#define RFUSE_COMPARE(K, FN) K,
#define RFUSE_LOGIC1(K, FN) K,
#define RFUSE_LOGIC2(K, FN) K,
#include "rfuse/IR/ScalarOps.def"
  Select,
};

enum class ScalarArity { Unary, Binary, Compare, Logic1, Logic2, Select };

ScalarArity scalarArity(ScalarOpKind kind);
/// Name of the function in ScalarOps.h (e.g. "rf_exp"); codegen emits calls to it.
const char *scalarFunctionName(ScalarOpKind kind);

} // namespace rfuse

#endif
