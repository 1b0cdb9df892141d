#pragma once
/// @file element_type.hpp
/// @brief Every ONNX `TensorProto.DataType` of ONNX 1.22 (IR 13), its size and, for the types computed on directly, its
/// C++ type, known at compile time.
///
/// The types added after ONNX 1.12 (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0, int4/uint4, float4e2m1, int2/uint2) are
/// storage types: a tensor holds them as the IR specification stores them (one byte each for the 8-bit types; two
/// 4-bit or four 2-bit elements to a byte, first element in the least significant bits), and the kernels that take
/// them convert on the way in and out. They have no C++ type in `all_element_types`, so `visit_element_type` does not
/// visit them.
///
/// Customization point: `element_type_of<T>` (specialise for a foreign type that has an ONNX element type).

#include <epstack/core/float16.hpp>

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>

#include <complex>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace epstack {

/// ONNX element types; the values are those of `onnx.TensorProto.DataType`.
enum class element_type : std::int32_t {
  undefined = 0,
  float32 = 1,
  uint8 = 2,
  int8 = 3,
  uint16 = 4,
  int16 = 5,
  int32 = 6,
  int64 = 7,
  string = 8,
  boolean = 9,
  float16 = 10,
  float64 = 11,
  uint32 = 12,
  uint64 = 13,
  complex64 = 14,
  complex128 = 15,
  bfloat16 = 16,
  float8e4m3fn = 17,
  float8e4m3fnuz = 18,
  float8e5m2 = 19,
  float8e5m2fnuz = 20,
  uint4 = 21,
  int4 = 22,
  float4e2m1 = 23,
  float8e8m0 = 24,
  uint2 = 25,
  int2 = 26,
};

/// The largest enumerator of `element_type` (ONNX 1.22, IR 13).
inline constexpr std::int32_t max_element_type = 26;
/// The largest element type with a C++ type (the types of ONNX 1.12): `visit_element_type` visits 1 to this.
inline constexpr std::int32_t max_computed_element_type = 16;

/// Maps an element type to its C++ type: `cpp_type_t<element_type::float32>` is `float`.
template <element_type E> struct cpp_type;
template <> struct cpp_type<element_type::float32> { using type = float; };
template <> struct cpp_type<element_type::uint8> { using type = std::uint8_t; };
template <> struct cpp_type<element_type::int8> { using type = std::int8_t; };
template <> struct cpp_type<element_type::uint16> { using type = std::uint16_t; };
template <> struct cpp_type<element_type::int16> { using type = std::int16_t; };
template <> struct cpp_type<element_type::int32> { using type = std::int32_t; };
template <> struct cpp_type<element_type::int64> { using type = std::int64_t; };
template <> struct cpp_type<element_type::string> { using type = std::string; };
template <> struct cpp_type<element_type::boolean> { using type = bool; };
template <> struct cpp_type<element_type::float16> { using type = ::epstack::float16; };
template <> struct cpp_type<element_type::float64> { using type = double; };
template <> struct cpp_type<element_type::uint32> { using type = std::uint32_t; };
template <> struct cpp_type<element_type::uint64> { using type = std::uint64_t; };
template <> struct cpp_type<element_type::complex64> { using type = std::complex<float>; };
template <> struct cpp_type<element_type::complex128> { using type = std::complex<double>; };
template <> struct cpp_type<element_type::bfloat16> { using type = ::epstack::bfloat16; };
template <element_type E> using cpp_type_t = typename cpp_type<E>::type;

/// The typelist of all defined element types, as integral constants; drives `visit_element_type`.
using all_element_types = boost::mp11::mp_list<
    std::integral_constant<element_type, element_type::float32>, std::integral_constant<element_type, element_type::uint8>,
    std::integral_constant<element_type, element_type::int8>, std::integral_constant<element_type, element_type::uint16>,
    std::integral_constant<element_type, element_type::int16>, std::integral_constant<element_type, element_type::int32>,
    std::integral_constant<element_type, element_type::int64>, std::integral_constant<element_type, element_type::string>,
    std::integral_constant<element_type, element_type::boolean>,
    std::integral_constant<element_type, element_type::float16>,
    std::integral_constant<element_type, element_type::float64>,
    std::integral_constant<element_type, element_type::uint32>,
    std::integral_constant<element_type, element_type::uint64>,
    std::integral_constant<element_type, element_type::complex64>,
    std::integral_constant<element_type, element_type::complex128>,
    std::integral_constant<element_type, element_type::bfloat16>>;

namespace detail {
template <class T>
struct element_type_of_impl {
  template <class C>
  using matches = std::is_same<cpp_type_t<C::value>, T>;
  using index = boost::mp11::mp_find_if<all_element_types, matches>;
  static constexpr element_type value = [] {
    if constexpr (index::value < boost::mp11::mp_size<all_element_types>::value)
      return boost::mp11::mp_at<all_element_types, index>::value;
    else
      return element_type::undefined;
  }();
};
}  // namespace detail

