// expected-error: an EP-context provider needs `std::string ep_sdk_version() const`
#include <epstack/provider/contract.hpp>

#include <array>

struct no_versions {
  using provider_concept = epstack::execution_provider_tag;
  using ep_context_concept = epstack::ep_context_tag;
  static constexpr std::string_view type_key = "NoVersionsExecutionProvider";
  static constexpr std::array<std::string_view, 1> source_keys{type_key};
  static constexpr bool multi_graph_context = false;
};
static_assert(epstack::check_ep_context_provider<no_versions>());
