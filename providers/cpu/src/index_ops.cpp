// Index and layout kernels: Trilu, Hardmax, EyeLike, DepthToSpace, SpaceToDepth, OneHot, GatherND, ScatterND,
// ScatterElements (and opset 9's Scatter), Compress and ReverseSequence. Data moves as elements of any fixed size
// (every type but string), so one loop serves every element type.
#include "kernel_util.hpp"

#include <numeric>

namespace epstack::cpu {
namespace impl {
namespace {

using dims = std::vector<std::int64_t>;

bool fixed_size(element_type e) { return e != element_type::string && e != element_type::undefined; }
std::size_t esize(const tensor& t) { return element_size(t.type()); }

void copy_elem(std::byte* dst, std::int64_t di, const std::byte* src, std::int64_t si, std::size_t es) {
  std::memcpy(dst + static_cast<std::size_t>(di) * es, src + static_cast<std::size_t>(si) * es, es);
}

/// Index `v` along a dimension of size `n`, negative values counted from the end; nullopt when out of range.
std::optional<std::int64_t> wrap_index(std::int64_t v, std::int64_t n) {
  if (v < -n || v >= n) return std::nullopt;
  return v < 0 ? v + n : v;
}

Status index_error(std::string_view op, std::int64_t v, std::int64_t n) {
  return Status(errc::invalid_argument, cat(op, ": index ", std::to_string(v), " is out of range for a dimension of ",
                                            std::to_string(n)));
}

// Reads element i of an integer or floating tensor as int64 (OneHot's indices and depth may be any number type).
std::int64_t int_at(const tensor& t, std::size_t i) {
  std::int64_t r = 0;
  const bool ok = dispatch<EPSTACK_NUMERIC_TYPES>(t.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = static_cast<std::int64_t>(t.typed<T>()[i]);
  });
  if (!ok) throw std::invalid_argument(cat("expected a number tensor, got ", std::string(to_string(t.type()))));
  return r;
}

// Adds (or multiplies, maxes, mins) element src into dst, for ScatterND and ScatterElements' reductions.
enum class reduction { none, add, mul, max, min };
Result<reduction> reduction_of(const node& nd) {
  const std::string r = attr_s(nd, "reduction", "none");
  if (r == "none") return reduction::none;
  if (r == "add") return reduction::add;
  if (r == "mul") return reduction::mul;
  if (r == "max") return reduction::max;
  if (r == "min") return reduction::min;
  return Status(errc::invalid_graph, cat("reduction '", r, "' is not none, add, mul, max or min"));
}
void combine(std::byte* dst, const std::byte* src, element_type e, reduction r) {
  if (r == reduction::none) {
    std::memcpy(dst, src, element_size(e));
    return;
  }
  const bool ok = dispatch<EPSTACK_NUMERIC_TYPES>(e, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T a, b;
    std::memcpy(&a, dst, sizeof(T));
    std::memcpy(&b, src, sizeof(T));
    T v = r == reduction::add ? static_cast<T>(a + b)
          : r == reduction::mul ? static_cast<T>(a * b)
          : r == reduction::max ? std::max(a, b)
                                : std::min(a, b);
    std::memcpy(dst, &v, sizeof(T));
  });
  if (!ok) {  // float16, bfloat16, bool: through float
    float a = 0, b = 0;
    if (e == element_type::float16) a = static_cast<float>(*reinterpret_cast<const float16*>(dst)), b = static_cast<float>(*reinterpret_cast<const float16*>(src));
    else if (e == element_type::bfloat16) a = static_cast<float>(*reinterpret_cast<const bfloat16*>(dst)), b = static_cast<float>(*reinterpret_cast<const bfloat16*>(src));
    else a = static_cast<float>(*reinterpret_cast<const bool*>(dst)), b = static_cast<float>(*reinterpret_cast<const bool*>(src));
    const float v = r == reduction::add ? a + b : r == reduction::mul ? a * b : r == reduction::max ? std::max(a, b) : std::min(a, b);
    if (e == element_type::float16) *reinterpret_cast<float16*>(dst) = float16(v);
    else if (e == element_type::bfloat16) *reinterpret_cast<bfloat16*>(dst) = bfloat16(v);
    else *reinterpret_cast<bool*>(dst) = v != 0;
  }
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

// ---- Trilu: the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims; the rest zero ----
bool trilu::supports(const graph& g, node_id n) { return fixed_size(in_type(g, n, 0)); }
Result<compute_function> trilu::compile(const graph& g, node_id n) {
  const bool upper = attr_i(g.node(n), "upper", 1) != 0;
  return make_fn("Trilu", [upper](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() < 2) return Status(errc::invalid_argument, "Trilu: the input needs rank 2 or more");
    const std::int64_t k = ctx.has_input(1) && ctx.input(1).element_count() > 0 ? int_at(ctx.input(1), 0) : 0;
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    const std::int64_t rows = x.sizes()[x.rank() - 2], cols = x.sizes()[x.rank() - 1];
    const std::int64_t mats = rows * cols == 0 ? 0 : static_cast<std::int64_t>(x.element_count()) / (rows * cols);
    const std::size_t es = esize(x);
    std::memset(y.mutable_data(), 0, y.byte_size());
    for (std::int64_t m = 0; m < mats; ++m)
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
          if (upper ? j - i >= k : j - i <= k) {
            const std::int64_t at = (m * rows + i) * cols + j;
            copy_elem(y.mutable_data(), at, x.data(), at, es);
          }
    return {};
  });
}

// ---- Hardmax: 1 at the first maximum along the axis (opset 13), or over the flattened trailing dims (before) ----
bool hardmax::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  return e == element_type::float32 || e == element_type::float64;
}
Result<compute_function> hardmax::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool per_axis = nd.since_version >= 13;
  const std::int64_t axis_attr = attr_i(nd, "axis", per_axis ? -1 : 1);
  const bool f64 = in_type(g, n, 0) == element_type::float64;
  return make_fn("Hardmax", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const auto axis = normalize_axis(axis_attr, std::max<std::size_t>(x.rank(), 1));
    if (!axis) return bad_axis(axis_attr, x.rank());
    std::int64_t outer = product(x.sizes(), 0, *axis), len = 0, inner = 1;
    if (per_axis) len = x.rank() ? x.sizes()[*axis] : 1, inner = product(x.sizes(), *axis + 1);
    else len = product(x.sizes(), *axis);
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    const auto run = [&](auto* in, auto* out) {
      using T = std::remove_pointer_t<decltype(out)>;
      std::fill(out, out + x.element_count(), T(0));
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < inner; ++i) {
          std::int64_t best = 0;
          for (std::int64_t a = 1; a < len; ++a)
            if (in[(o * len + a) * inner + i] > in[(o * len + best) * inner + i]) best = a;
          if (len > 0) out[(o * len + best) * inner + i] = T(1);
        }
    };
    if (f64) run(x.typed<double>(), y.typed<double>());
    else run(x.typed<float>(), y.typed<float>());
    return {};
  });
}

