// The interpreter's rfuse.recurrent and rfuse.recurrent_backward: plain loops over the steps in
// double, the cell's equations written out (the oracle the cuDNN calls are checked against).
#ifndef RFUSE_RUNTIME_INTERPRETER_RECURRENT_H
#define RFUSE_RUNTIME_INTERPRETER_RECURRENT_H

#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Runtime/HostTensor.h"

#include <vector>

namespace rfuse::interp {

/// in: x [T, B, I], h0 [B, H], (c0), w_ih, w_hh, b_ih, b_hh. Returns y, h_n (, c_n), each in x's dtype.
std::vector<HostTensor> recurrentForward(RecurrentMode cell, const std::vector<HostTensor> &in);

/// in: the forward's operands, then grad_y, grad_h_n (, grad_c_n). Returns grad_x, grad_h0
/// (, grad_c0), grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh.
std::vector<HostTensor> recurrentBackward(RecurrentMode cell, const std::vector<HostTensor> &in);

} // namespace rfuse::interp

#endif
