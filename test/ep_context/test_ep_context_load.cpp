// EPContext loading: what a context model may name and how each defect is refused (paths, damaged binaries, SDK
// and hardware, unknown sources, refused options), disable_model_compile, the shared workspace on load, and
// check_compatibility.
#include "fixtures.hpp"

using namespace epstack;
using namespace epstack::test::ctx;

TEST_CASE("Bad context paths, missing and corrupted binaries are invalid_graph saying what is wrong") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  REQUIRE(toy_session::create(src, gen_options(0)).is_ok());
  fs::create_directory(dir / "sub.bin");
  fs::create_directory(dir / "inner");
  const struct {
    std::string path, expect;
  } cases[] = {{"", "is empty"},
               {"/etc/passwd", "is absolute"},
               {"../model_toy.bin", "contains '..'"},
               {"inner/../model_toy.bin", "contains '..'"},
               {"sub.bin", "not a regular file"},
               {"missing.bin", "does not exist"}};
  for (const auto& c : cases) {
    CAPTURE(c.path);
    const auto bad = with_attribute(dir / "model_ctx.onnx", dir / "bad_ctx.onnx", "ep_cache_context", c.path);
    auto s = toy_session::create(bad);
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == errc::invalid_graph);
    CHECK(s.status().message().find(c.expect) != std::string::npos);
    CHECK(s.status().message().find("EPContext node") != std::string::npos);
    fs::remove(bad);
  }
  // Corrupted and truncated binaries: a byte of the table; a byte of a tensor (the toy provider leaves verifying to
  // the session, which verifies a graph's tensors before restoring it).
  const std::string good = test::read_file(dir / "model_toy.bin");
  const auto at = tensor_file_offset(dir / "model_toy.bin", 0) + 2;
  std::string flipped = good;
  flipped[150] = static_cast<char>(flipped[150] ^ 0x5a);
  test::write_file(dir / "model_toy.bin", flipped);
  auto c = toy_session::create(dir / "model_ctx.onnx");
  REQUIRE_FALSE(c.is_ok());
  CHECK(c.status().code() == errc::invalid_graph);
  CHECK(c.status().message().find("corrupted: the hash of its table") != std::string::npos);
  std::string tflip = good;
  tflip[at] = static_cast<char>(tflip[at] ^ 0x5a);
  test::write_file(dir / "model_toy.bin", tflip);
  auto ct = toy_session::create(dir / "model_ctx.onnx");
  REQUIRE_FALSE(ct.is_ok());
  CHECK(ct.status().code() == errc::invalid_graph);
  CHECK(ct.status().message().find("corrupted: tensor '") != std::string::npos);
  CHECK(ct.status().message().find("model_toy.bin") != std::string::npos);
  const auto compat = toy_session::check_compatibility(dir / "model_ctx.onnx");
  CHECK(compat.code() == errc::invalid_graph);
  CHECK(compat.message().find("corrupted: tensor '") != std::string::npos);
  test::write_file(dir / "model_toy.bin", good.substr(0, good.size() / 2));
  auto t = toy_session::create(dir / "model_ctx.onnx");
  REQUIRE_FALSE(t.is_ok());
  CHECK(t.status().code() == errc::invalid_graph);
  std::string future = good;
  future[8] = 9;  // format version 9
  test::write_file(dir / "model_toy.bin", future);
  auto v = toy_session::create(dir / "model_ctx.onnx");
  REQUIRE_FALSE(v.is_ok());
  CHECK(v.status().code() == errc::invalid_graph);
  test::write_file(dir / "model_toy.bin", good);
  CHECK(toy_session::create(dir / "model_ctx.onnx").is_ok());
  session_options verify_now;
  verify_now.set_config(config_keys::ep_context_verify, "on_load");
  CHECK(toy_session::create(dir / "model_ctx.onnx", verify_now).is_ok());
  session_options unknown;
  unknown.set_config(config_keys::ep_context_verify, "sometimes");
  auto u = toy_session::create(dir / "model_ctx.onnx", unknown);
  REQUIRE_FALSE(u.is_ok());
  CHECK(u.status().code() == errc::invalid_argument);
  CHECK(u.status().message().find("epstack.ep_context_verify must be on_use or on_load, found 'sometimes'") !=
        std::string::npos);
}