// ---- EyeLike: ones on diagonal k of a 2-D shape, of type `dtype` (default the input's) ----
bool eye_like::supports(const graph& g, node_id n) { return fixed_size(out_type(g, n, 0)) || fixed_size(in_type(g, n, 0)); }
Result<compute_function> eye_like::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::int64_t k = attr_i(nd, "k", 0);
  const auto dtype = has_attr(nd, "dtype") ? static_cast<element_type>(attr_i(nd, "dtype", 0)) : element_type::undefined;
  return make_fn("EyeLike", [k, dtype](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() != 2) return Status(errc::invalid_argument, "EyeLike: the input must be 2-D");
    const element_type e = dtype == element_type::undefined ? x.type() : dtype;
    if (!fixed_size(e)) return Status(errc::invalid_argument, "EyeLike: unsupported dtype");
    tensor& y = ctx.allocate_output(0, e, x.sizes());
    std::memset(y.mutable_data(), 0, y.byte_size());
    const std::int64_t rows = x.sizes()[0], cols = x.sizes()[1];
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t j = i + k;
      if (j < 0 || j >= cols) continue;
      std::byte* at = y.mutable_data() + static_cast<std::size_t>(i * cols + j) * element_size(e);
      dispatch<EPSTACK_ALL_POD_TYPES>(e, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T one = static_cast<T>(1.0f);
        std::memcpy(at, &one, sizeof(T));
      });
    }
    return {};
  });
}

