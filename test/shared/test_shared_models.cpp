// Every model of ../shared/models loads, round-trips (embedded or with external data), passes the onnx checker
// after saving, and its weights are not copied at load. The models' folder comes from EPSTACK_SHARED_MODELS.
#include <epstack/onnx/onnx_io.hpp>

#include "../support/temp_dir.hpp"

#include <onnx/checker.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <vector>

using namespace epstack;
namespace fs = std::filesystem;

TEST_CASE("shared models load and round-trip and pass the checker") {
  const char* env = std::getenv("EPSTACK_SHARED_MODELS");
  if (env == nullptr || !fs::exists(fs::path(env) / "models.json")) {
    std::cout << "SKIP: EPSTACK_SHARED_MODELS is not a folder of generated shared models" << std::endl;
    return;
  }
  std::vector<fs::path> models;
  for (const auto& e : fs::directory_iterator(env))
    if (e.path().extension() == ".onnx") models.push_back(e.path());
  std::sort(models.begin(), models.end());
  CHECK(models.size() == 9);
  test::temp_dir dir;
  for (const auto& p : models) {
    INFO("model: ", p.string());
    auto m = load_model(p);
    REQUIRE_MESSAGE(m.has_value(), m.status().to_string());
    std::uint64_t bytes = 0, borrowed = 0;
    for (value_id v : m->graph.initializers()) {
      const auto& t = *m->graph.value(v).initializer;
      bytes += t.byte_size();
      if (t.is_borrowed()) borrowed += t.byte_size();
    }
    CHECK(borrowed == bytes);  // every raw_data buffer was taken over, none copied
    for (const bool external : {false, true}) {
      const auto out = dir / (p.stem().string() + (external ? "_ext.onnx" : ".onnx"));
      save_options so;
      if (external) so.mode = external_data_mode::above_threshold;
      REQUIRE(save_model(*m, out, so).is_ok());
      CHECK_NOTHROW(onnx::checker::check_model(out.string()));
      auto back = load_model(out);
      REQUIRE_MESSAGE(back.has_value(), back.status().to_string());
      CHECK(back->graph.node_count() == m->graph.node_count());
      CHECK(*serialize_model(*back) == *serialize_model(*m));
      fs::remove(out);
      if (external) fs::remove(dir / (out.filename().string() + ".data"));
    }
    std::cout << "shared model " << p.filename().string() << ": " << m->graph.node_count() << " nodes, " << bytes
              << " initializer bytes: loads and round-trips\n";
  }
}