TEST_CASE("SDK version and hardware mismatches are refused, check_compatibility answers without a session") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  REQUIRE(toy_session::create(src, gen_options(0)).is_ok());
  const auto ctx = dir / "model_ctx.onnx";
  CHECK(toy_session::check_compatibility(ctx).is_ok());
  CHECK(toy_session::check_compatibility(src).is_ok());  // no EPContext node: nothing to check

  toy newer;
  newer.sdk = "2.0";
  const auto st = toy_session::check_compatibility(ctx, {}, {newer, cpu_provider{}});
  CHECK(st.code() == errc::invalid_graph);
  CHECK(st.message().find("SDK version '1.0'") != std::string::npos);
  CHECK(st.message().find("'2.0'") != std::string::npos);
  auto s = toy_session::create(ctx, {}, {newer, cpu_provider{}});
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.status().code() == errc::invalid_graph);
  CHECK(*newer.compiled == 0);

  toy other_hw;
  other_hw.hw = "toyarch2";
  auto h = toy_session::create(ctx, {}, {other_hw, cpu_provider{}});
  REQUIRE_FALSE(h.is_ok());
  CHECK(h.status().code() == errc::invalid_graph);
  CHECK(h.status().message().find("hardware architecture 'toyarch'") != std::string::npos);
  CHECK(h.status().message().find("'toyarch2'") != std::string::npos);
}

TEST_CASE("Compiled-model compatibility in ONNX Runtime's terms: recorded at generation, judged per provider, a suboptimal model refused on request") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  REQUIRE(toy_session::create(src, gen_options(0)).is_ok());
  const auto ctx = dir / "model_ctx.onnx";
  auto m = load_model(ctx);
  REQUIRE(m.has_value());
  std::string info;
  for (const auto& [k, v] : m->metadata)
    if (k == "ep_compatibility_info.ToyExecutionProvider") info = v;
  CHECK(info == "ToyExecutionProvider;sdk_version=1.0;hardware_architecture=toyarch");

  using cmc = compiled_model_compatibility;
  const auto verdicts = [&](const fs::path& p, toy t) {
    auto v = toy_session::compiled_model_compatibility(p, {t, cpu_provider{}});
    REQUIRE_MESSAGE(v.has_value(), v.status().to_string());
    REQUIRE(v->size() == 2);
    CHECK((*v)[0].provider == "ToyExecutionProvider");
    CHECK((*v)[1].provider == "CPUExecutionProvider");
    CHECK((*v)[1].value == cmc::ep_not_applicable);  // the CPU provider compiles nothing it keeps
    return (*v)[0];
  };
  const auto same = verdicts(ctx, toy{});
  CHECK(same.value == cmc::ep_supported_optimal);
  CHECK(same.info == info);
  CHECK(verdicts(src, toy{}).value == cmc::ep_not_applicable);  // not compiled
  const std::string bytes = test::read_file(ctx);
  auto from_bytes = toy_session::compiled_model_compatibility(std::as_bytes(std::span(bytes.data(), bytes.size())));
  REQUIRE(from_bytes.has_value());
  CHECK((*from_bytes)[0].value == cmc::ep_supported_optimal);

  toy newer;
  newer.sdk = "2.0";
  const auto sdk = verdicts(ctx, newer);
  CHECK(sdk.value == cmc::ep_unsupported);
  CHECK(sdk.reason.find("SDK version '1.0'; this build has '2.0'") != std::string::npos);
  toy other;
  other.hw = "toyarch2";
  CHECK(verdicts(ctx, other).value == cmc::ep_unsupported);
  toy plus;  // runs contexts made for toyarch, but would compile better ones
  plus.hw = "toyarch+";
  const auto sub = verdicts(ctx, plus);
  CHECK(sub.value == cmc::ep_supported_prefer_recompilation);
  CHECK(sub.reason.find("'toyarch'") != std::string::npos);
  CHECK(sub.reason.find("'toyarch+'") != std::string::npos);
  CHECK(toy_session::create(ctx, {}, {plus, cpu_provider{}}).is_ok());
  session_options strict;
  strict.set_config(config_keys::fail_on_suboptimal_compiled_model, "1");
  auto refused = toy_session::create(ctx, strict, {plus, cpu_provider{}});
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == errc::model_requires_compilation);
  CHECK(refused.status().message().find("session.fail_on_suboptimal_compiled_model") != std::string::npos);
  CHECK(refused.status().message().find("ToyExecutionProvider") != std::string::npos);
  CHECK(toy_session::create(ctx, strict).is_ok());  // optimal: the option changes nothing

  // An entry that does not read as epstack writes it, and none at all.
  for (const std::string& value : {std::string("garbage"), std::string("ToyExecutionProvider;sdk_version=1.0")}) {
    auto edited = *m;
    for (auto& [k, v] : edited.metadata)
      if (k == "ep_compatibility_info.ToyExecutionProvider") v = value;
    REQUIRE(save_model(edited, dir / "edited_ctx.onnx").is_ok());
    const auto bad = verdicts(dir / "edited_ctx.onnx", toy{});
    CHECK(bad.value == cmc::ep_unsupported);
    CHECK(bad.reason.find(value) != std::string::npos);
  }
  auto bare = *m;
  std::erase_if(bare.metadata, [](const auto& kv) { return kv.first.starts_with("ep_compatibility_info."); });
  REQUIRE(save_model(bare, dir / "bare_ctx.onnx").is_ok());
  const auto none = verdicts(dir / "bare_ctx.onnx", toy{});
  CHECK(none.value == cmc::ep_not_applicable);
  CHECK(none.reason.find("records no ep_compatibility_info.ToyExecutionProvider") != std::string::npos);
}

