// Random DAGs of rfuse ops for property tests: pointwise ops, broadcasts (NumPy-style through the
// GraphBuilder), reductions (with and without keep_dims), matmuls, transposes, compare/select;
// random shapes and dtype (f32 or f64). Inputs are random and never zero; every op is kept in a
// numerically tame domain (exp of tanh, log of 1 + |x|, division by 1 + |x|) so that results are
// finite and comparable.
#ifndef RFUSE_TESTS_RANDOMGRAPH_H
#define RFUSE_TESTS_RANDOMGRAPH_H

#include "rfuse/Runtime/HostTensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rfuse::test {

struct RandomGraph {
  uint64_t seed = 0;
  DType dtype = DType::F32;
  std::string moduleText; ///< entry function @main
  std::vector<HostTensor> inputs;
  int numOps = 0;
};

RandomGraph generateRandomGraph(uint64_t seed);

} // namespace rfuse::test

#endif
