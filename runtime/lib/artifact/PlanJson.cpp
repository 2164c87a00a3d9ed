#include "PlanJson.h"

#include <algorithm>

namespace rfuse {

NLOHMANN_JSON_SERIALIZE_ENUM(DType, {{DType::F32, "f32"}, {DType::F64, "f64"}, {DType::F16, "f16"},
                                     {DType::BF16, "bf16"}, {DType::I1, "i1"}, {DType::I32, "i32"},
                                     {DType::I64, "i64"}})
NLOHMANN_JSON_SERIALIZE_ENUM(ConvDirection, {{ConvDirection::Forward, "forward"},
                                             {ConvDirection::BackwardInput, "backward_input"},
                                             {ConvDirection::BackwardFilter, "backward_filter"}})
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ConvGeometry, direction, nhwc, n, c, h, w, o, kh, kw, oh, ow, strideH, strideW,
                                   padTop, padBottom, padLeft, padRight, dilationH, dilationW, groups)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PoolGeometry, nhwc, isMax, countIncludePad, backward, n, c, h, w, oh, ow, kh, kw,
                                   padTop, padBottom, padLeft, padRight, strideH, strideW)

namespace codegen {
NLOHMANN_JSON_SERIALIZE_ENUM(Activation, {{Activation::None, "none"}, {Activation::Relu, "relu"},
                                          {Activation::GeluTanh, "gelu_tanh"}})
NLOHMANN_JSON_SERIALIZE_ENUM(Backend, {{Backend::Cpu, "cpu"}, {Backend::Cuda, "cuda"}})
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MatmulCall, batch, m, n, k, transposeA, transposeB, batchedA, batchedB, dtype,
                                   lhsInput, rhsInput, biasInput, residualInput, alpha, activation,
                                   transposeLhsFirst, f32Result)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ConvCall, dtype, geometry, inputIndex, filterIndex, gradOutputIndex, biasIndex)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PoolCall, dtype, geometry)
NLOHMANN_JSON_SERIALIZE_ENUM(RecurrentCall::Cell, {{RecurrentCall::Cell::Lstm, "lstm"},
                                                   {RecurrentCall::Cell::Gru, "gru"},
                                                   {RecurrentCall::Cell::RnnTanh, "rnn_tanh"},
                                                   {RecurrentCall::Cell::RnnRelu, "rnn_relu"}})
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RecurrentCall, cell, backward, dtype, batch, steps, inputSize, hidden)
NLOHMANN_JSON_SERIALIZE_ENUM(LibraryCall::Kind, {{LibraryCall::Kind::Matmul, "matmul"},
                                                 {LibraryCall::Kind::Conv, "conv"},
                                                 {LibraryCall::Kind::Pool, "pool"},
                                                 {LibraryCall::Kind::Recurrent, "recurrent"}})
// (with defaults: plans written before recurrent calls existed have no "recurrent")
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LibraryCall, kind, matmul, conv, pool, recurrent, epilogueInputs,
                                                productIsOutput)
NLOHMANN_JSON_SERIALIZE_ENUM(Step::Kind, {{Step::Kind::Kernel, "kernel"}, {Step::Kind::Library, "library"},
                                          {Step::Kind::Alias, "alias"}, {Step::Kind::Constant, "constant"},
                                          {Step::Kind::Host, "host"}, {Step::Kind::Collective, "collective"}})
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BufferSlot, dtype, shape, bytes, firstUse, lastUse, aliasOf, constant, argument)
} // namespace codegen

