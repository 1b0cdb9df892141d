// ai.onnx.ml kernels: TreeEnsemble-5, LabelEncoder-1/2/4, Binarizer-1, ArrayFeatureExtractor-1.
#include "row_util.hpp"

#include <unordered_map>

namespace epstack::cpu {
namespace impl {
namespace {

/// The elements of a float16, bfloat16, float or double tensor as doubles; nullopt for other types.
std::optional<std::vector<double>> real_values(const tensor& t) {
  std::optional<std::vector<double>> r;
  dispatch<float, double, float16, bfloat16>(t.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.typed<T>();
    r.emplace(t.element_count());
    for (std::size_t i = 0; i < t.element_count(); ++i) {
      if constexpr (is_half_v<T>) (*r)[i] = static_cast<double>(static_cast<float>(p[i]));
      else (*r)[i] = static_cast<double>(p[i]);
    }
  });
  return r;
}

std::string type_name(element_type e) { return std::string(to_string(e)); }

// ---------------------------------------------------------------------------------------------------------------
// TreeEnsemble

enum class branch : std::uint8_t { leq = 0, lt = 1, gte = 2, gt = 3, eq = 4, neq = 5, member = 6 };
enum class aggregate : std::int64_t { average = 0, sum = 1, min = 2, max = 3 };
enum class post : std::int64_t { none = 0, softmax = 1, logistic = 2, softmax_zero = 3, probit = 4 };

/// An interior node; a child >= 0 is a node index, a child < 0 is the leaf ~child.
struct tree_node {
  std::int64_t feature = 0;
  double split = 0;
  std::int32_t true_child = 0, false_child = 0;
  std::int32_t set = -1;  // index of the membership set (BRANCH_MEMBER)
  branch mode = branch::leq;
  bool missing_true = false;
};

struct tree_ensemble {
  std::vector<tree_node> nodes;
  std::vector<std::vector<double>> sets;  // sorted members, no NaN
  std::vector<double> leaf_weight;
  std::vector<std::int64_t> leaf_target;
  std::vector<std::int32_t> roots;
  std::int64_t n_targets = 0;
  std::int64_t max_feature = -1;
  aggregate agg = aggregate::sum;
  post transform = post::none;
};

bool goes_true(const tree_node& nd, const std::vector<std::vector<double>>& sets, double x) {
  if (nd.missing_true && std::isnan(x)) return true;
  switch (nd.mode) {
    case branch::leq: return x <= nd.split;
    case branch::lt: return x < nd.split;
    case branch::gte: return x >= nd.split;
    case branch::gt: return x > nd.split;
    case branch::eq: return x == nd.split;
    case branch::neq: return x != nd.split;
    case branch::member: {
      const auto& s = sets[static_cast<std::size_t>(nd.set)];
      return std::binary_search(s.begin(), s.end(), x);
    }
  }
  return false;
}

/// The inverse error function: a rational first guess refined by Newton steps on std::erf.
double erf_inv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return std::numeric_limits<double>::quiet_NaN();
  if (y == 1) return std::numeric_limits<double>::infinity();
  if (y == -1) return -std::numeric_limits<double>::infinity();
  // Winitzki's approximation (relative error about 2e-3), then Newton: x -= (erf(x) - y) / erf'(x).
  constexpr double a = 0.147, pi = 3.14159265358979323846;
  const double ln = std::log(1 - y * y);
  const double t = 2 / (pi * a) + ln / 2;
  double x = std::copysign(std::sqrt(std::sqrt(t * t - ln / a) - t), y);
  for (int k = 0; k < 4; ++k) {
    const double d = 2 / std::sqrt(pi) * std::exp(-x * x);
    if (d == 0) break;
    x -= (std::erf(x) - y) / d;
  }
  return x;
}

void post_transform(post p, double* v, std::int64_t n) {
  switch (p) {
    case post::none: return;
    case post::logistic:
      for (std::int64_t i = 0; i < n; ++i) v[i] = 1 / (1 + std::exp(-v[i]));
      return;
    case post::probit:
      for (std::int64_t i = 0; i < n; ++i) v[i] = std::sqrt(2.0) * erf_inv(2 * v[i] - 1);
      return;
    case post::softmax:
    case post::softmax_zero: {
      if (n == 0) return;
      const bool zero = p == post::softmax_zero;
      double m = v[0], s = 0;
      for (std::int64_t i = 1; i < n; ++i) m = std::max(m, v[i]);
      for (std::int64_t i = 0; i < n; ++i) {
        v[i] = zero && v[i] == 0 ? 0.0 : std::exp(v[i] - m);
        s += v[i];
      }
      if (s > 0)
        for (std::int64_t i = 0; i < n; ++i) v[i] /= s;
      return;
    }
  }
}

Result<tree_ensemble> parse_tree_ensemble(const node& nd) {
  constexpr std::string_view op = "TreeEnsemble";
  const auto err = [&](std::string what) { return invalid(cat(op, ": ", what)); };
  const auto ints_attr = [&](std::string_view name, bool required, std::vector<std::int64_t>& out) -> Status {
    const auto* a = attr(nd, name);
    if (a == nullptr) return required ? err(cat("the attribute '", name, "' is required")) : Status{};
    const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value);
    if (v == nullptr) return err(cat("attribute '", name, "' must be a list of ints"));
    out = *v;
    return {};
  };
  const auto real_tensor_attr = [&](std::string_view name, bool required, std::vector<double>& out) -> Status {
    const auto* a = attr(nd, name);
    if (a == nullptr) return required ? err(cat("the attribute '", name, "' is required")) : Status{};
    const auto* t = std::get_if<tensor>(&a->value);
    if (t == nullptr) return err(cat("attribute '", name, "' must be a tensor"));
    auto v = real_values(*t);
    if (!v) return err(cat("attribute '", name, "' must be a float, double or float16 tensor, got ", type_name(t->type())));
    out = std::move(*v);
    return {};
  };

