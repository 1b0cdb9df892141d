// Selection and text kernels: NonMaxSuppression, Unique, StringNormalizer.
#include "kernel_util.hpp"

#include <map>
#include <numeric>
#include <set>

namespace epstack::cpu {
namespace impl {
namespace {


struct box {
  float y1, x1, y2, x2;
};
// Corners in any order ([y1, x1, y2, x2] with flipped coordinates allowed), or center format [xc, yc, w, h].
box box_at(const float* p, bool center) {
  if (center) return {p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
  return {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
}
float iou(const box& a, const box& b) {
  const float ih = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float iw = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float inter = ih * iw;
  const float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return 0;
  return inter / (area_a + area_b - inter);
}

// Lexicographic order through element comparisons (std::vector's own operator< of bytes trips a g++ 12 false
// positive, -Wstringop-overread, in the memcmp it is lowered to).
struct lex_less {
  template <class V>
  bool operator()(const V& a, const V& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) { return x < y; });
  }
};

std::string ascii_case(std::string s, bool upper) {
  for (auto& c : s)
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

// ---- NonMaxSuppression: per batch and class, greedy by score, dropping boxes whose IoU with a kept one exceeds the
// threshold; [selected, 3] of (batch, class, box) ----
bool non_max_suppression::supports(const graph& g, node_id n) {
  return in_type(g, n, 0) == element_type::float32 && in_type(g, n, 1) == element_type::float32;
}
Result<compute_function> non_max_suppression::compile(const graph& g, node_id n) {
  const bool center = attr_i(g.node(n), "center_point_box", 0) != 0;
  return make_fn("NonMaxSuppression", [center](compute_context& ctx) -> Status {
    const tensor& boxes = ctx.input(0);
    const tensor& scores = ctx.input(1);
    if (boxes.rank() != 3 || boxes.sizes()[2] != 4 || scores.rank() != 3 || scores.sizes()[0] != boxes.sizes()[0] ||
        scores.sizes()[2] != boxes.sizes()[1])
      return op_error("NonMaxSuppression", "boxes must be [B, N, 4] and scores [B, C, N]");
    const std::int64_t max_out = ctx.has_input(2) && ctx.input(2).element_count() > 0 ? to_int64s(ctx.input(2)).front() : 0;
    const float iou_th = ctx.has_input(3) && ctx.input(3).element_count() > 0 ? *ctx.input(3).typed<float>() : 0.0f;
    const bool has_score_th = ctx.has_input(4) && ctx.input(4).element_count() > 0;
    const float score_th = has_score_th ? *ctx.input(4).typed<float>() : 0.0f;
    const std::int64_t B = boxes.sizes()[0], N = boxes.sizes()[1], C = scores.sizes()[1];
    std::vector<std::int64_t> sel;
    for (std::int64_t b = 0; b < B && max_out > 0; ++b)
      for (std::int64_t c = 0; c < C; ++c) {
        const float* sc = scores.typed<float>() + (b * C + c) * N;
        std::vector<std::int64_t> order;
        for (std::int64_t i = 0; i < N; ++i)
          if (!std::isnan(sc[i]) && (!has_score_th || sc[i] > score_th)) order.push_back(i);  // NaN scores never selected
        // By score, ties by index (std::sort with the index as tie-break: clang 19 deprecates stable_sort's buffer).
        std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t z) { return sc[a] > sc[z] || (sc[a] == sc[z] && a < z); });
        std::vector<box> kept;
        std::int64_t count = 0;
        for (std::int64_t i : order) {
          if (count >= max_out) break;
          const box bx = box_at(boxes.typed<float>() + (b * N + i) * 4, center);
          bool keep = true;
          for (const auto& k : kept)
            if (iou(bx, k) > iou_th) {
              keep = false;
              break;
            }
          if (!keep) continue;
          kept.push_back(bx);
          sel.insert(sel.end(), {b, c, i});
          ++count;
        }
      }
    tensor& y = ctx.allocate_output(0, element_type::int64, {static_cast<std::int64_t>(sel.size() / 3), 3});
    std::copy(sel.begin(), sel.end(), y.typed<std::int64_t>());
    return {};
  });
}

// ---- Unique: the unique elements (or slices along `axis`), sorted or in order of first occurrence, with the
// first index of each, the inverse indices and the counts ----
bool unique::supports(const graph& g, node_id n) { return in_type(g, n, 0) != element_type::undefined; }
Result<compute_function> unique::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool sorted = attr_i(nd, "sorted", 1) != 0;
  const bool has_axis = has_attr(nd, "axis");
  const std::int64_t axis_attr = attr_i(nd, "axis", 0);
  return make_fn("Unique", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    std::size_t axis = 0;
    std::vector<std::int64_t> shape;
    if (has_axis) {
      const auto a = normalize_axis(axis_attr, x.rank());
      if (!a) return bad_axis(axis_attr, x.rank());
      axis = *a;
      shape.assign(x.sizes().begin(), x.sizes().end());
    } else {
      shape = {static_cast<std::int64_t>(x.element_count())};
    }
    const std::int64_t outer = product(shape, 0, axis), len = shape[axis], inner = product(shape, axis + 1);
    Status st;
    const bool ok = dispatch<EPSTACK_NUMERIC_TYPES, std::string>(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = x.typed<T>();
      // Slice i along the axis as a vector of values (outer-major), compared lexicographically.
      const auto slice = [&](std::int64_t i) {
        std::vector<T> v;
        v.reserve(static_cast<std::size_t>(outer * inner));
        for (std::int64_t o = 0; o < outer; ++o)
          for (std::int64_t k = 0; k < inner; ++k) v.push_back(p[(o * len + i) * inner + k]);
        return v;
      };
      std::vector<std::vector<T>> keys;
      std::map<std::vector<T>, std::int64_t, lex_less> first;  // key -> index among unique (first-occurrence order)
      std::vector<std::int64_t> first_at, counts, inverse(static_cast<std::size_t>(len));
      for (std::int64_t i = 0; i < len; ++i) {
        auto v = slice(i);
        auto [it, fresh] = first.emplace(v, static_cast<std::int64_t>(keys.size()));
        if (fresh) {
          keys.push_back(std::move(v));
          first_at.push_back(i);
          counts.push_back(0);
        }
        ++counts[static_cast<std::size_t>(it->second)];
        inverse[static_cast<std::size_t>(i)] = it->second;
      }
      std::vector<std::int64_t> order(keys.size());
      std::iota(order.begin(), order.end(), 0);
      if (sorted) std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return lex_less{}(keys[static_cast<std::size_t>(a)], keys[static_cast<std::size_t>(b)]); });
      std::vector<std::int64_t> rank(keys.size());
      for (std::size_t r = 0; r < order.size(); ++r) rank[static_cast<std::size_t>(order[r])] = static_cast<std::int64_t>(r);
      const auto u = static_cast<std::int64_t>(keys.size());
      std::vector<std::int64_t> yshape = shape;
      yshape[axis] = u;
      tensor& y = ctx.allocate_output(0, x.type(), yshape);
      T* py = y.typed<T>();
      for (std::int64_t r = 0; r < u; ++r) {
        const auto& key = keys[static_cast<std::size_t>(order[static_cast<std::size_t>(r)])];
        for (std::int64_t o = 0; o < outer; ++o)
          for (std::int64_t k = 0; k < inner; ++k) py[(o * u + r) * inner + k] = key[static_cast<std::size_t>(o * inner + k)];
      }
      const auto out_vec = [&](std::size_t i, const std::vector<std::int64_t>& v) {
        if (i >= ctx.output_count()) return;
        tensor& t = ctx.allocate_output(i, element_type::int64, {static_cast<std::int64_t>(v.size())});
        std::copy(v.begin(), v.end(), t.typed<std::int64_t>());
      };
      std::vector<std::int64_t> idx(static_cast<std::size_t>(u)), cnt(static_cast<std::size_t>(u)), inv(inverse.size());
      for (std::int64_t r = 0; r < u; ++r) {
        idx[static_cast<std::size_t>(r)] = first_at[static_cast<std::size_t>(order[static_cast<std::size_t>(r)])];
        cnt[static_cast<std::size_t>(r)] = counts[static_cast<std::size_t>(order[static_cast<std::size_t>(r)])];
      }
      for (std::size_t i = 0; i < inverse.size(); ++i) inv[i] = rank[static_cast<std::size_t>(inverse[i])];
      out_vec(1, idx);
      out_vec(2, inv);
      out_vec(3, cnt);
    });
    if (!ok) return op_error("Unique", cat("unsupported element type ", std::string(to_string(x.type()))));
    return st;
  });
}

