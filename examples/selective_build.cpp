// A selective build for an embedded target: a CPU provider with only the kernels an MLP needs (Gemm and Relu). Only
// those kernels are linked (link with --gc-sections); a test checks the binary's symbols. A model with other ops gets
// not_implemented naming the nodes.
#include <epstack/testing/model_zoo.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/session.hpp>

#include <iostream>

namespace ops = epstack::cpu::ops;
using mlp_cpu = epstack::basic_cpu_provider<ops::gemm, ops::relu>;
using session = epstack::basic_session<mlp_cpu>;

int main() {
  auto s = session::create(epstack::zoo::make_mlp({64, 32, 10}));
  if (!s) {
    std::cerr << s.status().to_string() << "\n";
    return 1;
  }
  auto out = s->run({{"input", epstack::zoo::random_tensor({4, 64}, 1, 1.0f)}});
  if (!out) {
    std::cerr << out.status().to_string() << "\n";
    return 1;
  }
  // Folding constants needs only the kernels of the stack; a convolutional model needs Conv, which this build lacks.
  auto conv = session::create(epstack::zoo::make_convnet({8}, 16, 2));
  std::cout << "mlp logits: " << (*out)[0].element_count() << " values; convnet: " << conv.status().to_string() << "\n";
  return conv.code() == epstack::errc::not_implemented ? 0 : 1;
}