namespace cuda {
NLOHMANN_JSON_SERIALIZE_ENUM(LaunchKind, {{LaunchKind::GridStride, "grid_stride"},
                                          {LaunchKind::BlockPerRow, "block_per_row"},
                                          {LaunchKind::ThreadPerColumn, "thread_per_column"},
                                          {LaunchKind::Tiles, "tiles"}})
// The source is not stored: the artifact holds the compiled kernel.
void to_json(nlohmann::json &j, const KernelSpec &k) {
  j = {{"name", k.name}, {"launch", k.launch}, {"elements", k.elements}, {"vectorWidth", k.vectorWidth},
       {"rows", k.rows}, {"rowLength", k.rowLength}, {"rowsPerBlock", k.rowsPerBlock}, {"columns", k.columns},
       {"columnsPerBlock", k.columnsPerBlock}, {"blockSize", k.blockSize},
       {"dynamicSharedBytes", k.dynamicSharedBytes}, {"clusterSize", k.clusterSize}, {"residentClusters", k.residentClusters}, {"grid", k.grid}, {"numInputs", k.numInputs},
       {"numOutputs", k.numOutputs}};
}
void from_json(const nlohmann::json &j, KernelSpec &k) {
  j.at("name").get_to(k.name);
  j.at("launch").get_to(k.launch);
  j.at("elements").get_to(k.elements);
  j.at("vectorWidth").get_to(k.vectorWidth);
  j.at("rows").get_to(k.rows);
  j.at("rowLength").get_to(k.rowLength);
  k.rowsPerBlock = j.value("rowsPerBlock", 1); // (absent before warp rows: a row a block)
  j.at("columns").get_to(k.columns);
  j.at("columnsPerBlock").get_to(k.columnsPerBlock);
  j.at("blockSize").get_to(k.blockSize);
  j.at("dynamicSharedBytes").get_to(k.dynamicSharedBytes);
  k.clusterSize = j.value("clusterSize", 1); // (absent before clusters: none)
  k.residentClusters = j.value("residentClusters", false); // (absent before column_prefetch)
  j.at("grid").get_to(k.grid);
  j.at("numInputs").get_to(k.numInputs);
  j.at("numOutputs").get_to(k.numOutputs);
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CudaTarget, arch, multiprocessors)
} // namespace cuda

namespace cpu {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CpuFunction, name, extent, maxChunk, workPerUnit, argShapes)
} // namespace cpu

namespace artifact {

using codegen::BufferSlot;
using codegen::ExecutionPlan;
using codegen::LibraryCall;
using codegen::Step;
using nlohmann::json;

namespace {

template <class T> json optional(const std::optional<T> &v) { return v ? json(*v) : json(nullptr); }
template <class T> void readOptional(const json &j, const char *key, std::optional<T> &out) {
  const json &v = j.at(key);
  if (v.is_null())
    out.reset();
  else
    out = v.get<T>();
}

[[noreturn]] void bad(const std::string &what) {
  throw ArtifactError(Status::Corrupt, "the artifact's plan is invalid: " + what);
}

// Everything the step loop and the executors index with, checked against the plan's own sizes.
void validate(const ExecutionPlan &p) {
  int nslots = (int)p.slots.size();
  auto slotOk = [&](int s) { return s >= 0 && s < nslots; };
  for (int s = 0; s < nslots; ++s) {
    const BufferSlot &b = p.slots[s];
    int64_t n = 1;
    for (int64_t d : b.shape) {
      if (d < 0 || (d > 0 && n > (int64_t(1) << 46) / d))
        bad("slot " + std::to_string(s) + " has a bad shape");
      n *= d;
    }
    if (b.bytes != (size_t)n * dtypeSize(b.dtype))
      bad("slot " + std::to_string(s) + " holds " + std::to_string(b.bytes) + " bytes, its shape and dtype " +
          std::to_string((size_t)n * dtypeSize(b.dtype)));
    if (b.aliasOf >= 0 && (!slotOk(b.aliasOf) || p.slots[b.aliasOf].aliasOf >= 0 ||
                           p.slots[b.aliasOf].bytes != b.bytes))
      bad("slot " + std::to_string(s) + " aliases a bad slot");
  }
  for (size_t k = 0; k < p.argSlots.size(); ++k)
    if (!slotOk(p.argSlots[k]) || p.slots[p.argSlots[k]].argument != (int)k)
      bad("argument " + std::to_string(k) + " names a bad slot");
  for (int s : p.resultSlots)
    if (!slotOk(s))
      bad("a result names a bad slot");
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step &s = p.steps[i];
    std::string where = "step " + std::to_string(i) + " (" + s.label + ")";
    for (int sl : s.in)
      if (!slotOk(sl))
        bad(where + " reads a bad slot");
    for (int sl : s.out)
      if (!slotOk(sl))
        bad(where + " writes a bad slot");
    auto inputOk = [&](int k, bool optional) { return (optional && k == -1) || (k >= 0 && k < (int)s.in.size()); };
    switch (s.kind) {
    case Step::Kind::Alias:
    case Step::Kind::Constant:
      if (s.out.size() != 1 || (s.kind == Step::Kind::Alias && s.in.size() != 1))
        bad(where + " has the wrong number of operands");
      break;
    case Step::Kind::Host:
      break;
    case Step::Kind::Collective:
      if (s.in.size() != s.out.size())
        bad(where + " reduces " + std::to_string(s.in.size()) + " tensors into " + std::to_string(s.out.size()));
      for (size_t k = 0; k < s.in.size(); ++k)
        if (p.slots[s.in[k]].bytes != p.slots[s.out[k]].bytes)
          bad(where + " reduces tensors of different sizes");
      break;
    case Step::Kind::Kernel:
      if (p.target.backend == codegen::Backend::Cuda &&
          (!s.cudaKernel || s.cudaKernel->numInputs != s.in.size() || s.cudaKernel->numOutputs != s.out.size()))
        bad(where + " has no kernel for its operands");
      if (p.target.backend == codegen::Backend::Cpu &&
          (!s.cpuFunction || s.cpuFunction->argShapes.size() != s.in.size() + s.out.size()))
        bad(where + " has no function for its operands");
      break;
    case Step::Kind::Library: {
      if (!s.library || s.out.empty())
        bad(where + " has no library call");
      const LibraryCall &c = *s.library;
      for (int k : c.epilogueInputs)
        if (!inputOk(k, false))
          bad(where + "'s epilogue reads a bad input");
      bool ok = true;
      if (c.kind == LibraryCall::Kind::Matmul)
        ok = inputOk(c.matmul.lhsInput, false) && inputOk(c.matmul.rhsInput, false) &&
             inputOk(c.matmul.biasInput, true) && inputOk(c.matmul.residualInput, true);
      else if (c.kind == LibraryCall::Kind::Conv)
        ok = inputOk(c.conv.inputIndex, true) && inputOk(c.conv.filterIndex, true) &&
             inputOk(c.conv.gradOutputIndex, true) && inputOk(c.conv.biasIndex, true);
      else
        ok = !s.in.empty();
      if (!ok)
        bad(where + "'s library call reads a bad input");
      size_t product = c.productBytes();
      if (c.productIsOutput && p.slots[s.out[0]].bytes != product)
        bad(where + "'s library result does not fit its output");
      if (s.hasEpilogue() && p.target.backend == codegen::Backend::Cuda) {
        size_t eins = 1 + c.epilogueInputs.size(), eouts = s.out.size() - (c.productIsOutput ? 1 : 0);
        if (s.cudaKernel->numInputs != eins || s.cudaKernel->numOutputs != eouts)
          bad(where + "'s epilogue has the wrong operands");
      }
      break;
    }
    }
  }
}

} // namespace

