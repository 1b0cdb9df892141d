// A program that imports epstack as a module: it builds a model, runs it on the default stack (with the oneDNN
// provider first when the build has it), and checks the numbers. Built by test/consumer/modules (a project of its
// own) and in-tree with EPSTACK_BUILD_MODULES.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <vector>

import epstack;
#if defined(EPSTACK_WITH_DNNL)
import epstack.dnnl;
using stack = epstack::session<epstack::dnnl_provider>;
#else
using stack = epstack::session<>;
#endif

namespace {
// A node of `type` named `name` (designated initializers would leave the other members to -Wextra's complaint).
epstack::node op(const char* name, const char* type) {
  epstack::node n;
  n.name = name;
  n.op_type = type;
  return n;
}

}  // namespace

int main() {
  using namespace epstack;
  // y = Relu(x @ W + b), x [2, 3], W [3, 2].
  model m;
  m.opsets = {{"", 17}};
  m.graph.set_name("module_consumer");
  m.graph.add_input("x", type_info::tensor_of(element_type::float32, shape{2, 3}));
  m.graph.add_initializer("W", tensor::from<float>(std::vector<std::int64_t>{3, 2}, std::vector<float>{1, -1, 2, 0, -1, 3}));
  m.graph.add_initializer("b", tensor::from<float>(std::vector<std::int64_t>{2}, std::vector<float>{0.5f, -4}));
  m.graph.add_node(op("mm", "MatMul"), {"x", "W"}, {"xw"});
  m.graph.add_node(op("add", "Add"), {"xw", "b"}, {"s"});
  m.graph.add_node(op("relu", "Relu"), {"s"}, {"y"});
  m.graph.add_output("y", type_info::tensor_of(element_type::float32, shape{2, 2}));
  auto s = stack::create(std::move(m));
  if (!s) {
    std::cerr << s.status().to_string() << "\n";
    return 1;
  }
  const auto x = tensor::from<float>(std::vector<std::int64_t>{2, 3}, std::vector<float>{1, 2, 3, -1, 0, 1});
  auto out = s->run({{"x", x}});
  if (!out) {
    std::cerr << out.status().to_string() << "\n";
    return 1;
  }
  // x @ W = [[1+4-3, -1+0+9], [-1+0-1, 1+0+3]] = [[2, 8], [-2, 4]]; + b = [[2.5, 4], [-1.5, 0]]; Relu.
  const std::vector<float> want{2.5f, 4.0f, 0.0f, 0.0f};
  const float* y = (*out)[0].typed<float>();
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(y[i] - want[i]) <= 1e-6f)) {
      std::cerr << "element " << i << ": got " << y[i] << ", want " << want[i] << "\n";
      return 1;
    }
  std::cout << "import epstack: y = [" << y[0] << ", " << y[1] << ", " << y[2] << ", " << y[3] << "] on "
            << s->plan().providers.front() << "\n";
  return 0;
}
