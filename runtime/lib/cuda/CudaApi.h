// Function tables for the CUDA driver, NVRTC and cuBLASLt, filled by dlopen/dlsym on first use.
// Types come from CUDA's headers; no CUDA library is linked.
#ifndef RFUSE_RUNTIME_CUDAAPI_H
#define RFUSE_RUNTIME_CUDAAPI_H

#include <cublasLt.h>
#include <cuda.h>
#include <cudnn.h>
#include <nvrtc.h>

#include <string>
#include <vector>

namespace rfuse::cuda {

struct DriverApi {
  bool loaded = false;
  std::string error;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemGetInfo)(size_t *, size_t *);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  // CUDA graphs (a program's steps captured once, replayed as one launch).
  CUresult (*cuStreamBeginCapture)(CUstream, CUstreamCaptureMode);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  // Pinned host memory (staging for uploads and downloads) and what rf_sitrep() reports.
  CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void *);
  CUresult (*cuDriverGetVersion)(int *);
  // Optional (CUDA 12 drivers and newer; null where absent): how many clusters of a kernel are
  // resident at once, for kernels whose clusters loop over their tiles.
  CUresult (*cuOccupancyMaxActiveClusters)(int *, CUfunction, const CUlaunchConfig *);
};

struct NvrtcApi {
  bool loaded = false;
  std::string error;
  nvrtcResult (*nvrtcVersion)(int *, int *);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                    const char *const *, const char *const *);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char *);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char *);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t *);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char *);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *);
  const char *(*nvrtcGetErrorString)(nvrtcResult);
};

struct CublasLtApi {
  bool loaded = false;
  std::string error;
  cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t *);
  cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t);
  size_t (*cublasLtGetVersion)();
  cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
  cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t,
                                                   const void *, size_t);
  cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t,
                                               uint64_t, int64_t);
  cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*cublasLtMatrixLayoutSetAttribute)(cublasLtMatrixLayout_t,
                                                     cublasLtMatrixLayoutAttribute_t, const void *, size_t);
  cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t *);
  cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t,
                                                         cublasLtMatmulPreferenceAttributes_t,
                                                         const void *, size_t);
  cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                                   cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                   cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                   cublasLtMatmulPreference_t, int,
                                                   cublasLtMatmulHeuristicResult_t *, int *);
  cublasStatus_t (*cublasLtMatmulAlgoCheck)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                            cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                            const cublasLtMatmulAlgo_t *, cublasLtMatmulHeuristicResult_t *);
  cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
                                   cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t,
                                   const void *, const void *, cublasLtMatrixLayout_t, void *,
                                   cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *,
                                   size_t, cudaStream_t);
  cublasStatus_t (*cublasLtMatrixTransformDescCreate)(cublasLtMatrixTransformDesc_t *, cudaDataType);
  cublasStatus_t (*cublasLtMatrixTransformDescDestroy)(cublasLtMatrixTransformDesc_t);
  cublasStatus_t (*cublasLtMatrixTransformDescSetAttribute)(cublasLtMatrixTransformDesc_t,
                                                            cublasLtMatrixTransformDescAttributes_t,
                                                            const void *, size_t);
  cublasStatus_t (*cublasLtMatrixTransform)(cublasLtHandle_t, cublasLtMatrixTransformDesc_t, const void *,
                                            const void *, cublasLtMatrixLayout_t, const void *, const void *,
                                            cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t, cudaStream_t);
};

