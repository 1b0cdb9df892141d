#pragma once
/// @file kernels.hpp
/// @brief The kernels of the CPU provider, one type per operator (declarations only: they are compiled once in the
/// `epstack::cpu` library, so including this header costs little). `all_cpu_kernels` lists them all; a selective
/// build names the ones it needs (`basic_cpu_provider<ops::conv, ops::relu>`), and only those are linked (the library
/// is built with one section per function: link with `-Wl,--gc-sections` to drop the rest).

#include <epstack/providers/cpu/kernel_concepts.hpp>

#include <boost/mp11/list.hpp>

#include <string_view>

/// Declares a kernel type `name` for operator `op` of domain `dom`.
#define EPSTACK_DECLARE_CPU_KERNEL(name, op, dom)                                  \
  struct name {                                                                    \
    using kernel_concept = ::epstack::cpu::kernel_tag;                             \
    static constexpr std::string_view kernel_name = #name; /* ops::<name> */      \
    static constexpr std::string_view op_type = op;                                \
    static constexpr std::string_view domain = dom;                                \
    static bool supports(const ::epstack::graph& g, ::epstack::node_id n);         \
    static ::epstack::Result<::epstack::compute_function> compile(const ::epstack::graph& g, ::epstack::node_id n); \
  }

namespace epstack::cpu::ops {

// clang-format off
// Element-wise, unary.
EPSTACK_DECLARE_CPU_KERNEL(relu, "Relu", "");
EPSTACK_DECLARE_CPU_KERNEL(neg, "Neg", "");
EPSTACK_DECLARE_CPU_KERNEL(abs, "Abs", "");
EPSTACK_DECLARE_CPU_KERNEL(exp, "Exp", "");
EPSTACK_DECLARE_CPU_KERNEL(log, "Log", "");
EPSTACK_DECLARE_CPU_KERNEL(sqrt, "Sqrt", "");
EPSTACK_DECLARE_CPU_KERNEL(reciprocal, "Reciprocal", "");
EPSTACK_DECLARE_CPU_KERNEL(sigmoid, "Sigmoid", "");
EPSTACK_DECLARE_CPU_KERNEL(tanh, "Tanh", "");
EPSTACK_DECLARE_CPU_KERNEL(erf, "Erf", "");
EPSTACK_DECLARE_CPU_KERNEL(floor, "Floor", "");
EPSTACK_DECLARE_CPU_KERNEL(ceil, "Ceil", "");
EPSTACK_DECLARE_CPU_KERNEL(sign, "Sign", "");
EPSTACK_DECLARE_CPU_KERNEL(not_, "Not", "");
EPSTACK_DECLARE_CPU_KERNEL(leaky_relu, "LeakyRelu", "");
EPSTACK_DECLARE_CPU_KERNEL(elu, "Elu", "");
EPSTACK_DECLARE_CPU_KERNEL(selu, "Selu", "");
EPSTACK_DECLARE_CPU_KERNEL(hard_sigmoid, "HardSigmoid", "");
EPSTACK_DECLARE_CPU_KERNEL(softplus, "Softplus", "");
EPSTACK_DECLARE_CPU_KERNEL(softsign, "Softsign", "");
EPSTACK_DECLARE_CPU_KERNEL(thresholded_relu, "ThresholdedRelu", "");
EPSTACK_DECLARE_CPU_KERNEL(prelu, "PRelu", "");
EPSTACK_DECLARE_CPU_KERNEL(clip, "Clip", "");
EPSTACK_DECLARE_CPU_KERNEL(sin, "Sin", "");
EPSTACK_DECLARE_CPU_KERNEL(cos, "Cos", "");
EPSTACK_DECLARE_CPU_KERNEL(tan, "Tan", "");
EPSTACK_DECLARE_CPU_KERNEL(asin, "Asin", "");
EPSTACK_DECLARE_CPU_KERNEL(acos, "Acos", "");
EPSTACK_DECLARE_CPU_KERNEL(atan, "Atan", "");
EPSTACK_DECLARE_CPU_KERNEL(sinh, "Sinh", "");
EPSTACK_DECLARE_CPU_KERNEL(cosh, "Cosh", "");
EPSTACK_DECLARE_CPU_KERNEL(asinh, "Asinh", "");
EPSTACK_DECLARE_CPU_KERNEL(acosh, "Acosh", "");
EPSTACK_DECLARE_CPU_KERNEL(atanh, "Atanh", "");
EPSTACK_DECLARE_CPU_KERNEL(round, "Round", "");
EPSTACK_DECLARE_CPU_KERNEL(is_inf, "IsInf", "");
EPSTACK_DECLARE_CPU_KERNEL(is_nan, "IsNaN", "");
EPSTACK_DECLARE_CPU_KERNEL(shrink, "Shrink", "");
EPSTACK_DECLARE_CPU_KERNEL(mod, "Mod", "");
EPSTACK_DECLARE_CPU_KERNEL(bit_shift, "BitShift", "");
EPSTACK_DECLARE_CPU_KERNEL(gelu, "Gelu", "com.microsoft");
EPSTACK_DECLARE_CPU_KERNEL(bias_gelu, "BiasGelu", "com.microsoft");
// Element-wise, binary and n-ary, with numpy broadcasting.
EPSTACK_DECLARE_CPU_KERNEL(add, "Add", "");
EPSTACK_DECLARE_CPU_KERNEL(sub, "Sub", "");
EPSTACK_DECLARE_CPU_KERNEL(mul, "Mul", "");
EPSTACK_DECLARE_CPU_KERNEL(div, "Div", "");
EPSTACK_DECLARE_CPU_KERNEL(pow, "Pow", "");
EPSTACK_DECLARE_CPU_KERNEL(equal, "Equal", "");
EPSTACK_DECLARE_CPU_KERNEL(greater, "Greater", "");
EPSTACK_DECLARE_CPU_KERNEL(less, "Less", "");
EPSTACK_DECLARE_CPU_KERNEL(greater_or_equal, "GreaterOrEqual", "");
EPSTACK_DECLARE_CPU_KERNEL(less_or_equal, "LessOrEqual", "");
EPSTACK_DECLARE_CPU_KERNEL(and_, "And", "");
EPSTACK_DECLARE_CPU_KERNEL(or_, "Or", "");
EPSTACK_DECLARE_CPU_KERNEL(xor_, "Xor", "");
EPSTACK_DECLARE_CPU_KERNEL(where, "Where", "");
EPSTACK_DECLARE_CPU_KERNEL(max, "Max", "");
EPSTACK_DECLARE_CPU_KERNEL(min, "Min", "");
EPSTACK_DECLARE_CPU_KERNEL(sum, "Sum", "");
EPSTACK_DECLARE_CPU_KERNEL(mean, "Mean", "");
// Matrix products.
EPSTACK_DECLARE_CPU_KERNEL(gemm, "Gemm", "");
EPSTACK_DECLARE_CPU_KERNEL(matmul, "MatMul", "");
EPSTACK_DECLARE_CPU_KERNEL(fused_matmul, "FusedMatMul", "com.microsoft");
// MatMul (B a matrix) with a bias over N and a ReLU or GELU applied as the product is stored: what the optimiser
// writes for the CPU provider's MatMul + Add (+ Relu / Gelu) and MatMul + BiasGelu (cpu_product_fusion).
EPSTACK_DECLARE_CPU_KERNEL(matmul_bias, "MatMulBias", "com.epstack.cpu");
// MatMul reading its operands and writing Y through permutations of their dims: what the optimiser writes for the
// CPU provider's Transposes around an attention layer's products (cpu_product_fusion).
EPSTACK_DECLARE_CPU_KERNEL(permuted_matmul, "PermutedMatMul", "com.epstack.cpu");
EPSTACK_DECLARE_CPU_KERNEL(einsum, "Einsum", "");
// Convolution and pooling.
EPSTACK_DECLARE_CPU_KERNEL(conv, "Conv", "");
EPSTACK_DECLARE_CPU_KERNEL(fused_conv, "FusedConv", "com.microsoft");
// The blocked-channel layout (NCHWc, 16 channels per block) the optimiser writes for the CPU provider (nchwc.cpp).
EPSTACK_DECLARE_CPU_KERNEL(nchwc_reorder_input, "ReorderInput", "com.epstack.nchwc16");
EPSTACK_DECLARE_CPU_KERNEL(nchwc_reorder_output, "ReorderOutput", "com.epstack.nchwc16");
EPSTACK_DECLARE_CPU_KERNEL(nchwc_conv, "Conv", "com.epstack.nchwc16");
// A Conv of that domain with attribute winograd (2 or 4): Winograd F(2x2, 3x3) or F(4x4, 3x3) on transformed filters.
EPSTACK_DECLARE_CPU_KERNEL(nchwc_winograd_conv, "Conv", "com.epstack.nchwc16");
// A 1x1 convolution and the depthwise convolution that reads it, fused: the optimiser's, for MobileNet's blocks.
EPSTACK_DECLARE_CPU_KERNEL(nchwc_pointwise_depthwise, "PointwiseDepthwiseConv", "com.epstack.nchwc16");
EPSTACK_DECLARE_CPU_KERNEL(nchwc_max_pool, "MaxPool", "com.epstack.nchwc16");
EPSTACK_DECLARE_CPU_KERNEL(nchwc_average_pool, "AveragePool", "com.epstack.nchwc16");
EPSTACK_DECLARE_CPU_KERNEL(nchwc_global_max_pool, "GlobalMaxPool", "com.epstack.nchwc16");
EPSTACK_DECLARE_CPU_KERNEL(nchwc_global_average_pool, "GlobalAveragePool", "com.epstack.nchwc16");
EPSTACK_DECLARE_CPU_KERNEL(max_pool, "MaxPool", "");
EPSTACK_DECLARE_CPU_KERNEL(average_pool, "AveragePool", "");
EPSTACK_DECLARE_CPU_KERNEL(global_average_pool, "GlobalAveragePool", "");
EPSTACK_DECLARE_CPU_KERNEL(global_max_pool, "GlobalMaxPool", "");
// Normalisation.
EPSTACK_DECLARE_CPU_KERNEL(batch_normalization, "BatchNormalization", "");
EPSTACK_DECLARE_CPU_KERNEL(layer_normalization, "LayerNormalization", "");
EPSTACK_DECLARE_CPU_KERNEL(layer_normalization_contrib, "LayerNormalization", "com.microsoft");
EPSTACK_DECLARE_CPU_KERNEL(skip_layer_normalization, "SkipLayerNormalization", "com.microsoft");
EPSTACK_DECLARE_CPU_KERNEL(softmax, "Softmax", "");
EPSTACK_DECLARE_CPU_KERNEL(log_softmax, "LogSoftmax", "");
// Reductions.
EPSTACK_DECLARE_CPU_KERNEL(reduce_mean, "ReduceMean", "");
EPSTACK_DECLARE_CPU_KERNEL(reduce_sum, "ReduceSum", "");
EPSTACK_DECLARE_CPU_KERNEL(reduce_max, "ReduceMax", "");
EPSTACK_DECLARE_CPU_KERNEL(reduce_min, "ReduceMin", "");
EPSTACK_DECLARE_CPU_KERNEL(reduce_prod, "ReduceProd", "");
EPSTACK_DECLARE_CPU_KERNEL(reduce_sum_square, "ReduceSumSquare", "");
EPSTACK_DECLARE_CPU_KERNEL(reduce_l1, "ReduceL1", "");
EPSTACK_DECLARE_CPU_KERNEL(reduce_l2, "ReduceL2", "");
EPSTACK_DECLARE_CPU_KERNEL(reduce_log_sum, "ReduceLogSum", "");
EPSTACK_DECLARE_CPU_KERNEL(reduce_log_sum_exp, "ReduceLogSumExp", "");
EPSTACK_DECLARE_CPU_KERNEL(arg_max, "ArgMax", "");
EPSTACK_DECLARE_CPU_KERNEL(arg_min, "ArgMin", "");
// Shapes, layout and data movement.
EPSTACK_DECLARE_CPU_KERNEL(reshape, "Reshape", "");
EPSTACK_DECLARE_CPU_KERNEL(flatten, "Flatten", "");
EPSTACK_DECLARE_CPU_KERNEL(squeeze, "Squeeze", "");
EPSTACK_DECLARE_CPU_KERNEL(unsqueeze, "Unsqueeze", "");
EPSTACK_DECLARE_CPU_KERNEL(identity, "Identity", "");
EPSTACK_DECLARE_CPU_KERNEL(dropout, "Dropout", "");
EPSTACK_DECLARE_CPU_KERNEL(shape, "Shape", "");
EPSTACK_DECLARE_CPU_KERNEL(size, "Size", "");
EPSTACK_DECLARE_CPU_KERNEL(transpose, "Transpose", "");
EPSTACK_DECLARE_CPU_KERNEL(concat, "Concat", "");
EPSTACK_DECLARE_CPU_KERNEL(split, "Split", "");
EPSTACK_DECLARE_CPU_KERNEL(slice, "Slice", "");
EPSTACK_DECLARE_CPU_KERNEL(gather, "Gather", "");
EPSTACK_DECLARE_CPU_KERNEL(gather_elements, "GatherElements", "");
EPSTACK_DECLARE_CPU_KERNEL(expand, "Expand", "");
EPSTACK_DECLARE_CPU_KERNEL(tile, "Tile", "");
EPSTACK_DECLARE_CPU_KERNEL(pad, "Pad", "");
EPSTACK_DECLARE_CPU_KERNEL(cast, "Cast", "");
EPSTACK_DECLARE_CPU_KERNEL(constant, "Constant", "");
EPSTACK_DECLARE_CPU_KERNEL(constant_of_shape, "ConstantOfShape", "");
EPSTACK_DECLARE_CPU_KERNEL(range, "Range", "");
EPSTACK_DECLARE_CPU_KERNEL(non_zero, "NonZero", "");
EPSTACK_DECLARE_CPU_KERNEL(top_k, "TopK", "");
EPSTACK_DECLARE_CPU_KERNEL(cum_sum, "CumSum", "");
EPSTACK_DECLARE_CPU_KERNEL(resize, "Resize", "");
// Control flow.
// Index and layout.
EPSTACK_DECLARE_CPU_KERNEL(trilu, "Trilu", "");
EPSTACK_DECLARE_CPU_KERNEL(hardmax, "Hardmax", "");
EPSTACK_DECLARE_CPU_KERNEL(eye_like, "EyeLike", "");
EPSTACK_DECLARE_CPU_KERNEL(depth_to_space, "DepthToSpace", "");
EPSTACK_DECLARE_CPU_KERNEL(space_to_depth, "SpaceToDepth", "");
EPSTACK_DECLARE_CPU_KERNEL(one_hot, "OneHot", "");
EPSTACK_DECLARE_CPU_KERNEL(gather_nd, "GatherND", "");
EPSTACK_DECLARE_CPU_KERNEL(scatter_nd, "ScatterND", "");
EPSTACK_DECLARE_CPU_KERNEL(scatter_elements, "ScatterElements", "");
EPSTACK_DECLARE_CPU_KERNEL(scatter, "Scatter", "");
EPSTACK_DECLARE_CPU_KERNEL(compress, "Compress", "");
EPSTACK_DECLARE_CPU_KERNEL(reverse_sequence, "ReverseSequence", "");
// Numeric kernels outside the hot paths, and the optimisers of ai.onnx.preview.training.
EPSTACK_DECLARE_CPU_KERNEL(instance_normalization, "InstanceNormalization", "");
EPSTACK_DECLARE_CPU_KERNEL(lrn, "LRN", "");
EPSTACK_DECLARE_CPU_KERNEL(det, "Det", "");
EPSTACK_DECLARE_CPU_KERNEL(quantize_linear, "QuantizeLinear", "");
EPSTACK_DECLARE_CPU_KERNEL(dequantize_linear, "DequantizeLinear", "");
EPSTACK_DECLARE_CPU_KERNEL(max_unpool, "MaxUnpool", "");
EPSTACK_DECLARE_CPU_KERNEL(conv_transpose, "ConvTranspose", "");
EPSTACK_DECLARE_CPU_KERNEL(matmul_integer, "MatMulInteger", "");
EPSTACK_DECLARE_CPU_KERNEL(qlinear_matmul, "QLinearMatMul", "");
EPSTACK_DECLARE_CPU_KERNEL(grid_sample, "GridSample", "");
EPSTACK_DECLARE_CPU_KERNEL(conv_integer, "ConvInteger", "");
EPSTACK_DECLARE_CPU_KERNEL(qlinear_conv, "QLinearConv", "");
EPSTACK_DECLARE_CPU_KERNEL(roi_align, "RoiAlign", "");
// Signal processing.
EPSTACK_DECLARE_CPU_KERNEL(dft, "DFT", "");
EPSTACK_DECLARE_CPU_KERNEL(stft, "STFT", "");
EPSTACK_DECLARE_CPU_KERNEL(mel_weight_matrix, "MelWeightMatrix", "");
EPSTACK_DECLARE_CPU_KERNEL(upsample, "Upsample", "");
EPSTACK_DECLARE_CPU_KERNEL(adagrad, "Adagrad", "ai.onnx.preview.training");
EPSTACK_DECLARE_CPU_KERNEL(momentum, "Momentum", "ai.onnx.preview.training");
EPSTACK_DECLARE_CPU_KERNEL(adam, "Adam", "ai.onnx.preview.training");
// Random values.
EPSTACK_DECLARE_CPU_KERNEL(random_uniform, "RandomUniform", "");
EPSTACK_DECLARE_CPU_KERNEL(random_uniform_like, "RandomUniformLike", "");
EPSTACK_DECLARE_CPU_KERNEL(random_normal, "RandomNormal", "");
EPSTACK_DECLARE_CPU_KERNEL(random_normal_like, "RandomNormalLike", "");
EPSTACK_DECLARE_CPU_KERNEL(bernoulli, "Bernoulli", "");
// Recurrent cells.
EPSTACK_DECLARE_CPU_KERNEL(rnn, "RNN", "");
EPSTACK_DECLARE_CPU_KERNEL(gru, "GRU", "");
EPSTACK_DECLARE_CPU_KERNEL(lstm, "LSTM", "");
// Selection and text.
EPSTACK_DECLARE_CPU_KERNEL(non_max_suppression, "NonMaxSuppression", "");
EPSTACK_DECLARE_CPU_KERNEL(unique, "Unique", "");
EPSTACK_DECLARE_CPU_KERNEL(string_normalizer, "StringNormalizer", "");
EPSTACK_DECLARE_CPU_KERNEL(tf_idf_vectorizer, "TfIdfVectorizer", "");
// Sequences and optionals.
EPSTACK_DECLARE_CPU_KERNEL(sequence_empty, "SequenceEmpty", "");
EPSTACK_DECLARE_CPU_KERNEL(sequence_construct, "SequenceConstruct", "");
EPSTACK_DECLARE_CPU_KERNEL(sequence_insert, "SequenceInsert", "");
EPSTACK_DECLARE_CPU_KERNEL(sequence_at, "SequenceAt", "");
EPSTACK_DECLARE_CPU_KERNEL(sequence_erase, "SequenceErase", "");
EPSTACK_DECLARE_CPU_KERNEL(sequence_length, "SequenceLength", "");
EPSTACK_DECLARE_CPU_KERNEL(split_to_sequence, "SplitToSequence", "");
EPSTACK_DECLARE_CPU_KERNEL(concat_from_sequence, "ConcatFromSequence", "");
EPSTACK_DECLARE_CPU_KERNEL(optional, "Optional", "");
EPSTACK_DECLARE_CPU_KERNEL(optional_has_element, "OptionalHasElement", "");
EPSTACK_DECLARE_CPU_KERNEL(optional_get_element, "OptionalGetElement", "");
EPSTACK_DECLARE_CPU_KERNEL(if_, "If", "");
EPSTACK_DECLARE_CPU_KERNEL(loop, "Loop", "");
EPSTACK_DECLARE_CPU_KERNEL(scan, "Scan", "");
// Operators of opsets 18-27 and ai.onnx.ml (ONNX 1.22).
EPSTACK_DECLARE_CPU_KERNEL(cast_like, "CastLike", "");                      // cast.cpp
EPSTACK_DECLARE_CPU_KERNEL(attention, "Attention", "");                     // attention.cpp
EPSTACK_DECLARE_CPU_KERNEL(rms_normalization, "RMSNormalization", "");      // attention.cpp
EPSTACK_DECLARE_CPU_KERNEL(rotary_embedding, "RotaryEmbedding", "");        // attention.cpp
EPSTACK_DECLARE_CPU_KERNEL(linear_attention, "LinearAttention", "");        // state_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(causal_conv_with_state, "CausalConvWithState", "");  // state_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(tensor_scatter, "TensorScatter", "");            // state_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(cum_prod, "CumProd", "");                        // state_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(bit_cast, "BitCast", "");                        // state_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(bitwise_and, "BitwiseAnd", "");                  // elementwise.cpp
EPSTACK_DECLARE_CPU_KERNEL(bitwise_or, "BitwiseOr", "");                    // elementwise.cpp
EPSTACK_DECLARE_CPU_KERNEL(bitwise_xor, "BitwiseXor", "");                  // elementwise.cpp
EPSTACK_DECLARE_CPU_KERNEL(bitwise_not, "BitwiseNot", "");                  // elementwise.cpp
EPSTACK_DECLARE_CPU_KERNEL(gelu_onnx, "Gelu", "");                          // elementwise.cpp
EPSTACK_DECLARE_CPU_KERNEL(mish, "Mish", "");                               // elementwise.cpp
EPSTACK_DECLARE_CPU_KERNEL(swish, "Swish", "");                             // elementwise.cpp
EPSTACK_DECLARE_CPU_KERNEL(group_normalization, "GroupNormalization", "");  // opset18_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(lp_pool, "LpPool", "");                          // opset18_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(col2im, "Col2Im", "");                           // opset18_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(center_crop_pad, "CenterCropPad", "");           // opset18_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(affine_grid, "AffineGrid", "");                  // opset18_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(deform_conv, "DeformConv", "");                  // opset18_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(lp_normalization, "LpNormalization", "");        // lp_norm.cpp
EPSTACK_DECLARE_CPU_KERNEL(flex_attention, "FlexAttention", "ai.onnx.preview");  // flex_attention.cpp
EPSTACK_DECLARE_CPU_KERNEL(string_concat, "StringConcat", "");              // string_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(string_split, "StringSplit", "");                // string_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(regex_full_match, "RegexFullMatch", "");         // string_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(image_decoder, "ImageDecoder", "");              // image_decoder.cpp
EPSTACK_DECLARE_CPU_KERNEL(ml_tree_ensemble, "TreeEnsemble", "ai.onnx.ml");             // ml_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(ml_label_encoder, "LabelEncoder", "ai.onnx.ml");             // ml_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(ml_binarizer, "Binarizer", "ai.onnx.ml");                    // ml_ops.cpp
EPSTACK_DECLARE_CPU_KERNEL(ml_array_feature_extractor, "ArrayFeatureExtractor", "ai.onnx.ml");  // ml_ops.cpp
// clang-format on

// Kernels of one element type. `K_of<T>` runs the nodes of its operator whose element type is T, with the very code
// kernel `K` compiles for them, and links nothing of K's other types: `epstack ops` names it for a model whose nodes
// of that operator are all T (a float MLP's deployable links the float product alone, not the double, half and
// integer ones). Each says which kernel it narrows (`general_kernel`).
#define EPSTACK_DECLARE_CPU_TYPED_KERNEL(name, type, general)                         \
  template <>                                                                      \
  struct name<type> {                                                              \
    using kernel_concept = ::epstack::cpu::kernel_tag;                             \
    using general_kernel = general;                                                \
    static constexpr std::string_view kernel_name = #name "<" #type ">";           \
    static constexpr std::string_view op_type = general::op_type;                  \
    static constexpr std::string_view domain = general::domain;                    \
    static bool supports(const ::epstack::graph& g, ::epstack::node_id n);         \
    static ::epstack::Result<::epstack::compute_function> compile(const ::epstack::graph& g, ::epstack::node_id n); \
  }

template <class T>
struct gemm_of;
/// Gemm whose A has at most 4 rows, known when the session is made: the matrix-vector kernels alone, no packed SGEMM
/// (`epstack ops` names it for a model whose float Gemms all have such static shapes, a batch-1 MLP's).
template <class T>
struct gemm_mv_of;
/// gemm_mv_of for transA = 0 and transB = 1 (a Linear layer's weight, [N, K]): the dot-product kernels alone.
template <class T>
struct gemm_mv_bt_of;
template <class T>
struct matmul_of;
template <class T>
struct relu_of;
EPSTACK_DECLARE_CPU_TYPED_KERNEL(gemm_of, float, gemm);
EPSTACK_DECLARE_CPU_TYPED_KERNEL(gemm_mv_of, float, gemm);
EPSTACK_DECLARE_CPU_TYPED_KERNEL(gemm_mv_bt_of, float, gemm);
EPSTACK_DECLARE_CPU_TYPED_KERNEL(matmul_of, float, matmul);
EPSTACK_DECLARE_CPU_TYPED_KERNEL(relu_of, float, relu);

}  // namespace epstack::cpu::ops

