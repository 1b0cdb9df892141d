// The compile cache (epstack.cache_dir): a miss compiles and writes an entry, a hit restores it compiling nothing;
// the key follows the model's bytes, the stack and the options; damaged and incomplete entries are replaced with a
// warning; concurrent compiles of one model leave one valid entry; least recently used entries go beyond the limit;
// listing, clearing and verifying, from the library and from `epstack cache`.
#include "fixtures.hpp"

#include <epstack/runtime/compile_cache.hpp>

#include <atomic>
#include <thread>

using namespace epstack;
using namespace epstack::test::ctx;

namespace {

session_options cache_options(const fs::path& dir) {
  session_options o;
  o.set_config(config_keys::cache_dir, dir.string());
  return o;
}

std::size_t entry_count(const fs::path& dir) {
  auto l = cache::list(dir);
  REQUIRE(l.is_ok());
  return l->size();
}

// Folders of writes in progress or left behind (the `.stat` memo of content hashes is not one).
std::size_t temporaries(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    n += name.starts_with(".tmp-") || name.starts_with(".trash-") ? 1 : 0;
  }
  return n;
}

fs::path only_entry(const fs::path& dir) {
  auto l = cache::list(dir);
  REQUIRE(l.is_ok());
  REQUIRE(l->size() == 1);
  return l->front().folder;
}

}  // namespace

TEST_CASE("Compile cache: a miss compiles and writes an entry, a hit restores it without compiling, same outputs") {
  test::temp_dir dir, cache_dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const auto want = reference(src);

  toy first;
  auto a = toy_session::create(src, cache_options(cache_dir / "c"), {first, cpu_provider{}});
  REQUIRE_MESSAGE(a.is_ok(), a.status().message());
  CHECK_FALSE(a->ep_context().cache_hit);
  CHECK(*first.compiled == 2);
  check_close(run_x(*a), want);
  const auto entry = only_entry(cache_dir / "c");
  CHECK(a->ep_context().cache_entry == entry.string());
  CHECK(a->ep_context().model_written == entry / "model_ctx.onnx");  // where the files are once the entry is in place
  REQUIRE(a->ep_context().binaries_written.size() == 1);
  CHECK(fs::is_regular_file(a->ep_context().binaries_written.front()));
  CHECK(fs::is_regular_file(entry / "model_ctx.onnx"));
  CHECK(fs::is_regular_file(entry / "entry.txt"));
  CHECK(fs::is_regular_file(entry / "model_toy.bin"));
  CHECK(temporaries(cache_dir / "c") == 0);
  CHECK_FALSE(fs::exists(dir / "model_ctx.onnx"));  // nothing beside the source model

  toy second;
  auto b = toy_session::create(src, cache_options(cache_dir / "c"), {second, cpu_provider{}});
  REQUIRE_MESSAGE(b.is_ok(), b.status().message());
  CHECK(b->ep_context().cache_hit);
  CHECK(b->ep_context().cache_entry == entry.string());
  CHECK(*second.compiled == 0);
  CHECK(*second.restored == 2);
  CHECK(b->ep_context().warnings.empty());
  check_close(run_x(*b), want);

  // A hit reads the entry's binaries, wherever the caller's options would look for a context model's.
  auto elsewhere = cache_options(cache_dir / "c");
  elsewhere.set_config(config_keys::ep_context_file_path, (dir / "other_ctx.onnx").string());
  elsewhere.set_context_reader([](std::string_view) -> std::optional<std::vector<std::byte>> { return std::nullopt; });
  auto e = toy_session::create(src, elsewhere);
  REQUIRE_MESSAGE(e.is_ok(), e.status().message());
  CHECK(e->ep_context().cache_hit);
  CHECK(e->ep_context().warnings.empty());

  // From bytes: the same key (the key is the model's content, not its path).
  const std::string bytes = test::read_file(src);
  toy third;
  auto c = toy_session::create(std::as_bytes(std::span(bytes.data(), bytes.size())), cache_options(cache_dir / "c"),
                               {third, cpu_provider{}});
  REQUIRE_MESSAGE(c.is_ok(), c.status().message());
  CHECK(c->ep_context().cache_hit);
  CHECK(*third.compiled == 0);
  check_close(run_x(*c), want);
  CHECK(entry_count(cache_dir / "c") == 1);
}

