// Normalisation kernels: BatchNormalization (inference and training mode), LayerNormalization (opset 17 and the com.microsoft contrib
// op), the contrib SkipLayerNormalization, InstanceNormalization, LRN, Softmax and LogSoftmax.
//
// Every kernel works on contiguous rows where it can (LayerNorm over its normalised dims, Softmax over the last axis):
// rows go to the intra-op threads, and each row is reduced with several independent accumulators so that the
// compiler vectorises the sums without reassociating floating-point arithmetic itself. Softmax along an inner axis
// runs over column blocks, vectorised across the trailing dims.
#include "broadcast.hpp"
#include "kernel_util.hpp"

namespace epstack::cpu {
namespace impl {


namespace {

// ---------------------------------------------------------------------------------------------------------------
// Row primitives

// Independent accumulators per row reduction: 32 lets g++ and clang vectorise the lane loops (g++ turns a fully
// unrolled 16-lane max into scalar code).


// Sum of x[0, n), in `lanes` partial sums (vectorisable).
template <class T>
T row_sum(const T* x, std::size_t n) {
  T acc[lanes] = {};
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (std::size_t j = 0; j < lanes; ++j) acc[j] += x[i + j];
  for (std::size_t j = 0; i + j < n; ++j) acc[j] += x[i + j];  // the tail, into independent lanes too
  return fold_lanes(acc, [](T a, T b) { return a + b; });
}
// Sum of (x - c)^2 over x[0, n).
template <class T>
T row_sum_sq_dev(const T* x, std::size_t n, T c) {
  T acc[lanes] = {};
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (std::size_t j = 0; j < lanes; ++j) {
      const T d = x[i + j] - c;
      acc[j] += d * d;
    }
  for (std::size_t j = 0; i + j < n; ++j) acc[j] += (x[i + j] - c) * (x[i + j] - c);
  return fold_lanes(acc, [](T a, T b) { return a + b; });
}
// Max of x[0, n), n > 0.
template <class T>
T row_max(const T* x, std::size_t n) {
  T acc[lanes];
  for (std::size_t j = 0; j < lanes; ++j) acc[j] = x[0];
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (std::size_t j = 0; j < lanes; ++j) acc[j] = acc[j] < x[i + j] ? x[i + j] : acc[j];
  for (std::size_t j = 0; i + j < n; ++j) acc[j] = acc[j] < x[i + j] ? x[i + j] : acc[j];
  return fold_lanes(acc, [](T a, T b) { return a < b ? b : a; });
}
// exp: the approximation for float, std::exp for double.
template <class T>
T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) return fast_exp(x);
  else return std::exp(x);
}

template <class T>
Status expect_type(const tensor& t, const char* what) {
  if (t.type() != element_type_of_v<T>)
    return Status(errc::invalid_argument, cat(what, " must be ", std::string(to_string(element_type_of_v<T>)), ", got ",
                                              std::string(to_string(t.type()))));
  return {};
}

// Normalises one row: y = (x - mean) * inv_std * scale (+ bias); returns mean and inv_std. x may equal y.
template <class T>
std::pair<T, T> normalize_row(const T* x, T* y, std::size_t n, T epsilon, const T* scale, const T* bias) {
  const T mean = row_sum(x, n) / static_cast<T>(n);
  const T var = row_sum_sq_dev(x, n, mean) / static_cast<T>(n);
  const T inv = T(1) / std::sqrt(var + epsilon);
  if (bias != nullptr)
    for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i] + bias[i];
  else
    for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i];
  return {mean, inv};
}

// ---------------------------------------------------------------------------------------------------------------
// BatchNormalization: y = x * a[c] + b[c], a = scale / sqrt(var + eps), b = B - mean * a; in training mode with the batch's
// mean and variance, and the running statistics as further outputs.

struct bn_params {
  float epsilon = 1e-5f;
  float momentum = 0.9f;
  bool spatial = true;   // opset < 9: spatial = 0 normalises each of C x D1 x ... separately
  bool training = false; // opset 14+: training_mode = 1 normalises by the batch's statistics
  bool running[2] = {false, false};  // training: running_mean and running_var are wanted
};

