//===- Passes.td - rfuse passes ---------------------------------*- tablegen -*-===//
// Every rfuse pass: its command-line name, summary, options and statistics. Each is implemented
// in one file under passes/lib and pinned by one lit test under tests/lit/passes.
#ifndef RFUSE_PASSES_TD
#define RFUSE_PASSES_TD

include "mlir/Pass/PassBase.td"

def Unfuse : Pass<"rfuse-unfuse", "mlir::func::FuncOp"> {
  let summary = "Dissolve rfuse.fusion regions back into the enclosing function";
  let description = [{
    Replaces every `rfuse.fusion` op by the ops of its body, with the region's block arguments
    replaced by the fusion's inputs and its results by the yielded values. The result computes
    the same values op by op. Uses: the unfused fallback when a fused kernel cannot be built,
    and comparing fused against unfused execution of the same module.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let statistics = [
    Statistic<"numDissolved", "fusions-dissolved", "Number of fusion regions dissolved">,
  ];
}

#endif // RFUSE_PASSES_TD
