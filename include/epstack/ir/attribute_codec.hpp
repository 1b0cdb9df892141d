#pragma once
/// @file attribute_codec.hpp
/// @brief Typed attribute codecs and typed attribute sets.
///
/// Customization points (specialise for your types):
/// - `attribute_codec<T>`: `kind` (the ONNX attribute kind T is stored as), `decode(const attribute::value_type&)` ->
///   `Result<T>` (called only when the kind matches), `encode(const T&)` -> `attribute::value_type`.
/// - `attribute_schema<S>`: `op_type`, `fields` (a tuple of `attribute_field`s), and optionally
///   `static Status validate(const S&, std::string_view node_name)`; then `read_attributes<S>` / `write_attributes`
///   read and write a whole attribute set, checking names, kinds, required fields and defaults.

#include <epstack/ir/attribute.hpp>
#include <epstack/core/errors.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace epstack {

/// Primary template: undefined. An error "incomplete type attribute_codec<T>" means T has no codec: specialise it.
template <class T>
struct attribute_codec;

namespace detail {
// A codec for a type stored as-is in the variant.
template <class T, attribute_kind K>
struct direct_codec {
  static constexpr attribute_kind kind = K;
  static Result<T> decode(const attribute::value_type& v) { return std::get<T>(v); }
  static attribute::value_type encode(const T& t) { return t; }
};
// A narrower integer (or bool) stored as INT, range-checked on decode.
template <class T>
struct narrow_int_codec {
  static constexpr attribute_kind kind = attribute_kind::int_;
  static Result<T> decode(const attribute::value_type& v) {
    const std::int64_t x = std::get<std::int64_t>(v);
    if constexpr (std::is_same_v<T, bool>) {
      if (x != 0 && x != 1) return Status(errc::invalid_graph, "value " + std::to_string(x) + " is not 0 or 1");
      return x == 1;
    } else {
      if (x < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
          x > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
        return Status(errc::invalid_graph, "value " + std::to_string(x) + " is out of range");
      return static_cast<T>(x);
    }
  }
  static attribute::value_type encode(const T& t) { return static_cast<std::int64_t>(t); }
};
}  // namespace detail

template <> struct attribute_codec<float> : detail::direct_codec<float, attribute_kind::float_> {};
template <> struct attribute_codec<std::int64_t> : detail::direct_codec<std::int64_t, attribute_kind::int_> {};
template <> struct attribute_codec<std::string> : detail::direct_codec<std::string, attribute_kind::string> {};
template <> struct attribute_codec<tensor> : detail::direct_codec<tensor, attribute_kind::tensor> {};
template <> struct attribute_codec<subgraph> : detail::direct_codec<subgraph, attribute_kind::graph> {};
template <> struct attribute_codec<sparse_tensor> : detail::direct_codec<sparse_tensor, attribute_kind::sparse_tensor> {};
template <> struct attribute_codec<type_info> : detail::direct_codec<type_info, attribute_kind::type_proto> {};
template <> struct attribute_codec<std::vector<float>> : detail::direct_codec<std::vector<float>, attribute_kind::floats> {};
template <> struct attribute_codec<std::vector<std::int64_t>>
    : detail::direct_codec<std::vector<std::int64_t>, attribute_kind::ints> {};
template <> struct attribute_codec<std::vector<std::string>>
    : detail::direct_codec<std::vector<std::string>, attribute_kind::strings> {};
template <> struct attribute_codec<std::vector<tensor>> : detail::direct_codec<std::vector<tensor>, attribute_kind::tensors> {};
template <> struct attribute_codec<std::vector<subgraph>>
    : detail::direct_codec<std::vector<subgraph>, attribute_kind::graphs> {};
template <> struct attribute_codec<std::vector<sparse_tensor>>
    : detail::direct_codec<std::vector<sparse_tensor>, attribute_kind::sparse_tensors> {};
template <> struct attribute_codec<std::vector<type_info>>
    : detail::direct_codec<std::vector<type_info>, attribute_kind::type_protos> {};
template <> struct attribute_codec<std::int32_t> : detail::narrow_int_codec<std::int32_t> {};
template <> struct attribute_codec<bool> : detail::narrow_int_codec<bool> {};

/// True when T has an attribute codec.
template <class T>
concept attribute_codable = requires(const attribute::value_type& v, const T& t) {
  { attribute_codec<T>::kind } -> std::convertible_to<attribute_kind>;
  { attribute_codec<T>::decode(v) } -> std::same_as<Result<T>>;
  { attribute_codec<T>::encode(t) } -> std::same_as<attribute::value_type>;
};

/// @brief Reads attribute `a` as T; invalid_graph naming the node and attribute when its kind is not T's.
template <attribute_codable T>
[[nodiscard]] Result<T> decode_attribute(const attribute& a, std::string_view node_name) {
  using codec = attribute_codec<T>;
  const auto where = [&] { return "node '" + std::string(node_name) + "': attribute '" + a.name + "'"; };
  if (!a.ref_attr_name.empty())
    return Status(errc::invalid_graph, where() + " refers to attribute '" + a.ref_attr_name + "' of a function caller");
  if (a.kind() != codec::kind)
    return Status(errc::invalid_graph, where() + " must be " + std::string(to_string(codec::kind)) + ", found " +
                                           std::string(to_string(a.kind())));
  auto r = codec::decode(a.value);
  if (!r) return Status(r.code(), where() + ": " + r.status().message());
  return r;
}

/// @brief Makes an attribute named `name` holding `v`.
template <attribute_codable T>
[[nodiscard]] attribute encode_attribute(std::string name, const T& v) {
  attribute a;
  a.name = std::move(name);
  a.value = attribute_codec<T>::encode(v);
  return a;
}

/// Flags of a field in an attribute schema.
enum class field_flags : std::uint8_t {
  none = 0,
  required = 1,      ///< reading fails when the attribute is absent
  always_write = 2,  ///< written even when equal to the default
};
[[nodiscard]] constexpr field_flags operator|(field_flags a, field_flags b) noexcept {
  return static_cast<field_flags>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
[[nodiscard]] constexpr bool has_flag(field_flags a, field_flags b) noexcept {
  return (static_cast<std::uint8_t>(a) & static_cast<std::uint8_t>(b)) != 0;
}

/// One row of a field table: the attribute name, the struct member, flags. Defaults are the struct's own.
template <class S, class T>
struct attribute_field {
  using struct_type = S;
  using value_type = T;
  std::string_view name;
  T S::*member;
  field_flags flags = field_flags::none;
};
template <class S, class T>
[[nodiscard]] constexpr attribute_field<S, T> field(std::string_view name, T S::*member,
                                                    field_flags flags = field_flags::none) {
  return {name, member, flags};
}

/// Primary template: undefined. Specialise with `op_type` and `fields` for a typed attribute set.
template <class S>
struct attribute_schema;

/// True when S has an attribute schema whose every field type has a codec.
template <class S>
concept attribute_struct = std::default_initializable<S> && requires {
  { attribute_schema<S>::op_type } -> std::convertible_to<std::string_view>;
  attribute_schema<S>::fields;
};

namespace detail {
template <class S>
concept has_schema_validate = requires(const S& s, std::string_view n) {
  { attribute_schema<S>::validate(s, n) } -> std::same_as<Status>;
};
// Whether a field equals its default; types without == (tensors, graphs) never do, so they are always written.
template <class T>
bool equals_default(const T& a, const T& b) {
  if constexpr (std::equality_comparable<T>) return a == b;
  else return false;
}
template <class S, class F>
constexpr void for_each_field(F&& f) {
  std::apply([&](const auto&... fld) { (f(fld), ...); }, attribute_schema<S>::fields);
}
}  // namespace detail

/// Options of `read_attributes`.
struct attribute_read_options {
  bool allow_unknown = false;  ///< when false, an attribute the schema does not name is an error
};

/// @brief Reads a whole attribute set into S: every field from its attribute or its default; fails with invalid_graph
/// naming the node and the attribute on an unknown name, a duplicate, a wrong kind, a value out of range, a missing
/// required field, or the schema's own validation.
template <attribute_struct S>
[[nodiscard]] Result<S> read_attributes(const attribute_list& attrs, std::string_view node_name,
                                        attribute_read_options opts = {}) {
  S s{};
  Status st;
  const auto op = std::string(attribute_schema<S>::op_type);
  for (auto it = attrs.begin(); it != attrs.end() && st.is_ok(); ++it) {
    bool known = false;
    detail::for_each_field<S>([&](const auto& f) { known = known || f.name == it->name; });
    if (!known && !opts.allow_unknown)
      st = Status(errc::invalid_graph,
                  "node '" + std::string(node_name) + "' (" + op + "): unknown attribute '" + it->name + "'");
    for (auto jt = attrs.begin(); jt != it && st.is_ok(); ++jt)
      if (jt->name == it->name)
        st = Status(errc::invalid_graph,
                    "node '" + std::string(node_name) + "' (" + op + "): attribute '" + it->name + "' appears twice");
  }
  detail::for_each_field<S>([&](const auto& f) {
    if (!st.is_ok()) return;
    using T = typename std::remove_cvref_t<decltype(f)>::value_type;
    static_assert(attribute_codable<T>, "a field of this attribute schema has a type without an attribute_codec");
    const attribute* a = attrs.find(f.name);
    if (a == nullptr) {
      if (has_flag(f.flags, field_flags::required))
        st = Status(errc::invalid_graph, "node '" + std::string(node_name) + "' (" + op +
                                             "): required attribute '" + std::string(f.name) + "' is missing");
      return;
    }
    auto r = decode_attribute<T>(*a, node_name);
    if (!r) st = r.status();
    else s.*(f.member) = std::move(r).value();
  });
  if (!st.is_ok()) return st;
  if constexpr (detail::has_schema_validate<S>) EPSTACK_RETURN_IF_ERROR(attribute_schema<S>::validate(s, node_name));
  return s;
}

/// @brief Writes S's fields into `attrs` in table order (replacing those of the same name). A field equal to its
/// default is written only when flagged `always_write` or when `write_defaults` is true.
template <attribute_struct S>
void write_attributes(const S& s, attribute_list& attrs, bool write_defaults = false) {
  const S defaults{};
  detail::for_each_field<S>([&](const auto& f) {
    const auto& v = s.*(f.member);
    if (write_defaults || has_flag(f.flags, field_flags::always_write) || !detail::equals_default(v, defaults.*(f.member)))
      attrs.set(encode_attribute(std::string(f.name), v));
  });
}

}  // namespace epstack
