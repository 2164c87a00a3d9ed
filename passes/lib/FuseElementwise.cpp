// rfuse-fuse-elementwise: see Passes.td. The grouping rules live in FusionGrouping.cpp.
#include "FusionGrouping.h"
#include "rfuse/Passes/Passes.h"

namespace rfuse {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "rfuse/Passes/Passes.h.inc"

namespace {
struct FuseElementwisePass : impl::FuseElementwiseBase<FuseElementwisePass> {
  using FuseElementwiseBase::FuseElementwiseBase;
  void runOnOperation() override {
    fusion::Options options{fusion::Mode::Elementwise};
    options.maxOps = maxOps;
    options.testFlipSubOperands = testFlipSubOperands;
    fusion::fuseAndRecord(getOperation(), options, numRegions, numFusedOps, numKernels,
                          bytesMoved);
  }
};
} // namespace
} // namespace rfuse
