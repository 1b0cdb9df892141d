// expected-error: a CPU kernel needs `static epstack::Result<epstack::compute_function> compile
#include <epstack/providers/cpu/kernel_concepts.hpp>

struct my_relu {
  using kernel_concept = epstack::cpu::kernel_tag;
  static constexpr std::string_view op_type = "Relu";
  static constexpr std::string_view domain = "";
  static bool supports(const epstack::graph&, epstack::node_id) { return true; }
  static epstack::compute_function compile(const epstack::graph&, epstack::node_id) { return {}; }
};
static_assert(epstack::cpu::check_cpu_kernel<my_relu>());
