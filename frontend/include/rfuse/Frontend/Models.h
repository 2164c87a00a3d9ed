//===- Models.h - reference model graphs built with GraphBuilder ----------------*- C++ -*-===//
//
// Whole models traced through the C++ API, for the benchmarks (the PyTorch baselines' shapes),
// the GPU tests and deployers who compile them ahead of time. The R package builds the same
// models from its nn_* modules.
//
//===----------------------------------------------------------------------===//
#ifndef RFUSE_FRONTEND_MODELS_H
#define RFUSE_FRONTEND_MODELS_H

#include "rfuse/Frontend/GraphBuilder.h"

#include <string>
#include <vector>

namespace rfuse {

/// torchvision's ResNet (BasicBlocks) for small images: a 7x7/2 stem convolution, batch norm,
/// ReLU and a 3x3/2 max pool; stages of residual blocks (the first block of a later stage
/// downsamples with stride 2 and a 1x1 convolution); global average pooling; a linear layer.
/// Batch norm runs in training mode (batch statistics). Convolutions have no bias.
struct ResNetConfig {
  int64_t batch = 256, imageSize = 32, inChannels = 3, classes = 10;
  std::vector<int64_t> widths{64, 128, 256, 512};
  std::vector<int64_t> blocks{2, 2, 2, 2}; ///< ResNet-18
  DType dtype = DType::F32;
  ImageLayout layout = ImageLayout::NHWC;
  double epsilon = 1e-5;
};

/// The traced training loss: the function's inputs are the parameters (in `parameterNames`
/// order), then the images, then one-hot labels [batch, classes]; its result is the mean
/// softmax cross-entropy.
struct ModelGraph {
  std::vector<std::string> parameterNames;
  std::vector<std::vector<int64_t>> inputShapes; ///< parameters, then the data inputs
  size_t parameterCount() const { return parameterNames.size(); }
};
ModelGraph buildResNetLoss(GraphBuilder &g, const ResNetConfig &config);

/// Mean softmax cross-entropy of logits [N, K] against one-hot targets [N, K] (log-sum-exp with
/// the row maximum subtracted).
TracedValue crossEntropy(GraphBuilder &g, TracedValue logits, TracedValue oneHot);

} // namespace rfuse

#endif