/// Maps a C++ type to its element type: `element_type_of_v<float>` is `element_type::float32`;
/// `element_type::undefined` for a type ONNX has no element type for.
template <class T>
struct element_type_of : std::integral_constant<element_type, detail::element_type_of_impl<std::remove_cv_t<T>>::value> {};
template <class T>
inline constexpr element_type element_type_of_v = element_type_of<T>::value;

/// True for the C++ types that are ONNX element types.
template <class T>
concept onnx_element = element_type_of_v<T> != element_type::undefined;

/// @brief Bits per stored element: 8 for the float8 types, 4 for int4/uint4/float4e2m1, 2 for int2/uint2, else
/// 8 * `element_size`.
[[nodiscard]] constexpr std::size_t element_bits(element_type e) noexcept;

/// @brief True for the types stored several to a byte (int4, uint4, float4e2m1, int2, uint2).
[[nodiscard]] constexpr bool is_packed(element_type e) noexcept {
  switch (e) {
    case element_type::uint4:
    case element_type::int4:
    case element_type::float4e2m1:
    case element_type::uint2:
    case element_type::int2: return true;
    default: return false;
  }
}

/// @brief True for the 8-bit float types of ONNX 1.14 and later (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0).
[[nodiscard]] constexpr bool is_float8(element_type e) noexcept {
  const auto v = static_cast<std::int32_t>(e);
  return (v >= 17 && v <= 20) || e == element_type::float8e8m0;
}

/// @brief Bytes per element (`sizeof` of the C++ type; `sizeof(std::string)` for strings; 1 for the float8 types);
/// 0 for undefined and for the packed types, whose storage is `storage_bytes`.
[[nodiscard]] constexpr std::size_t element_size(element_type e) noexcept {
  if (is_float8(e)) return 1;
  std::size_t r = 0;
  boost::mp11::mp_for_each<all_element_types>([&](auto c) {
    if (decltype(c)::value == e) r = sizeof(cpp_type_t<decltype(c)::value>);
  });
  return r;
}

constexpr std::size_t element_bits(element_type e) noexcept {
  switch (e) {
    case element_type::uint4:
    case element_type::int4:
    case element_type::float4e2m1: return 4;
    case element_type::uint2:
    case element_type::int2: return 2;
    default: return 8 * element_size(e);
  }
}

/// @brief Bytes that `count` elements of `e` occupy as stored (packed types round up to a whole byte).
[[nodiscard]] constexpr std::size_t storage_bytes(element_type e, std::size_t count) noexcept {
  if (is_packed(e)) return count / (8 / element_bits(e)) + (count % (8 / element_bits(e)) != 0 ? 1 : 0);
  return count * element_size(e);
}

/// @brief True for the values that name an element type of ONNX 1.22 (not `undefined`).
[[nodiscard]] constexpr bool is_valid(element_type e) noexcept {
  const auto v = static_cast<std::int32_t>(e);
  return v >= 1 && v <= max_element_type;
}

/// @brief The ONNX name of the type ("float", "int64", "float16", ...), as in `TensorProto.DataType` in lower case.
[[nodiscard]] constexpr std::string_view to_string(element_type e) noexcept {
  switch (e) {
    case element_type::undefined: return "undefined";
    case element_type::float32: return "float";
    case element_type::uint8: return "uint8";
    case element_type::int8: return "int8";
    case element_type::uint16: return "uint16";
    case element_type::int16: return "int16";
    case element_type::int32: return "int32";
    case element_type::int64: return "int64";
    case element_type::string: return "string";
    case element_type::boolean: return "bool";
    case element_type::float16: return "float16";
    case element_type::float64: return "double";
    case element_type::uint32: return "uint32";
    case element_type::uint64: return "uint64";
    case element_type::complex64: return "complex64";
    case element_type::complex128: return "complex128";
    case element_type::bfloat16: return "bfloat16";
    case element_type::float8e4m3fn: return "float8e4m3fn";
    case element_type::float8e4m3fnuz: return "float8e4m3fnuz";
    case element_type::float8e5m2: return "float8e5m2";
    case element_type::float8e5m2fnuz: return "float8e5m2fnuz";
    case element_type::uint4: return "uint4";
    case element_type::int4: return "int4";
    case element_type::float4e2m1: return "float4e2m1";
    case element_type::float8e8m0: return "float8e8m0";
    case element_type::uint2: return "uint2";
    case element_type::int2: return "int2";
  }
  return "invalid";
}

/// @brief Calls `f(std::integral_constant<element_type, E>{})` for the runtime type `e`; returns false when `e` is
/// not a valid element type or is one of the storage types without a C++ type (f is not called).
template <class F>
bool visit_element_type(element_type e, F&& f) {
  const auto v = static_cast<std::int32_t>(e);
  if (v < 1 || v > max_computed_element_type) return false;
  boost::mp11::mp_with_index<boost::mp11::mp_size<all_element_types>::value>(
      static_cast<std::size_t>(v - 1), [&](auto i) { f(boost::mp11::mp_at_c<all_element_types, decltype(i)::value>{}); });
  return true;
}

}  // namespace epstack