// ---- DepthToSpace (DCR or CRD) and SpaceToDepth, on [N, C, H, W] ----
bool depth_to_space::supports(const graph& g, node_id n) { return fixed_size(in_type(g, n, 0)); }
Result<compute_function> depth_to_space::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::int64_t b = attr_i(nd, "blocksize", 0);
  const std::string mode = attr_s(nd, "mode", "DCR");
  if (b < 1) return Status(errc::invalid_graph, "DepthToSpace: blocksize must be positive");
  if (mode != "DCR" && mode != "CRD") return Status(errc::invalid_graph, cat("DepthToSpace: unknown mode '", mode, "'"));
  const bool dcr = mode == "DCR";
  return make_fn("DepthToSpace", [b, dcr](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() != 4) return Status(errc::invalid_argument, "DepthToSpace: the input must be 4-D");
    const std::int64_t N = x.sizes()[0], C = x.sizes()[1], H = x.sizes()[2], W = x.sizes()[3];
    if (C % (b * b) != 0) return Status(errc::invalid_argument, "DepthToSpace: channels are not a multiple of blocksize^2");
    const std::int64_t c2 = C / (b * b);
    tensor& y = ctx.allocate_output(0, x.type(), {N, c2, H * b, W * b});
    const std::size_t es = esize(x);
    for (std::int64_t nn = 0; nn < N; ++nn)
      for (std::int64_t c = 0; c < c2; ++c)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t i = 0; i < b; ++i)
            for (std::int64_t w = 0; w < W; ++w)
              for (std::int64_t j = 0; j < b; ++j) {
                const std::int64_t ic = dcr ? (i * b + j) * c2 + c : c * b * b + i * b + j;
                copy_elem(y.mutable_data(), ((nn * c2 + c) * H * b + h * b + i) * W * b + w * b + j, x.data(),
                          ((nn * C + ic) * H + h) * W + w, es);
              }
    return {};
  });
}
bool space_to_depth::supports(const graph& g, node_id n) { return fixed_size(in_type(g, n, 0)); }
Result<compute_function> space_to_depth::compile(const graph& g, node_id n) {
  const std::int64_t b = attr_i(g.node(n), "blocksize", 0);
  if (b < 1) return Status(errc::invalid_graph, "SpaceToDepth: blocksize must be positive");
  return make_fn("SpaceToDepth", [b](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() != 4) return Status(errc::invalid_argument, "SpaceToDepth: the input must be 4-D");
    const std::int64_t N = x.sizes()[0], C = x.sizes()[1], H = x.sizes()[2], W = x.sizes()[3];
    if (H % b != 0 || W % b != 0) return Status(errc::invalid_argument, "SpaceToDepth: H and W must be multiples of blocksize");
    const std::int64_t h2 = H / b, w2 = W / b;
    tensor& y = ctx.allocate_output(0, x.type(), {N, C * b * b, h2, w2});
    const std::size_t es = esize(x);
    for (std::int64_t nn = 0; nn < N; ++nn)
      for (std::int64_t i = 0; i < b; ++i)
        for (std::int64_t j = 0; j < b; ++j)
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t h = 0; h < h2; ++h)
              for (std::int64_t w = 0; w < w2; ++w)
                copy_elem(y.mutable_data(), ((nn * C * b * b + (i * b + j) * C + c) * h2 + h) * w2 + w, x.data(),
                          ((nn * C + c) * H + h * b + i) * W + w * b + j, es);
    return {};
  });
}

// ---- OneHot: values[1] where the index (negative from the end) hits, values[0] elsewhere ----
bool one_hot::supports(const graph& g, node_id n) { return fixed_size(in_type(g, n, 2)); }
Result<compute_function> one_hot::compile(const graph& g, node_id n) {
  const std::int64_t axis_attr = attr_i(g.node(n), "axis", -1);
  return make_fn("OneHot", [axis_attr](compute_context& ctx) -> Status {
    const tensor& idx = ctx.input(0);
    const tensor& values = ctx.input(2);
    if (ctx.input(1).element_count() != 1) return Status(errc::invalid_argument, "OneHot: depth must be a scalar");
    if (values.element_count() != 2) return Status(errc::invalid_argument, "OneHot: values must hold [off, on]");
    const std::int64_t depth = int_at(ctx.input(1), 0);
    if (depth < 1) return Status(errc::invalid_argument, "OneHot: depth must be positive");
    const std::size_t rank = idx.rank() + 1;
    const auto axis = normalize_axis(axis_attr, rank);
    if (!axis) return bad_axis(axis_attr, rank);
    dims out(idx.sizes().begin(), idx.sizes().end());
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(*axis), depth);
    tensor& y = ctx.allocate_output(0, values.type(), out);
    const std::size_t es = esize(values);
    const std::int64_t outer = product(idx.sizes(), 0, *axis), inner = product(idx.sizes(), *axis);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t d = 0; d < depth; ++d)
        for (std::int64_t i = 0; i < inner; ++i) {
          std::int64_t v = int_at(idx, static_cast<std::size_t>(o * inner + i));
          if (v < 0) v += depth;
          copy_elem(y.mutable_data(), (o * depth + d) * inner + i, values.data(), v == d ? 1 : 0, es);
        }
    return {};
  });
}