  std::vector<std::int64_t> features, true_ids, false_ids, true_leafs, false_leafs, missing, targets, roots;
  std::vector<double> splits, weights, members;
  EPSTACK_RETURN_IF_ERROR(ints_attr("nodes_featureids", true, features));
  EPSTACK_RETURN_IF_ERROR(ints_attr("nodes_truenodeids", true, true_ids));
  EPSTACK_RETURN_IF_ERROR(ints_attr("nodes_falsenodeids", true, false_ids));
  EPSTACK_RETURN_IF_ERROR(ints_attr("nodes_trueleafs", true, true_leafs));
  EPSTACK_RETURN_IF_ERROR(ints_attr("nodes_falseleafs", true, false_leafs));
  EPSTACK_RETURN_IF_ERROR(ints_attr("nodes_missing_value_tracks_true", false, missing));
  EPSTACK_RETURN_IF_ERROR(ints_attr("leaf_targetids", true, targets));
  EPSTACK_RETURN_IF_ERROR(ints_attr("tree_roots", true, roots));
  EPSTACK_RETURN_IF_ERROR(real_tensor_attr("nodes_splits", true, splits));
  EPSTACK_RETURN_IF_ERROR(real_tensor_attr("leaf_weights", true, weights));
  EPSTACK_RETURN_IF_ERROR(real_tensor_attr("membership_values", false, members));
  const auto* modes_attr = attr_t(nd, "nodes_modes");
  if (modes_attr == nullptr) return err("the attribute 'nodes_modes' is required (a uint8 tensor)");
  if (modes_attr->type() != element_type::uint8)
    return err(cat("attribute 'nodes_modes' must be a uint8 tensor, got ", type_name(modes_attr->type())));