json planToJson(const ExecutionPlan &plan) {
  json steps = json::array();
  for (const Step &s : plan.steps)
    steps.push_back({{"kind", s.kind}, {"label", s.label}, {"kernelKind", s.kernelKind}, {"in", s.in},
                     {"out", s.out}, {"cudaKernel", optional(s.cudaKernel)},
                     {"cpuFunction", optional(s.cpuFunction)}, {"library", optional(s.library)},
                     {"why", s.why}, {"collectiveMean", s.collectiveMean}, {"scan", s.scan},
                     {"source", s.source}, {"bytes", s.bytes}, {"flops", s.flops}});
  return {{"backend", plan.target.backend}, {"cuda", plan.target.cuda}, {"entry", plan.entry},
          {"slots", plan.slots}, {"steps", steps}, {"argSlots", plan.argSlots},
          {"resultSlots", plan.resultSlots}};
}

ExecutionPlan planFromJson(const json &j) {
  ExecutionPlan p;
  try {
    j.at("backend").get_to(p.target.backend);
    j.at("cuda").get_to(p.target.cuda);
    j.at("entry").get_to(p.entry);
    j.at("slots").get_to(p.slots);
    j.at("argSlots").get_to(p.argSlots);
    j.at("resultSlots").get_to(p.resultSlots);
    for (const json &js : j.at("steps")) {
      Step s;
      js.at("kind").get_to(s.kind);
      js.at("label").get_to(s.label);
      js.at("kernelKind").get_to(s.kernelKind);
      js.at("in").get_to(s.in);
      js.at("out").get_to(s.out);
      readOptional(js, "cudaKernel", s.cudaKernel);
      readOptional(js, "cpuFunction", s.cpuFunction);
      readOptional(js, "library", s.library);
      js.at("why").get_to(s.why);
      js.at("collectiveMean").get_to(s.collectiveMean);
      js.at("scan").get_to(s.scan);
      js.at("source").get_to(s.source);
      js.at("bytes").get_to(s.bytes);
      js.at("flops").get_to(s.flops);
      p.steps.push_back(std::move(s));
    }
  } catch (const json::exception &e) {
    bad(e.what());
  }
  validate(p);
  return p;
}

} // namespace artifact
} // namespace rfuse