namespace epstack::cpu {

/// Every kernel of the CPU provider.
using all_kernels = boost::mp11::mp_list<
    ops::relu, ops::neg, ops::abs, ops::exp, ops::log, ops::sqrt, ops::reciprocal, ops::sigmoid, ops::tanh, ops::erf,
    ops::floor, ops::ceil, ops::sign, ops::not_, ops::leaky_relu, ops::elu, ops::selu, ops::hard_sigmoid, ops::softplus,
    ops::softsign, ops::thresholded_relu, ops::prelu, ops::clip, ops::sin, ops::cos, ops::tan, ops::asin, ops::acos,
    ops::atan, ops::sinh, ops::cosh, ops::asinh, ops::acosh, ops::atanh, ops::round, ops::is_inf, ops::is_nan,
    ops::shrink, ops::mod, ops::bit_shift, ops::gelu, ops::bias_gelu, ops::add,
    ops::sub, ops::mul, ops::div, ops::pow, ops::equal, ops::greater, ops::less, ops::greater_or_equal,
    ops::less_or_equal, ops::and_, ops::or_, ops::xor_, ops::where, ops::max, ops::min, ops::sum, ops::mean, ops::gemm,
    ops::matmul, ops::fused_matmul, ops::matmul_bias, ops::permuted_matmul, ops::einsum, ops::conv, ops::fused_conv, ops::nchwc_reorder_input, ops::nchwc_reorder_output,
    ops::nchwc_conv, ops::nchwc_winograd_conv, ops::nchwc_pointwise_depthwise, ops::nchwc_max_pool, ops::nchwc_average_pool, ops::nchwc_global_max_pool,
    ops::nchwc_global_average_pool,
    ops::max_pool, ops::average_pool,
    ops::global_average_pool, ops::global_max_pool, ops::batch_normalization, ops::layer_normalization,
    ops::layer_normalization_contrib, ops::skip_layer_normalization, ops::softmax, ops::log_softmax, ops::reduce_mean,
    ops::reduce_sum, ops::reduce_max, ops::reduce_min, ops::reduce_prod, ops::reduce_sum_square, ops::reduce_l1,
    ops::reduce_l2, ops::reduce_log_sum, ops::reduce_log_sum_exp, ops::arg_max, ops::arg_min, ops::reshape,
    ops::flatten, ops::squeeze, ops::unsqueeze, ops::identity, ops::dropout, ops::shape, ops::size, ops::transpose,
    ops::concat, ops::split, ops::slice, ops::gather, ops::gather_elements, ops::expand, ops::tile, ops::pad, ops::cast,
    ops::constant, ops::constant_of_shape, ops::range, ops::non_zero, ops::top_k, ops::cum_sum, ops::resize, ops::trilu, ops::hardmax,
    ops::eye_like, ops::depth_to_space, ops::space_to_depth, ops::one_hot, ops::gather_nd, ops::scatter_nd,
    ops::scatter_elements, ops::scatter, ops::compress, ops::reverse_sequence, ops::sequence_empty,
    ops::sequence_construct, ops::sequence_insert, ops::sequence_at, ops::sequence_erase, ops::sequence_length,
    ops::split_to_sequence, ops::concat_from_sequence, ops::optional, ops::optional_has_element,
    ops::optional_get_element, ops::instance_normalization, ops::lrn, ops::det, ops::quantize_linear,
    ops::dequantize_linear, ops::max_unpool, ops::conv_transpose, ops::matmul_integer, ops::qlinear_matmul, ops::grid_sample, ops::conv_integer,
    ops::qlinear_conv, ops::roi_align, ops::dft, ops::stft, ops::mel_weight_matrix, ops::non_max_suppression, ops::unique,
    ops::string_normalizer, ops::tf_idf_vectorizer, ops::rnn, ops::gru, ops::lstm, ops::random_uniform,
    ops::random_uniform_like, ops::random_normal, ops::random_normal_like, ops::bernoulli, ops::upsample, ops::adagrad, ops::momentum, ops::adam, ops::if_,
    ops::loop, ops::scan,
    // ONNX 1.22 (opsets 18-27, ai.onnx.ml 4-5)
    ops::cast_like, ops::attention, ops::rms_normalization, ops::rotary_embedding, ops::linear_attention,
    ops::causal_conv_with_state, ops::tensor_scatter, ops::cum_prod, ops::bit_cast, ops::bitwise_and, ops::bitwise_or,
    ops::bitwise_xor, ops::bitwise_not, ops::gelu_onnx, ops::mish, ops::swish, ops::group_normalization, ops::lp_pool,
    ops::col2im, ops::center_crop_pad, ops::affine_grid, ops::deform_conv, ops::lp_normalization, ops::flex_attention, ops::string_concat, ops::string_split,
    ops::regex_full_match, ops::image_decoder, ops::ml_tree_ensemble, ops::ml_label_encoder, ops::ml_binarizer,
    ops::ml_array_feature_extractor>;

/// The kernels of one element type (`K_of<T>`), each narrowing a kernel of `all_kernels` (the first that runs a node
/// is named for it: `gemm_mv_bt_of<float>` before `gemm_mv_of<float>` before `gemm_of<float>`).
using typed_kernels =
    boost::mp11::mp_list<ops::gemm_mv_bt_of<float>, ops::gemm_mv_of<float>, ops::gemm_of<float>, ops::matmul_of<float>, ops::relu_of<float>>;

}  // namespace epstack::cpu
