// Compiled-model compatibility in ONNX Runtime's terms: the `ep_compatibility_info.<provider type>` strings a
// generated EPContext model carries in its metadata, and each provider's verdict on them.
#include <epstack/ep_context/contexts.hpp>

#include <epstack/detail/cat.hpp>

namespace epstack::ctx {

using epstack::detail::cat;

namespace {

constexpr std::string_view sdk_key = "sdk_version", hardware_key = "hardware_architecture";

// The value of `key` in "type;k=v;k=v", or nullopt.
std::optional<std::string_view> field_of(std::string_view info, std::string_view key) {
  std::size_t at = info.find(';');
  while (at != std::string_view::npos) {
    const std::size_t next = info.find(';', at + 1);
    const std::string_view item = info.substr(at + 1, next == std::string_view::npos ? std::string_view::npos : next - at - 1);
    if (item.size() > key.size() && item.substr(0, key.size()) == key && item[key.size()] == '=') return item.substr(key.size() + 1);
    at = next;
  }
  return std::nullopt;
}

}  // namespace

std::string compatibility_info(const provider_binding& b) {
  if (!b.context) return {};
  return cat(b.type_key, ";", sdk_key, "=", b.context->sdk_version, ";", hardware_key, "=", b.context->hardware);
}

std::vector<ep_compatibility> model_compatibility(const model& m, const std::vector<provider_binding>& providers) {
  std::vector<ep_compatibility> out;
  for (const auto& b : providers) {
    ep_compatibility c;
    c.provider = std::string(b.type_key);
    const std::string key = cat(ep_compatibility_info_prefix, b.type_key);
    for (const auto& kv : m.metadata)
      if (kv.first == key) c.info = kv.second;
    using cmc = compiled_model_compatibility;
    if (!b.context) {
      c.value = cmc::ep_not_applicable;
      c.reason = "the provider compiles nothing it can keep in an EP context";
    } else if (c.info.empty()) {
      c.value = cmc::ep_not_applicable;
      c.reason = cat("the model records no ", key);
    } else {
      const std::string_view info = c.info;
      const auto sdk = field_of(info, sdk_key);
      const auto hw = field_of(info, hardware_key);
      if (info.substr(0, info.find(';')) != b.type_key || !sdk || !hw) {
        c.value = cmc::ep_unsupported;
        c.reason = cat(key, " is '", info, "', not '", b.type_key, ";", sdk_key, "=...;", hardware_key, "=...'");
      } else if (*sdk != b.context->sdk_version) {
        c.value = cmc::ep_unsupported;
        c.reason = cat("compiled with SDK version '", *sdk, "'; this build has '", b.context->sdk_version, "'");
      } else if (*hw == b.context->hardware) {
        c.value = cmc::ep_supported_optimal;
        c.reason = cat("same SDK version and hardware architecture ('", *hw, "')");
      } else if (b.context->hardware_supported && b.context->hardware_supported(*hw)) {
        c.value = cmc::ep_supported_prefer_recompilation;
        c.reason = cat("compiled for hardware architecture '", *hw, "', which this machine runs; compiled here it would use '",
                       b.context->hardware, "'");
      } else {
        c.value = cmc::ep_unsupported;
        c.reason = cat("compiled for hardware architecture '", *hw, "'; this machine has '", b.context->hardware, "'");
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace epstack::ctx
