# Residual networks from the nn_* layers: torchvision's BasicBlock and ResNet (for small images:
# the same stem, stages and head), traced, differentiated and trained like any module.

#' @rdname nn_layers
#' @export
nn_basic_block <- nn_module("nn_basic_block",
  initialize = function(in_channels, out_channels, stride = 1) {
    self$conv1 <- nn_conv2d(in_channels, out_channels, 3, stride, 1, bias = FALSE)
    self$bn1 <- nn_batch_norm2d(out_channels)
    self$conv2 <- nn_conv2d(out_channels, out_channels, 3, 1, 1, bias = FALSE)
    self$bn2 <- nn_batch_norm2d(out_channels)
    if (stride != 1 || in_channels != out_channels)
      self$downsample <- nn_sequential(nn_conv2d(in_channels, out_channels, 1, stride, bias = FALSE),
                                       nn_batch_norm2d(out_channels))
  },
  forward = function(x) {
    y <- nnf_relu(self$bn1(self$conv1(x)))
    y <- self$bn2(self$conv2(y))
    shortcut <- if (exists("downsample", envir = self, inherits = FALSE)) self$downsample(x) else x
    nnf_relu(y + shortcut)
  })

#' @rdname nn_layers
#' @export
nn_resnet <- nn_module("nn_resnet",
  initialize = function(blocks = c(2, 2, 2, 2), widths = c(64, 128, 256, 512), num_classes = 10,
                        in_channels = 3) {
    if (length(blocks) != length(widths) || !length(blocks))
      rf_abort("rfuse_type_error", "`blocks` and `widths` must have one entry per stage")
    self$conv1 <- nn_conv2d(in_channels, widths[1], 7, 2, 3, bias = FALSE)
    self$bn1 <- nn_batch_norm2d(widths[1])
    self$maxpool <- nn_max_pool2d(3, 2, 1)
    in_ch <- widths[1]
    for (s in seq_along(blocks)) {
      stage <- lapply(seq_len(blocks[s]), function(b)
        nn_basic_block(if (b == 1) in_ch else widths[s], widths[s], if (s > 1 && b == 1) 2 else 1))
      assign(sprintf("layer%d", s), do.call(nn_sequential, stage), envir = self)
      in_ch <- widths[s]
    }
    self$n_stages <- length(blocks)
    self$fc <- nn_linear(in_ch, num_classes)
  },
  forward = function(x) {
    x <- self$maxpool(nnf_relu(self$bn1(self$conv1(x))))
    for (s in seq_len(self$n_stages)) x <- get(sprintf("layer%d", s), envir = self)(x)
    self$fc(nnf_flatten(nnf_adaptive_avg_pool2d(x, 1)))
  })

#' @rdname nn_layers
#' @param num_classes,in_channels `nn_resnet18()`'s output classes and input channels.
#' @export
nn_resnet18 <- function(num_classes = 10, in_channels = 3)
  nn_resnet(c(2, 2, 2, 2), c(64, 128, 256, 512), num_classes, in_channels)
