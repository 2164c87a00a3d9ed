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


// Statistics every fusion pass reports, under the cost model of docs/passes.md: after the pass,
// how many kernels (fusion regions plus unfused compute ops) the function needs, and the bytes
// they move through device memory (each kernel reads its inputs and writes its outputs once).
defvar CostStatistics = [
  Statistic<"numKernels", "kernels", "Kernels after this pass (cost model)">,
  Statistic<"bytesMoved", "bytes-moved", "Estimated bytes moved through device memory">,
];

def FuseElementwise : Pass<"rfuse-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Group producer-consumer chains of pointwise ops into pointwise fusion regions";
  let description = [{
    Groups pointwise ops, casts, broadcasts and transposes whose results share one iteration
    space (shape) into `rfuse.fusion pointwise` regions, each of which becomes one kernel.
    Broadcasts and transposes read region inputs through index maps, so they never change the
    iteration space. Values needed outside a region become extra results (multi-output fusion);
    nothing is recomputed. Ops already inside fusion regions are left alone. Every remaining
    pointwise op ends up in some region (possibly alone).
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let options = [
    Option<"maxOps", "max-ops", "unsigned", /*default=*/"512",
           "Largest region in ops (0: unbounded). The bound keeps each merge's checks, and so "
           "fusion, linear in the function's size, and generated kernels of a size NVRTC compiles "
           "quickly">,
    Option<"testFlipSubOperands", "test-flip-sub-operands", "bool", /*default=*/"false",
           "TESTING ONLY: swap the operands of rfuse.sub when moving it into a region, a "
           "deliberately wrong transformation the property tests must catch">,
  ];
  let statistics = !listconcat([
    Statistic<"numRegions", "regions", "Fusion regions formed">,
    Statistic<"numFusedOps", "fused-ops", "Ops moved into fusion regions">,
  ], CostStatistics);
}

def FuseReductions : Pass<"rfuse-fuse-reductions", "mlir::func::FuncOp"> {
  let summary = "Fuse reductions with their pointwise prologue and epilogue";
  let description = [{
    Forms `rfuse.fusion reduction` regions around reductions: all reductions in a region reduce
    the same dimensions of the same shape F; the region also holds pointwise ops on F (prologue,
    and epilogue after broadcasting reduced values back) and on the reduced shape R (e.g.
    `rsqrt(var + eps)`). Codegen runs such a region as one row kernel, so row softmax and
    layernorm are one kernel each. Reductions over different dimensions are never fused
    together, and a reduction is never duplicated: a reduced value used elsewhere is an output.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let statistics = !listconcat([
    Statistic<"numRegions", "regions", "Fusion regions formed">,
    Statistic<"numFusedOps", "fused-ops", "Ops moved into fusion regions">,
  ], CostStatistics);
}

def FuseMatmulEpilogue : Pass<"rfuse-fuse-matmul-epilogue", "mlir::func::FuncOp"> {
  let summary = "Fuse bias, activation and residual adds into the preceding matmul or conv2d";
  let description = [{
    Forms one `rfuse.fusion matmul_epilogue` (or `conv_epilogue`) region per matmul (conv2d):
    the contraction plus the pointwise ops on its result's shape that follow it — bias adds
    (broadcasts of region inputs), activations, residual adds. Codegen maps the region to a
    cuBLASLt epilogue where one fits, otherwise to the library call plus one generated kernel.
    The contraction's own operands are always region inputs (no prologue).
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let statistics = !listconcat([
    Statistic<"numRegions", "regions", "Fusion regions formed">,
    Statistic<"numFusedOps", "fused-ops", "Ops moved into fusion regions">,
  ], CostStatistics);
}

def OutlineKernels : Pass<"rfuse-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Turn each fusion region into a kernel function called from the host function";
  let description = [{
    Moves the body of every `rfuse.fusion` into a private `func.func` named
    `<function>_k<N>_<kind>` carrying `rfuse.kernel = #rfuse.fusion_kind<...>`, and replaces the
    fusion op by a `func.call`. The host function becomes a sequence of kernel calls and the
    remaining unfused ops (library ops such as pools). Codegen consumes the kernel functions.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect", "::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numOutlined", "kernels-outlined", "Kernel functions created">,
  ];
}

def DropStopGradients : Pass<"rfuse-drop-stop-gradients", "mlir::ModuleOp"> {
  let summary = "Replace each rfuse.stop_gradient by its operand";
  let description = [{
    `rfuse.stop_gradient` (torch's `detach()`, a softmax's maximum) only tells `rfuse-autodiff`,
    which runs before the pipeline, to send its operand no gradient. Once the gradient is built
    it is its operand: this pass replaces each op by it, so that later passes and every backend
    see one value. First in every pipeline.
  }];
  let statistics = [Statistic<"dropped", "dropped", "stop_gradient ops replaced by their operands">];
}

def ExpandCustomVjp : Pass<"rfuse-expand-custom-vjp", "mlir::ModuleOp"> {
  let summary = "Replace each rfuse.custom_vjp by a call of its forward function";
  let description = [{
    An `rfuse.custom_vjp` (torch's `autograd_function`) carries its backward function for
    `rfuse-autodiff`, which runs before the pipeline. Once the gradient is built, what runs is the
    forward function: this pass replaces each op by a `func.call` of it (its results, residuals
    included, are the call's), so that the inliner that follows inlines it, and the functions no
    longer named anywhere go with the inliner's dead-function removal. First in every pipeline.
  }];
  let dependentDialects = ["mlir::func::FuncDialect"];
  let statistics = [Statistic<"expanded", "expanded", "custom_vjp ops replaced by calls">];
}

def FuseAttention : Pass<"rfuse-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "Fuse softmax(scale q k^T) v of bfloat16 / f16 products into one rfuse.attention";
  let description = [{
    Attention written out — a product of q and k^T, widened to f32, scaled by a constant, a
    softmax over the keys (exp(z - m) / sum(exp(z - m)) with m constant along the keys, as
    torch-style code subtracts each row's maximum), rounded to the narrow type and multiplied by
    v — becomes one `rfuse.attention` (and, through its VJP, one `rfuse.attention_backward`), so
    that the [B, L, S] scores and probabilities are never written to memory. Transposes and casts
    between the ops (R's layout) are followed. A dropout on the probabilities as traced code
    writes it — P times `cast(u >= threshold) * scale` in f32, u the draws of
    `rfuse.random_uniform` (possibly transposed) — becomes the op's dropout: its seed, threshold,
    scale and the draws' strides along [B, L, S], so the kernels draw each kept position
    themselves. It applies where the GPU kernel does: q, k and v
    bfloat16 or f16, rank 3, the head dim D = Dv a multiple of 16 up to 128; the scores,
    probabilities and max read by nothing else (torch's `need_weights`). Run before
    `rfuse-softmax-vjp` and `rfuse-autodiff`, after `rfuse-autocast` (which makes the narrow
    products), in the default pipeline only.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let statistics = [Statistic<"numFused", "attentions", "Attentions fused into one op">];
}

def SoftmaxVjp : Pass<"rfuse-softmax-vjp", "mlir::ModuleOp"> {
  let summary = "Give each softmax, exp(z) / sum(exp(z)), the gradient of its output alone";
  let description = [{
    Differentiated op by op, a softmax's division sends two cotangents back (g / s to e and
    -sum(g e / s^2) to the sum) and keeps e, p and the sum alive for them: on attention's
    scores, three full-size tensors written and read again. This pass, run before
    `rfuse-autodiff`, replaces each `exp(z) / broadcast(reduce_sum(exp(z), dims))` (the sum
    spread over exactly the summed dims; e and the sum read by nothing else) by an
    `rfuse.custom_vjp` whose forward computes the same ops and keeps p, and whose backward is
    torch's: `p * (g - sum(g * p, dims))`. The forward's values are unchanged; the gradient is
    the same function, computed from p alone.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect", "mlir::func::FuncDialect"];
  let statistics = [Statistic<"numSoftmaxes", "softmaxes", "Softmaxes given their output's VJP">];
}

def Autodiff : Pass<"rfuse-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation: @f becomes @f_grad returning the value and gradients";
  let description = [{
    Differentiates function `function` (calls inlined first) with respect to the arguments
    listed in `wrt` (default: every float argument) and adds `@<function>_grad`, which returns
    the function's result 0 (the value being differentiated, a one-element float tensor) and then
    the gradient of that value with respect to each chosen argument, in `wrt` order. The forward
    ops are kept; the backward ops are each op's vector-Jacobian product (VjpOpInterface, rules in
    ir/lib/Vjp.cpp), accumulated in reverse order. The backward graph is ordinary rfuse IR: the
    fusion pipeline fuses it like any other. The function's other results, if any, are
    auxiliary values (a batch norm's batch statistics): `@<function>_grad` returns them last,
    undifferentiated. Fails with a diagnostic naming the op for an op without a VJP, a non-float
    argument in `wrt`, or a result 0 that is not a scalar.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"main\"",
           "The function to differentiate">,
    ListOption<"wrt", "wrt", "int64_t", "Argument indices to differentiate by (default: every float argument)">,
    Option<"recomputePointwise", "recompute-pointwise", "bool", /*default=*/"false",
           "Recompute, in the backward pass, pointwise forward values computed directly from "
           "arguments instead of keeping them live (saved activations are the default)">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"none\"",
           "sgd, adam or adamw: @f_grad becomes a training step returning (value, updated "
           "arguments..., updated state...) instead of gradients. sgd with momentum takes one "
           "buffer per `wrt` argument after f's own arguments; adam/adamw take the first-moment "
           "buffers, the second-moment buffers, then the step number t (a tensor<1x...>, from 1)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam's beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam's beta2">,
    Option<"epsilon", "eps", "double", /*default=*/"1e-8", "Adam's epsilon">,
    Option<"learningRate", "lr", "double", /*default=*/"0.01", "SGD learning rate">,
    Option<"learningRateInput", "lr-input", "bool", /*default=*/"false",
           "Take the learning rate from a last argument (a tensor<1x...>) instead of `lr`: a "
           "schedule changes it without a new program">,
    Option<"momentum", "momentum", "double", /*default=*/"0", "SGD momentum (PyTorch's, no dampening)">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0", "SGD weight decay (L2, added to the gradient)">,
    Option<"gradientAllReduce", "gradient-all-reduce", "std::string", /*default=*/"\"none\"",
           "none, mean or sum: each gradient goes through an rfuse.all_reduce over the process "
           "group's ranks before the optimizer uses it (data-parallel training; "
           "rfuse-bucket-all-reduce then groups them into buckets). With optimizer=sgd and mean, "
           "the updated parameters are averaged instead (SGD is linear in the gradient: the same "
           "parameters, and the update stays fused with the gradient)">,
    Option<"lossScale", "loss-scale", "bool", /*default=*/"false",
           "Dynamic loss scaling (float16 mixed precision, as torch's GradScaler), with an "
           "optimizer: two last arguments, the scale and the count of finite steps since it last "
           "changed (tensor<1x...> each), and two last results, their new values. The backward "
           "pass starts from the scale instead of 1, the gradients are divided by it, and when any "
           "of them is not finite the step keeps the parameters and buffers as they were and "
           "halves the scale; after `loss-scale-growth-interval` finite steps in a row it doubles. "
           "Adam's step-number argument is then the count of steps taken (this step's t is one "
           "more), and its new value is the very last result">,
    Option<"lossScaleGrowthInterval", "loss-scale-growth-interval", "int64_t", /*default=*/"2000",
           "Finite steps after which the loss scale doubles">,
  ];
  let statistics = [
    Statistic<"numBackwardOps", "backward-ops", "Ops built for the backward pass">,
  ];
}

def BucketAllReduce : Pass<"rfuse-bucket-all-reduce", "mlir::func::FuncOp"> {
  let summary = "Group all-reduces into buckets that start as soon as their last operand is ready";
  let description = [{
    Data-parallel training all-reduces every gradient; one collective per gradient costs a
    launch and a latency each, one for all of them waits for the whole backward pass. As
    PyTorch's DDP does, this pass packs the one-operand `rfuse.all_reduce`s of a function, in
    the order their operands are computed (the backward pass's order), into buckets of at most
    `bucket-bytes` (a larger operand is a bucket of its own), one multi-operand all_reduce per
    bucket placed right after its last operand's definition: the runtime runs it on a
    communication stream while the rest of the backward pass computes. All-reduces with
    different reductions are never merged.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "The most bytes of operands in one bucket (PyTorch DDP's default: 25 MiB)">,
  ];
  let statistics = [
    Statistic<"numBuckets", "buckets", "All-reduce buckets made">,
  ];
}

def ChannelsLast : Pass<"rfuse-channels-last", "mlir::func::FuncOp"> {
  let summary = "Run NCHW convolutions and pooling in NHWC, moving the layout transposes out of the way";
  let description = [{
    Torch for R's images are NCHW, and R's column-major arrays reach rfuse as the reversed
    tensor, so traced convolutional code is convolutions and pooling in NCHW between transposes
    to and from R's layout. Tensor cores (cuDNN's TF32, FP16 and BF16 kernels) want NHWC, as
    PyTorch's channels_last does. This pass rewrites the float32, float16 and bfloat16 (not
    float64: cuDNN has no NHWC double kernels) NCHW `conv2d`, `max_pool2d`, `avg_pool2d` and
    their backward ops whose image operand is a transpose (R's layout) to NHWC
    (each 4-d operand transposed to NHWC, or filters to OHWI, the result transposed back; a
    program that takes NCHW tensors as they are keeps them), then moves rank-4 transposes down through the ops
    that do not care about layout so that consecutive ones meet and cancel: pointwise ops and
    casts whose operands are all the same transpose, broadcasts (their size-1 input dims
    dropped: a batch norm's [1, 1, C, 1] statistic in R's layout broadcasts as [C]), splat
    constants or pointwise ops of those (rebuilt in the new layout), and reductions (over
    the permuted dimensions). What is left are transposes where the program reads R's layout and
    where it hands values back, and in front of ops that depend on the order of dimensions
    (reshapes, matrix products), where fusion reads them as index maps. Values are unchanged:
    every rewrite permutes where elements live, not what is computed.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let statistics = [
    Statistic<"numLayoutOps", "ops-to-nhwc", "Convolution and pooling ops rewritten to NHWC">,
    Statistic<"numSunk", "transposes-sunk", "Transposes moved below a pointwise op or reduction">,
  ];
}

def SinkTransposes : Pass<"rfuse-sink-transposes", "mlir::func::FuncOp"> {
  let summary = "Move transposes down through pointwise ops and reductions until they meet and cancel";
  let description = [{
    R's arrays reach rfuse as the reversed tensor, and torch-style code on them (a batched
    product, attention's heads) is matrix products between transposes to and from R's layout.
    A softmax over the keys of attention's scores, traced on R's layout, is then a reduction
    over a strided leading dim between two transposes: a column reduction whose result is
    transposed again, in full, for the next product. This pass moves transposes of any rank
    down as rfuse-channels-last does for its rank-4 ones: through pointwise ops and casts whose
    operands are all the same transpose, broadcasts (their size-1 input dims dropped; a broadcast
    of a transposed statistic reads the statistic before the transpose), splat constants or
    pointwise ops of those, and through reductions (over the permuted dimensions, the kept ones
    put back in order by a transpose of the smaller result). Consecutive transposes compose and
    cancel (transpose's folder), so the softmax runs over the scores' contiguous dim and the next
    product reads them as they are. Values are unchanged: every rewrite permutes where elements
    live, not what is computed.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let statistics = [
    Statistic<"numSunk", "transposes-sunk", "Transposes moved below a pointwise op or reduction">,
  ];
}

def MoveReshapes : Pass<"rfuse-move-reshapes", "mlir::func::FuncOp"> {
  let summary = "Move reshapes out from between ops that one kernel could compute";
  let description = [{
    A reshape is a view, but fusion does not read through one: torch-style code traced on R's
    arrays reshapes between its products (2-D) and its pointwise code (a linear layer's bias
    and activation on [batch, seq, features]), and attention splits heads as a transpose, a
    reshape and a transpose. Each reshape then ends a kernel: the activation is not a product's
    epilogue, a cast to bfloat16 is a kernel of its own, a head split is two transposes in
    full. This pass moves reshapes down through pointwise ops and casts (the op then runs in the
    reshape's input shape; its other operands must be reshapes from that shape, splat
    constants, function arguments or broadcasts whose dims are whole runs of the reshape) and
    through reductions whose reduced dims are whole runs, and moves a reshape between two
    transposes above the first or below the second where its runs stay in order, so that the
    transposes compose. Only reshapes of computed values move; values are unchanged.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let statistics = [
    Statistic<"numSunk", "reshapes-sunk", "Reshapes moved below a pointwise op or reduction">,
    Statistic<"numComposed", "transposes-composed", "Reshapes moved from between two transposes">,
  ];
}

def SinkSlices : Pass<"rfuse-sink-slices", "mlir::func::FuncOp"> {
  let summary = "Move static slices above the pointwise ops, broadcasts and transposes they read, so kernels read inputs through index maps";
  let description = [{
    A slice of a computed value is a copy kernel unless the slice reads a region input: fusion
    can read inputs through slices (index maps), not values computed in the same kernel. This
    pass moves slices towards the inputs, before fusion; values are unchanged (every rewrite
    changes which elements are computed, not how):
    * slice(pointwise(a, b, ...)) -> pointwise(slice(a), slice(b), ...) when every user of the
      pointwise op is a slice (it then disappears; a splat constant becomes one of the slice's
      shape) — an LSTM step's four gate slices of `x W + h U + b`;
    * slice(broadcast_in_dim(v)) -> broadcast_in_dim(slice(v)) and
      slice(transpose(x)) -> transpose(slice(x)) (index maps stay index maps);
    * slice(slice(x)) -> one slice;
    * reshape(slice(x)) that drops the one size-1 dim `d` the slice picked (not the last) ->
      slice(reshape(x)) with `d` merged into the next dim: x[, t, ] of an [A, T, B] array as the
      contiguous columns t * B .. t * B + B - 1 of its [A, T * B] view, which a matrix
      product's epilogue reads in place.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let statistics = [
    Statistic<"numSunk", "slices-sunk", "Slices moved above a pointwise op, broadcast, transpose or reshape">,
  ];
}

def SplitReductions : Pass<"rfuse-split-reductions", "mlir::func::FuncOp"> {
  let summary = "Split reductions that would leave the GPU idle into two parallel stages";
  let description = [{
    A reduction kernel is parallel over its outputs: a reduction to a few outputs runs on a few
    blocks or threads. Two shapes are rewritten, before fusion:
    * every dim of a rank >= 2 tensor (a loss: mean((y - t)^2)): the trailing dim is reduced
      first (a block per row), then the rest;
    * the leading dims of a tensor with few columns left and many rows (a bias gradient: the sum
      over a batch of 4096 of a [4096, n] tensor; a batch norm's statistics over N, H, W): the
      rows are split into `k` groups (reshape [R, C] -> [k, R/k, C]) reduced in parallel, about
      `parallel-outputs` partial results in all; the partials, transposed to [C, k], are then
      reduced a row (a block) per output.
    Means become sums scaled once at the end; max and min split as they are. Results are the
    same values up to floating-point reassociation.

    An f32 leading-dim reduction with at least `keep-read-again-outputs` outputs over at most
    `keep-read-again-reduced` rows whose input is read again together with its result (a layer
    norm or softmax over an R matrix's rows: `x - mean(x)`, `e / sum(e)`) is not split: fused,
    all its passes read one input, which CUDA codegen keeps in shared memory per tile of 8 columns.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let options = [
    Option<"minReduced", "min-reduced", "int64_t", /*default=*/"4096",
           "Split only reductions over at least this many elements per output">,
    Option<"maxOutputs", "max-outputs", "int64_t", /*default=*/"16384",
           "Split leading-dim reductions only when they have at most this many outputs">,
    Option<"keepReadAgainOutputs", "keep-read-again-outputs", "int64_t", /*default=*/"4096",
           "Leave leading-dim reductions read again with their result unsplit from this many outputs">,
    Option<"keepReadAgainReduced", "keep-read-again-reduced", "int64_t", /*default=*/"4096",
           "... and up to this many reduced elements per output (what the register tile holds)">,
    Option<"parallelOutputs", "parallel-outputs", "int64_t", /*default=*/"262144",
           "The first stage of a leading-dim split aims at this many partial results (an H200 "
           "holds 132 x 2048 resident threads)">,
  ];
  let statistics = [
    Statistic<"numSplit", "reductions-split", "Reductions split into two stages">,
  ];
}

def Autocast : Pass<"rfuse-autocast", "mlir::func::FuncOp"> {
  let summary = "Mixed precision: float32 matrix products and convolutions in bfloat16 or float16";
  let description = [{
    Torch's autocast, as a rewrite. Each float32 `matmul` and `conv2d` in scope gets its operands
    cast to the low dtype, runs there (cuBLASLt and cuDNN accumulate in float32) and has its
    result cast back to float32, so every other op (reductions, softmax, normalization
    statistics, losses, the optimizer's update of the float32 weights) stays in float32. The
    product's result is rounded to the low dtype first, as autocast's is. Run before
    rfuse-autodiff, the backward products are low-precision too (the cast's gradient is a cast)
    and the parameters stay float32: master weights. Float64 and low-precision ops are left alone.

    Scope: `scope=all` rewrites every float32 product in `dtype`; `scope=marked` only those
    carrying a `rfuse.autocast` string attribute ("bf16" or "f16": what R's `with_autocast()`
    records), each in its own dtype. The attribute is dropped from the ops rewritten.
  }];
  let dependentDialects = ["::rfuse::RfuseDialect"];
  let options = [
    Option<"scope", "scope", "std::string", /*default=*/"\"marked\"",
           "Which products: all or marked (those with a rfuse.autocast attribute)">,
    Option<"dtype", "dtype", "std::string", /*default=*/"\"bf16\"",
           "The low dtype with scope=all: bf16 or f16">,
  ];
  let statistics = [
    Statistic<"numCast", "ops-autocast", "Products and convolutions moved to the low dtype">,
  ];
}

#endif // RFUSE_PASSES_TD
