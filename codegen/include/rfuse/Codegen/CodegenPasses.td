//===- CodegenPasses.td - rfuse code generation passes ----------*- tablegen -*-===//
// The lowering stages as passes, so rfuse-opt shows each and lit tests pin the generated code.
// Each runs codegen's ExecutionPlan builder over every host function (public, not a kernel) and
// records what the plan chose on the IR. Implemented in codegen/lib/*Pass.cpp; one lit test each
// under tests/lit/codegen.
#ifndef RFUSE_CODEGEN_PASSES_TD
#define RFUSE_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def EmitCuda : Pass<"rfuse-emit-cuda", "mlir::ModuleOp"> {
  let summary = "Plan every host function for the GPU and attach each step's CUDA code and choices";
  let description = [{
    Builds the CUDA execution plan of each host function (as the runtime does) and records it:
    every op of the host function gets `rfuse.plan`, a string saying how the step runs (the
    launch kind, grid, block and vector width; the cuBLASLt or cuDNN call and its epilogue; or
    why it runs on the host). Each kernel function called gets `rfuse.cuda_source`, the complete
    CUDA C++ of its kernel (or of the epilogue after its library call).
  }];
  let options = [
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_90\"", "The target architecture">,
    Option<"multiprocessors", "sms", "int", /*default=*/"132", "The target's SM count (launch grids)">,
  ];
}

def LowerKernelsToCpu : Pass<"rfuse-lower-kernels-to-cpu", "mlir::ModuleOp"> {
  let summary = "Plan every host function for the CPU and append each step's lowered functions";
  let description = [{
    Builds the CPU execution plan of each host function and records it: every op of the host
    function gets `rfuse.plan` (compiled pointwise / reduction, BLAS + compiled epilogue, or
    interpreted with the reason), and the functions each step is lowered to are appended as a
    nested module `@<step>_cpu`: functions `(index begin, index end, memrefs...)` of linalg,
    scf, memref and math ops (stage=linalg, the default), or the same lowered to the LLVM
    dialect, which the JIT compiles (stage=llvm).
  }];
  let options = [
    Option<"stage", "stage", "std::string", /*default=*/"\"linalg\"", "linalg or llvm">,
  ];
}

#endif
