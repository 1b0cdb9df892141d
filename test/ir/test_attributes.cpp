#include <epstack/ir/attribute_codec.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/ir/graph.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace epstack;

namespace {
// A user-defined attribute set, to check the generic reader on something other than EPContext.
struct conv_like {
  std::vector<std::int64_t> strides{1, 1};
  std::int32_t group = 1;
  std::string auto_pad = "NOTSET";
  float alpha = 0.5f;
  bool flag = false;
  tensor weights;
};
}  // namespace

template <>
struct epstack::attribute_schema<conv_like> {
  static constexpr std::string_view op_type = "ConvLike";
  static constexpr auto fields = std::tuple{
      field("strides", &conv_like::strides), field("group", &conv_like::group),
      field("auto_pad", &conv_like::auto_pad), field("alpha", &conv_like::alpha), field("flag", &conv_like::flag),
      field("weights", &conv_like::weights, field_flags::required)};
};

static_assert(attribute_codable<float>);
static_assert(attribute_codable<std::vector<subgraph>>);
static_assert(attribute_codable<type_info>);
static_assert(!attribute_codable<double>);
static_assert(attribute_struct<ep_context_attributes>);
static_assert(attribute_struct<conv_like>);
static_assert(!attribute_struct<int>);

TEST_CASE("every attribute kind round-trips through its codec") {
  const auto rt = [](const auto& v) {
    using T = std::decay_t<decltype(v)>;
    auto a = encode_attribute("a", v);
    CHECK(a.kind() == attribute_codec<T>::kind);
    auto back = decode_attribute<T>(a, "n");
    REQUIRE(back.has_value());
    return std::move(back).value();
  };
  CHECK(rt(1.5f) == 1.5f);
  CHECK(rt(std::int64_t{-7}) == -7);
  CHECK(rt(std::string("bytes\0x", 7)) == std::string("bytes\0x", 7));
  CHECK(rt(tensor::from<float>({2}, {1.0f, 2.0f})).view<float>()[1] == 2.0f);
  graph g("body");
  CHECK(rt(make_subgraph(g))->name() == "body");
  sparse_tensor sp{tensor::from<float>({1}, {3.0f}), tensor::from<std::int64_t>({1, 1}, {4}), {8}};
  CHECK(rt(sp).dims == std::vector<std::int64_t>{8});
  CHECK(rt(type_info::tensor_of(element_type::int8)).elem == element_type::int8);
  CHECK(rt(std::vector<float>{1, 2}) == std::vector<float>{1, 2});
  CHECK(rt(std::vector<std::int64_t>{3, 4}) == std::vector<std::int64_t>{3, 4});
  CHECK(rt(std::vector<std::string>{"a", "b"}) == std::vector<std::string>{"a", "b"});
  CHECK(rt(std::vector<tensor>{tensor::scalar<std::int32_t>(5)}).size() == 1);
  CHECK(rt(std::vector<subgraph>{make_subgraph(g), make_subgraph(g)}).size() == 2);
  CHECK(rt(std::vector<sparse_tensor>{sp}).size() == 1);
  CHECK(rt(std::vector<type_info>{type_info::sequence_of(type_info::tensor_of(element_type::float32))})[0].kind ==
        type_kind::sequence);
  CHECK(rt(std::int32_t{12}) == 12);
  CHECK(rt(true) == true);
}

TEST_CASE("decoding checks the kind and the range naming node and attribute") {
  auto a = encode_attribute("group", 2.0f);
  auto r = decode_attribute<std::int64_t>(a, "conv1");
  CHECK(r.code() == errc::invalid_graph);
  CHECK(r.status().message() == "node 'conv1': attribute 'group' must be INT, found FLOAT");
  auto big = encode_attribute("group", std::int64_t{1} << 40);
  auto r32 = decode_attribute<std::int32_t>(big, "conv1");
  CHECK(r32.code() == errc::invalid_graph);
  CHECK(r32.status().message().find("out of range") != std::string::npos);
  auto two = encode_attribute("flag", std::int64_t{2});
  CHECK(decode_attribute<bool>(two, "n").status().message() == "node 'n': attribute 'flag': value 2 is not 0 or 1");
  attribute ref;
  ref.name = "alpha";
  ref.ref_attr_name = "outer_alpha";
  CHECK(decode_attribute<float>(ref, "f").status().message().find("refers to attribute 'outer_alpha'") != std::string::npos);
}