// ---- GatherND (batch_dims) ----
bool gather_nd::supports(const graph& g, node_id n) { return fixed_size(in_type(g, n, 0)); }
Result<compute_function> gather_nd::compile(const graph& g, node_id n) {
  const std::int64_t bd = attr_i(g.node(n), "batch_dims", 0);
  return make_fn("GatherND", [bd](compute_context& ctx) -> Status {
    const tensor& data = ctx.input(0);
    const tensor& ind = ctx.input(1);
    const auto r = static_cast<std::int64_t>(data.rank()), q = static_cast<std::int64_t>(ind.rank());
    if (q < 1 || bd < 0 || bd >= std::min(r, q)) return Status(errc::invalid_argument, "GatherND: bad ranks or batch_dims");
    const std::int64_t m = ind.sizes()[static_cast<std::size_t>(q - 1)];
    if (m < 1 || bd + m > r) return Status(errc::invalid_argument, "GatherND: the index tuples are longer than the data's rank");
    for (std::int64_t i = 0; i < bd; ++i)
      if (data.sizes()[static_cast<std::size_t>(i)] != ind.sizes()[static_cast<std::size_t>(i)])
        return Status(errc::invalid_argument, "GatherND: batch dims of data and indices differ");
    dims out(ind.sizes().begin(), ind.sizes().end() - 1);
    out.insert(out.end(), data.sizes().begin() + bd + m, data.sizes().end());
    tensor& y = ctx.allocate_output(0, data.type(), out);
    const auto idx = to_int64s(ind);
    const dims ds = strides_of(data.sizes());
    const std::int64_t slice = product(data.sizes(), static_cast<std::size_t>(bd + m));
    const std::int64_t batches = product(data.sizes(), 0, static_cast<std::size_t>(bd));
    const std::int64_t per_batch = product(ind.sizes(), static_cast<std::size_t>(bd), static_cast<std::size_t>(q - 1));
    const std::size_t es = esize(data);
    std::int64_t at = 0;
    for (std::int64_t b = 0; b < batches; ++b)
      for (std::int64_t t = 0; t < per_batch; ++t, ++at) {
        std::int64_t off = b * (bd > 0 ? ds[static_cast<std::size_t>(bd - 1)] : 0);
        for (std::int64_t k = 0; k < m; ++k) {
          const std::int64_t dim = data.sizes()[static_cast<std::size_t>(bd + k)];
          const auto v = wrap_index(idx[static_cast<std::size_t>(at * m + k)], dim);
          if (!v) return index_error("GatherND", idx[static_cast<std::size_t>(at * m + k)], dim);
          off += *v * ds[static_cast<std::size_t>(bd + k)];
        }
        std::memcpy(y.mutable_data() + static_cast<std::size_t>(at * slice) * es, data.data() + static_cast<std::size_t>(off) * es,
                    static_cast<std::size_t>(slice) * es);
      }
    return {};
  });
}

