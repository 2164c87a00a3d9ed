// rfuse-fuse-matmul-epilogue: see Passes.td. The grouping rules live in FusionGrouping.cpp.
#include "FusionGrouping.h"
#include "rfuse/Passes/Passes.h"

namespace rfuse {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUE
#include "rfuse/Passes/Passes.h.inc"

namespace {
struct FuseMatmulEpiloguePass : impl::FuseMatmulEpilogueBase<FuseMatmulEpiloguePass> {
  using FuseMatmulEpilogueBase::FuseMatmulEpilogueBase;
  void runOnOperation() override {
    fusion::Options options{fusion::Mode::MatmulEpilogue};
    fusion::fuseAndRecord(getOperation(), options, numRegions, numFusedOps, numKernels,
                          bytesMoved);
  }
};
} // namespace
} // namespace rfuse