template <class T>
Status batch_norm_compute(const bn_params& p, compute_context& ctx) {
  const tensor& x = ctx.input(0);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(x, "X"));
  const auto dims = x.sizes();
  if (dims.size() < 2) return Status(errc::invalid_argument, cat("X must have rank >= 2, got ", dims_string(dims)));
  // Features: channels (spatial) or every element of a sample (spatial = 0); each covers `inner` contiguous values.
  const std::int64_t features = p.spatial ? dims[1] : product(dims, 1);
  const std::int64_t inner = p.spatial ? product(dims, 2) : 1;
  const char* names[] = {"scale", "B", "mean", "var"};
  const T* params[4];
  for (std::size_t i = 0; i < 4; ++i) {
    const tensor& t = ctx.input(i + 1);
    EPSTACK_RETURN_IF_ERROR(expect_type<T>(t, names[i]));
    if (static_cast<std::int64_t>(t.element_count()) != features)
      return Status(errc::invalid_argument, cat(names[i], " ", dims_string(t.sizes()), " must hold ", std::to_string(features),
                                                " values for X ", dims_string(dims)));
    params[i] = t.typed<T>();
  }
  tensor& y = ctx.allocate_output(0, x.type(), dims);
  const T* px = x.typed<T>();
  tensor ab = ctx.scratch(x.type(), static_cast<std::size_t>(2 * features));
  T* a = ab.typed<T>();
  T* b = a + features;
  const T eps = static_cast<T>(p.epsilon);
  if (p.training) {
    // The batch's mean and (population) variance per channel, in double; the running statistics move towards them:
    // running = input * momentum + batch * (1 - momentum).
    const std::int64_t count = dims[0] * inner;
    if (count == 0) return Status(errc::invalid_argument, "BatchNormalization: training mode needs a non-empty batch");
    tensor* run[2] = {nullptr, nullptr};
    for (std::size_t i = 0; i < 2; ++i)
      if (p.running[i] && ctx.output_count() > i + 1) run[i] = &ctx.allocate_output(i + 1, x.type(), ctx.input(i + 3).sizes());
    for (std::int64_t c = 0; c < features; ++c) {
      double sum = 0, sq = 0;
      for (std::int64_t nn = 0; nn < dims[0]; ++nn) {
        const T* in = px + (nn * features + c) * inner;
        for (std::int64_t i = 0; i < inner; ++i) sum += static_cast<double>(in[i]);
      }
      const double mean = sum / static_cast<double>(count);
      for (std::int64_t nn = 0; nn < dims[0]; ++nn) {
        const T* in = px + (nn * features + c) * inner;
        for (std::int64_t i = 0; i < inner; ++i) sq += (static_cast<double>(in[i]) - mean) * (static_cast<double>(in[i]) - mean);
      }
      const double var = sq / static_cast<double>(count), m = p.momentum;
      a[c] = static_cast<T>(static_cast<double>(params[0][c]) / std::sqrt(var + static_cast<double>(eps)));
      b[c] = static_cast<T>(static_cast<double>(params[1][c]) - mean * static_cast<double>(a[c]));
      if (run[0] != nullptr) run[0]->typed<T>()[c] = static_cast<T>(static_cast<double>(params[2][c]) * m + mean * (1 - m));
      if (run[1] != nullptr) run[1]->typed<T>()[c] = static_cast<T>(static_cast<double>(params[3][c]) * m + var * (1 - m));
    }
  } else {
    for (std::int64_t c = 0; c < features; ++c) {
      a[c] = params[0][c] / std::sqrt(params[3][c] + eps);
      b[c] = params[1][c] - params[2][c] * a[c];
    }
  }
  if (y.element_count() == 0) return {};
  T* py = y.typed<T>();
  const std::int64_t planes = dims[0] * features;
  parallel_items(ctx, static_cast<std::size_t>(planes), static_cast<std::size_t>(inner), [&](std::size_t p0, std::size_t p1) {
    for (std::size_t pl = p0; pl < p1; ++pl) {
      const std::int64_t c = static_cast<std::int64_t>(pl) % features;
      const T ac = a[c], bc = b[c];
      const T* in = px + static_cast<std::int64_t>(pl) * inner;
      T* out = py + static_cast<std::int64_t>(pl) * inner;
      for (std::int64_t i = 0; i < inner; ++i) out[i] = in[i] * ac + bc;
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// LayerNormalization over dims [axis, rank).

struct ln_params {
  std::int64_t axis = -1;
  float epsilon = 1e-5f;
  bool outputs[4] = {true, false, false, false};  // which outputs the node has
};

// A parameter (Scale, B) broadcast over the normalised dims `norm`: a pointer to `norm`'s element count of values,
// either the tensor's own data or an expanded copy in `storage`.
template <class T>
Result<const T*> broadcast_param(compute_context& ctx, const tensor& t, const char* what,
                                 std::span<const std::int64_t> norm, tensor& storage) {
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(t, what));
  const auto s = t.sizes();
  bool ok = true;
  for (std::size_t k = 0; k < s.size() && ok; ++k) {
    const std::size_t from_end = s.size() - 1 - k;
    if (from_end >= norm.size()) ok = s[k] == 1;
    else ok = s[k] == 1 || s[k] == norm[norm.size() - 1 - from_end];
  }
  if (!ok)
    return Status(errc::invalid_argument, cat(what, " ", dims_string(s), " cannot be broadcast to the normalized dims ",
                                              dims_string(norm)));
  const std::int64_t n = product(norm);
  if (static_cast<std::int64_t>(t.element_count()) == n) return t.typed<T>();
  // Expand: strip the leading 1s, then lay the rest against the trailing normalised dims.
  std::size_t lead = 0;
  while (lead < s.size() && s.size() - lead > norm.size()) ++lead;
  const auto strides = broadcast_strides(s.subspan(lead), norm);
  storage = ctx.scratch(element_type_of_v<T>, static_cast<std::size_t>(n));
  T* out = storage.typed<T>();
  const T* in = t.typed<T>();
  tensor_sizes idx(norm.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k < norm.size(); ++k) off += idx[k] * strides[k];
    out[i] = in[off];
    for (std::size_t k = norm.size(); k-- > 0;) {
      if (++idx[k] < norm[k]) break;
      idx[k] = 0;
    }
  }
  return static_cast<const T*>(out);
}

template <class T, class U>
Status layer_norm_compute(const ln_params& p, compute_context& ctx) {
  const tensor& x = ctx.input(0);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(x, "X"));
  const auto dims = x.sizes();
  const auto axis = normalize_axis(p.axis, dims.size());
  if (!axis) return bad_axis(p.axis, dims.size());
  const auto norm = dims.subspan(*axis);
  const std::int64_t n = product(norm);
  const std::int64_t rows = product(dims, 0, *axis);
  tensor scale_store, bias_store;
  if (!ctx.has_input(1)) return Status(errc::invalid_argument, "Scale is missing");
  EPSTACK_ASSIGN_OR_RETURN(const T* scale, broadcast_param<T>(ctx, ctx.input(1), "Scale", norm, scale_store));
  const T* bias = nullptr;
  if (ctx.has_input(2)) {
    EPSTACK_ASSIGN_OR_RETURN(bias, broadcast_param<T>(ctx, ctx.input(2), "B", norm, bias_store));
  }
  tensor& y = ctx.allocate_output(0, x.type(), dims);
  tensor_sizes stat_dims(dims.begin(), dims.end());
  for (std::size_t k = *axis; k < stat_dims.size(); ++k) stat_dims[k] = 1;
  U* mean_out = nullptr;
  U* inv_out = nullptr;
  if (p.outputs[1] && ctx.output_count() > 1) mean_out = ctx.allocate_output(1, element_type_of_v<U>, stat_dims).template typed<U>();
  if (p.outputs[2] && ctx.output_count() > 2) inv_out = ctx.allocate_output(2, element_type_of_v<U>, stat_dims).template typed<U>();
  if (rows == 0) return {};
  if (n == 0) {
    // Normalising nothing: the statistics of an empty set are undefined.
    for (std::int64_t r = 0; r < rows; ++r) {
      if (mean_out != nullptr) mean_out[r] = std::numeric_limits<U>::quiet_NaN();
      if (inv_out != nullptr) inv_out[r] = std::numeric_limits<U>::quiet_NaN();
    }
    return {};
  }
  const T* px = x.typed<T>();
  T* py = y.typed<T>();
  const T eps = static_cast<T>(p.epsilon);
  parallel_items(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>(n) * 3, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      const auto off = static_cast<std::int64_t>(r) * n;
      const auto [mean, inv] = normalize_row(px + off, py + off, static_cast<std::size_t>(n), eps, scale, bias);
      if (mean_out != nullptr) mean_out[r] = static_cast<U>(mean);
      if (inv_out != nullptr) inv_out[r] = static_cast<U>(inv);
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// SkipLayerNormalization (com.microsoft): LayerNorm(input + skip + bias) over the last dim.

template <class T, class U>
Status skip_layer_norm_compute(const ln_params& p, compute_context& ctx) {
  // The sum is commutative: the larger operand is the input, the other broadcasts over it (the graph optimiser fuses
  // Add(a, b) without knowing which of a and b is the larger when shapes are unknown).
  const bool swap = ctx.input(1).element_count() > ctx.input(0).element_count();
  const tensor& x = ctx.input(swap ? 1 : 0);
  const tensor& skip = ctx.input(swap ? 0 : 1);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(x, "input"));
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(skip, "skip"));
  const auto dims = x.sizes();
  if (dims.empty()) return Status(errc::invalid_argument, "input must have rank >= 1");
  const std::int64_t h = dims.back();
  const std::int64_t rows = product(dims, 0, dims.size() - 1);
  // skip: the input's shape, or its trailing dims (leading dims of 1 or absent), repeated over the leading rows.
  const auto sd = skip.sizes();
  bool skip_ok = sd.size() <= dims.size() && !sd.empty();
  std::size_t lead = 0;
  while (skip_ok && lead < sd.size() && sd[lead] == 1 && sd.size() - lead > 1) ++lead;
  for (std::size_t k = lead; k < sd.size() && skip_ok; ++k) skip_ok = sd[k] == dims[dims.size() - (sd.size() - k)];
  if (!skip_ok)
    return Status(errc::invalid_argument, cat("skip ", dims_string(sd), " does not match input ", dims_string(dims)));
  const std::int64_t skip_rows = h == 0 ? 1 : std::max<std::int64_t>(1, static_cast<std::int64_t>(skip.element_count()) / h);
  const char* names[] = {"gamma", "beta", "bias"};
  const T* vecs[3] = {nullptr, nullptr, nullptr};
  for (std::size_t i = 0; i < 3; ++i) {
    if (!ctx.has_input(i + 2)) {
      if (i == 0) return Status(errc::invalid_argument, "gamma is missing");
      continue;
    }
    const tensor& t = ctx.input(i + 2);
    EPSTACK_RETURN_IF_ERROR(expect_type<T>(t, names[i]));
    if (static_cast<std::int64_t>(t.element_count()) != h || t.rank() != 1)
      return Status(errc::invalid_argument, cat(names[i], " ", dims_string(t.sizes()), " must be 1-D with the hidden size ",
                                                std::to_string(h), " of input ", dims_string(dims)));
    vecs[i] = t.typed<T>();
  }
  const T* gamma = vecs[0];
  const T* beta = vecs[1];
  const T* bias = vecs[2];
  tensor& y = ctx.allocate_output(0, x.type(), dims);
  tensor_sizes stat_dims(dims.begin(), dims.end());
  stat_dims.back() = 1;
  const auto want = [&](std::size_t i) { return p.outputs[i] && ctx.output_count() > i; };
  U* mean_out = want(1) ? ctx.allocate_output(1, element_type_of_v<U>, stat_dims).template typed<U>() : nullptr;
  U* inv_out = want(2) ? ctx.allocate_output(2, element_type_of_v<U>, stat_dims).template typed<U>() : nullptr;
  T* sum_out = want(3) ? ctx.allocate_output(3, x.type(), dims).template typed<T>() : nullptr;
  if (rows == 0) return {};
  if (h == 0) {
    for (std::int64_t r = 0; r < rows; ++r) {
      if (mean_out != nullptr) mean_out[r] = std::numeric_limits<U>::quiet_NaN();
      if (inv_out != nullptr) inv_out[r] = std::numeric_limits<U>::quiet_NaN();
    }
    return {};
  }
  const T* px = x.typed<T>();
  const T* ps = skip.typed<T>();
  T* py = y.typed<T>();
  const T eps = static_cast<T>(p.epsilon);
  const auto n = static_cast<std::size_t>(h);
  parallel_items(ctx, static_cast<std::size_t>(rows), n * 4, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      const auto off = static_cast<std::int64_t>(r) * h;
      const T* xr = px + off;
      const T* sr = ps + (static_cast<std::int64_t>(r) % skip_rows) * h;
      // The sum goes to output 3 when asked for, else into Y, which is then normalised in place.
      T* s = sum_out != nullptr ? sum_out + off : py + off;
      if (bias != nullptr)
        for (std::size_t i = 0; i < n; ++i) s[i] = xr[i] + sr[i] + bias[i];
      else
        for (std::size_t i = 0; i < n; ++i) s[i] = xr[i] + sr[i];
      const auto [mean, inv] = normalize_row(s, py + off, n, eps, gamma, beta);
      if (mean_out != nullptr) mean_out[r] = static_cast<U>(mean);
      if (inv_out != nullptr) inv_out[r] = static_cast<U>(inv);
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Softmax and LogSoftmax

// One contiguous row.
template <class T, bool Log>
void softmax_row(const T* x, T* y, std::size_t n) {
  const T m = row_max(x, n);
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && !Log) {
    // exp(x - m) 16 lanes at a time, summed as it is stored (one pass over the row, not two): the compilers turn the
    // loops below into 8-wide vectors on Intel's cores (g++-12 -march=native prefers 256 bits there), and BERT-base's
    // 12 x 128 rows of 128 scores went through exp at half the width.
    const __m512 vm = _mm512_set1_ps(m);
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      const __m512 e0 = fast_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
      const __m512 e1 = fast_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vm));
      _mm512_storeu_ps(y + i, e0);
      _mm512_storeu_ps(y + i + 16, e1);
      s0 = _mm512_add_ps(s0, e0);
      s1 = _mm512_add_ps(s1, e1);
    }
    for (; i < n; i += 16) {
      const auto k = static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
      const __m512 e = fast_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm));
      _mm512_mask_storeu_ps(y + i, k, e);
      s0 = _mm512_mask_add_ps(s0, k, s0, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
    for (i = 0; i < n; i += 16) {
      const auto k = static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
      _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), inv));
    }
    return;
  }
