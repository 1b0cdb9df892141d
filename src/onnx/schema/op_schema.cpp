// The operator schema table: the generated rows of schema_table.inc, parsed once on first use.
#include <epstack/onnx/op_schema.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <utility>

namespace epstack::schema {
namespace {

struct row {
  const char* domain;
  const char* name;
  int since;
  bool deprecated;
  int min_in, max_in, min_out, max_out;
  const char* inputs;       // name:type:option[h];...   option s(ingle) o(ptional) v(ariadic), h heterogeneous
  const char* outputs;      // same
  const char* attributes;   // name:kind:r|o:default;...
  const char* constraints;  // T=type,type;U=...
};

constexpr row rows[] = {
#include "schema_table.inc"
};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  if (s.empty()) return out;
  std::size_t b = 0;
  for (;;) {
    const auto e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    if (e == std::string_view::npos) break;
    b = e + 1;
  }
  return out;
}

// A formal parameter "name:type:option": the type may itself contain ':'? It does not (types use parentheses and
// commas only), so the fields are the first, the last and everything between.
formal_parameter parse_param(std::string_view s) {
  const auto a = s.find(':');
  const auto z = s.rfind(':');
  formal_parameter p;
  p.name = std::string(s.substr(0, a));
  p.type = std::string(s.substr(a + 1, z - a - 1));
  const auto opt = s.substr(z + 1);
  p.option = opt[0] == 'v' ? param_option::variadic : opt[0] == 'o' ? param_option::optional : param_option::single;
  p.homogeneous = opt.find('h') == std::string_view::npos;
  return p;
}

attr_type parse_kind(std::string_view k) {
  static const std::map<std::string_view, attr_type> kinds{
      {"f", attr_type::floating}, {"i", attr_type::integer}, {"s", attr_type::string}, {"t", attr_type::tensor},
      {"g", attr_type::graph}, {"fs", attr_type::floats}, {"is", attr_type::ints}, {"ss", attr_type::strings},
      {"ts", attr_type::tensors}, {"gs", attr_type::graphs}, {"st", attr_type::sparse_tensor},
      {"sts", attr_type::sparse_tensors}, {"tp", attr_type::type_proto}, {"tps", attr_type::type_protos}};
  return kinds.at(k);
}

attribute_spec parse_attribute(std::string_view s) {
  // name:kind:r|o:default (the default may contain ':' and ';' never: the generator checks)
  const auto f = split(s, ':');
  attribute_spec a;
  a.name = std::string(f.at(0));
  a.type = parse_kind(f.at(1));
  a.required = f.at(2) == "r";
  const auto d = s.find(':', f[0].size() + f[1].size() + 2);
  a.default_text = std::string(s.substr(d + 1));
  return a;
}

struct registry {
  std::vector<op_schema> schemas;
  // Keys view the schemas' own strings (the vector is filled before the map and never grows after).
  std::map<std::pair<std::string_view, std::string_view>, std::vector<const op_schema*>> by_op;

