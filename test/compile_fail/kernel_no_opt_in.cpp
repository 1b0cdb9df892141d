// expected-error: not a CPU kernel: declare `using kernel_concept = epstack::cpu::kernel_tag
#include <epstack/providers/cpu.hpp>

// Everything a kernel needs but the opt-in.
struct my_relu {
  static constexpr std::string_view op_type = "Relu";
  static constexpr std::string_view domain = "";
  static bool supports(const epstack::graph&, epstack::node_id) { return true; }
  static epstack::Result<epstack::compute_function> compile(const epstack::graph&, epstack::node_id) {
    return epstack::Status(epstack::errc::not_implemented, "no");
  }
};
epstack::basic_cpu_provider<my_relu> provider;