#endif
  for (std::size_t i = 0; i < n; ++i) y[i] = exp_of<T>(x[i] - m);
  const T s = row_sum(y, n);
  if constexpr (Log) {
    // (x - m) - log(s), in that order: x - m is exact near the max, m + log(s) would round at m's magnitude.
    const T ls = std::log(s);
    for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
  } else {
    const T inv = T(1) / s;
    for (std::size_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// Columns [k0, k1) of one outer slice [n, inner]: softmax down each column, vectorised across the columns.
template <class T, bool Log>
void softmax_columns(const T* x, T* y, std::int64_t n, std::int64_t inner, std::int64_t k0, std::int64_t k1) {
  constexpr std::int64_t block = 256;
  T m[block], s[block];
  for (std::int64_t b0 = k0; b0 < k1; b0 += block) {
    const std::int64_t w = std::min(block, k1 - b0);
    const T* xb = x + b0;
    T* yb = y + b0;
    for (std::int64_t k = 0; k < w; ++k) {
      m[k] = xb[k];
      s[k] = 0;
    }
    for (std::int64_t j = 1; j < n; ++j) {
      const T* row = xb + j * inner;
      for (std::int64_t k = 0; k < w; ++k) m[k] = m[k] < row[k] ? row[k] : m[k];
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const T* row = xb + j * inner;
      T* out = yb + j * inner;
      for (std::int64_t k = 0; k < w; ++k) {
        out[k] = exp_of<T>(row[k] - m[k]);
        s[k] += out[k];
      }
    }
    if constexpr (Log) {
      for (std::int64_t k = 0; k < w; ++k) s[k] = std::log(s[k]);
      for (std::int64_t j = 0; j < n; ++j) {
        const T* row = xb + j * inner;
        T* out = yb + j * inner;
        for (std::int64_t k = 0; k < w; ++k) out[k] = (row[k] - m[k]) - s[k];
      }
    } else {
      for (std::int64_t k = 0; k < w; ++k) s[k] = T(1) / s[k];
      for (std::int64_t j = 0; j < n; ++j) {
        T* out = yb + j * inner;
        for (std::int64_t k = 0; k < w; ++k) out[k] *= s[k];
      }
    }
  }
}

struct softmax_params {
  std::int64_t axis = -1;
  bool coerce_2d = false;  // opset < 13: softmax over the flattened dims [axis, rank)
};

// The axis Softmax runs along: opset < 13 allows axis == rank (rows of one element); opset 13 needs an axis of the
// tensor.
Result<std::size_t> softmax_axis(const softmax_params& p, std::span<const std::int64_t> dims) {
  std::optional<std::size_t> axis;
  if (p.coerce_2d && p.axis == static_cast<std::int64_t>(dims.size())) axis = dims.size();
  else axis = normalize_axis(p.axis, dims.size());
  if (!axis) return bad_axis(p.axis, dims.size());
  return *axis;
}

template <class T, bool Log>
void softmax_run(const softmax_params& p, compute_context& ctx, std::span<const std::int64_t> dims, std::size_t axis,
                 const T* px, T* py) {
  const std::int64_t outer = product(dims, 0, axis);
  const std::int64_t n = p.coerce_2d ? product(dims, axis) : dims[axis];
  const std::int64_t inner = p.coerce_2d ? 1 : product(dims, axis + 1);
  if (inner == 1) {
    parallel_items(ctx, static_cast<std::size_t>(outer), static_cast<std::size_t>(n) * 4, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) {
        const auto off = static_cast<std::int64_t>(r) * n;
        softmax_row<T, Log>(px + off, py + off, static_cast<std::size_t>(n));
      }
    });
    return;
  }
  // Along an inner axis: work items are (outer slice, block of columns).
  constexpr std::int64_t cols = 256;
  const std::int64_t blocks = (inner + cols - 1) / cols;
  parallel_items(ctx, static_cast<std::size_t>(outer * blocks), static_cast<std::size_t>(n * std::min(inner, cols)) * 4,
                 [&](std::size_t i0, std::size_t i1) {
                   for (std::size_t i = i0; i < i1; ++i) {
                     const std::int64_t o = static_cast<std::int64_t>(i) / blocks, b = static_cast<std::int64_t>(i) % blocks;
                     const auto off = o * n * inner;
                     softmax_columns<T, Log>(px + off, py + off, n, inner, b * cols, std::min(inner, (b + 1) * cols));
                   }
                 });
}

