// rfuse-fuse-reductions: see Passes.td. The grouping rules live in FusionGrouping.cpp.
#include "FusionGrouping.h"
#include "rfuse/Passes/Passes.h"

namespace rfuse {
#define GEN_PASS_DEF_FUSEREDUCTIONS
#include "rfuse/Passes/Passes.h.inc"

namespace {
struct FuseReductionsPass : impl::FuseReductionsBase<FuseReductionsPass> {
  using FuseReductionsBase::FuseReductionsBase;
  void runOnOperation() override {
    fusion::Options options{fusion::Mode::Reduction};
    fusion::fuseAndRecord(getOperation(), options, numRegions, numFusedOps, numKernels,
                          bytesMoved);
  }
};
} // namespace
} // namespace rfuse