// ---- ScatterND (reduction none, add, mul, max, min) ----
bool scatter_nd::supports(const graph& g, node_id n) { return fixed_size(in_type(g, n, 0)); }
Result<compute_function> scatter_nd::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(auto red, reduction_of(g.node(n)));
  return make_fn("ScatterND", [red](compute_context& ctx) -> Status {
    const tensor& data = ctx.input(0);
    const tensor& ind = ctx.input(1);
    const tensor& upd = ctx.input(2);
    if (ind.rank() < 1) return Status(errc::invalid_argument, "ScatterND: indices need rank 1 or more");
    const std::int64_t m = ind.sizes()[ind.rank() - 1];
    if (m < 1 || m > static_cast<std::int64_t>(data.rank()))
      return Status(errc::invalid_argument, "ScatterND: the index tuples are longer than the data's rank");
    tensor& y = ctx.allocate_output(0, data.type(), data.sizes());
    std::memcpy(y.mutable_data(), data.data(), data.byte_size());
    const auto idx = to_int64s(ind);
    const dims ds = strides_of(data.sizes());
    const std::int64_t slice = product(data.sizes(), static_cast<std::size_t>(m));
    const std::int64_t count = product(ind.sizes(), 0, ind.rank() - 1);
    if (static_cast<std::int64_t>(upd.element_count()) != count * slice || upd.type() != data.type())
      return Status(errc::invalid_argument, "ScatterND: updates do not match the indices and data");
    const std::size_t es = esize(data);
    for (std::int64_t t = 0; t < count; ++t) {
      std::int64_t off = 0;
      for (std::int64_t k = 0; k < m; ++k) {
        const std::int64_t dim = data.sizes()[static_cast<std::size_t>(k)];
        const auto v = wrap_index(idx[static_cast<std::size_t>(t * m + k)], dim);
        if (!v) return index_error("ScatterND", idx[static_cast<std::size_t>(t * m + k)], dim);
        off += *v * ds[static_cast<std::size_t>(k)];
      }
      for (std::int64_t e = 0; e < slice; ++e)
        combine(y.mutable_data() + static_cast<std::size_t>(off + e) * es, upd.data() + static_cast<std::size_t>(t * slice + e) * es,
                data.type(), red);
    }
    return {};
  });
}

// ---- ScatterElements and Scatter (opset 9-10, the same without reduction) ----
Result<compute_function> scatter_elements_fn(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::int64_t axis_attr = attr_i(nd, "axis", 0);
  EPSTACK_ASSIGN_OR_RETURN(auto red, reduction_of(nd));
  return make_fn(nd.op_type, [axis_attr, red](compute_context& ctx) -> Status {
    const tensor& data = ctx.input(0);
    const tensor& ind = ctx.input(1);
    const tensor& upd = ctx.input(2);
    const auto axis = normalize_axis(axis_attr, data.rank());
    if (!axis) return bad_axis(axis_attr, data.rank());
    if (ind.rank() != data.rank() || !std::equal(ind.sizes().begin(), ind.sizes().end(), upd.sizes().begin(), upd.sizes().end()) ||
        upd.type() != data.type())
      return Status(errc::invalid_argument, "ScatterElements: indices and updates must have the same shape and the data's rank");
    tensor& y = ctx.allocate_output(0, data.type(), data.sizes());
    std::memcpy(y.mutable_data(), data.data(), data.byte_size());
    const auto idx = to_int64s(ind);
    const dims ds = strides_of(data.sizes()), is = strides_of(ind.sizes());
    const std::size_t es = esize(data);
    const std::int64_t dim = data.sizes()[*axis];
    for (std::size_t i = 0; i < idx.size(); ++i) {
      std::int64_t rest = static_cast<std::int64_t>(i), off = 0;
      for (std::size_t d = 0; d < ind.rank(); ++d) {
        const std::int64_t c = rest / is[d];
        rest %= is[d];
        if (d == *axis) {
          const auto v = wrap_index(idx[i], dim);
          if (!v) return index_error("ScatterElements", idx[i], dim);
          off += *v * ds[d];
        } else {
          if (c >= data.sizes()[d]) return Status(errc::invalid_argument, "ScatterElements: indices exceed the data's shape");
          off += c * ds[d];
        }
      }
      combine(y.mutable_data() + static_cast<std::size_t>(off) * es, upd.data() + i * es, data.type(), red);
    }
    return {};
  });
}
bool scatter_elements::supports(const graph& g, node_id n) { return fixed_size(in_type(g, n, 0)); }
Result<compute_function> scatter_elements::compile(const graph& g, node_id n) { return scatter_elements_fn(g, n); }
bool scatter::supports(const graph& g, node_id n) { return fixed_size(in_type(g, n, 0)); }
Result<compute_function> scatter::compile(const graph& g, node_id n) { return scatter_elements_fn(g, n); }

