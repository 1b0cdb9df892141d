// expected-error: has `serialize` or `restore` but does not opt in to EP contexts
#include <epstack/provider/binding.hpp>

// A provider with an EP-context side but no `ep_context_concept`: refused, not silently run without caching.
struct forgot_opt_in {
  using provider_concept = epstack::execution_provider_tag;
  static constexpr std::string_view type_key = "ForgotExecutionProvider";
  std::vector<epstack::capability> get_capability(const epstack::graph_view<epstack::graph>&) const { return {}; }
  epstack::Result<std::vector<epstack::compute_function>> compile(std::span<const epstack::partition>) const {
    return std::vector<epstack::compute_function>{};
  }
  epstack::Result<epstack::compute_function> restore(const epstack::ep_context_restore&) const {
    return epstack::Status(epstack::errc::not_implemented, "no");
  }
};
auto binding = epstack::make_binding(forgot_opt_in{});