  const std::size_t n = features.size();
  const auto same_length = [&](std::string_view name, std::size_t len) -> Status {
    if (len != n)
      return err(cat("attribute '", name, "' has ", std::to_string(len), " entries, nodes_featureids has ", std::to_string(n)));
    return {};
  };
  EPSTACK_RETURN_IF_ERROR(same_length("nodes_truenodeids", true_ids.size()));
  EPSTACK_RETURN_IF_ERROR(same_length("nodes_falsenodeids", false_ids.size()));
  EPSTACK_RETURN_IF_ERROR(same_length("nodes_trueleafs", true_leafs.size()));
  EPSTACK_RETURN_IF_ERROR(same_length("nodes_falseleafs", false_leafs.size()));
  EPSTACK_RETURN_IF_ERROR(same_length("nodes_splits", splits.size()));
  EPSTACK_RETURN_IF_ERROR(same_length("nodes_modes", modes_attr->element_count()));
  if (!missing.empty()) EPSTACK_RETURN_IF_ERROR(same_length("nodes_missing_value_tracks_true", missing.size()));
  if (weights.size() != targets.size())
    return err(cat("attribute 'leaf_weights' has ", std::to_string(weights.size()), " entries, leaf_targetids has ",
                   std::to_string(targets.size())));
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) ||
      weights.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    return err("too many nodes or leaves");

  tree_ensemble te;
  te.leaf_weight = std::move(weights);
  te.leaf_target = std::move(targets);
  const std::int64_t agg = attr_i(nd, "aggregate_function", 1), pt = attr_i(nd, "post_transform", 0);
  if (agg < 0 || agg > 3)
    return err(cat("attribute 'aggregate_function' must be 0 (AVERAGE), 1 (SUM), 2 (MIN) or 3 (MAX), got ", std::to_string(agg)));
  if (pt < 0 || pt > 4)
    return err(cat("attribute 'post_transform' must be 0 (NONE), 1 (SOFTMAX), 2 (LOGISTIC), 3 (SOFTMAX_ZERO) or 4 (PROBIT), got ",
                   std::to_string(pt)));
  te.agg = static_cast<aggregate>(agg);
  te.transform = static_cast<post>(pt);
  std::int64_t max_target = -1;
  for (std::size_t i = 0; i < te.leaf_target.size(); ++i) {
    if (te.leaf_target[i] < 0)
      return err(cat("attribute 'leaf_targetids' has the negative target ", std::to_string(te.leaf_target[i])));
    max_target = std::max(max_target, te.leaf_target[i]);
  }
  te.n_targets = attr_i(nd, "n_targets", max_target + 1);
  if (te.n_targets < 0 || te.n_targets > (std::int64_t{1} << 24)) return err(cat("attribute 'n_targets' is invalid: ", std::to_string(te.n_targets)));
  if (max_target >= te.n_targets)
    return err(cat("attribute 'leaf_targetids' has target ", std::to_string(max_target), ", outside [0, n_targets = ",
                   std::to_string(te.n_targets), ")"));

  // Membership sets: runs of membership_values delimited by NaN, in the order of the BRANCH_MEMBER nodes.
  {
    std::vector<double> cur;
    bool open = false;
    for (double v : members) {
      if (std::isnan(v)) {
        std::sort(cur.begin(), cur.end());
        te.sets.push_back(std::move(cur));
        cur.clear();
        open = false;
      } else {
        cur.push_back(v);
        open = true;
      }
    }
    if (open) {  // the last set without its closing NaN
      std::sort(cur.begin(), cur.end());
      te.sets.push_back(std::move(cur));
    }
  }

  const std::uint8_t* modes = modes_attr->typed<std::uint8_t>();
  const auto n32 = static_cast<std::int64_t>(n), l32 = static_cast<std::int64_t>(te.leaf_weight.size());
  std::size_t member_count = 0;
  te.nodes.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    tree_node& t = te.nodes[i];
    if (modes[i] > 6)
      return err(cat("attribute 'nodes_modes' has the invalid mode ", std::to_string(modes[i]), " at node ", std::to_string(i)));
    t.mode = static_cast<branch>(modes[i]);
    if (features[i] < 0) return err(cat("attribute 'nodes_featureids' has the negative feature ", std::to_string(features[i])));
    t.feature = features[i];
    te.max_feature = std::max(te.max_feature, t.feature);
    t.split = splits[i];
    t.missing_true = !missing.empty() && missing[i] != 0;
    if (t.mode == branch::member) {
      if (member_count >= te.sets.size())
        return err(cat("attribute 'membership_values' has ", std::to_string(te.sets.size()),
                       " NaN-delimited sets, fewer than the BRANCH_MEMBER nodes"));
      t.set = static_cast<std::int32_t>(member_count++);
    }
    const auto child = [&](std::int64_t id, std::int64_t leaf, std::string_view side, std::int32_t& out) -> Status {
      if (leaf != 0) {
        if (id < 0 || id >= l32)
          return err(cat("attribute 'nodes_", side, "nodeids' has leaf ", std::to_string(id), " at node ", std::to_string(i),
                         ", outside [0, ", std::to_string(l32), ")"));
        out = ~static_cast<std::int32_t>(id);
      } else {
        if (id < 0 || id >= n32)
          return err(cat("attribute 'nodes_", side, "nodeids' has node ", std::to_string(id), " at node ", std::to_string(i),
                         ", outside [0, ", std::to_string(n32), ")"));
        out = static_cast<std::int32_t>(id);
      }
      return {};
    };
    EPSTACK_RETURN_IF_ERROR(child(true_ids[i], true_leafs[i], "true", t.true_child));
    EPSTACK_RETURN_IF_ERROR(child(false_ids[i], false_leafs[i], "false", t.false_child));
  }
  if (member_count != te.sets.size())
    return err(cat("attribute 'membership_values' has ", std::to_string(te.sets.size()), " NaN-delimited sets for ",
                   std::to_string(member_count), " BRANCH_MEMBER nodes"));
  if (roots.empty()) return err("attribute 'tree_roots' is empty");
  for (auto r : roots) {
    if (r < 0 || r >= n32) return err(cat("attribute 'tree_roots' has node ", std::to_string(r), ", outside [0, ", std::to_string(n32), ")"));
    te.roots.push_back(static_cast<std::int32_t>(r));
  }
  // No cycles: a depth-first walk from every root (colour 1: on the current path, 2: done).
  std::vector<std::uint8_t> colour(n, 0);
  std::vector<std::pair<std::int32_t, int>> stack;  // node, children visited
  for (auto r : te.roots) {
    if (colour[static_cast<std::size_t>(r)] == 2) continue;
    stack.assign(1, {r, 0});
    colour[static_cast<std::size_t>(r)] = 1;
    while (!stack.empty()) {
      auto& [id, k] = stack.back();
      if (k == 2) {
        colour[static_cast<std::size_t>(id)] = 2;
        stack.pop_back();
        continue;
      }
      const auto& t = te.nodes[static_cast<std::size_t>(id)];
      const std::int32_t c = k++ == 0 ? t.true_child : t.false_child;
      if (c < 0) continue;
      if (colour[static_cast<std::size_t>(c)] == 1)
        return err(cat("the trees have a cycle through node ", std::to_string(c), " (nodes_truenodeids / nodes_falsenodeids)"));
      if (colour[static_cast<std::size_t>(c)] == 0) {
        colour[static_cast<std::size_t>(c)] = 1;
        stack.emplace_back(c, 0);
      }
    }
  }
  return te;
}

