// The process group of data-parallel training (rfuse/Runtime/ProcessGroup.h) for rf_fit()'s
// strategy = "ddp": start and end it, what it is, and collectives over rf_tensors' buffers.
#include "glue.h"

using namespace Rcpp;
using rfuse::r::fail;
using rfuse::r::guarded;
using rfuse::r::tensorOf;

// [[Rcpp::export(.rf_process_group_init, rng = false)]]
void rf_process_group_init(int rank, int worldSize, std::string masterAddr, int masterPort, double timeout,
                           std::string device) {
  guarded([&] {
    rfuse::ProcessGroupOptions o;
    o.rank = rank;
    o.worldSize = worldSize;
    o.masterAddr = masterAddr;
    o.masterPort = masterPort;
    o.timeoutSeconds = timeout;
    if (device != "cpu" && device != "cuda")
      fail("rfuse_type_error", "internal: device is 'cpu' or 'cuda'");
    o.device = device == "cuda" ? rfuse::Device::Cuda : rfuse::Device::Cpu;
    // On this thread (the device's context is current here); the rendezvous waits for the other
    // ranks at most `timeout` seconds.
    rfuse::initProcessGroup(o);
  });
}

// [[Rcpp::export(.rf_process_group_destroy, rng = false)]]
void rf_process_group_destroy() {
  guarded([] { rfuse::destroyProcessGroup(); });
}

// [[Rcpp::export(.rf_process_group_info, rng = false)]]
List rf_process_group_info() {
  return guarded([] {
    rfuse::ProcessGroupInfo i = rfuse::processGroupInfo();
    return List::create(_["active"] = i.active, _["rank"] = i.rank, _["world_size"] = i.worldSize,
                        _["device"] = i.device == rfuse::Device::Cuda ? "cuda" : "cpu", _["backend"] = i.backend);
  });
}

namespace {
std::vector<rfuse::Tensor> tensorsOf(List handles) {
  std::vector<rfuse::Tensor> out;
  for (R_xlen_t k = 0; k < handles.size(); ++k)
    out.push_back(tensorOf(handles[k]));
  return out;
}
} // namespace

// In place: each tensor's sum or mean over the ranks.
// [[Rcpp::export(.rf_all_reduce, rng = false)]]
void rf_all_reduce(List handles, bool mean) {
  guarded([&] { rfuse::allReduce(tensorsOf(handles), mean); });
}

// In place: rank `root`'s values into every rank's tensors.
// [[Rcpp::export(.rf_broadcast, rng = false)]]
void rf_broadcast(List handles, int root) {
  guarded([&] { rfuse::broadcast(tensorsOf(handles), root); });
}
