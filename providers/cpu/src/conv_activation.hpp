#pragma once
// The activation a fused convolution applies as it stores (com.microsoft FusedConv's `activation` and
// `activation_params`, and the blocked-layout convolutions of nchwc.cpp). Private to the epstack::cpu library.
#include "kernel_util.hpp"

namespace epstack::cpu::impl {

enum class act_kind : std::uint8_t { none, relu, clip, sigmoid, tanh, leaky_relu, hard_sigmoid };
struct activation {
  act_kind kind = act_kind::none;
  float a = 0, b = 0;
  void apply(float* p, std::size_t n) const {
    switch (kind) {
      case act_kind::none: return;
      case act_kind::relu: for (std::size_t i = 0; i < n; ++i) p[i] = std::max(p[i], 0.0f); return;
      case act_kind::clip: for (std::size_t i = 0; i < n; ++i) p[i] = std::min(std::max(p[i], a), b); return;
      case act_kind::sigmoid: for (std::size_t i = 0; i < n; ++i) p[i] = fast_sigmoid(p[i]); return;
      case act_kind::tanh: for (std::size_t i = 0; i < n; ++i) p[i] = std::tanh(p[i]); return;
      case act_kind::leaky_relu: for (std::size_t i = 0; i < n; ++i) p[i] = p[i] >= 0 ? p[i] : a * p[i]; return;
      case act_kind::hard_sigmoid: for (std::size_t i = 0; i < n; ++i) p[i] = std::min(std::max(a * p[i] + b, 0.0f), 1.0f); return;
    }
  }
};
inline Result<activation> parse_activation(const node& nd) {
  activation act;
  const std::string name = attr_s(nd, "activation");
  const auto params = attr_floats(nd, "activation_params");
  const auto param = [&](std::size_t i, float def) { return i < params.size() ? params[i] : def; };
  if (name.empty()) act.kind = act_kind::none;
  else if (name == "Relu") act.kind = act_kind::relu;
  else if (name == "Clip") act = {act_kind::clip, param(0, std::numeric_limits<float>::lowest()), param(1, std::numeric_limits<float>::max())};
  else if (name == "Sigmoid") act.kind = act_kind::sigmoid;
  else if (name == "Tanh") act.kind = act_kind::tanh;
  else if (name == "LeakyRelu") act = {act_kind::leaky_relu, param(0, 0.01f), 0};
  else if (name == "HardSigmoid") act = {act_kind::hard_sigmoid, param(0, 0.2f), param(1, 0.5f)};
  else return Status(errc::not_implemented, cat("FusedConv: activation '", name, "' is not supported"));
  return act;
}

}  // namespace epstack::cpu::impl
