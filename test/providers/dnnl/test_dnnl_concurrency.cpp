// Concurrency of the oneDNN provider (label "concurrency"; CI runs it under ThreadSanitizer): eight threads running
// one session<dnnl_provider, cpu_provider> get identical outputs. oneDNN runs its primitives on OpenMP threads
// (libgomp), whose barriers ThreadSanitizer cannot see (libgomp is not instrumented, so a buffer written by an OpenMP
// worker and freed after the barrier looks like a race): under ThreadSanitizer the session uses one intra-op thread,
// and the provider runs every oneDNN call of a run (planning included) with that many OpenMP threads, so all of them
// happen on the calling thread. What is checked is our code's sharing of compiled plans, primitives, execution
// states and memory between the eight callers. (The models here have a symbolic batch: nothing is planned at compile
// time, where oneDNN would use every core.)
#include <epstack/testing/model_zoo.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/providers/dnnl.hpp>
#include <epstack/runtime/session.hpp>

#include "../../support/hammer.hpp"
#include "../../support/sanitizers.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

using namespace epstack;

namespace {

constexpr int intra_threads = test::dnnl_intra_threads;


}  // namespace

TEST_CASE("eight threads running one oneDNN session get identical outputs") {
  session_options so;
  so.set_intra_op_threads(intra_threads);
  auto conv = session<dnnl_provider>::create(zoo::make_convnet({8, 16}, 32, 10), so);
  REQUIRE_MESSAGE(conv.has_value(), conv.status().to_string());
  EPSTACK_CHECK_HAMMER(test::hammer(*conv, {{"image", zoo::random_tensor({2, 3, 32, 32}, 3, 1.0f)}}, 8, 10));
  zoo::transformer_config cfg;
  cfg.layers = 1;
  auto tr = session<dnnl_provider>::create(zoo::make_transformer(cfg), so);
  REQUIRE_MESSAGE(tr.has_value(), tr.status().to_string());
  tensor ids(element_type::int64, {1, 12});
  for (std::size_t i = 0; i < ids.element_count(); ++i) ids.typed<std::int64_t>()[i] = static_cast<std::int64_t>(i * 7 % 512);
  EPSTACK_CHECK_HAMMER(test::hammer(*tr, {{"input_ids", ids}}, 8, 10));
}

TEST_CASE("threads seeing new input shapes at once plan them once and agree") {
  session_options so;
  so.set_intra_op_threads(intra_threads);
  auto s = session<dnnl_provider>::create(zoo::make_mlp({16, 32, 4}), so);
  REQUIRE(s.has_value());
  std::vector<std::thread> pool;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t)
    pool.emplace_back([&, t] {
      const std::int64_t batch = 1 + t % 4;
      const auto x = zoo::random_tensor({batch, 16}, static_cast<std::uint64_t>(batch), 1.0f);
      auto a = s->run({{"input", x}});
      auto b = s->run({{"input", x}});
      if (!a || !b || !(*a)[0].same_content((*b)[0]) || (*a)[0].sizes()[0] != batch) ++bad;
    });
  for (auto& th : pool) th.join();
  CHECK(bad.load() == 0);
}