// ---- Compress: the slices (or, without an axis, the flattened elements) where the condition holds ----
bool compress::supports(const graph& g, node_id n) { return fixed_size(in_type(g, n, 0)); }
Result<compute_function> compress::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool has_axis = has_attr(nd, "axis");
  const std::int64_t axis_attr = attr_i(nd, "axis", 0);
  return make_fn("Compress", [has_axis, axis_attr](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& cond = ctx.input(1);
    if (cond.type() != element_type::boolean || cond.rank() != 1)
      return Status(errc::invalid_argument, "Compress: the condition must be a 1-D bool tensor");
    const bool* c = cond.typed<bool>();
    const std::size_t es = esize(x);
    if (!has_axis) {
      std::vector<std::int64_t> keep;
      for (std::size_t i = 0; i < std::min(cond.element_count(), x.element_count()); ++i)
        if (c[i]) keep.push_back(static_cast<std::int64_t>(i));
      tensor& y = ctx.allocate_output(0, x.type(), {static_cast<std::int64_t>(keep.size())});
      for (std::size_t i = 0; i < keep.size(); ++i) copy_elem(y.mutable_data(), static_cast<std::int64_t>(i), x.data(), keep[i], es);
      return {};
    }
    const auto axis = normalize_axis(axis_attr, x.rank());
    if (!axis) return bad_axis(axis_attr, x.rank());
    const std::int64_t len = x.sizes()[*axis];
    if (static_cast<std::int64_t>(cond.element_count()) > len)
      return Status(errc::invalid_argument, "Compress: the condition is longer than the axis");
    std::vector<std::int64_t> keep;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(cond.element_count()); ++i)
      if (c[i]) keep.push_back(i);
    dims out(x.sizes().begin(), x.sizes().end());
    out[*axis] = static_cast<std::int64_t>(keep.size());
    tensor& y = ctx.allocate_output(0, x.type(), out);
    const std::int64_t outer = product(x.sizes(), 0, *axis), inner = product(x.sizes(), *axis + 1);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::size_t k = 0; k < keep.size(); ++k)
        std::memcpy(y.mutable_data() + static_cast<std::size_t>((o * static_cast<std::int64_t>(keep.size()) + static_cast<std::int64_t>(k)) * inner) * es,
                    x.data() + static_cast<std::size_t>((o * len + keep[k]) * inner) * es, static_cast<std::size_t>(inner) * es);
    return {};
  });
}

// ---- ReverseSequence: each batch entry's first sequence_lens[b] steps along the time axis reversed ----
bool reverse_sequence::supports(const graph& g, node_id n) { return fixed_size(in_type(g, n, 0)); }
Result<compute_function> reverse_sequence::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::int64_t time_attr = attr_i(nd, "time_axis", 0), batch_attr = attr_i(nd, "batch_axis", 1);
  return make_fn("ReverseSequence", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() < 2) return Status(errc::invalid_argument, "ReverseSequence: the input needs rank 2 or more");
    const auto ta = normalize_axis(time_attr, x.rank()), ba = normalize_axis(batch_attr, x.rank());
    if (!ta || !ba || *ta == *ba || *ta > 1 || *ba > 1)
      return Status(errc::invalid_argument, "ReverseSequence: time_axis and batch_axis must be 0 and 1");
    const auto lens = to_int64s(ctx.input(1));
    const std::int64_t T = x.sizes()[*ta], B = x.sizes()[*ba];
    if (static_cast<std::int64_t>(lens.size()) != B) return Status(errc::invalid_argument, "ReverseSequence: sequence_lens must have one entry per batch");
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    const std::size_t es = esize(x);
    const std::int64_t inner = product(x.sizes(), 2);
    const dims st = strides_of(x.sizes());
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t len = lens[static_cast<std::size_t>(b)];
      if (len < 0 || len > T) return Status(errc::invalid_argument, "ReverseSequence: a sequence length is out of range");
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t from = t < len ? len - 1 - t : t;
        const std::int64_t dst = t * st[*ta] + b * st[*ba], src = from * st[*ta] + b * st[*ba];
        std::memcpy(y.mutable_data() + static_cast<std::size_t>(dst) * es, x.data() + static_cast<std::size_t>(src) * es,
                    static_cast<std::size_t>(inner) * es);
      }
    }
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