template <class T, bool Log>
Status softmax_compute(const softmax_params& p, compute_context& ctx) {
  const tensor& x = ctx.input(0);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(x, "input"));
  EPSTACK_ASSIGN_OR_RETURN(const std::size_t axis, softmax_axis(p, x.sizes()));
  tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
  if (y.element_count() == 0) return {};
  softmax_run<T, Log>(p, ctx, x.sizes(), axis, x.typed<T>(), y.typed<T>());
  return {};
}

// float16 and bfloat16 (H): widened to float in scratch memory, the float kernel, each result rounded once.
template <class H, bool Log>
Status softmax_compute_half(const softmax_params& p, compute_context& ctx) {
  const tensor& x = ctx.input(0);
  EPSTACK_RETURN_IF_ERROR(expect_type<H>(x, "input"));
  EPSTACK_ASSIGN_OR_RETURN(const std::size_t axis, softmax_axis(p, x.sizes()));
  tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
  if (y.element_count() == 0) return {};
  const tensor fx = half_as_float(ctx, x);
  tensor fy = ctx.scratch(element_type::float32, y.element_count());
  softmax_run<float, Log>(p, ctx, x.sizes(), axis, fx.typed<float>(), fy.typed<float>());
  store_as_half(ctx, fy.typed<float>(), y);
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Compile helpers


// True when every present input from `first` on has the element type of input 0.
bool inputs_match(const graph& g, node_id n, std::size_t first) {
  const auto& nd = g.node(n);
  for (std::size_t i = first; i < nd.inputs.size(); ++i)
    if (nd.inputs[i] != no_id && in_type(g, n, i) != in_type(g, n, 0)) return false;
  return true;
}
// True when output i is present in the node.
bool has_out(const graph& g, node_id n, std::size_t i) {
  return i < g.node(n).outputs.size() && g.node(n).outputs[i] != no_id;
}

// The element type of the statistics outputs (Mean, InvStdDev): what the graph says, else from stash_type (ONNX:
// float unless stash_type asks for double), else `fallback`.
element_type stats_type(const graph& g, node_id n, std::size_t first_stat, element_type fallback) {
  for (std::size_t i = first_stat; i < first_stat + 2; ++i) {
    const auto t = out_type(g, n, i);
    if (t != element_type::undefined) return t;
  }
  if (has_attr(g.node(n), "stash_type")) {
    const auto s = attr_i(g.node(n), "stash_type", 1);
    return s == static_cast<std::int64_t>(element_type::float64) ? element_type::float64 : element_type::float32;
  }
  return fallback;
}

bool layer_norm_supported(const graph& g, node_id n) {
  if (!f32_or_f64(in_type(g, n, 0)) || !inputs_match(g, n, 1) || !has_in(g, n, 1)) return false;
  return f32_or_f64(stats_type(g, n, 1, element_type::float32));
}

// Instantiates F<T, U> for the input type T and statistics type U.
template <class Make>
Result<compute_function> over_t_u(element_type t, element_type u, Make make) {
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element types");
  dispatch<float, double>(t, [&](auto tt) {
    dispatch<float, double>(u, [&](auto tu) { r = make(tt, tu); });
  });
  return r;
}

Result<compute_function> compile_layer_norm(const graph& g, node_id n, const char* op) {
  const auto& nd = g.node(n);
  ln_params p;
  p.axis = attr_i(nd, "axis", -1);
  p.epsilon = attr_f(nd, "epsilon", 1e-5f);
  for (std::size_t i = 1; i < 3; ++i) p.outputs[i] = has_out(g, n, i);
  return over_t_u(in_type(g, n, 0), stats_type(g, n, 1, element_type::float32), [&](auto tt, auto tu) {
    using T = typename decltype(tt)::type;
    using U = typename decltype(tu)::type;
    return make_fn(op, [p](compute_context& ctx) { return layer_norm_compute<T, U>(p, ctx); });
  });
}

template <bool Log>
Result<compute_function> compile_softmax(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  softmax_params p;
  p.coerce_2d = nd.since_version > 0 && nd.since_version < 13;
  p.axis = attr_i(nd, "axis", p.coerce_2d ? 1 : -1);
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<float, double, float16, bfloat16>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_half_v<T>) r = make_fn(nd.op_type, [p](compute_context& ctx) { return softmax_compute_half<T, Log>(p, ctx); });
    else r = make_fn(nd.op_type, [p](compute_context& ctx) { return softmax_compute<T, Log>(p, ctx); });
  });
  return r;
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

