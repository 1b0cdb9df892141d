// expected-error: an execution provider needs `epstack::Result<std::vector<epstack::compute_function>> compile
#include <epstack/partition/partitioner.hpp>

struct cannot_compile {
  using provider_concept = epstack::execution_provider_tag;
  static constexpr std::string_view type_key = "LazyExecutionProvider";
  std::vector<epstack::capability> get_capability(const epstack::graph_view<epstack::graph>&) const { return {}; }
};
// partition_with checks every provider of the stack.
auto plan(const epstack::graph& g) { return epstack::partition_with(g, std::tuple{cannot_compile{}}); }
