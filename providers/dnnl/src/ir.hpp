#pragma once
// The oneDNN provider's view of a partition: a list of operations over numbered values, each operation one oneDNN
// primitive with its post-ops. Built from the partition's nodes (decomposing contrib operators, recognising the
// Erf form of Gelu), then fused (BatchNormalization into Conv, activations and additions into post-ops). Private to
// epstack::dnnl.

#include <epstack/provider/compute.hpp>
#include <epstack/provider/contract.hpp>
#include <epstack/core/errors.hpp>
#include <epstack/core/tensor.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace epstack::dnnl_ep {

namespace dn = ::dnnl;

enum class op_kind : std::uint8_t {
  conv, deconv, matmul, pool, eltwise, binary, softmax, layernorm, batchnorm, transpose, reshape, concat, split,
  host,     ///< an int64 shape computation, evaluated when a plan is made (`host_op` names it)
  resample  ///< nearest upsampling by the whole factors in `strides`
};
enum class reshape_form : std::uint8_t { reshape, flatten, squeeze, unsqueeze };

/// A post-op: an element-wise function, or a binary operation with value `src1`.
struct post_op {
  bool binary = false;
  dn::algorithm alg = dn::algorithm::undef;
  float alpha = 0, beta = 0;
  int src1 = -1;
};

struct ir_value {
  std::string name;
  std::optional<tensor> constant;  ///< an initializer (or a constant made by fusion)
  int input = -1;                  ///< position among the partition's inputs
  std::vector<int> outputs;        ///< positions among the partition's outputs
};

struct ir_op {
  op_kind kind{};
  std::vector<std::string> nodes;  ///< names of the nodes it computes
  std::vector<int> in;             ///< value indices (-1: absent)
  int out = -1;
  std::vector<int> outs;  ///< split: every output (`out` is the first)
  std::string host_op;    ///< host: Shape, Gather, Unsqueeze, Squeeze, Concat or Slice
  std::vector<std::int64_t> sizes;  ///< split: the size of each output along `axis`
  std::int64_t start = 0, end = INT64_MAX;  ///< host Shape: the dims it returns
  // convolution, deconvolution, pooling
  std::vector<std::int64_t> strides, dilations, pads, kernel, output_padding, output_shape;
  std::string auto_pad = "NOTSET";
  std::int64_t group = 1;
  bool ceil_mode = false;
  tensor weights, bias;  ///< conv/deconv weights and bias; layer norm scale and shift; batch norm scale and shift
  tensor mean, variance; ///< batch normalisation
  // element-wise, binary, pooling
  dn::algorithm alg = dn::algorithm::undef;
  float alpha = 0, beta = 0, epsilon = 1e-5f;
  // matmul
  bool trans_a = false, trans_b = false;
  float scale = 1;
  // softmax, concat, flatten
  std::int64_t axis = 0;
  // transpose
  std::vector<std::int64_t> perm;
  // reshape family
  reshape_form form = reshape_form::reshape;
  std::vector<std::int64_t> axes;  ///< squeeze/unsqueeze axes from attributes (else in[1])
  bool allowzero = false;
  std::vector<post_op> posts;
};

struct ir {
  std::string name;
  bool winograd = false;  ///< Winograd convolutions allowed (dnnl_options::winograd, or what a context's weights say)
  std::vector<ir_value> values;
  std::vector<ir_op> ops;
  std::vector<int> inputs, outputs;  ///< value of each partition input and output
};

/// A constant reordered into the layout a primitive chose (weights): kept in the plan so that an EP context can
/// store it, and given back to the plan builder when a context is restored (then nothing is reordered).
struct laid_weight {
  dn::memory::desc md;
  std::shared_ptr<const void> data;
  /// The layout of the constant it was reordered from, when that was the whole constant (`source`: the constant's
  /// data). An EP context then stores only this copy; a plan that needs the constant itself reorders it back.
  dn::memory::desc from;
  const void* source = nullptr;
};
/// A constant of a restored partition that the context stored only in its laid-out form: the tensor's data pointer
/// `at` (which points at the laid-out bytes, never read as the tensor) stands for laid weight `laid` reordered back.
struct deferred_constant {
  const void* at = nullptr;
  std::size_t laid = 0;
};

/// An EP context record of a compiled partition: its operations (constants as tensors of the binary, partition
/// inputs that are constants dropped from the boundary) and, when it was planned at compile time, the plan's input
/// key and its weights in their final layout.
[[nodiscard]] Result<ep_context_record> encode_context(const ir& r, const std::vector<std::int64_t>* key,
                                                       const std::vector<laid_weight>* laid, ep_context_builder& b);
struct decoded_context {
  ir r;
  std::vector<std::int64_t> key;
  std::vector<laid_weight> laid;
  std::vector<deferred_constant> deferred;
};
/// Reads a record back; every index, size and enumerator is checked (invalid_graph). Tensors are read in place.
[[nodiscard]] Result<decoded_context> decode_context(const ep_context_restore& rr);

/// Builds and fuses the operations of partition `p`.
[[nodiscard]] Result<ir> build_ir(const partition& p);
/// One line per operation ("convolution <- a + b [post-ops: eltwise_relu]").
[[nodiscard]] std::vector<std::string> describe_ir(const ir& r);

/// True when two element-wise post-ops of `posts` share an algorithm but not its parameters. oneDNN 2.6.3's jit
/// post-op injector keeps one eltwise injector per algorithm, so every later post-op of that algorithm silently runs
/// with the first one's alpha and beta (matmul, convolution and binary primitives alike): such a list must never be
/// given to a primitive.
[[nodiscard]] bool eltwise_conflict(const std::vector<post_op>& posts);

/// Appends `p` to `posts`, folding a linear function that follows a linear function into one
/// (a2 * (a1 * x + b1) + b2 = a2 a1 * x + (a2 b1 + b2)).
void append_post(std::vector<post_op>& posts, const post_op& p);

}  // namespace epstack::dnnl_ep