TEST_CASE("Compile cache: the key follows the model's bytes, the stack, the optimisation level, dims and options") {
  test::temp_dir dir, cache_dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const auto cd = cache_dir / "c";
  REQUIRE(toy_session::create(src, cache_options(cd)).is_ok());
  CHECK(entry_count(cd) == 1);
  // A session option that does not change compilation: same entry.
  auto verify = cache_options(cd);
  verify.set_config(config_keys::ep_context_verify, "on_load");
  auto same = toy_session::create(src, verify);
  REQUIRE(same.is_ok());
  CHECK(same->ep_context().cache_hit);
  CHECK(entry_count(cd) == 1);

  auto level = cache_options(cd);
  level.set_graph_optimization_level(graph_optimization_level::basic);
  auto l = toy_session::create(src, level);
  REQUIRE(l.is_ok());
  CHECK_FALSE(l->ep_context().cache_hit);
  CHECK(entry_count(cd) == 2);

  auto placement = cache_options(cd);
  placement.set_config(config_keys::placement, "priority");
  REQUIRE(toy_session::create(src, placement).is_ok());
  CHECK(entry_count(cd) == 3);

  // Another stack (another provider type in front).
  REQUIRE(session<toy_a>::create(src, cache_options(cd)).is_ok());
  CHECK(entry_count(cd) == 4);

  // Other weights under the same file name: a new entry, and the outputs are the new model's.
  write_model(chain_model(3.0f), src);
  auto w = toy_session::create(src, cache_options(cd));
  REQUIRE(w.is_ok());
  CHECK_FALSE(w->ep_context().cache_hit);
  CHECK(entry_count(cd) == 5);
  check_close(run_x(*w), reference(src));

  // The external data of a model is part of its content.
  save_options ext;
  ext.mode = external_data_mode::all_external;
  write_model(chain_model(), dir / "ext.onnx", ext);
  REQUIRE(toy_session::create(dir / "ext.onnx", cache_options(cd)).is_ok());
  CHECK(entry_count(cd) == 6);
  auto again = toy_session::create(dir / "ext.onnx", cache_options(cd));
  REQUIRE(again.is_ok());
  CHECK(again->ep_context().cache_hit);
  const auto k1 = cache::key_of(dir / "ext.onnx", {}, {}, session_options{});
  REQUIRE(k1.is_ok());
  // Rewrite only the data file (same size, other numbers): the .onnx is byte-identical, the key is not.
  const auto before = test::read_file(dir / "ext.onnx");
  write_model(chain_model(5.0f), dir / "ext.onnx", ext);
  CHECK(test::read_file(dir / "ext.onnx") == before);
  const auto k2 = cache::key_of(dir / "ext.onnx", {}, {}, session_options{});
  REQUIRE(k2.is_ok());
  CHECK(*k1 != *k2);
  auto changed = toy_session::create(dir / "ext.onnx", cache_options(cd));
  REQUIRE(changed.is_ok());
  CHECK_FALSE(changed->ep_context().cache_hit);
  check_close(run_x(*changed), reference(dir / "ext.onnx"));
}

