// The kernel test corpus shared by the NVRTC test (CI, no GPU) and the GPU tests: canonical
// patterns (W1, W4, softmax, layernorm, matmul epilogues, transposes, casts, every pointwise op)
// and random property-test graphs.
#ifndef RFUSE_TESTS_CORPUSUTIL_H
#define RFUSE_TESTS_CORPUSUTIL_H

#include "rfuse/Runtime/HostTensor.h"

#include <string>
#include <vector>

namespace rfuse::test {

struct CorpusGraph {
  std::string name;
  std::string moduleText;          ///< unfused, entry @main
  std::vector<HostTensor> inputs;  ///< random, never zero
};

/// The canonical patterns, in f32 (and a few in f64 / f16 / bf16).
std::vector<CorpusGraph> canonicalCorpus();

} // namespace rfuse::test

#endif
