#include "rfuse/IR/RfuseDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace rfuse;

#include "rfuse/IR/RfuseDialect.cpp.inc"
#include "rfuse/IR/RfuseEnums.cpp.inc"
#include "rfuse/IR/RfuseInterfaces.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "rfuse/IR/RfuseAttrs.cpp.inc"

namespace {
// Every rfuse op is pure and value-semantic, so calls to traced helper functions can always be
// inlined, and so can ops into fusion regions.
struct RfuseInlinerInterface : DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final { return true; }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final { return true; }
};
} // namespace

void RfuseDialect::initialize() {
  addInterfaces<RfuseInlinerInterface>();
  addOperations<
#define GET_OP_LIST
#include "rfuse/IR/RfuseOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "rfuse/IR/RfuseAttrs.cpp.inc"
      >();
}

Operation *RfuseDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                             Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}
