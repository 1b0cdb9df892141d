// Runs a residual convolutional network (built with epstack::zoo) on the default provider stack: the session type
// names the stack, `plan()` shows which provider took which node, `run` is thread-safe. Used by the consumer tests.
// Linked with epstack::dnnl (which defines EPSTACK_WITH_DNNL), the stack is oneDNN first, then the CPU provider.
#include <epstack/testing/model_zoo.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/session.hpp>
#if defined(EPSTACK_WITH_DNNL)
#include <epstack/providers/dnnl.hpp>
#endif

#include <iostream>

int main() {
#if defined(EPSTACK_WITH_DNNL)
  using session = epstack::session<epstack::dnnl_provider>;  // the CPU provider is appended: it runs what oneDNN does not
#else
  using session = epstack::session<>;  // the CPU provider is appended to every stack: here it is the whole stack
#endif
  epstack::session_options so;
  so.set_intra_op_threads(2);
  auto s = session::create(epstack::zoo::make_convnet({8, 16}, 32, 10), so);
  if (!s) {
    std::cerr << s.status().to_string() << "\n";
    return 1;
  }
  const auto image = epstack::zoo::random_tensor({2, 3, 32, 32}, 1, 1.0f);
  auto out = s->run({{"image", image}});
  if (!out) {
    std::cerr << out.status().to_string() << "\n";
    return 1;
  }
  const auto& logits = (*out)[0];
  std::cout << "logits [" << logits.sizes()[0] << "," << logits.sizes()[1] << "], first " << logits.typed<float>()[0]
            << "; " << s->optimizations().fusions.size() << " fusions; " << s->plan().main.partitions.size()
            << " partitions on " << s->plan().providers.front() << "\n";
  return logits.element_count() == 20 ? 0 : 1;
}
