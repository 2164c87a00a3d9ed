// dlopen-based loading of CUDA's libraries (see CudaApi.h) and what the device and libraries are
// (rfuse/Runtime/Cuda.h). The NVRTC compiler and its cache are KernelCompiler.cpp's.
#include "CudaApi.h"
#include "rfuse/Runtime/Options.h"
#include "rfuse/Runtime/Cuda.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>


namespace rfuse::cuda {

void *openFirst(const std::vector<std::string> &names, std::string &error, std::string *opened) {
  for (const std::string &n : names)
    if (void *h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      if (opened)
        *opened = n;
      return h;
    }
  const char *why = dlerror(); // dlerror() clears itself: read it once
  error = "cannot load " + names.front() + ": " + (why ? why : "not found");
  return nullptr;
}

void *bindAddress(void *lib, const char *name, std::string &error) {
  void *p = dlsym(lib, name);
  if (!p && error.empty())
    error = std::string("missing symbol ") + name;
  return p;
}

const DriverApi &driver() {
  static DriverApi api = [] {
    DriverApi a{};
    void *lib = openFirst({"libcuda.so.1", "libcuda.so"}, a.error);
    if (!lib)
      return a;
    bool ok = true;
#define RF_BIND(field, sym) ok &= bind(lib, a.field, sym, a.error)
    RF_BIND(cuInit, "cuInit");
    RF_BIND(cuDeviceGetCount, "cuDeviceGetCount");
    RF_BIND(cuDeviceGet, "cuDeviceGet");
    RF_BIND(cuDeviceGetName, "cuDeviceGetName");
    RF_BIND(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    RF_BIND(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    RF_BIND(cuCtxSetCurrent, "cuCtxSetCurrent");
    RF_BIND(cuCtxSynchronize, "cuCtxSynchronize");
    RF_BIND(cuMemAlloc, "cuMemAlloc_v2");
    RF_BIND(cuMemFree, "cuMemFree_v2");
    RF_BIND(cuMemGetInfo, "cuMemGetInfo_v2");
    RF_BIND(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    RF_BIND(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    RF_BIND(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    RF_BIND(cuMemsetD32Async, "cuMemsetD32Async");
    RF_BIND(cuMemsetD8Async, "cuMemsetD8Async");
    RF_BIND(cuModuleLoadData, "cuModuleLoadData");
    RF_BIND(cuModuleUnload, "cuModuleUnload");
    RF_BIND(cuModuleGetFunction, "cuModuleGetFunction");
    RF_BIND(cuFuncSetAttribute, "cuFuncSetAttribute");
    RF_BIND(cuLaunchKernel, "cuLaunchKernel");
    RF_BIND(cuStreamCreate, "cuStreamCreate");
    RF_BIND(cuStreamWaitEvent, "cuStreamWaitEvent");
    RF_BIND(cuStreamDestroy, "cuStreamDestroy_v2");
    RF_BIND(cuStreamSynchronize, "cuStreamSynchronize");
    RF_BIND(cuEventCreate, "cuEventCreate");
    RF_BIND(cuEventRecord, "cuEventRecord");
    RF_BIND(cuEventSynchronize, "cuEventSynchronize");
    RF_BIND(cuEventElapsedTime, "cuEventElapsedTime_v2");
    RF_BIND(cuEventDestroy, "cuEventDestroy_v2");
    RF_BIND(cuGetErrorString, "cuGetErrorString");
    RF_BIND(cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    RF_BIND(cuStreamEndCapture, "cuStreamEndCapture");
    RF_BIND(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    RF_BIND(cuGraphLaunch, "cuGraphLaunch");
    RF_BIND(cuGraphExecDestroy, "cuGraphExecDestroy");
    RF_BIND(cuGraphDestroy, "cuGraphDestroy");
    RF_BIND(cuMemHostAlloc, "cuMemHostAlloc");
    RF_BIND(cuMemFreeHost, "cuMemFreeHost");
    RF_BIND(cuDriverGetVersion, "cuDriverGetVersion");
    std::string optional;
    bind(lib, a.cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters", optional);
    a.loaded = ok;
    return a;
  }();
  return api;
}

const NvrtcApi &nvrtc() {
  static NvrtcApi api = [] {
    NvrtcApi a{};
    void *lib = openFirst({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                           "/usr/local/cuda/lib64/libnvrtc.so.13"},
                          a.error);
    if (!lib)
      return a;
    bool ok = true;
    RF_BIND(nvrtcVersion, "nvrtcVersion");
    RF_BIND(nvrtcCreateProgram, "nvrtcCreateProgram");
    RF_BIND(nvrtcCompileProgram, "nvrtcCompileProgram");
    RF_BIND(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
    RF_BIND(nvrtcGetProgramLog, "nvrtcGetProgramLog");
    RF_BIND(nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
    RF_BIND(nvrtcGetCUBIN, "nvrtcGetCUBIN");
    RF_BIND(nvrtcGetPTXSize, "nvrtcGetPTXSize");
    RF_BIND(nvrtcGetPTX, "nvrtcGetPTX");
    RF_BIND(nvrtcDestroyProgram, "nvrtcDestroyProgram");
    RF_BIND(nvrtcGetErrorString, "nvrtcGetErrorString");
    a.loaded = ok;
    return a;
  }();
  return api;
}

const CublasLtApi &cublasLt() {
  static CublasLtApi api = [] {
    CublasLtApi a{};
    void *lib = openFirst({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
                           "/usr/local/cuda/lib64/libcublasLt.so.13"},
                          a.error);
    if (!lib)
      return a;
    bool ok = true;
    RF_BIND(cublasLtCreate, "cublasLtCreate");
    RF_BIND(cublasLtDestroy, "cublasLtDestroy");
    RF_BIND(cublasLtGetVersion, "cublasLtGetVersion");
    RF_BIND(cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate");
    RF_BIND(cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy");
    RF_BIND(cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
    RF_BIND(cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
    RF_BIND(cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
    RF_BIND(cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
    RF_BIND(cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
    RF_BIND(cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
    RF_BIND(cublasLtMatrixTransformDescCreate, "cublasLtMatrixTransformDescCreate");
    RF_BIND(cublasLtMatrixTransformDescDestroy, "cublasLtMatrixTransformDescDestroy");
    RF_BIND(cublasLtMatrixTransformDescSetAttribute, "cublasLtMatrixTransformDescSetAttribute");
    RF_BIND(cublasLtMatrixTransform, "cublasLtMatrixTransform");
    RF_BIND(cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    RF_BIND(cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
    RF_BIND(cublasLtMatmulAlgoCheck, "cublasLtMatmulAlgoCheck");
    RF_BIND(cublasLtMatmul, "cublasLtMatmul");
#undef RF_BIND
    a.loaded = ok;
    return a;
  }();
  return api;
}

const CudnnApi &cudnn() {
  static CudnnApi api = [] {
    CudnnApi a{};
    void *lib = openFirst({"libcudnn.so.9", "libcudnn.so"}, a.error);
    if (!lib)
      return a;
    bool ok = true;
#define RF_BIND(field, sym) ok &= bind(lib, a.field, sym, a.error)
    RF_BIND(cudnnCreate, "cudnnCreate");
    RF_BIND(cudnnDestroy, "cudnnDestroy");
    RF_BIND(cudnnGetVersion, "cudnnGetVersion");
    RF_BIND(cudnnSetStream, "cudnnSetStream");
    RF_BIND(cudnnGetErrorString, "cudnnGetErrorString");
    RF_BIND(cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor");
    RF_BIND(cudnnSetTensor4dDescriptor, "cudnnSetTensor4dDescriptor");
    RF_BIND(cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor");
    RF_BIND(cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor");
    RF_BIND(cudnnSetFilter4dDescriptor, "cudnnSetFilter4dDescriptor");
    RF_BIND(cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor");
    RF_BIND(cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
    RF_BIND(cudnnSetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor");
    RF_BIND(cudnnSetConvolutionGroupCount, "cudnnSetConvolutionGroupCount");
    RF_BIND(cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType");
    RF_BIND(cudnnDestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor");
    RF_BIND(cudnnGetConvolutionForwardAlgorithm_v7, "cudnnGetConvolutionForwardAlgorithm_v7");
    RF_BIND(cudnnConvolutionForward, "cudnnConvolutionForward");
    RF_BIND(cudnnGetConvolutionBackwardDataAlgorithm_v7, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    RF_BIND(cudnnConvolutionBackwardData, "cudnnConvolutionBackwardData");
    RF_BIND(cudnnGetConvolutionBackwardFilterAlgorithm_v7, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    RF_BIND(cudnnFindConvolutionForwardAlgorithmEx, "cudnnFindConvolutionForwardAlgorithmEx");
    RF_BIND(cudnnFindConvolutionBackwardDataAlgorithmEx, "cudnnFindConvolutionBackwardDataAlgorithmEx");
    RF_BIND(cudnnFindConvolutionBackwardFilterAlgorithmEx, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    RF_BIND(cudnnGetConvolutionForwardWorkspaceSize, "cudnnGetConvolutionForwardWorkspaceSize");
    RF_BIND(cudnnGetConvolutionBackwardDataWorkspaceSize, "cudnnGetConvolutionBackwardDataWorkspaceSize");
    RF_BIND(cudnnGetConvolutionBackwardFilterWorkspaceSize, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
    RF_BIND(cudnnConvolutionBackwardFilter, "cudnnConvolutionBackwardFilter");
    RF_BIND(cudnnPoolingBackward, "cudnnPoolingBackward");
    RF_BIND(cudnnAddTensor, "cudnnAddTensor");
    RF_BIND(cudnnSetTensorNdDescriptor, "cudnnSetTensorNdDescriptor");
    RF_BIND(cudnnCreateDropoutDescriptor, "cudnnCreateDropoutDescriptor");
    RF_BIND(cudnnSetDropoutDescriptor, "cudnnSetDropoutDescriptor");
    RF_BIND(cudnnDestroyDropoutDescriptor, "cudnnDestroyDropoutDescriptor");
    RF_BIND(cudnnCreateRNNDescriptor, "cudnnCreateRNNDescriptor");
    RF_BIND(cudnnDestroyRNNDescriptor, "cudnnDestroyRNNDescriptor");
    RF_BIND(cudnnSetRNNDescriptor_v8, "cudnnSetRNNDescriptor_v8");
    RF_BIND(cudnnCreateRNNDataDescriptor, "cudnnCreateRNNDataDescriptor");
    RF_BIND(cudnnDestroyRNNDataDescriptor, "cudnnDestroyRNNDataDescriptor");
    RF_BIND(cudnnSetRNNDataDescriptor, "cudnnSetRNNDataDescriptor");
    RF_BIND(cudnnBuildRNNDynamic, "cudnnBuildRNNDynamic");
    RF_BIND(cudnnGetRNNWeightSpaceSize, "cudnnGetRNNWeightSpaceSize");
    RF_BIND(cudnnGetRNNTempSpaceSizes, "cudnnGetRNNTempSpaceSizes");
    RF_BIND(cudnnGetRNNWeightParams, "cudnnGetRNNWeightParams");
    RF_BIND(cudnnRNNForward, "cudnnRNNForward");
    RF_BIND(cudnnRNNBackwardData_v8, "cudnnRNNBackwardData_v8");
    RF_BIND(cudnnRNNBackwardWeights_v8, "cudnnRNNBackwardWeights_v8");
    RF_BIND(cudnnCreatePoolingDescriptor, "cudnnCreatePoolingDescriptor");
    RF_BIND(cudnnSetPooling2dDescriptor, "cudnnSetPooling2dDescriptor");
    RF_BIND(cudnnDestroyPoolingDescriptor, "cudnnDestroyPoolingDescriptor");
    RF_BIND(cudnnPoolingForward, "cudnnPoolingForward");
#undef RF_BIND
    a.loaded = ok;
    return a;
  }();
  return api;
}

void check(CUresult r, const char *call, const std::string &what) {
  if (r == CUDA_SUCCESS)
    return;
  const char *msg = nullptr;
  if (driver().cuGetErrorString)
    driver().cuGetErrorString(r, &msg);
  throw CudaError(what + ": " + call + " failed: " + (msg ? msg : "error " + std::to_string(r)));
}

const DeviceInfo &gpuPresence() {
  static DeviceInfo info = [] {
    DeviceInfo d;
    if (runtimeOptions().disableCuda) {
      d.reason = "disabled by RFUSE_DISABLE_CUDA";
      return d;
    }
    const DriverApi &api = driver();
    if (!api.loaded) {
      d.reason = "no CUDA driver (" + api.error + ")";
      return d;
    }
    int count = 0;
    if (api.cuInit(0) != CUDA_SUCCESS || api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
      d.reason = "no CUDA device";
      return d;
    }
    CUdevice dev;
    char name[256] = {0};
    api.cuDeviceGet(&dev, 0);
    api.cuDeviceGetName(name, sizeof name, dev);
    api.cuDeviceGetAttribute(&d.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    api.cuDeviceGetAttribute(&d.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    api.cuDeviceGetAttribute(&d.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    d.name = name;
    d.present = true;
    return d;
  }();
  return info;
}

std::vector<std::string> supportedArchitectures() { return {"sm_86", "sm_89", "sm_90"}; }

} // namespace rfuse::cuda