TEST_CASE("An EPContext node no provider of the stack recognises is an error naming its source and the stack") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  REQUIRE(toy_session::create(src, gen_options(0)).is_ok());
  auto s = session<toy_a>::create(dir / "model_ctx.onnx");
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.status().code() == errc::invalid_graph);
  CHECK(s.status().message().find("source 'ToyExecutionProvider'") != std::string::npos);
  CHECK(s.status().message().find("ToyAExecutionProvider, CPUExecutionProvider") != std::string::npos);
  // The short name is accepted too, case-insensitively.
  const auto renamed = with_attribute(dir / "model_ctx.onnx", dir / "short_ctx.onnx", "source", "TOY");
  auto r = toy_session::create(renamed);
  CHECK_MESSAGE(r.is_ok(), r.status().message());
}

TEST_CASE("session.disable_model_compile: a complete context model loads, a model still to compile fails") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  REQUIRE(toy_session::create(src, gen_options(0)).is_ok());
  session_options o;
  o.set_config(config_keys::disable_model_compile, "1");
  auto ok = toy_session::create(dir / "model_ctx.onnx", o);
  REQUIRE_MESSAGE(ok.is_ok(), ok.status().message());
  check_close(run_x(*ok), reference(src));
  auto no = toy_session::create(src, o);
  REQUIRE_FALSE(no.is_ok());
  CHECK(no.status().code() == errc::model_requires_compilation);
  CHECK(no.status().message().find("ToyExecutionProvider_") != std::string::npos);
}

TEST_CASE("A node with main_context 0 whose graph is in no main context is invalid_graph") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  REQUIRE(toy_session::create(src, gen_options(0)).is_ok());
  auto m = load_model(dir / "model_ctx.onnx");
  REQUIRE(m.is_ok());
  for (node_id n = 0; n < m->graph.node_count(); ++n)
    if (auto* a = m->graph.node(n).attributes.find("main_context"); a && std::get<std::int64_t>(a->value) == 0)
      m->graph.node(n).attributes.set("partition_name", std::string("nowhere"));
  write_model(*m, dir / "orphan_ctx.onnx");
  auto s = toy_session::create(dir / "orphan_ctx.onnx");
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.status().code() == errc::invalid_graph);
  CHECK(s.status().message().find("graph 'nowhere' is in none of the 1 main contexts") != std::string::npos);
}