bool batch_normalization::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!f32_or_f64(in_type(g, n, 0)) || !inputs_match(g, n, 1) || nd.inputs.size() < 5) return false;
  for (std::size_t i = 1; i < 5; ++i)
    if (!has_in(g, n, i)) return false;
  // Training mode (opset 14+) may ask for running_mean and running_var; before opset 14, extra outputs (running and
  // saved statistics of the old training interface) are not supported.
  const bool training = nd.since_version >= 14 && attr_i(nd, "training_mode", 0) != 0;
  for (std::size_t i = 1; i < nd.outputs.size(); ++i)
    if (has_out(g, n, i) && !(training && i < 3)) return false;
  return true;
}
Result<compute_function> batch_normalization::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  bn_params p;
  p.epsilon = attr_f(nd, "epsilon", 1e-5f);
  p.spatial = nd.since_version >= 9 || attr_i(nd, "spatial", 1) != 0;
  p.momentum = attr_f(nd, "momentum", 0.9f);
  p.training = nd.since_version >= 14 && attr_i(nd, "training_mode", 0) != 0;
  for (std::size_t i = 0; i < 2; ++i) p.running[i] = p.training && has_out(g, n, i + 1);
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<float, double>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("BatchNormalization", [p](compute_context& ctx) { return batch_norm_compute<T>(p, ctx); });
  });
  return r;
}