  registry() {
    schemas.reserve(std::size(rows));
    for (const auto& r : rows) {
      op_schema s;
      s.domain = r.domain;
      s.name = r.name;
      s.since_version = r.since;
      s.deprecated = r.deprecated;
      s.min_inputs = r.min_in;
      s.max_inputs = r.max_in;
      s.min_outputs = r.min_out;
      s.max_outputs = r.max_out;
      for (auto p : split(r.inputs, ';')) s.inputs.push_back(parse_param(p));
      for (auto p : split(r.outputs, ';')) s.outputs.push_back(parse_param(p));
      for (auto p : split(r.attributes, ';')) s.attributes.push_back(parse_attribute(p));
      for (auto p : split(r.constraints, ';')) {
        type_constraint c;
        const auto eq = p.find('=');
        c.name = std::string(p.substr(0, eq));
        for (auto t : split(p.substr(eq + 1), ',')) c.allowed.emplace_back(t);
        s.constraints.push_back(std::move(c));
      }
      schemas.push_back(std::move(s));
    }
    // Types such as map(string,tensor(int64)) were split at their inner comma: join them back.
    for (auto& s : schemas)
      for (auto& c : s.constraints) {
        std::vector<std::string> joined;
        for (auto& t : c.allowed) {
          const auto depth = [](const std::string& x) {
            return std::count(x.begin(), x.end(), '(') - std::count(x.begin(), x.end(), ')');
          };
          if (!joined.empty() && depth(joined.back()) > 0)
            joined.back() += "," + t;
          else
            joined.push_back(std::move(t));
        }
        c.allowed = std::move(joined);
      }
    for (const auto& s : schemas) by_op[{s.domain, s.name}].push_back(&s);
    for (auto& [k, v] : by_op)
      std::sort(v.begin(), v.end(), [](const op_schema* a, const op_schema* b) { return a->since_version < b->since_version; });
  }
};

const registry& the_registry() {
  static const registry r;
  return r;
}

std::string_view canonical(std::string_view domain) noexcept { return domain == "ai.onnx" ? std::string_view() : domain; }

constexpr std::array<domain_versions, 5> domains{{
    {"", 1, 27},
    {"ai.onnx.ml", 1, 5},
    {"ai.onnx.training", 1, 1},
    {"ai.onnx.preview.training", 1, 1},
    {"ai.onnx.preview", 1, 1},
}};

}  // namespace

std::string_view to_string(attr_type t) noexcept {
  switch (t) {
    case attr_type::floating: return "float";
    case attr_type::integer: return "int";
    case attr_type::string: return "string";
    case attr_type::tensor: return "tensor";
    case attr_type::graph: return "graph";
    case attr_type::floats: return "floats";
    case attr_type::ints: return "ints";
    case attr_type::strings: return "strings";
    case attr_type::tensors: return "tensors";
    case attr_type::graphs: return "graphs";
    case attr_type::sparse_tensor: return "sparse_tensor";
    case attr_type::sparse_tensors: return "sparse_tensors";
    case attr_type::type_proto: return "type_proto";
    case attr_type::type_protos: return "type_protos";
  }
  return "?";
}

bool type_constraint::allows(std::string_view type) const noexcept {
  return std::find(allowed.begin(), allowed.end(), type) != allowed.end();
}

const attribute_spec* op_schema::attribute(std::string_view n) const noexcept {
  for (const auto& a : attributes)
    if (a.name == n) return &a;
  return nullptr;
}

const type_constraint* op_schema::constraint(std::string_view n) const noexcept {
  for (const auto& c : constraints)
    if (c.name == n) return &c;
  return nullptr;
}

namespace {
const formal_parameter* formal_at(const std::vector<formal_parameter>& f, std::size_t i) noexcept {
  if (i < f.size()) return &f[i];
  if (!f.empty() && f.back().option == param_option::variadic) return &f.back();
  return nullptr;
}
}  // namespace

const formal_parameter* op_schema::input(std::size_t i) const noexcept { return formal_at(inputs, i); }
const formal_parameter* op_schema::output(std::size_t i) const noexcept { return formal_at(outputs, i); }

std::string op_schema::label() const {
  return (domain.empty() ? std::string() : domain + ".") + name + "-" + std::to_string(since_version);
}

std::span<const domain_versions> known_domains() noexcept { return domains; }

const domain_versions* find_domain(std::string_view domain) noexcept {
  const auto d = canonical(domain);
  for (const auto& k : domains)
    if (k.domain == d) return &k;
  return nullptr;
}

std::span<const op_schema* const> versions_of(std::string_view domain, std::string_view op) noexcept {
  const auto& r = the_registry();
  const auto it = r.by_op.find({canonical(domain), op});
  if (it == r.by_op.end()) return {};
  return it->second;
}

const op_schema* find_schema(std::string_view domain, std::string_view op, int opset_version) noexcept {
  const op_schema* best = nullptr;
  for (const auto* s : versions_of(domain, op))
    if (s->since_version <= opset_version) best = s;
  return best != nullptr && !best->deprecated ? best : nullptr;
}

std::span<const op_schema> all_schemas() noexcept { return the_registry().schemas; }

}  // namespace epstack::schema
