// expected-error: an execution provider needs `static constexpr std::string_view type_key`
#include <epstack/provider/contract.hpp>

struct keyless {
  using provider_concept = epstack::execution_provider_tag;
  std::vector<epstack::capability> get_capability(const epstack::graph_view<epstack::graph>&) const { return {}; }
  epstack::Result<std::vector<epstack::compute_function>> compile(std::span<const epstack::partition>) const {
    return std::vector<epstack::compute_function>{};
  }
};
static_assert(epstack::check_execution_provider<keyless>());
