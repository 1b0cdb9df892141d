#pragma once
/// @file model_zoo.hpp
/// @brief Small models built with the IR's own API, with deterministic weights: what the README's main job, the
/// examples and the tests run, so that none of them needs a model from outside the repository.

#include <epstack/model.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace epstack::zoo {

/// @brief splitmix64 at counter i+1 for `seed`, mapped to [-1, 1) with step 2^-23 (the rule of the benchmark inputs).
[[nodiscard]] inline float uniform_at(std::uint64_t seed, std::uint64_t i) noexcept {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<std::int64_t>(z >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
}

/// @brief A float tensor of `sizes` with values uniform in [-scale, scale), deterministic in `seed`.
[[nodiscard]] inline tensor random_tensor(std::initializer_list<std::int64_t> sizes, std::uint64_t seed, float scale) {
  tensor t(element_type::float32, sizes);
  float* p = t.typed<float>();
  for (std::size_t i = 0; i < t.element_count(); ++i) p[i] = scale * uniform_at(seed, i);
  return t;
}

/// @brief A multi-layer perceptron `input [batch, widths[0]] -> Gemm(transB=1) -> Relu -> ... -> Gemm -> logits`,
/// opset 13, with He-scaled deterministic weights; `batch` may be a symbol ("batch") or a number.
[[nodiscard]] inline model make_mlp(const std::vector<std::int64_t>& widths, dimension batch = dimension("batch"),
                                    std::uint64_t seed = 42) {
  model m;
  m.opsets = {{"", 13}};
  m.producer_name = "epstack.zoo";
  m.doc_string = "multi-layer perceptron built by epstack::zoo::make_mlp";
  m.metadata = {{"generator", "epstack::zoo::make_mlp"}};
  auto& g = m.graph;
  g.set_name("mlp");
  g.add_input("input", type_info::tensor_of(element_type::float32, shape{batch, widths.front()}));
  std::string x = "input";
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const auto in = widths[l], out = widths[l + 1];
    const std::string p = "layer" + std::to_string(l);
    const float he = std::sqrt(6.0f / static_cast<float>(in));
    g.add_initializer(p + ".weight", random_tensor({out, in}, seed * 1000 + 2 * l, he));
    g.add_initializer(p + ".bias", random_tensor({out}, seed * 1000 + 2 * l + 1, 0.1f));
    node gemm;
    gemm.name = "/" + p + "/Gemm";
    gemm.op_type = "Gemm";
    gemm.attributes.set("transB", std::int64_t{1});
    const bool last = l + 2 == widths.size();
    const std::string y = last ? std::string("logits") : p + ".gemm";
    g.add_node(std::move(gemm), {x, p + ".weight", p + ".bias"}, {y});
    x = y;
    if (!last) {
      node relu;
      relu.name = "/" + p + "/Relu";
      relu.op_type = "Relu";
      g.add_node(std::move(relu), {x}, {p + ".relu"});
      x = p + ".relu";
    }
  }
  g.add_output("logits", type_info::tensor_of(element_type::float32, shape{batch, widths.back()}));
  return m;
}

}  // namespace epstack::zoo