bool layer_normalization::supports(const graph& g, node_id n) { return layer_norm_supported(g, n); }
Result<compute_function> layer_normalization::compile(const graph& g, node_id n) {
  return compile_layer_norm(g, n, "LayerNormalization");
}
bool layer_normalization_contrib::supports(const graph& g, node_id n) { return layer_norm_supported(g, n); }
Result<compute_function> layer_normalization_contrib::compile(const graph& g, node_id n) {
  return compile_layer_norm(g, n, "LayerNormalization");
}

bool skip_layer_normalization::supports(const graph& g, node_id n) {
  if (!f32_or_f64(in_type(g, n, 0)) || !inputs_match(g, n, 1) || !has_in(g, n, 1) || !has_in(g, n, 2)) return false;
  return f32_or_f64(stats_type(g, n, 1, element_type::float32));
}
Result<compute_function> skip_layer_normalization::compile(const graph& g, node_id n) {
  ln_params p;
  p.epsilon = attr_f(g.node(n), "epsilon", 1e-12f);
  for (std::size_t i = 1; i < 4; ++i) p.outputs[i] = has_out(g, n, i);
  return over_t_u(in_type(g, n, 0), stats_type(g, n, 1, element_type::float32), [&](auto tt, auto tu) {
    using T = typename decltype(tt)::type;
    using U = typename decltype(tu)::type;
    return make_fn("SkipLayerNormalization", [p](compute_context& ctx) { return skip_layer_norm_compute<T, U>(p, ctx); });
  });
}

