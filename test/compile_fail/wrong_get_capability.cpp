// expected-error: an execution provider needs `std::vector<epstack::capability> get_capability
#include <epstack/provider/contract.hpp>

struct wrong_signature {
  using provider_concept = epstack::execution_provider_tag;
  static constexpr std::string_view type_key = "WrongExecutionProvider";
  std::vector<epstack::node_id> get_capability(const epstack::graph_view<epstack::graph>&) const { return {}; }
  epstack::Result<std::vector<epstack::compute_function>> compile(std::span<const epstack::partition>) const {
    return std::vector<epstack::compute_function>{};
  }
};
static_assert(epstack::check_execution_provider<wrong_signature>());
