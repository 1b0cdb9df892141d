// expected-error: not an execution provider: declare `using provider_concept = epstack::execution_provider_tag
#include <epstack/provider/contract.hpp>

struct not_a_provider {
  static constexpr std::string_view type_key = "X";
};
static_assert(epstack::check_execution_provider<not_a_provider>());
