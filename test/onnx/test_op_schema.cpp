// The generated schema table (epstack/onnx/op_schema.hpp) against the onnx 1.12 library's own registry: for every
// operator version that library knows (ai.onnx 1-17, ai.onnx.ml 1-3), the table must have the same version with the
// same input and output counts, attributes and type constraints, and resolve every opset 1-17 to the same version.
// Then the versions onnx 1.12 does not know, spot-checked against the ONNX 1.22 changelog.
#include <onnx/defs/schema.h>

#include <epstack/onnx/op_schema.hpp>

#include <doctest/doctest.h>

#include <limits>
#include <set>
#include <string>

namespace {

using epstack::schema::find_schema;

int max_of(int v) { return v == std::numeric_limits<int>::max() ? -1 : v; }

// Type strings without spaces ("map(string, int64)" in onnx 1.12 is "map(string,int64)" in the table).
std::set<std::string> known_types(const std::vector<std::string>& v) {
  std::set<std::string> out;
  for (auto s : v) {
    std::erase(s, ' ');
    out.insert(s);
  }
  return out;
}

}  // namespace

TEST_CASE("the schema table agrees with onnx 1.12 on every operator version it knows") {
  const auto all = onnx::OpSchemaRegistry::get_all_schemas_with_history();
  int compared = 0;
  for (const auto& os : all) {
    const std::string domain = os.domain();
    if (domain != "" && domain != "ai.onnx.ml") continue;
    if (domain == "" && os.SinceVersion() > 17) continue;
    const auto versions = epstack::schema::versions_of(domain, os.Name());
    const epstack::schema::op_schema* mine = nullptr;
    for (const auto* s : versions)
      if (s->since_version == os.SinceVersion()) mine = s;
    INFO(os.Name(), "-", os.SinceVersion(), " domain '", domain, "'");
    REQUIRE(mine != nullptr);
    // Two corrections ONNX made after 1.12, which the table follows: GridSample-16's grid is T2 (1.12 typed it T1,
    // so its T2 constrained nothing), Erf-13 is for floating types (1.12 also listed the integer types).
    const bool corrected = (os.Name() == "GridSample" && os.SinceVersion() == 16) || (os.Name() == "Erf" && os.SinceVersion() == 13);
    if (corrected) continue;
    CHECK(mine->deprecated == os.Deprecated());
    if (os.Deprecated()) continue;
    CHECK(mine->min_inputs == os.min_input());
    CHECK(mine->max_inputs == max_of(os.max_input()));
    CHECK(mine->min_outputs == os.min_output());
    CHECK(mine->max_outputs == max_of(os.max_output()));
    REQUIRE(mine->inputs.size() == os.inputs().size());
    for (std::size_t i = 0; i < mine->inputs.size(); ++i) {
      CHECK(mine->inputs[i].name == os.inputs()[i].GetName());
      CHECK(mine->inputs[i].type == os.inputs()[i].GetTypeStr());
      CHECK((mine->inputs[i].option == epstack::schema::param_option::optional) ==
            (os.inputs()[i].GetOption() == onnx::OpSchema::Optional));
      CHECK((mine->inputs[i].option == epstack::schema::param_option::variadic) ==
            (os.inputs()[i].GetOption() == onnx::OpSchema::Variadic));
    }
    REQUIRE(mine->outputs.size() == os.outputs().size());
    for (std::size_t i = 0; i < mine->outputs.size(); ++i) CHECK(mine->outputs[i].name == os.outputs()[i].GetName());
    CHECK(mine->attributes.size() == os.attributes().size());
    for (const auto& [name, a] : os.attributes()) {
      const auto* ma = mine->attribute(name);
      INFO("attribute ", name);
      REQUIRE(ma != nullptr);
      CHECK(ma->required == a.required);
      CHECK(static_cast<int>(ma->type) == static_cast<int>(a.type));
    }
    CHECK(mine->constraints.size() == os.typeConstraintParams().size());
    for (const auto& c : os.typeConstraintParams()) {
      const auto* mc = mine->constraint(c.type_param_str);
      INFO("constraint ", c.type_param_str);
      REQUIRE(mc != nullptr);
      CHECK(known_types(mc->allowed) == known_types(c.allowed_type_strs));
    }
    ++compared;
  }
  CHECK(compared > 430);

  // Resolution: every operator of onnx 1.12 at every opset it knows.
  int resolved = 0;
  for (const auto& os : all) {
    const std::string domain = os.domain();
    const int top = domain == "" ? 17 : domain == "ai.onnx.ml" ? 3 : 0;
    for (int v = 1; v <= top; ++v) {
      const auto* theirs = onnx::OpSchemaRegistry::Schema(os.Name(), v, domain);
      const auto* mine = find_schema(domain, os.Name(), v);
      INFO(os.Name(), " at opset ", v);
      if (theirs == nullptr || theirs->Deprecated()) {
        CHECK(mine == nullptr);
      } else {
        REQUIRE(mine != nullptr);
        CHECK(mine->since_version == theirs->SinceVersion());
        ++resolved;
      }
    }
  }
  CHECK(resolved > 5000);
}