TEST_CASE("Refused options and context nodes: each error says what it expected and what it found") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");

  SUBCASE("ep.context_enable and ep.context_embed_mode take 0 or 1") {
    session_options o;
    o.set_config(config_keys::ep_context_enable, "yes");
    auto s = toy_session::create(src, o);
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == errc::invalid_argument);
    CHECK(s.status().message().find("ep.context_enable must be 0 or 1, found 'yes'") != std::string::npos);
    auto e = gen_options(0);
    e.set_config(config_keys::ep_context_embed_mode, "2");
    auto t = toy_session::create(src, e);
    REQUIRE_FALSE(t.is_ok());
    CHECK(t.status().message().find("ep.context_embed_mode must be 0 or 1, found '2'") != std::string::npos);
    CHECK(file_count(dir.path()) == 1);
  }
  SUBCASE("embed_mode 1 contexts over the model size limit: use embed_mode 0") {
    auto o = gen_options(1);
    o.set_config(config_keys::ep_context_embed_limit_bytes, "100");  // the toy contexts take a few hundred bytes
    auto s = toy_session::create(src, o);
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == errc::invalid_argument);
    CHECK(s.status().message().find("more than an ONNX model can hold with ep.context_embed_mode 1") != std::string::npos);
    CHECK(s.status().message().find("use ep.context_embed_mode 0") != std::string::npos);
    CHECK(file_count(dir.path()) == 1);
    o.set_config(config_keys::ep_context_embed_limit_bytes, "lots");
    auto t = toy_session::create(src, o);
    REQUIRE_FALSE(t.is_ok());
    CHECK(t.status().message().find("must be a number of bytes, found 'lots'") != std::string::npos);
    o.set_config(config_keys::ep_context_embed_limit_bytes, "100000");
    o.set_config(config_keys::ep_context_file_path, (dir / "roomy_ctx.onnx").string());
    REQUIRE(toy_session::create(src, o).is_ok());
    fs::remove(dir / "roomy_ctx.onnx");
  }
  SUBCASE("weight sharing needs embed_mode 0") {
    auto o = gen_options(1);
    o.set_config(config_keys::ep_share_contexts, "1");
    toy p;
    auto s = toy_session::create(src, o, {p, cpu_provider{}});
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == errc::invalid_argument);
    CHECK(s.status().message().find("needs ep.context_embed_mode 0") != std::string::npos);
    CHECK(*p.compiled == 0);
  }
  SUBCASE("the external initializers file is a plain name in the model's folder") {
    for (const std::string bad : {"../w.data", "/tmp/w.data", "sub/../../w.data"}) {
      CAPTURE(bad);
      auto o = gen_options(0);
      o.set_config(config_keys::ep_context_external_initializers_file, bad);
      auto s = toy_session::create(src, o);
      REQUIRE_FALSE(s.is_ok());
      CHECK(s.status().code() == errc::invalid_argument);
      CHECK(s.status().message().find("must be a file name relative to the EP context model's folder, found '" + bad +
                                      "'") != std::string::npos);
    }
    CHECK(file_count(dir.path()) == 1);
  }

  // A context model to damage.
  REQUIRE(toy_session::create(src, gen_options(0)).is_ok());
  const fs::path ctx = dir / "model_ctx.onnx";
  auto edit_first_node = [&](const std::function<void(node&)>& f, const fs::path& to) {
    auto m = load_model(ctx);
    REQUIRE(m.is_ok());
    for (node_id n = 0; n < m->graph.node_count(); ++n)
      if (m->graph.node(n).op_type == "EPContext") {
        f(m->graph.node(n));
        break;
      }
    return write_model(*m, to);
  };
  const auto refused = [](const auto& s, const std::string& says) {
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == errc::invalid_graph);
    CHECK_MESSAGE(s.status().message().find(says) != std::string::npos, s.status().message());
  };

  SUBCASE("an EPContext node without a name") {
    const auto p = edit_first_node([](node& n) { n.name.clear(); }, dir / "noname_ctx.onnx");
    refused(toy_session::create(p), "an EPContext node has no name");
  }
  SUBCASE("a binary made by another provider") {
    // The node says ToyB; the binary (read by the ToyB provider of this stack) was made by toy.
    const auto p = with_attribute(ctx, dir / "other_ctx.onnx", "source", "ToyBExecutionProvider");
    refused(session<toy_b>::create(p), "was made by provider 'ToyExecutionProvider', expected 'ToyBExecutionProvider'");
  }
  SUBCASE("the node's ep_sdk_version differs from the provider's") {
    const auto p = with_attribute(ctx, dir / "sdk_ctx.onnx", "ep_sdk_version", "0.9");
    refused(toy_session::create(p), "attribute ep_sdk_version is '0.9'; this build of ToyExecutionProvider has version '1.0'");
  }
  SUBCASE("the node's inputs and outputs differ from its stored graph's") {
    auto m = load_model(ctx);
    REQUIRE(m.is_ok());
    // The first node points at the second node's graph.
    const auto nodes = context_nodes(*m);
    REQUIRE(nodes.size() == 2);
    const std::string second = attrs_of(*nodes[1]).partition_name;
    for (node_id n = 0; n < m->graph.node_count(); ++n)
      if (m->graph.node(n).op_type == "EPContext") {
        m->graph.node(n).attributes.set("partition_name", second);
        break;
      }
    refused(toy_session::create(write_model(*m, dir / "io_ctx.onnx")), "differ from those of graph '" + second + "'");
  }
}