TEST_CASE("Compile cache: a damaged or incomplete entry is reported as a warning, replaced, and valid afterwards") {
  test::temp_dir dir, cache_dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const auto want = reference(src);
  const auto cd = cache_dir / "c";
  REQUIRE(toy_session::create(src, cache_options(cd)).is_ok());
  const auto entry = only_entry(cd);

  SUBCASE("truncated binary") {
    const auto bin = test::read_file(entry / "model_toy.bin");
    test::write_file(entry / "model_toy.bin", bin.substr(0, bin.size() / 2));
  }
  SUBCASE("garbled model") { test::write_file(entry / "model_ctx.onnx", "not a model"); }
  SUBCASE("a damaged weight, found when the entry is read completely") {
    const auto at = tensor_file_offset(entry / "model_toy.bin", 0);
    auto bin = test::read_file(entry / "model_toy.bin");
    bin[at] = static_cast<char>(bin[at] ^ 0x21);
    test::write_file(entry / "model_toy.bin", bin);
    auto v = cache::verify(cd);
    REQUIRE(v.is_ok());
    REQUIRE(v->size() == 1);
    CHECK_FALSE(v->front().ok);
    CHECK(v->front().problem.find("corrupted: tensor") != std::string::npos);
  }
  SUBCASE("no manifest (a write that never finished)") { fs::remove(entry / "entry.txt"); }

  toy p;
  auto s = toy_session::create(src, cache_options(cd), {p, cpu_provider{}});
  REQUIRE_MESSAGE(s.is_ok(), s.status().message());
  CHECK_FALSE(s->ep_context().cache_hit);
  CHECK(*p.compiled == 2);
  REQUIRE(s->ep_context().warnings.size() == 1);
  const auto& w = s->ep_context().warnings.front();
  CHECK(w.find("compile cache: entry ") != std::string::npos);
  CHECK((w.find("does not load") != std::string::npos || w.find("incomplete") != std::string::npos));
  check_close(run_x(*s), want);
  // Replaced: one entry, whole, that loads.
  CHECK(entry_count(cd) == 1);
  auto v = cache::verify(cd);
  REQUIRE(v.is_ok());
  CHECK(v->front().ok);
  auto again = toy_session::create(src, cache_options(cd));
  REQUIRE(again.is_ok());
  CHECK(again->ep_context().cache_hit);
  CHECK(again->ep_context().warnings.empty());
}

TEST_CASE("Compile cache: sessions compiling the same model at once end with one valid entry and no leftovers") {
  test::temp_dir dir, cache_dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const auto want = reference(src);
  const auto cd = cache_dir / "c";
  constexpr int n = 6;
  std::vector<std::optional<Result<toy_session>>> made(n);
  std::atomic<int> ready{0};
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < n) std::this_thread::yield();
        made[static_cast<std::size_t>(i)].emplace(toy_session::create(src, cache_options(cd)));
      });
  }
  for (auto& m : made) {
    REQUIRE(m.has_value());
    REQUIRE_MESSAGE(m->is_ok(), m->status().message());
    check_close(run_x(**m), want);
  }
  CHECK(entry_count(cd) == 1);
  CHECK(temporaries(cd) == 0);
  auto v = cache::verify(cd);
  REQUIRE(v.is_ok());
  CHECK(v->front().ok);
  auto hit = toy_session::create(src, cache_options(cd));
  REQUIRE(hit.is_ok());
  CHECK(hit->ep_context().cache_hit);
}

