// Zero-copy loading of weights embedded in a model file: see zero_copy.hpp.
#include "zero_copy.hpp"

#include <epstack/core/element_type.hpp>

#include <cstdint>
#include <cstring>
#include <limits>

namespace epstack::detail {
namespace {

using byte_t = std::uint8_t;

bool read_varint(const byte_t*& p, const byte_t* end, std::uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const byte_t b = *p++;
    v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

void write_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// One field of a message: its number, wire type, the whole field's bytes and, for length-delimited fields, the payload.
struct field {
  std::uint32_t number = 0;
  std::uint32_t wire = 0;
  const byte_t* begin = nullptr;
  const byte_t* end = nullptr;
  const byte_t* payload = nullptr;
  std::uint64_t varint = 0;  // wire type 0
  std::size_t size() const { return static_cast<std::size_t>(end - payload); }
};

// Calls f(field) for every field of the message [p, end); false on malformed input (or groups, which ONNX never uses).
template <class F>
bool for_each_field(const byte_t* p, const byte_t* end, F&& f) {
  while (p < end) {
    field fl;
    fl.begin = p;
    std::uint64_t tag = 0;
    if (!read_varint(p, end, tag)) return false;
    fl.number = static_cast<std::uint32_t>(tag >> 3);
    fl.wire = static_cast<std::uint32_t>(tag & 7);
    switch (fl.wire) {
      case 0:
        if (!read_varint(p, end, fl.varint)) return false;
        fl.payload = p;
        break;
      case 1:
        if (end - p < 8) return false;
        p += 8;
        fl.payload = p;
        break;
      case 5:
        if (end - p < 4) return false;
        p += 4;
        fl.payload = p;
        break;
      case 2: {
        std::uint64_t len = 0;
        if (!read_varint(p, end, len) || len > static_cast<std::uint64_t>(end - p)) return false;
        fl.payload = p;
        p += len;
        break;
      }
      default: return false;
    }
    fl.end = p;
    if (!f(fl)) return false;
  }
  return true;
}

void copy_field(std::string& out, const field& f) { out.append(reinterpret_cast<const char*>(f.begin), static_cast<std::size_t>(f.end - f.begin)); }
void write_len_field(std::string& out, std::uint32_t number, const std::string& payload) {
  write_varint(out, (std::uint64_t{number} << 3) | 2);
  write_varint(out, payload.size());
  out.append(payload);
}
std::string entry(const std::string& key, const std::string& value) {
  std::string e;
  write_len_field(e, 1, key);
  write_len_field(e, 2, value);
  return e;
}

// TensorProto field numbers (onnx.proto).
constexpr std::uint32_t t_dims = 1, t_data_type = 2, t_raw_data = 9, t_external_data = 13, t_data_location = 14;

// A TensorProto whose raw_data (at least `threshold` bytes, exactly its elements' bytes) becomes external data in
// the file itself; nullopt when it stays as it is.
std::optional<std::string> rewrite_tensor(const byte_t* p, const byte_t* end, const byte_t* file, const std::string& self,
                                          std::size_t threshold) {
  std::uint64_t type = 0, count = 1;
  int raw_fields = 0;
  bool external = false, dims_ok = true;
  field raw;
  const bool ok = for_each_field(p, end, [&](const field& f) {
    if (f.number == t_data_type && f.wire == 0) type = f.varint;
    if (f.number == t_dims) {
      const auto mul = [&](std::uint64_t d) {
        if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / d) dims_ok = false;
        else count *= d;
      };
      if (f.wire == 0) mul(f.varint);
      else if (f.wire == 2) {  // packed
        const byte_t* q = f.payload;
        std::uint64_t d = 0;
        while (q < f.end)
          if (read_varint(q, f.end, d)) mul(d);
          else return dims_ok = false;
      } else dims_ok = false;
    }
    if (f.number == t_raw_data && f.wire == 2) {
      ++raw_fields;
      raw = f;
    }
    if (f.number == t_external_data || (f.number == t_data_location && f.varint != 0)) external = true;
    return true;
  });
  const auto et = static_cast<element_type>(type);
  if (!ok || !dims_ok || external || raw_fields != 1 || !is_valid(et) || et == element_type::string) return std::nullopt;
  if (raw.size() < threshold || count > std::numeric_limits<std::uint64_t>::max() / element_size(et) ||
      raw.size() != count * element_size(et))
    return std::nullopt;
  std::string out;
  for_each_field(p, end, [&](const field& f) {
    if (f.begin != raw.begin) copy_field(out, f);
    return true;
  });
  write_varint(out, (std::uint64_t{t_data_location} << 3) | 0);
  write_varint(out, 1);  // EXTERNAL
  write_len_field(out, t_external_data, entry("location", self));
  write_len_field(out, t_external_data, entry("offset", std::to_string(raw.payload - file)));
  write_len_field(out, t_external_data, entry("length", std::to_string(raw.size())));
  return out;
}

constexpr std::uint32_t m_graph = 7, g_initializer = 5;

}  // namespace

std::optional<std::string> externalize_raw_data(std::span<const std::byte> bytes, const std::string& self_name,
                                                std::size_t threshold) {
  const auto* file = reinterpret_cast<const byte_t*>(bytes.data());
  const byte_t* end = file + bytes.size();
  int graphs = 0;
  std::size_t rewritten = 0;
  std::string out;
  out.reserve(1 << 20);
  const bool ok = for_each_field(file, end, [&](const field& mf) {
    if (mf.number != m_graph || mf.wire != 2) {
      copy_field(out, mf);
      return true;
    }
    if (++graphs > 1) return false;  // several graph fields merge in protobuf: leave that to the parser
    std::string g;
    const bool gok = for_each_field(mf.payload, mf.end, [&](const field& gf) {
      if (gf.number == g_initializer && gf.wire == 2) {
        if (auto t = rewrite_tensor(gf.payload, gf.end, file, self_name, threshold)) {
          write_len_field(g, g_initializer, *t);
          ++rewritten;
          return true;
        }
      }
      copy_field(g, gf);
      return true;
    });
    if (!gok) return false;
    write_len_field(out, m_graph, g);
    return true;
  });
  if (!ok || rewritten == 0) return std::nullopt;
  return out;
}

}  // namespace epstack::detail
