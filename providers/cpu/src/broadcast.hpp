#pragma once
// Numpy-style (multidirectional) broadcasting for the CPU provider's element-wise kernels: the broadcast shape, and a
// plan that collapses adjacent dimensions broadcast the same way, so that the innermost loop is long and each operand
// has stride 0 or 1 in it.
#include <epstack/detail/cat.hpp>
#include <epstack/core/errors.hpp>
#include <epstack/core/tensor.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace epstack::cpu::impl {

/// @brief The broadcast shape of all `shapes`, or invalid_argument when a dimension is neither equal nor 1.
[[nodiscard]] inline Result<tensor_sizes> broadcast_shape(std::span<const std::span<const std::int64_t>> shapes) {
  std::size_t r = 0;
  for (auto s : shapes) r = std::max(r, s.size());
  tensor_sizes out(r, 1);
  for (auto s : shapes)
    for (std::size_t k = 0; k < s.size(); ++k) {
      const std::size_t i = r - s.size() + k;
      const std::int64_t d = s[k];
      if (d == out[i] || d == 1) continue;
      if (out[i] != 1)
        return Status(errc::invalid_argument,
                      epstack::detail::cat("shapes cannot be broadcast: dimension ", std::to_string(i), " is ",
                                           std::to_string(out[i]), " and ", std::to_string(d)));
      out[i] = d;
    }
  return out;
}
[[nodiscard]] inline Result<tensor_sizes> broadcast_shape(std::span<const std::int64_t> a, std::span<const std::int64_t> b) {
  const std::span<const std::int64_t> both[] = {a, b};
  return broadcast_shape(both);
}

/// @brief Element strides of `in` laid against the broadcast shape `out` (0 where `in` is broadcast).
[[nodiscard]] inline tensor_sizes broadcast_strides(std::span<const std::int64_t> in, std::span<const std::int64_t> out) {
  tensor_sizes s(out.size(), 0);
  std::int64_t stride = 1;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const std::size_t i = in.size() - 1 - k, o = out.size() - 1 - k;
    s[o] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return s;
}

/// @brief How N operands map onto a broadcast output: collapsed dims, and each operand's strides over them.
template <std::size_t N>
struct broadcast_plan {
  tensor_sizes dims;                 // collapsed output dims (at least one)
  std::array<tensor_sizes, N> strides;
  std::int64_t inner = 1;            // dims.back()
  std::int64_t rows = 1;             // product of the other dims
  std::array<std::int64_t, N> inner_stride{};  // each operand's stride in the innermost dim: 0 or 1

  broadcast_plan(std::span<const std::int64_t> out, const std::array<std::span<const std::int64_t>, N>& ins) {
    std::array<tensor_sizes, N> full;
    for (std::size_t k = 0; k < N; ++k) full[k] = broadcast_strides(ins[k], out);
    // Collapse dim i into i-1 when every operand's stride continues contiguously (or stays 0) across them.
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i] == 1) continue;  // size-1 dims change nothing
      bool merge = !dims.empty();
      for (std::size_t k = 0; k < N && merge; ++k) {
        const std::int64_t prev = strides[k].back(), cur = full[k][i];
        merge = (prev == 0 && cur == 0) || (prev != 0 && cur != 0 && prev == cur * out[i]);
      }
      if (merge) {
        dims.back() *= out[i];
        for (std::size_t k = 0; k < N; ++k) strides[k].back() = full[k][i];
      } else {
        dims.push_back(out[i]);
        for (std::size_t k = 0; k < N; ++k) strides[k].push_back(full[k][i]);
      }
    }
    if (dims.empty()) {
      dims.push_back(1);
      for (std::size_t k = 0; k < N; ++k) strides[k].push_back(0);
    }
    inner = dims.back();
    for (std::size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
    for (std::size_t k = 0; k < N; ++k) inner_stride[k] = strides[k].back();
  }

  /// Offsets of row `r` (an index over all dims but the last) in each operand.
  [[nodiscard]] std::array<std::int64_t, N> row_offsets(std::int64_t r) const {
    std::array<std::int64_t, N> off{};
    for (std::size_t i = dims.size() - 1; i-- > 0;) {
      const std::int64_t idx = r % dims[i];
      r /= dims[i];
      for (std::size_t k = 0; k < N; ++k) off[k] += idx * strides[k][i];
    }
    return off;
  }
};

}  // namespace epstack::cpu::impl