TEST_CASE("the schema table knows the versions after onnx 1.12") {
  using epstack::schema::attr_type;
  const auto* rm = find_schema("", "ReduceMean", 27);
  REQUIRE(rm != nullptr);
  CHECK(rm->since_version == 18);
  CHECK(rm->min_inputs == 1);
  CHECK(rm->max_inputs == 2);
  CHECK(rm->inputs[1].name == "axes");
  CHECK(rm->attribute("noop_with_empty_axes") != nullptr);
  CHECK(rm->attribute("axes") == nullptr);

  const auto* split = find_schema("ai.onnx", "Split", 18);
  REQUIRE(split != nullptr);
  CHECK(split->since_version == 18);
  REQUIRE(split->attribute("num_outputs") != nullptr);
  CHECK(split->attribute("num_outputs")->type == attr_type::integer);

  const auto* reshape = find_schema("", "Reshape", 27);
  REQUIRE(reshape != nullptr);
  CHECK(reshape->since_version == 25);
  const auto* t = reshape->constraint("T");
  REQUIRE(t != nullptr);
  for (const char* ty : {"tensor(float8e4m3fn)", "tensor(int4)", "tensor(float4e2m1)", "tensor(float8e8m0)",
                         "tensor(int2)", "tensor(uint2)"})
    CHECK(t->allows(ty));
  CHECK_FALSE(t->allows("seq(tensor(float))"));

  const auto* attn = find_schema("", "Attention", 24);
  REQUIRE(attn != nullptr);
  CHECK(attn->since_version == 24);
  CHECK(attn->attribute("softcap") != nullptr);
  CHECK(find_schema("", "Attention", 22) == nullptr);  // added at 23

  // ONNX 1.22 lists GroupNormalization-18 as deprecated (its scale and bias were per group; 21 made them per
  // channel): opsets 18 to 20 have no GroupNormalization.
  CHECK(find_schema("", "GroupNormalization", 20) == nullptr);
  const auto* gn = find_schema("", "GroupNormalization", 21);
  REQUIRE(gn != nullptr);
  CHECK(gn->since_version == 21);

  const auto* te = find_schema("ai.onnx.ml", "TreeEnsemble", 5);
  REQUIRE(te != nullptr);
  CHECK(te->attribute("nodes_modes") != nullptr);
  CHECK(find_schema("ai.onnx.ml", "TreeEnsembleRegressor", 5) == nullptr);  // deprecated at 5
  CHECK(find_schema("ai.onnx.ml", "TreeEnsembleRegressor", 4) != nullptr);

  // Types with commas inside stay whole.
  const auto* le = find_schema("ai.onnx.ml", "DictVectorizer", 1);
  REQUIRE(le != nullptr);
  REQUIRE(le->constraint("T1") != nullptr);
  CHECK(le->constraint("T1")->allows("map(string,int64)"));

  CHECK(epstack::schema::find_domain("ai.onnx")->max_version == 27);
  CHECK(epstack::schema::find_domain("ai.onnx.ml")->max_version == 5);
  CHECK(epstack::schema::find_domain("com.example") == nullptr);
  CHECK(find_schema("", "NoSuchOp", 27) == nullptr);
}