TEST_CASE("Weight sharing on load: the workspace keeps no binary mapped that no session uses") {
  test::temp_dir dir;
  const auto a = write_model(chain_model(), dir / "a.onnx");
  const auto b = write_model(chain_model(3.0f), dir / "b.onnx");
  auto o = share_options();
  REQUIRE(toy_session::create(a, o).is_ok());
  o.set_config(config_keys::ep_stop_share_contexts, "1");
  REQUIRE(toy_session::create(b, o).is_ok());

  session_options lo;
  lo.set_config(config_keys::ep_share_contexts, "1");
  {
    auto sa = toy_session::create(dir / "a_ctx.onnx", lo);
    REQUIRE_MESSAGE(sa.is_ok(), sa.status().message());
    CHECK(sa->ep_context().binaries_read.size() == 1);
  }
  // a's session is gone, and with it the mapping: b reads the file again and leaves a's graphs for a later session.
  auto sb = toy_session::create(dir / "b_ctx.onnx", lo);
  REQUIRE_MESSAGE(sb.is_ok(), sb.status().message());
  CHECK(sb->ep_context().binaries_read.size() == 1);
  CHECK(sb->ep_context().graphs_from_workspace == 0);
  auto sa2 = toy_session::create(dir / "a_ctx.onnx", lo);
  REQUIRE_MESSAGE(sa2.is_ok(), sa2.status().message());
  CHECK(sa2->ep_context().binaries_read.empty());
  CHECK(sa2->ep_context().graphs_from_workspace == 2);
  check_close(run_x(*sa2), reference(a));
  check_close(run_x(*sb), reference(b));
}

TEST_CASE("check_compatibility verifies every byte of a binary, from a path and from a buffer") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  REQUIRE(toy_session::create(src, gen_options(0)).is_ok());
  const auto ctx = dir / "model_ctx.onnx";
  const std::string cbytes = test::read_file(ctx);
  const auto cbuf = std::as_bytes(std::span(cbytes.data(), cbytes.size()));
  session_options with_path;
  with_path.set_config(config_keys::ep_context_file_path, ctx.string());
  CHECK(toy_session::check_compatibility(ctx).is_ok());
  CHECK(toy_session::check_compatibility(cbuf, with_path).is_ok());
  // From a buffer without ep.context_file_path the binary's folder is unknown.
  const auto nofolder = toy_session::check_compatibility(cbuf);
  CHECK(nofolder.code() == errc::invalid_graph);
  CHECK(nofolder.message().find("ep.context_file_path") != std::string::npos);

  // A byte in the zeros after the first tensor (24 bytes, the next starts 64 bytes on): no tensor reads it, so a
  // load (which verifies tensors before their first use) accepts the file, but the compatibility check does not.
  const auto bin = dir / "model_toy.bin";
  std::string b = test::read_file(bin);
  const std::size_t at = tensor_file_offset(bin, 0) + 30;
  REQUIRE(b[at] == '\0');
  b[at] = '\x5a';
  test::write_file(bin, b);
  auto s = toy_session::create(ctx);
  REQUIRE_MESSAGE(s.is_ok(), s.status().message());
  check_close(run_x(*s), reference(src));
  for (const Status& st : {toy_session::check_compatibility(ctx), toy_session::check_compatibility(cbuf, with_path)}) {
    CHECK(st.code() == errc::invalid_graph);
    CHECK(st.message().find("lies outside every tensor and is not zero") != std::string::npos);
  }
}
