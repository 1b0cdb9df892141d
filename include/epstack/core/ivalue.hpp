#pragma once
/// @file ivalue.hpp
/// @brief The values a model computes with at run time: a tensor, a sequence of tensors, or none (an omitted optional
/// input, or an Optional without an element). ONNX Runtime's `OrtValue`.

#include <epstack/core/tensor.hpp>

#include <memory>
#include <stdexcept>
#include <utility>
#include <variant>
#include <vector>

namespace epstack {

/// @brief A sequence of tensors (ONNX `seq(tensor(T))`): every element has the element type `elem`.
struct tensor_sequence {
  element_type elem = element_type::undefined;
  std::vector<tensor> items;
};

/// @brief A runtime value. Copies are cheap: tensors share their storage and sequences are shared, immutable.
class ivalue {
 public:
  ivalue() = default;
  ivalue(tensor t) : v_(std::move(t)) {}  // NOLINT(google-explicit-constructor)
  ivalue(tensor_sequence s) : v_(std::make_shared<const tensor_sequence>(std::move(s))) {}  // NOLINT
  ivalue(std::shared_ptr<const tensor_sequence> s) : v_(std::move(s)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool is_none() const noexcept { return v_.index() == 0; }
  [[nodiscard]] bool is_tensor() const noexcept { return v_.index() == 1; }
  [[nodiscard]] bool is_sequence() const noexcept { return v_.index() == 2; }

  /// @throws std::invalid_argument when the value is not a tensor.
  [[nodiscard]] const tensor& as_tensor() const {
    if (!is_tensor()) throw std::invalid_argument(std::string("expected a tensor, found ") + kind_name());
    return std::get<1>(v_);
  }
  [[nodiscard]] tensor& as_tensor() {
    if (!is_tensor()) throw std::invalid_argument(std::string("expected a tensor, found ") + kind_name());
    return std::get<1>(v_);
  }
  /// @throws std::invalid_argument when the value is not a sequence.
  [[nodiscard]] const tensor_sequence& as_sequence() const {
    if (!is_sequence()) throw std::invalid_argument(std::string("expected a sequence, found ") + kind_name());
    return *std::get<2>(v_);
  }
  [[nodiscard]] const std::shared_ptr<const tensor_sequence>& sequence_ptr() const { return std::get<2>(v_); }

  /// "none", "tensor" or "sequence".
  [[nodiscard]] const char* kind_name() const noexcept {
    return is_none() ? "none" : is_tensor() ? "tensor" : "sequence";
  }

 private:
  std::variant<std::monostate, tensor, std::shared_ptr<const tensor_sequence>> v_;
};

}  // namespace epstack