template <class T>
Status tree_ensemble_compute(compute_context& ctx, const tree_ensemble& te) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>)
    return op_error("TreeEnsemble", cat("input X has element type ", type_name(x.type()), ", expected ", type_name(element_type_of_v<T>)));
  if (x.rank() != 2) return op_error("TreeEnsemble", cat("input X must be [N, F], got shape ", dims_string(x.sizes())));
  const std::int64_t rows = x.sizes()[0], features = x.sizes()[1];
  if (te.max_feature >= features)
    return op_error("TreeEnsemble", cat("attribute 'nodes_featureids' uses feature ", std::to_string(te.max_feature),
                                        " but input X has ", std::to_string(features), " features"));
  const std::int64_t nt = te.n_targets;
  tensor& y = ctx.allocate_output(0, x.type(), {rows, nt});
  const T* px = x.typed<T>();
  T* py = y.typed<T>();
  double init = 0;
  if (te.agg == aggregate::min || te.agg == aggregate::max) {
    // The reference starts MIN at the type's largest finite value and MAX at its lowest.
    double big = is_half_v<T> ? 65504.0 : static_cast<double>(std::numeric_limits<std::conditional_t<is_half_v<T>, float, T>>::max());
    if constexpr (std::is_same_v<T, bfloat16>) big = 3.3895313892515355e38;
    init = te.agg == aggregate::min ? big : -big;
  }
  const auto value = [](T v) {
    if constexpr (is_half_v<T>) return static_cast<double>(static_cast<float>(v));
    else return static_cast<double>(v);
  };
  const std::size_t cost = te.roots.size() * 8 + static_cast<std::size_t>(nt);
  const auto pieces = piece_count(ctx, static_cast<std::size_t>(rows), cost);
  std::vector<double> acc_all(pieces * static_cast<std::size_t>(nt));
  for_pieces(ctx, static_cast<std::size_t>(rows), pieces, [&](std::size_t p, std::size_t r0, std::size_t r1) {
    double* acc = acc_all.data() + p * static_cast<std::size_t>(nt);
    for (std::size_t r = r0; r < r1; ++r) {
      const T* row = px + static_cast<std::int64_t>(r) * features;
      std::fill(acc, acc + nt, init);
      for (const std::int32_t root : te.roots) {
        std::int32_t at = root;
        while (at >= 0) {
          const tree_node& nd = te.nodes[static_cast<std::size_t>(at)];
          at = goes_true(nd, te.sets, value(row[nd.feature])) ? nd.true_child : nd.false_child;
        }
        const auto leaf = static_cast<std::size_t>(~at);
        const double w = te.leaf_weight[leaf];
        double& a = acc[te.leaf_target[leaf]];
        switch (te.agg) {
          case aggregate::sum:
          case aggregate::average: a += w; break;
          case aggregate::min: a = std::min(a, w); break;
          case aggregate::max: a = std::max(a, w); break;
        }
      }
      if (te.agg == aggregate::average)
        for (std::int64_t t = 0; t < nt; ++t) acc[t] /= static_cast<double>(te.roots.size());
      post_transform(te.transform, acc, nt);
      T* out = py + static_cast<std::int64_t>(r) * nt;
      for (std::int64_t t = 0; t < nt; ++t) {
        if constexpr (is_half_v<T>) out[t] = T(static_cast<float>(acc[t]));
        else out[t] = static_cast<T>(acc[t]);
      }
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// LabelEncoder

/// A key of the map: strings as themselves, integers as int64, reals as the bits of a double with every NaN alike
/// and -0 as +0.
using int_key = std::int64_t;
std::uint64_t real_key(double v) {
  if (std::isnan(v)) return 0x7ff8000000000000ULL;
  if (v == 0) return 0;
  return std::bit_cast<std::uint64_t>(v);
}

struct label_map {
  element_type key_type = element_type::undefined;
  element_type value_type = element_type::undefined;
  std::unordered_map<std::string, std::size_t> str_keys;
  std::unordered_map<int_key, std::size_t> int_keys;
  std::unordered_map<std::uint64_t, std::size_t> real_keys;
  tensor values;        // 1-D, value_type
  tensor default_value; // one element, value_type
};

bool is_label_type(element_type e) {
  return type_in<std::string, std::int64_t, float, std::int32_t, std::int16_t, double>(e);
}

/// A 1-D tensor of `type` with the given values converted.
template <class T, class V>
tensor vector_tensor(const std::vector<V>& v) {
  const std::int64_t d = static_cast<std::int64_t>(v.size());
  tensor t(element_type_of_v<T>, std::span<const std::int64_t>(&d, 1));
  T* p = t.typed<T>();
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
  return t;
}
template <class T>
tensor one(T v) {
  const std::int64_t d = 1;
  tensor t(element_type_of_v<T>, std::span<const std::int64_t>(&d, 1));
  *t.typed<T>() = std::move(v);
  return t;
}

/// A scalar converted to a one-element tensor of `type` (the default_* attributes for values of another type).
tensor default_of(element_type type, const node& nd) {
  tensor t;
  dispatch<std::string, std::int64_t, float, std::int32_t, std::int16_t, double>(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, std::string>) t = one<std::string>(attr_s(nd, "default_string", "_Unused"));
    else if constexpr (std::is_integral_v<T>) t = one<T>(static_cast<T>(attr_i(nd, "default_int64", -1)));
    else t = one<T>(static_cast<T>(attr_f(nd, "default_float", -0.0f)));
  });
  return t;
}

Result<label_map> parse_label_encoder(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const auto err = [](std::string what) { return invalid(cat("LabelEncoder: ", what)); };
  label_map m;
  const element_type in = in_type(g, n, 0);
  const int ver = opset_of(nd);
  tensor keys;  // 1-D
  std::string keys_name, values_name;
  if (ver < 2) {
    std::vector<std::string> classes;
    if (const auto* a = attr(nd, "classes_strings")) {
      const auto* v = std::get_if<std::vector<std::string>>(&a->value);
      if (v == nullptr) return err("attribute 'classes_strings' must be a list of strings");
      classes = *v;
    }
    if (in == element_type::string) {  // string -> its index in classes_strings
      m.key_type = element_type::string;
      m.value_type = element_type::int64;
      for (std::size_t i = 0; i < classes.size(); ++i) m.str_keys.emplace(classes[i], i);  // the first one found
      std::vector<std::int64_t> idx(classes.size());
      for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i);
      m.values = vector_tensor<std::int64_t>(idx);
      m.default_value = one<std::int64_t>(attr_i(nd, "default_int64", -1));
    } else if (in == element_type::int64) {  // index -> classes_strings[index]
      m.key_type = element_type::int64;
      m.value_type = element_type::string;
      for (std::size_t i = 0; i < classes.size(); ++i) m.int_keys.emplace(static_cast<int_key>(i), i);
      m.values = vector_tensor<std::string>(classes);
      m.default_value = one<std::string>(attr_s(nd, "default_string", "_Unused"));
    } else {
      return err(cat("opset 1 maps string or int64 input X, got ", type_name(in)));
    }
  } else {
    // keys_* and values_*: exactly one of each.
    const auto pick = [&](std::string_view kind, tensor& out, std::string& name) -> Status {
      int found = 0;
      for (const char* suffix : {"strings", "int64s", "floats", "tensor"}) {
        const std::string an = cat(kind, "_", suffix);
        const auto* a = attr(nd, an);
        if (a == nullptr) continue;
        ++found;
        name = an;
        const std::string_view sfx = suffix;
        const auto wrong_kind = [&] {
          return err(cat("attribute '", an, "' must be ",
                         sfx == "strings" ? "a list of strings" : sfx == "int64s" ? "a list of ints" : sfx == "floats" ? "a list of floats" : "a tensor",
                         ", got ", std::string(to_string(a->kind()))));
        };
        if (const auto* v = std::get_if<std::vector<std::string>>(&a->value)) {
          if (sfx != "strings") return wrong_kind();
          out = vector_tensor<std::string>(*v);
        } else if (const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value)) {
          if (sfx != "int64s") return wrong_kind();
          out = vector_tensor<std::int64_t>(*v);
        } else if (const auto* v = std::get_if<std::vector<float>>(&a->value)) {
          if (sfx != "floats") return wrong_kind();
          out = vector_tensor<float>(*v);
        } else if (const auto* t = std::get_if<tensor>(&a->value)) {
          if (sfx != "tensor") return wrong_kind();
          if (ver < 4) return err(cat("attribute '", an, "' needs ai.onnx.ml opset 4"));
          if (!is_label_type(t->type()))
            return err(cat("attribute '", an, "' must hold string, int64, int32, int16, float or double, got ", type_name(t->type())));
          if (t->rank() > 1) return err(cat("attribute '", an, "' must be a 1-D tensor, got shape ", dims_string(t->sizes())));
          const std::int64_t d = static_cast<std::int64_t>(t->element_count());
          out = t->clone().reshaped(std::span<const std::int64_t>(&d, 1));
        } else if (a->value.index() == 0) {  // an empty list reads as no kind: an empty map of the named type
          if (sfx == "strings") out = vector_tensor<std::string>(std::vector<std::string>{});
          else if (sfx == "int64s") out = vector_tensor<std::int64_t>(std::vector<std::int64_t>{});
          else if (sfx == "floats") out = vector_tensor<float>(std::vector<float>{});
          else return err(cat("attribute '", an, "' is empty"));
        } else {
          return wrong_kind();
        }
      }
      if (found != 1)
        return err(cat("exactly one of the attributes ", kind, "_strings, ", kind, "_int64s, ", kind, "_floats",
                       ver >= 4 ? cat(", ", kind, "_tensor") : std::string(), " must be set, found ", std::to_string(found)));
      return {};
    };
    EPSTACK_RETURN_IF_ERROR(pick("keys", keys, keys_name));
    EPSTACK_RETURN_IF_ERROR(pick("values", m.values, values_name));
    if (keys.element_count() != m.values.element_count())
      return err(cat("attribute '", keys_name, "' has ", std::to_string(keys.element_count()), " entries but '", values_name,
                     "' has ", std::to_string(m.values.element_count())));
    m.key_type = keys.type();
    m.value_type = m.values.type();
    if (in != element_type::undefined && in != m.key_type)
      return err(cat("input X has element type ", type_name(in), " but attribute '", keys_name, "' holds ", type_name(m.key_type)));
    dispatch<std::string, std::int64_t, float, std::int32_t, std::int16_t, double>(m.key_type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = keys.typed<T>();
      for (std::size_t i = 0; i < keys.element_count(); ++i) {  // a repeated key: the last one wins
        if constexpr (std::is_same_v<T, std::string>) m.str_keys[p[i]] = i;
        else if constexpr (std::is_integral_v<T>) m.int_keys[static_cast<int_key>(p[i])] = i;
        else m.real_keys[real_key(static_cast<double>(p[i]))] = i;
      }
    });
    if (const auto* a = attr(nd, "default_tensor")) {
      const auto* t = std::get_if<tensor>(&a->value);
      if (t == nullptr) return err("attribute 'default_tensor' must be a tensor");
      if (t->type() != m.value_type)
        return err(cat("attribute 'default_tensor' holds ", type_name(t->type()), " but attribute '", values_name, "' holds ",
                       type_name(m.value_type)));
      if (t->element_count() != 1)
        return err(cat("attribute 'default_tensor' must have one element, got shape ", dims_string(t->sizes())));
      const std::int64_t d = 1;
      m.default_value = t->clone().reshaped(std::span<const std::int64_t>(&d, 1));
    } else {
      m.default_value = default_of(m.value_type, nd);
    }
  }
  const element_type out = out_type(g, n, 0);
  if (out != element_type::undefined && out != m.value_type)
    return err(cat("output Y has element type ", type_name(out), " but the values hold ", type_name(m.value_type)));
  return m;
}

