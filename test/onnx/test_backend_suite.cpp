// The ONNX 1.12 backend test suite's models (Debian package libonnx-testdata): every model loads, round-trips
// (load -> save -> load serializes to the same bytes), and the saved file passes the onnx checker.
// The data folder comes from EPSTACK_ONNX_TESTDATA, else /usr/share/libonnx-testdata/data.
#include <epstack/onnx/onnx_io.hpp>

#include "../support/temp_dir.hpp"

#include <onnx/checker.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

using namespace epstack;
namespace fs = std::filesystem;

namespace {
fs::path data_root() {
  if (const char* e = std::getenv("EPSTACK_ONNX_TESTDATA")) return e;
  return "/usr/share/libonnx-testdata/data";
}
}  // namespace

TEST_CASE("ONNX backend test suite models load, round-trip and pass the checker after saving") {
  const auto root = data_root();
  if (!fs::is_directory(root / "node")) {
    std::cout << "SKIP: the ONNX backend test data is not at " << root.string()
              << " (install libonnx-testdata or set EPSTACK_ONNX_TESTDATA)" << std::endl;
    return;
  }
  test::temp_dir dir;
  struct tally {
    int total = 0, loaded = 0, round_tripped = 0;
  };
  std::map<std::string, tally> per_suite;
  std::vector<std::string> failures;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    std::vector<fs::path> cases;
    for (const auto& e : fs::directory_iterator(root / suite))
      if (fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
    std::sort(cases.begin(), cases.end());
    auto& t = per_suite[suite];
    for (const auto& c : cases) {
      ++t.total;
      const std::string name = std::string(suite) + "/" + c.filename().string();
      auto m = load_model(c / "model.onnx");
      if (!m) {
        failures.push_back(name + ": load: " + m.status().to_string());
        continue;
      }
      ++t.loaded;
      const auto out = dir / "saved.onnx";
      if (auto st = save_model(*m, out); !st) {
        failures.push_back(name + ": save: " + st.to_string());
        continue;
      }
      try {
        onnx::checker::check_model(out.string());
      } catch (const std::exception& ex) {
        failures.push_back(name + ": checker on the saved model: " + ex.what());
        continue;
      }
      auto again = load_model(out);
      if (!again) {
        failures.push_back(name + ": reload: " + again.status().to_string());
        continue;
      }
      auto a = serialize_model(*m), b = serialize_model(*again);
      if (!a || !b || *a != *b) {
        failures.push_back(name + ": the reloaded model differs");
        continue;
      }
      ++t.round_tripped;
    }
  }
  int total = 0, ok = 0;
  for (const auto& [suite, t] : per_suite) {
    std::cout << "backend suite " << suite << ": " << t.round_tripped << " of " << t.total << " round-trip ("
              << t.loaded << " load)\n";
    total += t.total;
    ok += t.round_tripped;
  }
  std::cout << "backend suite total: " << ok << " of " << total << " models load, round-trip and pass the checker\n";
  for (const auto& f : failures) std::cout << "  FAILED " << f << "\n";
  CHECK(total == 1072);
  CHECK(failures.empty());
}
