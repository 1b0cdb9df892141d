#pragma once
// session.set_denormal_as_zero, checked the same way on every stack: a run that flushes subnormal floats does so on
// every thread of the run (the provider's own threads included), one that does not keeps IEEE subnormals, and the
// calling thread's mode is as it was after either.
#include <epstack/core/float_mode.hpp>
#include <epstack/core/session_options.hpp>
#include <epstack/runtime/session.hpp>

#include "graphs.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace epstack::test {

/// y = x w, a product of two graph inputs (nothing folded or packed ahead), x [rows, 4] and w [4, 4]: with x all
/// FLT_MIN and w all 1/16 every product and sum is subnormal (y = 2^-128 exactly); with x all 2^-128 and w all 1,
/// every operand of x is, and y = FLT_MIN exactly. Subnormal arithmetic is exact at these values.
inline model product_model(std::int64_t rows) {
  model m;
  m.opsets = {{"", 17}};
  auto& g = m.graph;
  g.set_name("product");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{rows, 4}));
  g.add_input("w", type_info::tensor_of(element_type::float32, shape{4, 4}));
  g.add_node(op("matmul", "MatMul"), {"x", "w"}, {"y"});
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{rows, 4}));
  return m;
}

/// This thread's handling of subnormals, told by arithmetic alone: 1 flush-to-zero (FLT_MIN / 4 is 0), 2
/// denormals-are-zero (2^-128 * 4 is 0), 3 both, 0 IEEE subnormals.
inline int subnormal_mode() {
  volatile float a = std::numeric_limits<float>::min(), quarter = 0.25f, tiny = 0x1p-128f, four = 4.0f;
  return (a * quarter == 0.0f ? 1 : 0) + (tiny * four == 0.0f ? 2 : 0);
}

/// Whether this thread reads subnormal operands as zero or flushes subnormal results, by arithmetic.
inline bool thread_flushes_subnormals() { return subnormal_mode() != 0; }

/// For each value of the option ("1", "0", unset): sessions made by `create` (two intra-op threads, the options
/// given) run product_model over 2^16 rows, so that both threads work; `check_plan` sees each session first.
template <class Session>
void check_set_denormal_as_zero(std::function<Result<Session>(const model&, const session_options&)> create,
                                std::function<void(const Session&)> check_plan = {}) {
  constexpr std::int64_t rows = std::int64_t{1} << 16, n = rows * 4;
#if defined(__x86_64__) || defined(__i386__)
  constexpr bool has_mode = true;
#else
  constexpr bool has_mode = false;  // no such mode: the option changes nothing
#endif
  const model m = product_model(rows);
  const auto filled = [](std::int64_t r, float v) {
    const std::vector<float> values(static_cast<std::size_t>(r * 4), v);
    const std::int64_t sizes[] = {r, 4};
    return tensor::from<float>(sizes, values);
  };
  REQUIRE_FALSE(thread_flushes_subnormals());
  for (const std::optional<std::string>& value : {std::optional<std::string>("1"), std::optional<std::string>("0"),
                                                 std::optional<std::string>()}) {
    CAPTURE(value.value_or("unset"));
    session_options o;
    o.set_intra_op_threads(2);
    if (value) o.set_config(config_keys::set_denormal_as_zero, *value);
    auto s = create(m, o);
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    if (check_plan) check_plan(*s);
    const bool flush = has_mode && value == "1";
    const auto count_of = [&](const tensor& t, float want) {
      std::size_t k = 0;
      for (const float v : t.view<float>()) k += v == want ? 1 : 0;  // NaN counts nowhere
      return k;
    };
    for (int round = 0; round < 2; ++round) {  // a second run finds the threads as the first left them
      CAPTURE(round);
      // Subnormal results: flushed to 0, or 2^-128 exactly.
      auto r = s->run({{"x", filled(rows, std::numeric_limits<float>::min())}, {"w", filled(4, 1.0f / 16)}});
      REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
      CHECK(count_of((*r)[0], flush ? 0.0f : 0x1p-128f) == static_cast<std::size_t>(n));
      // Subnormal operands: read as 0, or scaled back to FLT_MIN exactly.
      auto q = s->run({{"x", filled(rows, 0x1p-128f)}, {"w", filled(4, 1.0f)}});
      REQUIRE_MESSAGE(q.has_value(), q.status().to_string());
      CHECK(count_of((*q)[0], flush ? 0.0f : std::numeric_limits<float>::min()) == static_cast<std::size_t>(n));
      // The caller's own mode after the run, either way.
      CHECK_FALSE(thread_flushes_subnormals());
      CHECK_FALSE(flush_denormals_scope::active_on_this_thread());
    }
  }
}

}  // namespace epstack::test