// ---- InstanceNormalization: per (n, c), over the spatial dims: scale * (x - mean) / sqrt(var + epsilon) + B ----
bool instance_normalization::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)); }
Result<compute_function> instance_normalization::compile(const graph& g, node_id n) {
  const double eps = attr_f(g.node(n), "epsilon", 1e-5f);
  return make_fn("InstanceNormalization", [eps](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() < 2) return op_error("InstanceNormalization", "the input needs rank 2 or more");
    const std::int64_t N = x.sizes()[0], C = x.sizes()[1], S = product(x.sizes(), 2);
    if (static_cast<std::int64_t>(ctx.input(1).element_count()) != C || static_cast<std::int64_t>(ctx.input(2).element_count()) != C)
      return op_error("InstanceNormalization", "scale and B must have one value per channel");
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    float_dispatch(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.typed<T>();
      const T* sc = ctx.input(1).typed<T>();
      const T* b = ctx.input(2).typed<T>();
      T* out = y.typed<T>();
      parallel_items(ctx, static_cast<std::size_t>(N * C), static_cast<std::size_t>(S), [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
          const T* p = in + r * static_cast<std::size_t>(S);
          double mean = 0, var = 0;
          for (std::int64_t i = 0; i < S; ++i) mean += p[i];
          mean /= static_cast<double>(std::max<std::int64_t>(S, 1));
          for (std::int64_t i = 0; i < S; ++i) var += (p[i] - mean) * (p[i] - mean);
          var /= static_cast<double>(std::max<std::int64_t>(S, 1));
          const std::size_t c = r % static_cast<std::size_t>(C);
          const double k = sc[c] / std::sqrt(var + eps);
          for (std::int64_t i = 0; i < S; ++i) out[r * static_cast<std::size_t>(S) + static_cast<std::size_t>(i)] = static_cast<T>((p[i] - mean) * k + b[c]);
        }
      });
    });
    return {};
  });
}

