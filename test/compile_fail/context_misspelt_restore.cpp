// expected-error: an EP-context provider needs `epstack::Result<epstack::compute_function> restore
#include <epstack/provider/binding.hpp>

#include <array>

// Opts in to EP contexts, but `restore` is misspelt: the check names the member.
struct misspelt {
  using provider_concept = epstack::execution_provider_tag;
  using ep_context_concept = epstack::ep_context_tag;
  static constexpr std::string_view type_key = "MisspeltExecutionProvider";
  static constexpr std::array<std::string_view, 1> source_keys{type_key};
  static constexpr bool multi_graph_context = true;
  std::vector<epstack::capability> get_capability(const epstack::graph_view<epstack::graph>&) const { return {}; }
  epstack::Result<std::vector<epstack::compute_function>> compile(std::span<const epstack::partition>) const {
    return std::vector<epstack::compute_function>{};
  }
  std::string ep_sdk_version() const { return "1"; }
  std::string hardware_architecture() const { return "any"; }
  epstack::Result<epstack::ep_context_record> serialize(const epstack::partition&, const epstack::compute_function&,
                                                        epstack::ep_context_builder&) const {
    return epstack::ep_context_record{};
  }
  epstack::Result<epstack::compute_function> restor(const epstack::ep_context_restore&) const {
    return epstack::Status(epstack::errc::not_implemented, "no");
  }
};
static_assert(epstack::check_ep_context_provider<misspelt>());