template <class K, class V>
Status label_encode(compute_context& ctx, const label_map& m) {
  const tensor& x = ctx.input(0);
  if (x.type() != m.key_type)
    return op_error("LabelEncoder", cat("input X has element type ", type_name(x.type()), ", expected ", type_name(m.key_type)));
  tensor& y = ctx.allocate_output(0, m.value_type, x.sizes());
  const K* px = x.typed<K>();
  V* py = y.typed<V>();
  const V* vals = m.values.typed<V>();
  const V& def = *m.default_value.typed<V>();
  for (std::size_t i = 0; i < x.element_count(); ++i) {
    std::size_t idx = SIZE_MAX;
    if constexpr (std::is_same_v<K, std::string>) {
      if (auto it = m.str_keys.find(px[i]); it != m.str_keys.end()) idx = it->second;
    } else if constexpr (std::is_integral_v<K>) {
      if (auto it = m.int_keys.find(static_cast<int_key>(px[i])); it != m.int_keys.end()) idx = it->second;
    } else {
      if (auto it = m.real_keys.find(real_key(static_cast<double>(px[i]))); it != m.real_keys.end()) idx = it->second;
    }
    py[i] = idx == SIZE_MAX ? def : vals[idx];
  }
  return {};
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

// ---- TreeEnsemble (ai.onnx.ml 5): every tree walked to a leaf, leaf weights aggregated per target, transformed ----
bool ml_tree_ensemble::supports(const graph& g, node_id n) {
  return type_in<float, double, float16>(in_type(g, n, 0));
}
Result<compute_function> ml_tree_ensemble::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(auto parsed, parse_tree_ensemble(g.node(n)));
  auto te = std::make_shared<const tree_ensemble>(std::move(parsed));
  Result<compute_function> r = invalid(cat("TreeEnsemble: input X must be float, double or float16, got ", type_name(in_type(g, n, 0))));
  dispatch<float, double, float16>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("TreeEnsemble", [te](compute_context& ctx) { return tree_ensemble_compute<T>(ctx, *te); });
  });
  return r;
}

