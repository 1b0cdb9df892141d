#pragma once
/// @file shape.hpp
/// @brief Shapes whose dimensions are known values, symbolic names (`dim_param`) or unknown.

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace epstack {

/// @brief One dimension: a value, a symbol (e.g. "batch"), or neither (unknown). ONNX's `TensorShapeProto.Dimension`.
struct dimension {
  std::int64_t value = -1;  ///< >= 0 when known.
  std::string param;        ///< the symbol when symbolic.
  std::string denotation;   ///< ONNX dimension denotation, kept for round trips.

  dimension() = default;
  dimension(std::int64_t v) : value(v) {}  // NOLINT(google-explicit-constructor)
  dimension(std::string symbol) : param(std::move(symbol)) {}  // NOLINT(google-explicit-constructor)
  dimension(const char* symbol) : param(symbol) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool is_known() const noexcept { return value >= 0; }
  [[nodiscard]] bool is_symbolic() const noexcept { return value < 0 && !param.empty(); }
  friend bool operator==(const dimension&, const dimension&) = default;
};

/// @brief A shape with possibly symbolic dimensions. A scalar has rank 0.
class shape {
 public:
  shape() = default;
  shape(std::initializer_list<dimension> dims) : dims_(dims) {}
  explicit shape(std::vector<dimension> dims) : dims_(std::move(dims)) {}
  /// From concrete sizes.
  [[nodiscard]] static shape of(std::span<const std::int64_t> sizes) {
    shape s;
    s.dims_.assign(sizes.begin(), sizes.end());
    return s;
  }

  [[nodiscard]] std::size_t rank() const noexcept { return dims_.size(); }
  [[nodiscard]] const dimension& operator[](std::size_t i) const { return dims_[i]; }
  [[nodiscard]] dimension& operator[](std::size_t i) { return dims_[i]; }
  [[nodiscard]] const std::vector<dimension>& dims() const noexcept { return dims_; }
  [[nodiscard]] std::vector<dimension>& dims() noexcept { return dims_; }
  void push_back(dimension d) { dims_.push_back(std::move(d)); }

  /// True when every dimension has a value.
  [[nodiscard]] bool is_static() const noexcept {
    for (const auto& d : dims_)
      if (!d.is_known()) return false;
    return true;
  }
  /// The concrete sizes, when static.
  [[nodiscard]] std::optional<std::vector<std::int64_t>> sizes() const {
    if (!is_static()) return std::nullopt;
    std::vector<std::int64_t> r;
    r.reserve(dims_.size());
    for (const auto& d : dims_) r.push_back(d.value);
    return r;
  }
  /// "[batch,3,224,?]"
  [[nodiscard]] std::string to_string() const {
    std::string s = "[";
    for (std::size_t i = 0; i < dims_.size(); ++i) {
      if (i) s += ',';
      if (dims_[i].is_known()) s += std::to_string(dims_[i].value);
      else if (!dims_[i].param.empty()) s += dims_[i].param;
      else s += '?';
    }
    return s + ']';
  }
  friend bool operator==(const shape&, const shape&) = default;

 private:
  std::vector<dimension> dims_;
};

/// @brief The element count of concrete sizes, or nullopt when a size is negative or the product overflows int64.
[[nodiscard]] inline std::optional<std::int64_t> element_count(std::span<const std::int64_t> sizes) noexcept {
  std::int64_t n = 1;
  for (auto d : sizes) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

}  // namespace epstack