// ---- LRN: x / (bias + alpha / size * sum of squares over the channel window)^beta ----
bool lrn::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)) && has_attr(g.node(n), "size"); }
Result<compute_function> lrn::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const double alpha = attr_f(nd, "alpha", 1e-4f), beta = attr_f(nd, "beta", 0.75f), bias = attr_f(nd, "bias", 1.0f);
  const std::int64_t size = attr_i(nd, "size", 0);
  if (size < 1) return Status(errc::invalid_graph, "LRN: size must be positive");
  return make_fn("LRN", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() < 2) return op_error("LRN", "the input needs rank 2 or more");
    const std::int64_t N = x.sizes()[0], C = x.sizes()[1], S = product(x.sizes(), 2);
    const std::int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    float_dispatch(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.typed<T>();
      T* out = y.typed<T>();
      for (std::int64_t nn = 0; nn < N; ++nn)
        for (std::int64_t c = 0; c < C; ++c)
          for (std::int64_t s = 0; s < S; ++s) {
            double sum = 0;
            for (std::int64_t k = std::max<std::int64_t>(0, c - lo); k <= std::min(C - 1, c + hi); ++k) {
              const double v = in[(nn * C + k) * S + s];
              sum += v * v;
            }
            const std::int64_t at = (nn * C + c) * S + s;
            out[at] = static_cast<T>(in[at] / std::pow(bias + alpha / static_cast<double>(size) * sum, beta));
          }
    });
    return {};
  });
}

// Softmax and LogSoftmax: float, double; float16 and bfloat16 computed in float.
bool softmax::supports(const graph& g, node_id n) { return is_float(in_type(g, n, 0)); }
Result<compute_function> softmax::compile(const graph& g, node_id n) { return compile_softmax<false>(g, n); }
bool log_softmax::supports(const graph& g, node_id n) { return is_float(in_type(g, n, 0)); }
Result<compute_function> log_softmax::compile(const graph& g, node_id n) { return compile_softmax<true>(g, n); }

}  // namespace ops
}  // namespace epstack::cpu
