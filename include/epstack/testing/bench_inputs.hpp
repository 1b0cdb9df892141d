#pragma once
/// @file bench_inputs.hpp
/// @brief Deterministic benchmark inputs by the rule the ONNX Runtime peer harness uses (shared/bench/inputs.md):
/// each input's values depend only on its name, element type and shape, so two engines can be compared on
/// bit-identical inputs. seed = FNV-1a64(name) XOR S; element i takes the splitmix64 output at counter i + 1.

#include <epstack/core/errors.hpp>
#include <epstack/core/tensor.hpp>
#include <epstack/core/type_info.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace epstack::bench {

/// FNV-1a 64-bit hash of the UTF-8 bytes of `s`.
[[nodiscard]] constexpr std::uint64_t fnv1a64(std::string_view s) noexcept {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}
/// The splitmix64 output at counter i + 1 for `seed` (i is the 0-based element index).
[[nodiscard]] constexpr std::uint64_t splitmix64_at(std::uint64_t seed, std::uint64_t i) noexcept {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Options of the input rule: the global seed S, ID_MAX, and the values of symbolic dimensions.
struct input_rule {
  std::uint64_t seed = 0;
  std::uint64_t id_max = 100;
  std::map<std::string, std::int64_t, std::less<>> dims{{"batch", 1}, {"seq", 128}, {"N", 1}};
};

/// @brief The concrete sizes of an input declared with `shape`: symbolic dims from `rule.dims`, unknown ones 1
/// (`warnings` says which).
[[nodiscard]] inline std::vector<std::int64_t> resolve_sizes(const std::string& name, const shape& s, const input_rule& rule,
                                                             std::vector<std::string>* warnings = nullptr) {
  std::vector<std::int64_t> r;
  for (std::size_t i = 0; i < s.rank(); ++i) {
    const auto& d = s[i];
    if (d.is_known() && d.value > 0) r.push_back(d.value);
    else if (auto it = rule.dims.find(d.param); !d.param.empty() && it != rule.dims.end()) r.push_back(it->second);
    else {
      r.push_back(1);
      if (warnings != nullptr)
        warnings->push_back("input '" + name + "' axis " + std::to_string(i) + ": symbolic dim '" + d.param +
                            "' not in --dims, using 1");
    }
  }
  return r;
}

/// @brief The input named `name` of element type `type` and concrete `sizes`, by the rule. invalid_argument for an
/// element type the rule does not define (float16, bfloat16, string, ...).
[[nodiscard]] inline Result<tensor> make_input(const std::string& name, element_type type, std::span<const std::int64_t> sizes,
                                               const input_rule& rule = {}) {
  const std::uint64_t seed = fnv1a64(name) ^ rule.seed;
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool mask = lower.find("mask") != std::string::npos;
  tensor t = tensor::uninitialized(type, sizes);
  const std::size_t n = t.element_count();
  const auto z = [&](std::size_t i) { return splitmix64_at(seed, i); };
  const auto fill_int = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    for (std::size_t i = 0; i < n; ++i) p[i] = mask ? T(1) : static_cast<T>(z(i) % rule.id_max);
  };
  switch (type) {
    case element_type::float32: {
      float* p = t.typed<float>();
      for (std::size_t i = 0; i < n; ++i)
        p[i] = static_cast<float>(static_cast<std::int32_t>(z(i) >> 40) - 8388608) / 8388608.0f;
      break;
    }
    case element_type::float64: {
      double* p = t.typed<double>();
      for (std::size_t i = 0; i < n; ++i)
        p[i] = static_cast<double>(static_cast<std::int32_t>(z(i) >> 40) - 8388608) / 8388608.0;
      break;
    }
    case element_type::int64: fill_int(t.typed<std::int64_t>()); break;
    case element_type::uint64: fill_int(t.typed<std::uint64_t>()); break;
    case element_type::int32: fill_int(t.typed<std::int32_t>()); break;
    case element_type::uint32: fill_int(t.typed<std::uint32_t>()); break;
    case element_type::int16: fill_int(t.typed<std::int16_t>()); break;
    case element_type::uint16: fill_int(t.typed<std::uint16_t>()); break;
    case element_type::uint8: {
      auto* p = t.typed<std::uint8_t>();
      for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(z(i) >> 56);
      break;
    }
    case element_type::int8: {
      auto* p = t.typed<std::int8_t>();
      for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::int8_t>(static_cast<int>(z(i) >> 56) - 128);
      break;
    }
    case element_type::boolean: {
      bool* p = t.typed<bool>();
      for (std::size_t i = 0; i < n; ++i) p[i] = mask || (z(i) >> 63) != 0;
      break;
    }
    default:
      return Status(errc::invalid_argument, "input '" + name + "': element type " + std::string(to_string(type)) +
                                                " is not defined by the benchmark input rule");
  }
  return t;
}

}  // namespace epstack::bench