// ---- LabelEncoder (ai.onnx.ml 1, 2, 4): each element mapped through keys -> values, or to the default ----
bool ml_label_encoder::supports(const graph& g, node_id n) { return is_label_type(in_type(g, n, 0)); }
Result<compute_function> ml_label_encoder::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(auto parsed, parse_label_encoder(g, n));
  auto m = std::make_shared<const label_map>(std::move(parsed));
  Result<compute_function> r = invalid("LabelEncoder: unsupported key or value type");
  dispatch<std::string, std::int64_t, float, std::int32_t, std::int16_t, double>(m->key_type, [&](auto ktag) {
    dispatch<std::string, std::int64_t, float, std::int32_t, std::int16_t, double>(m->value_type, [&](auto vtag) {
      using K = typename decltype(ktag)::type;
      using V = typename decltype(vtag)::type;
      r = make_fn("LabelEncoder", [m](compute_context& ctx) { return label_encode<K, V>(ctx, *m); });
    });
  });
  return r;
}

// ---- Binarizer (ai.onnx.ml 1): Y = X > threshold ? 1 : 0 ----
bool ml_binarizer::supports(const graph& g, node_id n) {
  return type_in<float, double, std::int64_t, std::int32_t>(in_type(g, n, 0));
}
Result<compute_function> ml_binarizer::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (const auto* a = attr(nd, "threshold"); a != nullptr && !std::holds_alternative<float>(a->value))
    return invalid("Binarizer: attribute 'threshold' must be a float");
  const double threshold = attr_f(nd, "threshold", 0.0f);
  Result<compute_function> r = invalid("Binarizer: unsupported element type");
  dispatch<float, double, std::int64_t, std::int32_t>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Binarizer", [threshold](compute_context& ctx) -> Status {
      const tensor& x = ctx.input(0);
      if (x.type() != element_type_of_v<T>)
        return op_error("Binarizer", cat("input X has element type ", type_name(x.type()), ", expected ", type_name(element_type_of_v<T>)));
      tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
      const T* px = x.typed<T>();
      T* py = y.typed<T>();
      parallel_elements(ctx, x.element_count(), [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) py[i] = static_cast<double>(px[i]) > threshold ? T(1) : T(0);
      });
      return {};
    });
  });
  return r;
}

