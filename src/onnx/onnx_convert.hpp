#pragma once
// Conversions between onnx's protobuf classes and epstack's IR. Private to the epstack::onnx library.

#include <epstack/core/errors.hpp>
#include <epstack/core/mapped_file.hpp>
#include <epstack/ir/model.hpp>

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

namespace epstack::detail {

/// Resolves and maps external data files (one mapping per file), checking every location against the folder.
class external_data_resolver {
 public:
  external_data_resolver(std::filesystem::path folder, bool folder_given)
      : folder_(std::move(folder)), folder_given_(folder_given) {}
  /// The mapped bytes [offset, offset + length) for `tp` (an EXTERNAL TensorProto whose byte size is `expected`).
  Result<std::pair<std::byte*, std::shared_ptr<mapped_file>>> map(const onnx::TensorProto& tp, std::size_t expected);
  [[nodiscard]] const std::filesystem::path& folder() const noexcept { return folder_; }
  /// value_info counts of each GraphProto before shape inference added to them (absent: all are original).
  std::unordered_map<const onnx::GraphProto*, int> original_value_info;

 private:
  std::filesystem::path folder_;
  bool folder_given_;
  std::map<std::string, std::shared_ptr<mapped_file>> files_;
};

/// Checks a tensor's data type, dims and raw_data size (before the onnx checker, which multiplies dims unchecked).
Status check_tensor_header(const onnx::TensorProto& tp, const std::string& where);
/// Proto -> IR. `tp` may be modified (raw_data moved out of it).
Result<tensor> tensor_from_proto(onnx::TensorProto& tp, external_data_resolver& ext, const std::string& where);
Result<type_info> type_from_proto(const onnx::TypeProto& tp, const std::string& where);
Status graph_from_proto(onnx::GraphProto& gp, graph& g, external_data_resolver& ext);
Result<attribute> attribute_from_proto(onnx::AttributeProto& ap, external_data_resolver& ext, const std::string& where);

/// IR -> proto. `external` decides, per tensor, whether to write it to the external file (it returns the
/// external_data entries to set, or false to embed).
using external_writer = std::function<Result<bool>(const tensor&, onnx::TensorProto&)>;
Status tensor_to_proto(const tensor& t, onnx::TensorProto& tp, const external_writer& ext);
void type_to_proto(const type_info& t, onnx::TypeProto& tp);
Status graph_to_proto(const graph& g, onnx::GraphProto& gp, const external_writer& ext);
Status attribute_to_proto(const attribute& a, onnx::AttributeProto& ap, const external_writer& ext);

}  // namespace epstack::detail