struct CudnnApi {
  bool loaded = false;
  std::string error;
  cudnnStatus_t (*cudnnCreate)(cudnnHandle_t *);
  cudnnStatus_t (*cudnnDestroy)(cudnnHandle_t);
  size_t (*cudnnGetVersion)();
  cudnnStatus_t (*cudnnSetStream)(cudnnHandle_t, cudaStream_t);
  const char *(*cudnnGetErrorString)(cudnnStatus_t);
  cudnnStatus_t (*cudnnCreateTensorDescriptor)(cudnnTensorDescriptor_t *);
  cudnnStatus_t (*cudnnSetTensor4dDescriptor)(cudnnTensorDescriptor_t, cudnnTensorFormat_t,
                                              cudnnDataType_t, int, int, int, int);
  cudnnStatus_t (*cudnnDestroyTensorDescriptor)(cudnnTensorDescriptor_t);
  cudnnStatus_t (*cudnnCreateFilterDescriptor)(cudnnFilterDescriptor_t *);
  cudnnStatus_t (*cudnnSetFilter4dDescriptor)(cudnnFilterDescriptor_t, cudnnDataType_t,
                                              cudnnTensorFormat_t, int, int, int, int);
  cudnnStatus_t (*cudnnDestroyFilterDescriptor)(cudnnFilterDescriptor_t);
  cudnnStatus_t (*cudnnCreateConvolutionDescriptor)(cudnnConvolutionDescriptor_t *);
  cudnnStatus_t (*cudnnSetConvolution2dDescriptor)(cudnnConvolutionDescriptor_t, int, int, int, int,
                                                   int, int, cudnnConvolutionMode_t, cudnnDataType_t);
  cudnnStatus_t (*cudnnSetConvolutionGroupCount)(cudnnConvolutionDescriptor_t, int);
  cudnnStatus_t (*cudnnSetConvolutionMathType)(cudnnConvolutionDescriptor_t, cudnnMathType_t);
  cudnnStatus_t (*cudnnDestroyConvolutionDescriptor)(cudnnConvolutionDescriptor_t);
  cudnnStatus_t (*cudnnGetConvolutionForwardAlgorithm_v7)(cudnnHandle_t, cudnnTensorDescriptor_t,
                                                          cudnnFilterDescriptor_t,
                                                          cudnnConvolutionDescriptor_t,
                                                          cudnnTensorDescriptor_t, int, int *,
                                                          cudnnConvolutionFwdAlgoPerf_t *);
  cudnnStatus_t (*cudnnConvolutionForward)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t,
                                           const void *, cudnnFilterDescriptor_t, const void *,
                                           cudnnConvolutionDescriptor_t, cudnnConvolutionFwdAlgo_t,
                                           void *, size_t, const void *, cudnnTensorDescriptor_t,
                                           void *);
  cudnnStatus_t (*cudnnGetConvolutionBackwardDataAlgorithm_v7)(
      cudnnHandle_t, cudnnFilterDescriptor_t, cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,
      cudnnTensorDescriptor_t, int, int *, cudnnConvolutionBwdDataAlgoPerf_t *);
  cudnnStatus_t (*cudnnConvolutionBackwardData)(cudnnHandle_t, const void *, cudnnFilterDescriptor_t,
                                                const void *, cudnnTensorDescriptor_t, const void *,
                                                cudnnConvolutionDescriptor_t, cudnnConvolutionBwdDataAlgo_t,
                                                void *, size_t, const void *, cudnnTensorDescriptor_t, void *);
  cudnnStatus_t (*cudnnGetConvolutionBackwardFilterAlgorithm_v7)(
      cudnnHandle_t, cudnnTensorDescriptor_t, cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,
      cudnnFilterDescriptor_t, int, int *, cudnnConvolutionBwdFilterAlgoPerf_t *);
  // cuDNN's timed choice (option conv_autotune, as PyTorch's cudnn.benchmark): every algorithm run
  // on the call's own buffers, results sorted by time.
  cudnnStatus_t (*cudnnFindConvolutionForwardAlgorithmEx)(cudnnHandle_t, cudnnTensorDescriptor_t, const void *,
                                                          cudnnFilterDescriptor_t, const void *,
                                                          cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, void *,
                                                          int, int *, cudnnConvolutionFwdAlgoPerf_t *, void *, size_t);
  cudnnStatus_t (*cudnnFindConvolutionBackwardDataAlgorithmEx)(cudnnHandle_t, cudnnFilterDescriptor_t, const void *,
                                                               cudnnTensorDescriptor_t, const void *,
                                                               cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t,
                                                               void *, int, int *, cudnnConvolutionBwdDataAlgoPerf_t *,
                                                               void *, size_t);
  cudnnStatus_t (*cudnnFindConvolutionBackwardFilterAlgorithmEx)(cudnnHandle_t, cudnnTensorDescriptor_t, const void *,
                                                                 cudnnTensorDescriptor_t, const void *,
                                                                 cudnnConvolutionDescriptor_t, cudnnFilterDescriptor_t,
                                                                 void *, int, int *,
                                                                 cudnnConvolutionBwdFilterAlgoPerf_t *, void *, size_t);
  // A remembered algorithm's check (PlanCache): its workspace, or NOT_SUPPORTED for this problem.
  cudnnStatus_t (*cudnnGetConvolutionForwardWorkspaceSize)(cudnnHandle_t, cudnnTensorDescriptor_t,
                                                           cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t,
                                                           cudnnTensorDescriptor_t, cudnnConvolutionFwdAlgo_t,
                                                           size_t *);
  cudnnStatus_t (*cudnnGetConvolutionBackwardDataWorkspaceSize)(cudnnHandle_t, cudnnFilterDescriptor_t,
                                                                cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,
                                                                cudnnTensorDescriptor_t, cudnnConvolutionBwdDataAlgo_t,
                                                                size_t *);
  cudnnStatus_t (*cudnnGetConvolutionBackwardFilterWorkspaceSize)(cudnnHandle_t, cudnnTensorDescriptor_t,
                                                                  cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,
                                                                  cudnnFilterDescriptor_t,
                                                                  cudnnConvolutionBwdFilterAlgo_t, size_t *);
  cudnnStatus_t (*cudnnConvolutionBackwardFilter)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t,
                                                  const void *, cudnnTensorDescriptor_t, const void *,
                                                  cudnnConvolutionDescriptor_t, cudnnConvolutionBwdFilterAlgo_t,
                                                  void *, size_t, const void *, cudnnFilterDescriptor_t, void *);
  cudnnStatus_t (*cudnnPoolingBackward)(cudnnHandle_t, cudnnPoolingDescriptor_t, const void *,
                                        cudnnTensorDescriptor_t, const void *, cudnnTensorDescriptor_t,
                                        const void *, cudnnTensorDescriptor_t, const void *, const void *,
                                        cudnnTensorDescriptor_t, void *);
  cudnnStatus_t (*cudnnAddTensor)(cudnnHandle_t, const void *, cudnnTensorDescriptor_t,
                                  const void *, const void *, cudnnTensorDescriptor_t, void *);
  cudnnStatus_t (*cudnnSetTensorNdDescriptor)(cudnnTensorDescriptor_t, cudnnDataType_t, int, const int *, const int *);
  cudnnStatus_t (*cudnnCreateDropoutDescriptor)(cudnnDropoutDescriptor_t *);
  cudnnStatus_t (*cudnnSetDropoutDescriptor)(cudnnDropoutDescriptor_t, cudnnHandle_t, float, void *, size_t,
                                             unsigned long long);
  cudnnStatus_t (*cudnnDestroyDropoutDescriptor)(cudnnDropoutDescriptor_t);
  cudnnStatus_t (*cudnnCreateRNNDescriptor)(cudnnRNNDescriptor_t *);
  cudnnStatus_t (*cudnnDestroyRNNDescriptor)(cudnnRNNDescriptor_t);
  cudnnStatus_t (*cudnnSetRNNDescriptor_v8)(cudnnRNNDescriptor_t, cudnnRNNAlgo_t, cudnnRNNMode_t, cudnnRNNBiasMode_t,
                                            cudnnDirectionMode_t, cudnnRNNInputMode_t, cudnnDataType_t,
                                            cudnnDataType_t, cudnnMathType_t, int32_t, int32_t, int32_t, int32_t,
                                            cudnnDropoutDescriptor_t, uint32_t);
  cudnnStatus_t (*cudnnCreateRNNDataDescriptor)(cudnnRNNDataDescriptor_t *);
  cudnnStatus_t (*cudnnDestroyRNNDataDescriptor)(cudnnRNNDataDescriptor_t);
  cudnnStatus_t (*cudnnSetRNNDataDescriptor)(cudnnRNNDataDescriptor_t, cudnnDataType_t, cudnnRNNDataLayout_t, int, int,
                                             int, const int *, void *);
  cudnnStatus_t (*cudnnBuildRNNDynamic)(cudnnHandle_t, cudnnRNNDescriptor_t, int);
  cudnnStatus_t (*cudnnGetRNNWeightSpaceSize)(cudnnHandle_t, cudnnRNNDescriptor_t, size_t *);
  cudnnStatus_t (*cudnnGetRNNTempSpaceSizes)(cudnnHandle_t, cudnnRNNDescriptor_t, cudnnForwardMode_t,
                                             cudnnRNNDataDescriptor_t, size_t *, size_t *);
  cudnnStatus_t (*cudnnGetRNNWeightParams)(cudnnHandle_t, cudnnRNNDescriptor_t, int32_t, size_t, const void *, int32_t,
                                           cudnnTensorDescriptor_t, void **, cudnnTensorDescriptor_t, void **);
  cudnnStatus_t (*cudnnRNNForward)(cudnnHandle_t, cudnnRNNDescriptor_t, cudnnForwardMode_t, const int32_t *,
                                   cudnnRNNDataDescriptor_t, const void *, cudnnRNNDataDescriptor_t, void *,
                                   cudnnTensorDescriptor_t, const void *, void *, cudnnTensorDescriptor_t, const void *,
                                   void *, size_t, const void *, size_t, void *, size_t, void *);
  cudnnStatus_t (*cudnnRNNBackwardData_v8)(cudnnHandle_t, cudnnRNNDescriptor_t, const int32_t *,
                                           cudnnRNNDataDescriptor_t, const void *, const void *,
                                           cudnnRNNDataDescriptor_t, void *, cudnnTensorDescriptor_t, const void *,
                                           const void *, void *, cudnnTensorDescriptor_t, const void *, const void *,
                                           void *, size_t, const void *, size_t, void *, size_t, void *);
  cudnnStatus_t (*cudnnRNNBackwardWeights_v8)(cudnnHandle_t, cudnnRNNDescriptor_t, cudnnWgradMode_t, const int32_t *,
                                              cudnnRNNDataDescriptor_t, const void *, cudnnTensorDescriptor_t,
                                              const void *, cudnnRNNDataDescriptor_t, const void *, size_t, void *,
                                              size_t, void *, size_t, void *);
  cudnnStatus_t (*cudnnCreatePoolingDescriptor)(cudnnPoolingDescriptor_t *);
  cudnnStatus_t (*cudnnSetPooling2dDescriptor)(cudnnPoolingDescriptor_t, cudnnPoolingMode_t,
                                               cudnnNanPropagation_t, int, int, int, int, int, int);
  cudnnStatus_t (*cudnnDestroyPoolingDescriptor)(cudnnPoolingDescriptor_t);
  cudnnStatus_t (*cudnnPoolingForward)(cudnnHandle_t, cudnnPoolingDescriptor_t, const void *,
                                       cudnnTensorDescriptor_t, const void *, const void *,
                                       cudnnTensorDescriptor_t, void *);
};

/// dlopen of the first of `names` that loads (its name into `opened`); null, with the reason
/// in `error`, when none does.
void *openFirst(const std::vector<std::string> &names, std::string &error, std::string *opened = nullptr);
/// dlsym of `name` into `fn`; false, with the first missing symbol in `error`, when absent.
void *bindAddress(void *lib, const char *name, std::string &error);
template <class T> bool bind(void *lib, T &fn, const char *name, std::string &error) {
  fn = reinterpret_cast<T>(bindAddress(lib, name, error));
  return fn != nullptr;
}

const DriverApi &driver();
const CudnnApi &cudnn();
const NvrtcApi &nvrtc();
const CublasLtApi &cublasLt();

/// Throws CudaError "<what>: <call> failed: <error string>" unless r == CUDA_SUCCESS.
void check(CUresult r, const char *call, const std::string &what);

} // namespace rfuse::cuda

#endif