// ---- ArrayFeatureExtractor (ai.onnx.ml 1): Z = X[..., Y] (1-D X gives [1, len(Y)]) ----
bool ml_array_feature_extractor::supports(const graph& g, node_id n) {
  return type_in<float, double, std::int64_t, std::int32_t, std::string>(in_type(g, n, 0)) &&
         type_in<std::int64_t, std::int32_t>(in_type(g, n, 1));
}
Result<compute_function> ml_array_feature_extractor::compile(const graph& g, node_id n) {
  Result<compute_function> r = invalid("ArrayFeatureExtractor: unsupported element type");
  dispatch<float, double, std::int64_t, std::int32_t, std::string>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("ArrayFeatureExtractor", [](compute_context& ctx) -> Status {
      const tensor& x = ctx.input(0);
      const tensor& yi = ctx.input(1);
      if (x.type() != element_type_of_v<T>)
        return op_error("ArrayFeatureExtractor", cat("input X has element type ", type_name(x.type()), ", expected ",
                                                     type_name(element_type_of_v<T>)));
      if (yi.empty()) return op_error("ArrayFeatureExtractor", "input Y (the indices) is missing");
      if (x.rank() == 0) return op_error("ArrayFeatureExtractor", "input X must have rank >= 1, got a scalar");
      const std::vector<std::int64_t> idx = to_int64s(yi);
      const std::int64_t last = x.sizes()[x.rank() - 1];
      for (std::size_t i = 0; i < idx.size(); ++i)
        if (idx[i] < 0 || idx[i] >= last)
          return op_error("ArrayFeatureExtractor", cat("input Y has index ", std::to_string(idx[i]), " (element ", std::to_string(i),
                                                       "), outside [0, ", std::to_string(last), ") of X's last dimension"));
      const auto k = static_cast<std::int64_t>(idx.size());
      dims_t out;
      if (x.rank() == 1) out = {1, k};
      else {
        out.assign(x.sizes().begin(), x.sizes().end() - 1);
        out.push_back(k);
      }
      tensor& z = ctx.allocate_output(0, x.type(), out);
      const T* px = x.typed<T>();
      T* pz = z.typed<T>();
      const std::int64_t rows = last == 0 ? 0 : static_cast<std::int64_t>(x.element_count()) / last;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < k; ++j) pz[r * k + j] = px[r * last + idx[static_cast<std::size_t>(j)]];
      return {};
    });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu
