#pragma once
/// @file attributes.hpp
/// @brief The attribute set of the `com.microsoft` `EPContext` node (EP context design, "EPContext Op Schema"),
/// read and written through `attribute_schema`.

#include <epstack/ir/attribute_codec.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

namespace epstack {

/// The EPContext op's domain and type.
inline constexpr std::string_view ep_context_domain = "com.microsoft";
inline constexpr std::string_view ep_context_op_type = "EPContext";
/// epstack's node metadata_props key in a context model: on a plain node that placement by cost gave to another
/// provider than the first that claimed it, that provider's type key. Loading gives the node to it alone, so the
/// choice is replayed without estimating or measuring again.
inline constexpr std::string_view placement_metadata_key = "epstack.placement";

/// @brief The attributes of one EPContext node, with the op schema's defaults.
struct ep_context_attributes {
  std::int64_t main_context = 1;      ///< 1: this node carries a context; 0: its graph is in another node's context.
  std::string ep_cache_context;       ///< the payload (embed_mode 1) or the context file's relative path (0).
  std::int64_t embed_mode = 1;        ///< 1: payload embedded; 0: a path.
  std::string ep_sdk_version;         ///< the SDK version that generated the node.
  std::string onnx_model_filename;    ///< the source model's file name.
  std::string hardware_architecture;  ///< the hardware the context was compiled for.
  std::string partition_name;         ///< the fused node's (partition's) name.
  std::string source;                 ///< the provider key that generated the node.
  std::string notes;                  ///< provider-specific notes.
  std::int64_t max_size = 0;          ///< provider-specific maximum size.
  friend bool operator==(const ep_context_attributes&, const ep_context_attributes&) = default;
};

template <>
struct attribute_schema<ep_context_attributes> {
  using S = ep_context_attributes;
  static constexpr std::string_view op_type = ep_context_op_type;
  static constexpr auto fields = std::tuple{
      field("main_context", &S::main_context, field_flags::always_write),
      field("ep_cache_context", &S::ep_cache_context, field_flags::always_write),
      field("embed_mode", &S::embed_mode, field_flags::always_write),
      field("ep_sdk_version", &S::ep_sdk_version),
      field("onnx_model_filename", &S::onnx_model_filename),
      field("hardware_architecture", &S::hardware_architecture),
      field("partition_name", &S::partition_name),
      field("source", &S::source, field_flags::always_write),
      field("notes", &S::notes),
      field("max_size", &S::max_size),
  };
  /// The schema's value rules: main_context and embed_mode are 0 or 1, max_size is not negative, and a main context
  /// has a payload or a path.
  static Status validate(const S& s, std::string_view node) {
    const auto bad = [&](const std::string& what) {
      return Status(errc::invalid_graph, "EPContext node '" + std::string(node) + "': " + what);
    };
    if (s.main_context != 0 && s.main_context != 1)
      return bad("attribute 'main_context' must be 0 or 1, found " + std::to_string(s.main_context));
    if (s.embed_mode != 0 && s.embed_mode != 1)
      return bad("attribute 'embed_mode' must be 0 or 1, found " + std::to_string(s.embed_mode));
    if (s.max_size < 0) return bad("attribute 'max_size' must not be negative, found " + std::to_string(s.max_size));
    if (s.main_context == 1 && s.ep_cache_context.empty())
      return bad("attribute 'ep_cache_context' is empty on a main context (main_context = 1)");
    return {};
  }
};

}  // namespace epstack
