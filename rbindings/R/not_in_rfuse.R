# torch for R's exported functions that rfuse does not have (their names, from torch's NAMESPACE):
# each is a function that stops with a classed `rfuse_unsupported` naming it, so that a port
# calling one learns what is missing and where to look, instead of R's "could not find function".
# (Names rfuse has are not here: the list is what torch exports minus rfuse's namespace.)

torch_names_not_in_rfuse <- c(
  "autograd_backward", "autograd_grad", "autograd_set_grad_mode",
  "cuda_current_device", "cuda_device_count", "install_path", "install_torch", "install_type",
  "is_dataloader", "mnist_dataset", "nn_adaptive_log_softmax_with_loss", "nn_celu", "nn_dropout3d",
  "nn_glu", "nn_hardshrink", "nn_hardsigmoid", "nn_hardswish", "nn_init_dirac_", "nn_init_sparse_",
  "nn_log_sigmoid", "nn_max_pool1d", "nn_prelu", "nn_rrelu", "nn_softmax2d", "nn_softmin",
  "nn_softshrink", "nn_softsign", "nn_tanhshrink", "nn_threshold",
  "nn_utils_rnn_pack_padded_sequence", "nn_utils_rnn_pack_sequence",
  "nn_utils_rnn_pad_packed_sequence", "nn_utils_rnn_pad_sequence", "nnf_adaptive_avg_pool1d",
  "nnf_adaptive_avg_pool3d", "nnf_adaptive_max_pool1d", "nnf_adaptive_max_pool3d",
  "nnf_affine_grid", "nnf_alpha_dropout", "nnf_avg_pool1d", "nnf_avg_pool3d", "nnf_celu",
  "nnf_celu_", "nnf_conv3d", "nnf_conv_tbc", "nnf_conv_transpose1d", "nnf_conv_transpose3d",
  "nnf_cosine_embedding_loss", "nnf_cosine_similarity", "nnf_ctc_loss", "nnf_dropout3d",
  "nnf_elu_", "nnf_embedding_bag", "nnf_fold", "nnf_fractional_max_pool2d",
  "nnf_fractional_max_pool3d", "nnf_glu", "nnf_grid_sample", "nnf_gumbel_softmax",
  "nnf_hardshrink", "nnf_hardsigmoid", "nnf_hardswish", "nnf_hardtanh_",
  "nnf_hinge_embedding_loss", "nnf_instance_norm", "nnf_kl_div", "nnf_local_response_norm",
  "nnf_logsigmoid", "nnf_lp_pool1d", "nnf_lp_pool2d", "nnf_margin_ranking_loss", "nnf_max_pool1d",
  "nnf_max_pool3d", "nnf_max_unpool1d", "nnf_max_unpool2d", "nnf_max_unpool3d",
  "nnf_multi_head_attention_forward", "nnf_multi_margin_loss", "nnf_multilabel_margin_loss",
  "nnf_multilabel_soft_margin_loss", "nnf_pad", "nnf_pairwise_distance", "nnf_pdist",
  "nnf_pixel_shuffle", "nnf_poisson_nll_loss", "nnf_prelu", "nnf_relu_", "nnf_rrelu", "nnf_rrelu_",
  "nnf_selu_", "nnf_smooth_l1_loss", "nnf_soft_margin_loss", "nnf_softmin", "nnf_softshrink",
  "nnf_softsign", "nnf_tanhshrink", "nnf_threshold", "nnf_threshold_", "nnf_unfold",
  "torch_adaptive_avg_pool1d", "torch_addbmm", "torch_addcdiv", "torch_addcmul", "torch_addmm",
  "torch_addmv", "torch_addr", "torch_allclose", "torch_angle",
  "torch_as_strided", "torch_atan2", "torch_avg_pool1d", "torch_baddbmm", "torch_bartlett_window",
  "torch_bernoulli", "torch_bincount", "torch_bitwise_and", "torch_bitwise_not",
  "torch_bitwise_or", "torch_bitwise_xor", "torch_blackman_window", "torch_broadcast_tensors",
  "torch_can_cast", "torch_cartesian_prod", "torch_cdist", "torch_ceil", "torch_celu_",
  "torch_chain_matmul", "torch_channels_last_format", "torch_cholesky", "torch_cholesky_inverse",
  "torch_cholesky_solve", "torch_combinations", "torch_conj", "torch_contiguous_format",
  "torch_conv1d", "torch_conv2d", "torch_conv3d", "torch_conv_tbc", "torch_conv_transpose1d",
  "torch_conv_transpose2d", "torch_conv_transpose3d", "torch_cosh", "torch_cosine_similarity",
  "torch_cross", "torch_cummax", "torch_cummin", "torch_det",
  "torch_diag", "torch_diag_embed", "torch_diagflat", "torch_diagonal", "torch_digamma",
  "torch_dist", "torch_dot", "torch_eig", "torch_einsum", "torch_empty_like",
  "torch_empty_strided", "torch_eq", "torch_equal", "torch_erf", "torch_erfc", "torch_erfinv",
  "torch_expm1", "torch_eye", "torch_fft", "torch_flip", "torch_floor", "torch_floor_divide",
  "torch_fmod", "torch_frac", "torch_full_like", "torch_ge", "torch_generator",
  "torch_geqrf", "torch_ger", "torch_get_default_dtype", "torch_gt", "torch_hamming_window",
  "torch_hann_window", "torch_histc", "torch_ifft", "torch_imag", "torch_index_select",
  "torch_int16", "torch_int8", "torch_inverse", "torch_irfft", "torch_is_complex",
  "torch_is_floating_point", "torch_isfinite", "torch_isinf", "torch_isnan", "torch_kthvalue",
  "torch_le", "torch_lerp", "torch_lgamma", "torch_log10", "torch_log1p", "torch_log2",
  "torch_logdet", "torch_logical_and", "torch_logical_not", "torch_logical_or",
  "torch_logical_xor", "torch_logspace", "torch_logsumexp", "torch_lstsq", "torch_lt", "torch_lu",
  "torch_lu_solve", "torch_masked_select", "torch_matrix_power", "torch_matrix_rank",
  "torch_median", "torch_mode", "torch_multinomial", "torch_mv", "torch_mvlgamma", "torch_ne",
  "torch_nonzero", "torch_norm", "torch_normal", "torch_orgqr", "torch_ormqr", "torch_pdist",
  "torch_per_channel_affine", "torch_per_channel_symmetric", "torch_per_tensor_affine",
  "torch_per_tensor_symmetric", "torch_pinverse", "torch_pixel_shuffle", "torch_poisson",
  "torch_polygamma", "torch_preserve_format", "torch_promote_types", "torch_qint32", "torch_qint8",
  "torch_qr", "torch_quantize_per_channel", "torch_quantize_per_tensor", "torch_quint8",
  "torch_randint_like", "torch_randperm", "torch_range", "torch_real", "torch_reciprocal",
  "torch_reduction_mean", "torch_reduction_none", "torch_reduction_sum", "torch_relu_",
  "torch_renorm", "torch_repeat_interleave", "torch_result_type", "torch_rfft",
  "torch_roll", "torch_rot90", "torch_round", "torch_rrelu_", "torch_selu_",
  "torch_set_default_dtype", "torch_short", "torch_sign", "torch_sinh", "torch_slogdet",
  "torch_solve", "torch_sparse_coo", "torch_sparse_coo_tensor", "torch_square",
  "torch_std", "torch_std_mean", "torch_stft", "torch_strided", "torch_svd", "torch_symeig",
  "torch_take", "torch_tensor", "torch_tensordot", "torch_threshold_", "torch_trace",
  "torch_trapz", "torch_triangular_solve", "torch_tril_indices", "torch_triu_indices",
  "torch_true_divide", "torch_trunc", "torch_uint8", "torch_unique_consecutive", "torch_var",
  "torch_var_mean", "with_enable_grad")

unsupported_torch_function <- function(name) {
  force(name)
  function(...) rf_abort("rfuse_unsupported", sprintf(paste0(
    "`%s()` is a torch function rfuse does not have yet (in `%s`)%s: the porting table in rfuse's ",
    "docs/r-package.md lists the torch names it has and how they differ"), name, call_text(sys.call()),
    if (name == "torch_tensor") "; rfuse's tensors are made with rf_tensor()" else ""), sys.call())
}

for (torch_name in torch_names_not_in_rfuse) assign(torch_name, unsupported_torch_function(torch_name))
rm(torch_name)

#' Tensor values as an R array (torch's `as_array()`)
#'
#' @param x An [rf_tensor] (or an R array, returned as one).
#' @return `as.array(x)`.
#' @examples
#' as_array(rf_tensor(matrix(1:4, 2)))
#' @export
as_array <- function(x) as.array(x)