TEST_CASE("a typed attribute set reads defaults checks names and required fields and writes back") {
  attribute_list attrs;
  attrs.set("group", std::int64_t{4});
  attrs.set("weights", tensor::from<float>({1}, {1.0f}));
  auto s = read_attributes<conv_like>(attrs, "c1");
  REQUIRE(s.has_value());
  CHECK(s->group == 4);
  CHECK(s->strides == std::vector<std::int64_t>{1, 1});  // default
  CHECK(s->auto_pad == "NOTSET");

  attrs.set("dilations", std::vector<std::int64_t>{2, 2});
  auto unknown = read_attributes<conv_like>(attrs, "c1");
  CHECK(unknown.code() == errc::invalid_graph);
  CHECK(unknown.status().message() == "node 'c1' (ConvLike): unknown attribute 'dilations'");
  CHECK(read_attributes<conv_like>(attrs, "c1", {.allow_unknown = true}).has_value());
  attrs.erase("dilations");

  attrs.erase("weights");
  auto missing = read_attributes<conv_like>(attrs, "c1");
  CHECK(missing.status().message() == "node 'c1' (ConvLike): required attribute 'weights' is missing");

  attrs.set("weights", tensor::from<float>({1}, {1.0f}));
  attrs.append(encode_attribute("group", std::int64_t{2}));
  CHECK(read_attributes<conv_like>(attrs, "c1").status().message() ==
        "node 'c1' (ConvLike): attribute 'group' appears twice");

  conv_like c;
  c.group = 3;
  c.weights = tensor::from<float>({1}, {2.0f});
  attribute_list out;
  write_attributes(c, out);
  CHECK(out.size() == 2);  // only what differs from the defaults
  CHECK(out.find("group") != nullptr);
  CHECK(out.find("strides") == nullptr);
  attribute_list all;
  write_attributes(c, all, /*write_defaults=*/true);
  CHECK(all.size() == 6);
  auto back = read_attributes<conv_like>(all, "c2");
  REQUIRE(back.has_value());
  CHECK(back->group == 3);
  CHECK(back->weights.view<float>()[0] == 2.0f);
}

TEST_CASE("EPContext attributes: schema defaults value rules and a round trip") {
  ep_context_attributes ctx;
  CHECK(ctx.main_context == 1);
  CHECK(ctx.embed_mode == 1);
  CHECK(ctx.max_size == 0);
  ctx.ep_cache_context = "model_dnnl.bin";
  ctx.embed_mode = 0;
  ctx.source = "DnnlExecutionProvider";
  ctx.partition_name = "DnnlExecutionProvider_dnnl_0_0";
  ctx.ep_sdk_version = "2.6.0";
  ctx.hardware_architecture = "avx512_core";
  ctx.onnx_model_filename = "model.onnx";
  ctx.notes = "n";
  ctx.max_size = 1 << 20;
  attribute_list attrs;
  write_attributes(ctx, attrs);
  CHECK(attrs.size() == 10);
  CHECK(std::get<std::int64_t>(attrs.find("embed_mode")->value) == 0);
  CHECK(std::get<std::string>(attrs.find("source")->value) == "DnnlExecutionProvider");
  auto back = read_attributes<ep_context_attributes>(attrs, "ctx0");
  REQUIRE(back.has_value());
  CHECK(*back == ctx);

  // Defaults are written for the fields flagged always_write, the rest omitted.
  ep_context_attributes minimal;
  minimal.ep_cache_context = "payload";
  attribute_list few;
  write_attributes(minimal, few);
  CHECK(few.size() == 4);  // main_context, ep_cache_context, embed_mode, source
  CHECK(few.find("notes") == nullptr);
  CHECK(read_attributes<ep_context_attributes>(few, "ctx1").has_value());

  const auto reject = [&](const char* name, attribute::value_type v, const char* expected) {
    attribute_list a = attrs;
    a.set(name, std::move(v));
    auto r = read_attributes<ep_context_attributes>(a, "ctx0");
    CHECK(r.code() == errc::invalid_graph);
    CHECK(r.status().message() == expected);
  };
  reject("embed_mode", std::int64_t{2}, "EPContext node 'ctx0': attribute 'embed_mode' must be 0 or 1, found 2");
  reject("main_context", std::int64_t{-1}, "EPContext node 'ctx0': attribute 'main_context' must be 0 or 1, found -1");
  reject("max_size", std::int64_t{-5}, "EPContext node 'ctx0': attribute 'max_size' must not be negative, found -5");
  reject("embed_mode", std::string("1"), "node 'ctx0': attribute 'embed_mode' must be INT, found STRING");
  reject("source", std::int64_t{1}, "node 'ctx0': attribute 'source' must be STRING, found INT");
  reject("ep_cache_context", std::string(), "EPContext node 'ctx0': attribute 'ep_cache_context' is empty on a main context (main_context = 1)");
  reject("colour", std::string("blue"), "node 'ctx0' (EPContext): unknown attribute 'colour'");
  attribute_list secondary = attrs;
  secondary.set("main_context", std::int64_t{0});
  secondary.set("ep_cache_context", std::string());
  CHECK(read_attributes<ep_context_attributes>(secondary, "ctx2").has_value());  // refers to another node's context
}
