#pragma once
// The fields of IR versions 9 to 13 that onnx 1.12's message classes do not declare (a node's overload,
// metadata_props and device configurations, a graph's metadata_props, a model's multi-device configuration...)
// reach those classes as unknown fields, which proto2 keeps. These helpers read the ones epstack interprets and
// keep the rest as wire bytes, and write them back. Private to epstack::onnx.
#include <onnx/onnx_pb.h>

#include <google/protobuf/unknown_field_set.h>

#include <string>
#include <utility>
#include <vector>

namespace epstack::detail {

using metadata_list = std::vector<std::pair<std::string, std::string>>;

/// Field numbers of the IR 10 fields epstack interprets (0: the message has none).
struct newer_field_numbers {
  int overload = 0;
  int metadata = 0;
};
inline constexpr newer_field_numbers node_fields{8, 9};
inline constexpr newer_field_numbers graph_fields{0, 16};
inline constexpr newer_field_numbers function_fields{13, 14};
inline constexpr newer_field_numbers model_fields{0, 0};  // metadata_props (14) is known to onnx 1.12

struct newer_fields {
  std::string overload;
  metadata_list metadata;
  std::string rest;  ///< every other unknown field, as wire bytes
};

inline newer_fields read_newer_fields(const google::protobuf::Message& m, newer_field_numbers numbers) {
  newer_fields out;
  const auto& unknown = m.GetReflection()->GetUnknownFields(m);
  google::protobuf::UnknownFieldSet rest;
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto& f = unknown.field(i);
    const bool bytes = f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED;
    if (bytes && numbers.overload != 0 && f.number() == numbers.overload) {
      out.overload = f.length_delimited();
      continue;
    }
    if (bytes && numbers.metadata != 0 && f.number() == numbers.metadata) {
      onnx::StringStringEntryProto e;
      if (e.ParseFromString(f.length_delimited())) {
        out.metadata.emplace_back(e.key(), e.value());
        continue;
      }
    }
    rest.AddField(f);
  }
  if (!rest.empty()) rest.SerializeToString(&out.rest);
  return out;
}

/// Adds the fields back to `m` (after its known fields were set).
inline void write_newer_fields(google::protobuf::Message& m, newer_field_numbers numbers, const std::string& overload,
                               const metadata_list& metadata, const std::string& rest) {
  if (overload.empty() && metadata.empty() && rest.empty()) return;
  google::protobuf::UnknownFieldSet add;
  if (numbers.overload != 0 && !overload.empty()) add.AddLengthDelimited(numbers.overload, overload);
  if (numbers.metadata != 0)
    for (const auto& [k, v] : metadata) {
      onnx::StringStringEntryProto e;
      e.set_key(k);
      e.set_value(v);
      add.AddLengthDelimited(numbers.metadata, e.SerializeAsString());
    }
  std::string bytes;
  add.SerializeToString(&bytes);
  bytes += rest;
  m.MergeFromString(bytes);
}

}  // namespace epstack::detail
