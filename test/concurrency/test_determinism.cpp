// Determinism: the same model and input give bit-identical outputs over 50 runs of one session and from 8 threads
// running it at once, on each provider stack of the build, for the zoo models and the differential fuzzer's graphs.
// (The shared benchmark models are checked the same way by `epstack run --repeat`, label shared.)
#include <epstack/testing/model_zoo.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/session.hpp>
#if defined(EPSTACK_WITH_DNNL)
#include <epstack/providers/dnnl.hpp>
#endif

#include <graph_fuzz.hpp>

#include "../support/sanitizers.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

using namespace epstack;

namespace {

struct named_model {
  std::string name;
  model m;
  std::vector<named_tensor> feeds;
};

std::vector<named_model> models() {
  std::vector<named_model> r;
  r.push_back({"mlp", zoo::make_mlp({32, 64, 10}), {{"input", zoo::random_tensor({3, 32}, 1, 1.0f)}}});
  r.push_back({"convnet", zoo::make_convnet({8, 16}, 16, 10), {{"image", zoo::random_tensor({2, 3, 16, 16}, 2, 1.0f)}}});
  tensor ids(element_type::int64, {2, 16});
  for (std::size_t i = 0; i < ids.element_count(); ++i) ids.typed<std::int64_t>()[i] = static_cast<std::int64_t>(i * 37 % 100);
  r.push_back({"transformer", zoo::make_transformer(), {{"input_ids", std::move(ids)}}});
  for (std::uint64_t seed : {11, 23, 37, 41, 58, 64, 79, 83, 97, 101, 113, 127}) {
    auto g = fuzz::generate_graph(seed);
    r.push_back({"fuzz seed " + std::to_string(seed) + " (" + g.summary + ")", std::move(g.m), std::move(g.feeds)});
  }
  return r;
}

/// 50 runs in a row, then 8 threads at once, each compared bit for bit with the first run. Worker threads record
/// what they see; the assertions run on this thread.
template <class S>
void check_deterministic(const named_model& nm, int intra_threads = 2) {
  CAPTURE(nm.name);
  session_options so;
  so.set_intra_op_threads(intra_threads);
  auto s = S::create(nm.m, so);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  auto first = s->run(nm.feeds);
  REQUIRE_MESSAGE(first.has_value(), first.status().to_string());
  for (int i = 1; i < 50; ++i) {
    auto again = s->run(nm.feeds);
    REQUIRE(again.has_value());
    const std::string d = fuzz::compare_bits(*again, *first);
    CHECK_MESSAGE(d.empty(), "run ", i, ": ", d);
  }
  std::vector<std::string> differences(8);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4 && differences[t].empty(); ++i) {
        auto out = s->run(nm.feeds);
        differences[t] = out ? fuzz::compare_bits(*out, *first) : out.status().to_string();
      }
    });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < 8; ++t) CHECK_MESSAGE(differences[t].empty(), "thread ", t, ": ", differences[t]);
}

}  // namespace

TEST_CASE("the CPU stack gives bit-identical outputs over 50 runs and from 8 threads") {
  for (const auto& nm : models()) check_deterministic<session<cpu_provider>>(nm);
}

#if defined(EPSTACK_WITH_DNNL)
TEST_CASE("the default stack (oneDNN, CPU) gives bit-identical outputs over 50 runs and from 8 threads") {
  for (const auto& nm : models()) check_deterministic<session<dnnl_provider, cpu_provider>>(nm, test::dnnl_intra_threads);
}
#endif