TEST_CASE("Compile cache: beyond epstack.cache_max_bytes the least recently used entries go") {
  test::temp_dir dir, cache_dir;
  const auto cd = cache_dir / "c";
  std::vector<fs::path> models;
  for (int i = 0; i < 3; ++i) models.push_back(write_model(chain_model(1.0f + static_cast<float>(i)), dir / ("m" + std::to_string(i) + ".onnx")));
  auto o = cache_options(cd);
  REQUIRE(toy_session::create(models[0], o).is_ok());
  const auto one = cache::list(cd);
  REQUIRE(one.is_ok());
  const auto size = one->front().bytes;
  // Room for two entries.
  o.set_config(config_keys::cache_max_bytes, std::to_string(size * 2 + size / 2));
  const auto key_of = [&](const fs::path& m) {
    auto k = cache::key_of(m, {}, make_bindings(std::tuple<toy, cpu_provider>{}), o);
    REQUIRE(k.is_ok());
    return *k;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(toy_session::create(models[1], o).is_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto hit = toy_session::create(models[0], o);  // m0 used again: m1 is now the least recently used
  REQUIRE(hit.is_ok());
  CHECK(hit->ep_context().cache_hit);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(toy_session::create(models[2], o).is_ok());
  auto l = cache::list(cd);
  REQUIRE(l.is_ok());
  std::vector<std::string> keys;
  for (const auto& e : *l) keys.push_back(e.key);
  CHECK(keys == std::vector<std::string>{key_of(models[0]), key_of(models[2])});
  // A limit smaller than one entry keeps the entry just written.
  auto tiny = cache_options(cd);
  tiny.set_config(config_keys::cache_max_bytes, "1");
  REQUIRE(toy_session::create(models[1], tiny).is_ok());
  CHECK(entry_count(cd) == 1);
  CHECK(only_entry(cd).filename().string() == key_of(models[1]));
}

TEST_CASE("Compile cache: refusals, a stack with nothing to cache, weightless entries, clear") {
  test::temp_dir dir, cache_dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const auto cd = cache_dir / "c";
  auto both = cache_options(cd);
  both.set_config(config_keys::ep_context_enable, "1");
  auto b = toy_session::create(src, both);
  REQUIRE_FALSE(b.is_ok());
  CHECK(b.status().code() == errc::invalid_argument);
  CHECK(b.status().message().find("epstack.cache_dir compiles through the cache") != std::string::npos);
  auto limit = cache_options(cd);
  limit.set_config(config_keys::cache_max_bytes, "lots");
  CHECK(toy_session::create(src, limit).status().code() == errc::invalid_argument);
  test::write_file(cache_dir / "file", "x");
  auto on_file = toy_session::create(src, cache_options(cache_dir / "file"));
  REQUIRE_FALSE(on_file.is_ok());
  CHECK(on_file.status().code() == errc::invalid_argument);
  CHECK(on_file.status().message().find("file") != std::string::npos);

  // The CPU provider alone compiles nothing a context holds: the session is made, the cache stays empty.
  auto cpu = session<>::create(src, cache_options(cd));
  REQUIRE(cpu.is_ok());
  CHECK(entry_count(cd) == 0);
  CHECK(temporaries(cd) == 0);

  // Weightless entries: small, and bound to the source model at each hit.
  auto wl = cache_options(cd);
  wl.set_config(config_keys::ep_enable_weightless_mode, "2");
  REQUIRE(toy_session::create(src, wl).is_ok());
  auto hit = toy_session::create(src, wl);
  REQUIRE_MESSAGE(hit.is_ok(), hit.status().message());
  CHECK(hit->ep_context().cache_hit);
  CHECK(hit->ep_context().source_model_read == fs::absolute(src));
  check_close(run_x(*hit), reference(src));

  auto cleared = cache::clear(cd);
  REQUIRE(cleared.is_ok());
  CHECK(*cleared == 1);
  CHECK(entry_count(cd) == 0);
}

TEST_CASE("Compile cache: the content hash is remembered by size, time and inode, and a changed file is hashed again") {
  test::temp_dir dir, cache_dir;
  const auto cd = cache_dir / "c";
  save_options ext;
  ext.mode = external_data_mode::all_external;
  const auto src = write_model(chain_model(), dir / "m.onnx", ext);
  const auto data = dir / "m.onnx.data";
  REQUIRE(fs::is_regular_file(data));
  const auto age = [&](const fs::path& p, int minutes) { fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::minutes(minutes)); };
  // Files modified just now are hashed every time (a rewrite within one timestamp tick would go unseen).
  REQUIRE(toy_session::create(src, cache_options(cd)).is_ok());
  CHECK_FALSE(fs::exists(cd / ".stat"));
  age(src, 10);
  age(data, 10);
  auto a = toy_session::create(src, cache_options(cd));
  REQUIRE(a.is_ok());
  CHECK(a->ep_context().cache_hit);
  REQUIRE(fs::is_directory(cd / ".stat"));
  CHECK(file_count(cd / ".stat") == 1);
  const auto memo = fs::directory_iterator(cd / ".stat")->path();
  const auto text = test::read_file(memo);
  CHECK(text.find("m.onnx.data") != std::string::npos);  // the external data file is covered
  // Served from the memo: the same key, a hit.
  auto b = toy_session::create(src, cache_options(cd));
  REQUIRE(b.is_ok());
  CHECK(b->ep_context().cache_hit);
  // Other weights in the data file (same size): its time and inode change, the memo is not used, a new entry.
  write_model(chain_model(4.0f), dir / "m.onnx", ext);
  age(src, 5);
  age(data, 5);
  auto c = toy_session::create(src, cache_options(cd));
  REQUIRE(c.is_ok());
  CHECK_FALSE(c->ep_context().cache_hit);
  check_close(run_x(*c), reference(src));
  CHECK(entry_count(cd) == 2);
}
