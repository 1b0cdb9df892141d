// Static facts, checked by compiling this file (mp-units' test/static): concepts satisfied or not.
#include <epstack/ir/attribute_codec.hpp>
#include <epstack/core/element_type.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/ir/graph.hpp>

#include <complex>
#include <cstdint>
#include <string>

namespace {
using namespace epstack;
static_assert(onnx_element<float> && onnx_element<std::string> && onnx_element<bool> && onnx_element<float16>);
static_assert(!onnx_element<char> && !onnx_element<long double> && !onnx_element<void*>);
static_assert(attribute_struct<ep_context_attributes>);
static_assert(std::is_copy_constructible_v<graph> && std::is_nothrow_move_constructible_v<subgraph>);
static_assert(std::is_copy_constructible_v<attribute>);
// element_type values are ONNX's TensorProto.DataType values.
static_assert(static_cast<int>(element_type::float16) == 10 && static_cast<int>(element_type::bfloat16) == 16);
static_assert(static_cast<int>(attribute_kind::type_protos) == 14 && static_cast<int>(attribute_kind::sparse_tensor) == 11);
}  // namespace