// ---- StringNormalizer: stop words removed (case-sensitive or not), then LOWER, UPPER or NONE (ASCII letters) ----
bool string_normalizer::supports(const graph& g, node_id n) { return in_type(g, n, 0) == element_type::string; }
Result<compute_function> string_normalizer::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::string action = attr_s(nd, "case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return Status(errc::invalid_graph, cat("StringNormalizer: case_change_action '", action, "' is not NONE, LOWER or UPPER"));
  const bool sensitive = attr_i(nd, "is_case_sensitive", 0) != 0;
  std::set<std::string> stop;
  if (const auto* a = attr(nd, "stopwords"))
    if (const auto* v = std::get_if<std::vector<std::string>>(&a->value))
      for (const auto& w : *v) stop.insert(sensitive ? w : ascii_case(w, false));
  return make_fn("StringNormalizer", [action, sensitive, stop](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() != 1 && !(x.rank() == 2 && x.sizes()[0] == 1))
      return op_error("StringNormalizer", "the input must be [C] or [1, C]");
    std::vector<std::string> kept;
    for (std::size_t i = 0; i < x.element_count(); ++i) {
      const std::string& s = x.typed<std::string>()[i];
      if (stop.contains(sensitive ? s : ascii_case(s, false))) continue;
      kept.push_back(action == "NONE" ? s : ascii_case(s, action == "UPPER"));
    }
    if (kept.empty()) kept.emplace_back();  // everything removed: one empty string
    const auto c = static_cast<std::int64_t>(kept.size());
    tensor& y = x.rank() == 1 ? ctx.allocate_output(0, element_type::string, {c}) : ctx.allocate_output(0, element_type::string, {1, c});
    for (std::size_t i = 0; i < kept.size(); ++i) y.typed<std::string>()[i] = std::move(kept[i]);
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu

// ---- TfIdfVectorizer: counts of the pool's n-grams (lengths min..max, items max_skip_count apart at most) per row,
// as TF, IDF (the weight where the n-gram occurs) or TFIDF ----
namespace epstack::cpu::ops {
using namespace impl;

bool tf_idf_vectorizer::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  return e == element_type::string || e == element_type::int32 || e == element_type::int64;
}
Result<compute_function> tf_idf_vectorizer::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  struct params {
    std::int64_t min_n, max_n, max_skip;
    std::string mode;
    std::vector<std::int64_t> counts, indexes, pool_ints;
    std::vector<std::string> pool_strings;
    std::vector<float> weights;
    std::int64_t width = 0;
  } p{attr_i(nd, "min_gram_length", 1), attr_i(nd, "max_gram_length", 1), attr_i(nd, "max_skip_count", 0),
      attr_s(nd, "mode", "TF"), attr_ints(nd, "ngram_counts"), attr_ints(nd, "ngram_indexes"), attr_ints(nd, "pool_int64s"),
      {}, attr_floats(nd, "weights"), 0};
  if (const auto* a = attr(nd, "pool_strings"))
    if (const auto* v = std::get_if<std::vector<std::string>>(&a->value)) p.pool_strings = *v;
  if (p.mode != "TF" && p.mode != "IDF" && p.mode != "TFIDF")
    return Status(errc::invalid_graph, cat("TfIdfVectorizer: mode '", p.mode, "' is not TF, IDF or TFIDF"));
  if (p.min_n < 1 || p.max_n < p.min_n || p.max_skip < 0) return Status(errc::invalid_graph, "TfIdfVectorizer: bad gram lengths or skip count");
  for (auto i : p.indexes) {
    if (i < 0) return Status(errc::invalid_graph, "TfIdfVectorizer: ngram_indexes must not be negative");
    p.width = std::max(p.width, i + 1);
  }
  for (auto c : p.counts)
    if (c < 0) return Status(errc::invalid_graph, "TfIdfVectorizer: ngram_counts must not be negative");
  if (!p.weights.empty() && p.weights.size() != p.indexes.size())
    return Status(errc::invalid_graph, "TfIdfVectorizer: one weight per n-gram is needed");
  return make_fn("TfIdfVectorizer", [p](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() != 1 && x.rank() != 2) return op_error("TfIdfVectorizer", "the input must be [C] or [N, C]");
    const bool strings = x.type() == element_type::string;
    const std::size_t pool_size = strings ? p.pool_strings.size() : p.pool_ints.size();
    // The pool's n-grams: (length, first pool item) -> output column, with the items as strings for lookup.
    std::map<std::vector<std::string>, std::int64_t> grams;
    std::size_t gram_no = 0;
    for (std::size_t len = 1; len <= p.counts.size(); ++len) {
      const auto begin = static_cast<std::size_t>(p.counts[len - 1]);
      const std::size_t end = len < p.counts.size() ? static_cast<std::size_t>(p.counts[len]) : pool_size;
      if (begin > end || end > pool_size || (end - begin) % len != 0) return op_error("TfIdfVectorizer", "ngram_counts do not fit the pool");
      for (std::size_t at = begin; at < end; at += len, ++gram_no) {
        if (gram_no >= p.indexes.size()) return op_error("TfIdfVectorizer", "fewer ngram_indexes than n-grams in the pool");
        std::vector<std::string> key;
        for (std::size_t k = 0; k < len; ++k) key.push_back(strings ? p.pool_strings[at + k] : std::to_string(p.pool_ints[at + k]));
        grams.emplace(std::move(key), gram_no);
      }
    }
    const std::int64_t rows = x.rank() == 1 ? 1 : x.sizes()[0], C = x.sizes()[x.rank() - 1];
    const auto item = [&](std::int64_t r, std::int64_t c) -> std::string {
      const std::size_t i = static_cast<std::size_t>(r * C + c);
      if (strings) return x.typed<std::string>()[i];
      return std::to_string(x.type() == element_type::int64 ? x.typed<std::int64_t>()[i] : x.typed<std::int32_t>()[i]);
    };
    tensor& y = x.rank() == 1 ? ctx.allocate_output(0, element_type::float32, {p.width})
                              : ctx.allocate_output(0, element_type::float32, {rows, p.width});
    float* out = y.typed<float>();
    std::fill(out, out + y.element_count(), 0.0f);
    std::vector<std::int64_t> count(p.indexes.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      std::fill(count.begin(), count.end(), 0);
      for (std::int64_t len = p.min_n; len <= p.max_n; ++len)
        for (std::int64_t skip = 0; skip <= (len == 1 ? 0 : p.max_skip); ++skip)  // unigrams once, whatever the skip
          for (std::int64_t s = 0; s + (len - 1) * (skip + 1) < C; ++s) {
            std::vector<std::string> key;
            for (std::int64_t k = 0; k < len; ++k) key.push_back(item(r, s + k * (skip + 1)));
            if (auto it = grams.find(key); it != grams.end()) ++count[static_cast<std::size_t>(it->second)];
          }
      for (std::size_t gi = 0; gi < count.size(); ++gi) {
        if (count[gi] == 0) continue;
        const float w = p.weights.empty() ? 1.0f : p.weights[gi];
        const float v = p.mode == "TF" ? static_cast<float>(count[gi]) : p.mode == "IDF" ? w : static_cast<float>(count[gi]) * w;
        out[r * p.width + p.indexes[gi]] = v;
      }
    }
    return {};
  });
}

}  // namespace epstack::cpu::ops
