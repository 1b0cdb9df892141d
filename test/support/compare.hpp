#pragma once
// The one way tests compare computed tensors with expected ones: element by element, |got - want| <= atol +
// rtol * |want|. A NaN never passes (unless both are NaN and the caller asks for that), a size or type mismatch
// never passes, and the message says where and by how much. (A `max(worst, |a - b|)` loop passes on NaN: std::max
// drops it.)
#include <epstack/core/tensor.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace epstack::test {

struct comparison {
  std::size_t count = 0;      ///< elements compared
  std::size_t bad = 0;        ///< elements out of tolerance (NaN included)
  std::size_t first_bad = 0;  ///< index of the first
  double worst_abs = 0;       ///< largest |got - want| (infinite when a NaN was met)
  std::string problem;        ///< a size or type mismatch
  [[nodiscard]] bool ok() const { return problem.empty() && bad == 0; }
  [[nodiscard]] std::string message() const {
    std::ostringstream s;
    if (!problem.empty()) return problem;
    s << bad << " of " << count << " elements out of tolerance (first at " << first_bad << "), worst |diff| "
      << worst_abs;
    return s.str();
  }
};

/// Compares two sequences of values read as double.
template <class Got, class Want>
[[nodiscard]] comparison compare_values(const Got& got, const Want& want, std::size_t n, double atol, double rtol,
                                        bool nan_equal = false) {
  comparison c;
  c.count = n;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got(i)), w = static_cast<double>(want(i));
    bool good;
    if (std::isnan(g) || std::isnan(w)) {
      good = nan_equal && std::isnan(g) && std::isnan(w);
      if (!good) c.worst_abs = std::numeric_limits<double>::infinity();
    } else if (std::isinf(g) || std::isinf(w)) {
      good = g == w;
      if (!good) c.worst_abs = std::numeric_limits<double>::infinity();
    } else {
      const double d = std::fabs(g - w);
      if (d > c.worst_abs) c.worst_abs = d;
      good = d <= atol + rtol * std::fabs(w);
    }
    if (!good && c.bad++ == 0) c.first_bad = i;
  }
  return c;
}

/// Compares two tensors of the same floating or integer type and shape.
[[nodiscard]] inline comparison compare(const tensor& got, const tensor& want, double atol, double rtol,
                                        bool nan_equal = false) {
  comparison c;
  if (got.type() != want.type()) {
    c.problem = "element types differ";
    return c;
  }
  if (std::vector<std::int64_t>(got.sizes().begin(), got.sizes().end()) !=
      std::vector<std::int64_t>(want.sizes().begin(), want.sizes().end())) {
    c.problem = "shapes differ";
    return c;
  }
  const std::size_t n = got.element_count();
  switch (got.type()) {
    case element_type::float32:
      return compare_values([&](std::size_t i) { return got.typed<float>()[i]; },
                            [&](std::size_t i) { return want.typed<float>()[i]; }, n, atol, rtol, nan_equal);
    case element_type::float64:
      return compare_values([&](std::size_t i) { return got.typed<double>()[i]; },
                            [&](std::size_t i) { return want.typed<double>()[i]; }, n, atol, rtol, nan_equal);
    case element_type::int64:
      return compare_values([&](std::size_t i) { return got.typed<std::int64_t>()[i]; },
                            [&](std::size_t i) { return want.typed<std::int64_t>()[i]; }, n, atol, rtol);
    case element_type::int32:
      return compare_values([&](std::size_t i) { return got.typed<std::int32_t>()[i]; },
                            [&](std::size_t i) { return want.typed<std::int32_t>()[i]; }, n, atol, rtol);
    default:
      c.problem = "compare: unsupported element type";
      return c;
  }
}

}  // namespace epstack::test

/// CHECK that `got` is within atol + rtol * |want| of `want`, element by element (NaN fails).
#define EPSTACK_CHECK_CLOSE(got, want, atol, rtol)                                       \
  do {                                                                                    \
    const auto epstack_cmp = ::epstack::test::compare((got), (want), (atol), (rtol));     \
    CHECK_MESSAGE(epstack_cmp.ok(), epstack_cmp.message());                               \
  } while (false)
