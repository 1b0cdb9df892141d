// Gemm, MatMul and FusedMatMul against a double-precision reference: transposes, alpha and beta, C broadcasting,
// numpy batching with 1-D operands and broadcast batch dims, and products large enough to be split across threads.
#include "../../support/kernel_harness.hpp"

#include <epstack/providers/cpu.hpp>
#include <epstack/providers/cpu/kernels.hpp>
#include <epstack/core/weight_memory.hpp>

#include <epstack/testing/model_zoo.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <thread>

using namespace epstack;
namespace ops = epstack::cpu::ops;
using test::kernel_node;
using test::run1;

namespace {
tensor rnd(std::vector<std::int64_t> s, std::uint64_t seed) {
  tensor t(element_type::float32, s);
  for (std::size_t i = 0; i < t.element_count(); ++i) t.typed<float>()[i] = zoo::uniform_at(seed, i);
  return t;
}
// C[b][i][j] = alpha * sum_k A(b, i, k) * B(b, k, j), with accessors for any layout.
template <class FA, class FB>
std::vector<float> product(std::int64_t batches, std::int64_t M, std::int64_t N, std::int64_t K, FA a, FB b, double alpha = 1) {
  std::vector<float> r;
  for (std::int64_t bt = 0; bt < batches; ++bt)
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (std::int64_t k = 0; k < K; ++k) acc += double(a(bt, i, k)) * double(b(bt, k, j));
        r.push_back(static_cast<float>(alpha * acc));
      }
  return r;
}
}  // namespace

namespace {
// Gemm of every transpose combination, alpha 0.5 and beta 2 with a constant C [N] and B, against the reference, on
// `pool` when given.
void check_gemm_transposes(std::int64_t M, std::int64_t N, std::int64_t K, thread_pool* pool, double tolerance) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      CAPTURE(ta);
      CAPTURE(tb);
      const auto A = rnd(ta ? std::vector<std::int64_t>{K, M} : std::vector<std::int64_t>{M, K}, 1);
      const auto B = rnd(tb ? std::vector<std::int64_t>{N, K} : std::vector<std::int64_t>{K, N}, 2);
      const auto C = rnd({N}, 3);
      kernel_node kn{"Gemm"};
      kn.set("transA", std::int64_t{ta}).set("transB", std::int64_t{tb}).set("alpha", 0.5f).set("beta", 2.0f);
      auto want = product(1, M, N, K,
                          [&](auto, auto i, auto k) { return A.typed<float>()[ta ? k * M + i : i * K + k]; },
                          [&](auto, auto k, auto j) { return B.typed<float>()[tb ? j * K + k : k * N + j]; }, 0.5);
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) want[static_cast<std::size_t>(i * N + j)] += 2.0f * C.typed<float>()[j];
      test::check_tensor<float>(run1<ops::gemm>(kn, {{A}, {B, true}, {C, true}}, pool), {M, N}, want, tolerance, tolerance);
    }
}
}  // namespace

TEST_CASE("Gemm: every transpose combination, alpha, beta and C broadcast") {
  check_gemm_transposes(5, 7, 3, nullptr, 1e-5);
  // C of shape [M, 1] broadcasts along columns; no C at all.
  const auto A = rnd({2, 3}, 4), B = rnd({3, 2}, 5), C = tensor::from<float>({2, 1}, {1, -1});
  auto want = product(1, 2, 2, 3, [&](auto, auto i, auto k) { return A.typed<float>()[i * 3 + k]; },
                      [&](auto, auto k, auto j) { return B.typed<float>()[k * 2 + j]; });
  test::check_tensor<float>(run1<ops::gemm>(kernel_node{"Gemm"}, {{A}, {B}}), {2, 2}, want, 1e-6, 1e-6);
  for (std::size_t i = 0; i < 4; ++i) want[i] += i < 2 ? 1.0f : -1.0f;
  test::check_tensor<float>(run1<ops::gemm>(kernel_node{"Gemm"}, {{A}, {B}, {C}}), {2, 2}, want, 1e-6, 1e-6);
  auto bad = test::run_kernel<ops::gemm>(kernel_node{"Gemm"}, {{A}, {rnd({4, 2}, 6)}});
  CHECK(bad.code() == errc::invalid_argument);
  CHECK(bad.status().message().find("inner dimensions differ") != std::string::npos);
}

// The same on 3 threads at a size split by columns of a constant B, each thread packing its own copy of op(A): the
// transposes, alpha, and beta with C applied as the last K block is stored.
TEST_CASE("Gemm split by columns on 3 threads: every transpose, alpha, beta and C") {
  thread_pool pool(3);
  check_gemm_transposes(40, 500, 300, &pool, 1e-4);
}

// A row of the product comes out with the same bits wherever it falls in the SGEMM's 12-row panels: with alpha and
// more than one K block (alpha * sum + the previous blocks' C) one build's object code contracted the row store into
// an FMA for some places of a tile and not others (the store is now one FMA, written so). Rows 1-12 of a 13-row A
// against the same 12 rows alone (each one place earlier), B constant (prepacked) and fed (packed per call), 1 and
// 2 threads.
TEST_CASE("Gemm rows have the same bits wherever they fall in the packed SGEMM's panels") {
  thread_pool pool(2);
  const std::int64_t N = 40, K = 300;
  const auto A13 = rnd({13, K}, 21), B = rnd({K, N}, 22);
  tensor A12(element_type::float32, {12, K});
  std::copy(A13.typed<float>() + K, A13.typed<float>() + 13 * K, A12.typed<float>());
  kernel_node kn{"Gemm"};
  kn.set("alpha", 0.37f);
  for (thread_pool* threads : {static_cast<thread_pool*>(nullptr), &pool})
    for (const bool constant_b : {true, false}) {
      CAPTURE(threads != nullptr);
      CAPTURE(constant_b);
      const auto y13 = run1<ops::gemm>(kn, {{A13}, {B, constant_b}}, threads);
      const auto y12 = run1<ops::gemm>(kn, {{A12}, {B, constant_b}}, threads);
      REQUIRE(y13.sizes()[0] == 13);
      REQUIRE(y12.sizes()[0] == 12);
      std::int64_t differ = 0;
      for (std::int64_t i = 0; i < 12 * N; ++i) differ += y13.typed<float>()[N + i] != y12.typed<float>()[i] ? 1 : 0;
      CHECK(differ == 0);
      CHECK(std::isfinite(y12.typed<float>()[0]));
    }
}

// C broadcasts to [M, N] one way: every shape that does (scalar, [1], [N], [1, N], [M, 1], [M, N], [1, 1]), on the
// general Gemm and on the Linear layer's matrix-vector Gemm; shapes that do not are refused naming both.
TEST_CASE("Gemm: C of every shape that broadcasts to [M, N], and of shapes that do not") {
  thread_pool pool(2);
  // beta 1 with C of one value per column is the general Gemm's fused bias (added as the packed product is stored).
  for (const float beta : {-0.5f, 1.0f})
    for (const std::int64_t M : {3, 5}) {
      CAPTURE(beta);
      const std::int64_t N = 70, K = 33;
      const auto A = rnd({M, K}, 50), B = rnd({N, K}, 51);
      kernel_node kn{"Gemm"};
      kn.set("transB", std::int64_t{1}).set("beta", beta);
      const auto base = product(1, M, N, K, [&](auto, auto i, auto k) { return A.typed<float>()[i * K + k]; },
                                [&](auto, auto k, auto j) { return B.typed<float>()[j * K + k]; });
      const std::vector<std::vector<std::int64_t>> good{{}, {1}, {N}, {1, N}, {M, 1}, {M, N}, {1, 1}};
      for (const auto& cs : good) {
        CAPTURE(M);
        CAPTURE(cs.size());
        const auto C = rnd(cs, 52);
        const std::int64_t cn = cs.empty() ? 1 : cs.back(), cm = cs.size() == 2 ? cs[0] : 1;
        auto want = base;
        for (std::int64_t i = 0; i < M; ++i)
          for (std::int64_t j = 0; j < N; ++j)
            want[static_cast<std::size_t>(i * N + j)] += beta * C.typed<float>()[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
        test::check_tensor<float>(run1<ops::gemm>(kn, {{A}, {B, true}, {C}}, &pool), {M, N}, want, 1e-5, 1e-5);
        if (M <= 4)
          test::check_tensor<float>(run1<ops::gemm_mv_bt_of<float>>(kn, {{A}, {B, true}, {C}}, &pool), {M, N}, want, 1e-5, 1e-5);
      }
      const std::vector<std::vector<std::int64_t>> bad{{N + 1}, {M + 1, N}, {M, 2}, {2, M, N}};
      for (const auto& cs : bad) {
        CAPTURE(M);
        CAPTURE(cs.size());
        const auto r = test::run_kernel<ops::gemm>(kn, {{A}, {B, true}, {rnd(cs, 53)}});
        REQUIRE_FALSE(r.has_value());
        CHECK(r.code() == errc::invalid_argument);
        CHECK(r.status().message().find("does not broadcast to [" + std::to_string(M) + ",70]") != std::string::npos);
        if (M <= 4) {
          const auto mv = test::run_kernel<ops::gemm_mv_bt_of<float>>(kn, {{A}, {B, true}, {rnd(cs, 53)}});
          REQUIRE_FALSE(mv.has_value());
          CHECK(mv.code() == errc::invalid_argument);
          CHECK(mv.status().message().find("does not broadcast to [" + std::to_string(M) + ",70]") != std::string::npos);
        }
      }
    }
}

TEST_CASE("MatMul: 1-D operands, batch broadcasting, and stacked batches against a shared weight") {
  const auto v = rnd({4}, 1), m = rnd({4, 3}, 2);
  test::check_tensor<float>(run1<ops::matmul>(kernel_node{"MatMul"}, {{v}, {m}}), {3},
                            product(1, 1, 3, 4, [&](auto, auto, auto k) { return v.typed<float>()[k]; },
                                    [&](auto, auto k, auto j) { return m.typed<float>()[k * 3 + j]; }), 1e-6, 1e-6);
  const auto m2 = rnd({3, 4}, 3);
  test::check_tensor<float>(run1<ops::matmul>(kernel_node{"MatMul"}, {{m2}, {v}}), {3},
                            product(1, 3, 1, 4, [&](auto, auto i, auto k) { return m2.typed<float>()[i * 4 + k]; },
                                    [&](auto, auto k, auto) { return v.typed<float>()[k]; }), 1e-6, 1e-6);
  // [2,1,3,4] x [5,4,2] -> [2,5,3,2]
  const auto P = rnd({2, 1, 3, 4}, 4), Q = rnd({5, 4, 2}, 5);
  test::check_tensor<float>(run1<ops::matmul>(kernel_node{"MatMul"}, {{P}, {Q}}), {2, 5, 3, 2},
                            product(10, 3, 2, 4, [&](auto b, auto i, auto k) { return P.typed<float>()[(b / 5) * 12 + i * 4 + k]; },
                                    [&](auto b, auto k, auto j) { return Q.typed<float>()[(b % 5) * 8 + k * 2 + j]; }), 1e-5, 1e-5);
  // [2,3,8,16] x [16,24]: the batches stacked into one product.
  thread_pool pool(2);
  const auto X = rnd({2, 3, 8, 16}, 6), W = rnd({16, 24}, 7);
  test::check_tensor<float>(run1<ops::matmul>(kernel_node{"MatMul"}, {{X}, {W, true}}, &pool), {2, 3, 8, 24},
                            product(1, 48, 24, 16, [&](auto, auto i, auto k) { return X.typed<float>()[i * 16 + k]; },
                                    [&](auto, auto k, auto j) { return W.typed<float>()[k * 24 + j]; }), 1e-5, 1e-5);
}

TEST_CASE("MatMul splits large products across threads (by columns, by rows, by batch) with the same result") {
  thread_pool pool(3);
  const auto check = [&](std::vector<std::int64_t> sa, std::vector<std::int64_t> sb, bool constant_b = false,
                         std::uint64_t seed = 8) {
    const auto A = rnd(sa, seed), B = rnd(sb, 9);
    const auto M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
    const std::int64_t batches = sa.size() == 3 ? sa[0] : 1;
    auto want = product(batches, M, N, K, [&](auto b, auto i, auto k) { return A.typed<float>()[(b * M + i) * K + k]; },
                        [&](auto b, auto k, auto j) { return B.typed<float>()[(sb.size() == 3 ? b * K * N : 0) + k * N + j]; });
    std::vector<std::int64_t> out = sa;
    out.back() = N;
    test::check_tensor<float>(run1<ops::matmul>(kernel_node{"MatMul"}, {{A}, {B, constant_b}}, &pool), out, want, 1e-4,
                              1e-4);
  };
  check({4, 300}, {300, 500});      // N larger: column blocks
  check({400, 64}, {64, 16});       // M larger: row blocks
  check({6, 20, 32}, {6, 32, 20});  // batches in parallel
  check({1, 1, 512}, {1, 512, 200});
  check({50, 24}, {24, 700});  // column pieces of a B read in place, its rows 700 floats apart
  // Prepacked B split by columns: each thread packs all of A for itself, once per call (the next call, with other
  // values at the same size, packs again); over 2 MiB of packed A, one copy packed by all threads first. Or split
  // by rows, each thread packing the rows it multiplies.
  check({40, 300}, {300, 500}, true);
  check({40, 300}, {300, 500}, true, 18);
  check({2100, 256}, {256, 192}, true);
  check({1024, 64}, {64, 64}, true);
  check({401, 300}, {300, 40}, true);  // a partial last panel, two K blocks
}

TEST_CASE("FusedMatMul transposes either operand and scales") {
  const auto A = rnd({2, 4, 3}, 1), B = rnd({2, 5, 4}, 2);  // op(A) = A^T: [2,3,4]; op(B) = B^T: [2,4,5]
  kernel_node kn{"FusedMatMul", 1, "com.microsoft"};
  kn.set("transA", std::int64_t{1}).set("transB", std::int64_t{1}).set("alpha", 0.25f);
  test::check_tensor<float>(run1<ops::fused_matmul>(kn, {{A}, {B}}), {2, 3, 5},
                            product(2, 3, 5, 4, [&](auto b, auto i, auto k) { return A.typed<float>()[b * 12 + k * 3 + i]; },
                                    [&](auto b, auto k, auto j) { return B.typed<float>()[b * 20 + j * 4 + k]; }, 0.25),
                            1e-5, 1e-5);
}

// The packed SGEMM's edges: row counts around its 12-row panels (pairs of panels go through the narrow kernel when a
// column panel has at most 16 columns), column counts around its 16- and 32-wide panels, K around its 256 blocks;
// B read in place (a graph input) and prepacked (an initializer).
// A constant transposed B meeting at most 4 rows of A (known when the session is made) is packed in full-depth panels;
// 5 rows and more in the SGEMM's K blocks, except 2 columns or fewer (read in place): both sides of the line, A
// transposed or not, bias and alpha.
TEST_CASE("Gemm with a constant transposed B and few rows of A: in place and packed agree with the reference") {
  for (const std::int64_t M : {1, 2, 4, 5, 13})
    for (const std::int64_t N : {2, 33, 300})
      for (const std::int64_t K : {7, 257})
        for (int ta = 0; ta < 2; ++ta) {
          CAPTURE(M);
          CAPTURE(N);
          CAPTURE(K);
          CAPTURE(ta);
          const auto A = rnd(ta ? std::vector<std::int64_t>{K, M} : std::vector<std::int64_t>{M, K}, 20);
          const auto B = rnd({N, K}, 21);
          const auto C = rnd({N}, 22);
          kernel_node kn{"Gemm"};
          kn.set("transA", std::int64_t{ta}).set("transB", std::int64_t{1}).set("alpha", 0.75f);
          auto want = product(1, M, N, K, [&](auto, auto i, auto k) { return A.typed<float>()[ta ? k * M + i : i * K + k]; },
                              [&](auto, auto k, auto j) { return B.typed<float>()[j * K + k]; }, 0.75);
          for (std::int64_t i = 0; i < M; ++i)
            for (std::int64_t j = 0; j < N; ++j) want[static_cast<std::size_t>(i * N + j)] += C.typed<float>()[j];
          test::check_tensor<float>(run1<ops::gemm>(kn, {{A}, {B, true}, {C, true}}), {M, N}, want, 1e-4, 1e-4);
        }
}

// gemm_mv_bt_of<float> (what `epstack ops` names for a Linear layer's Gemm, transA = 0 and transB = 1, of at most 4
// static rows): against the reference, on 2 threads, over widths that leave remainders of every dot-product block;
// it takes no other transpose, and its compile refuses a node it does not take.
TEST_CASE("gemm_mv_bt_of<float>: a Linear layer's few rows on the dot-product kernels alone, other transposes not taken") {
  thread_pool pool(2);
  for (const std::int64_t M : {1, 2, 3, 4})
    for (const std::int64_t N : {1, 9, 300})
      for (const std::int64_t K : {0, 15, 129}) {
        CAPTURE(M);
        CAPTURE(N);
        CAPTURE(K);
        const auto A = rnd({M, K}, 40), B = rnd({N, K}, 41), C = rnd({N}, 42);
        kernel_node kn{"Gemm"};
        kn.set("transB", std::int64_t{1}).set("alpha", 1.5f).set("beta", 0.5f);
        auto want = product(1, M, N, K, [&](auto, auto i, auto k) { return A.typed<float>()[i * K + k]; },
                            [&](auto, auto k, auto j) { return B.typed<float>()[j * K + k]; }, 1.5);
        for (std::int64_t i = 0; i < M; ++i)
          for (std::int64_t j = 0; j < N; ++j) want[static_cast<std::size_t>(i * N + j)] += 0.5f * C.typed<float>()[j];
        test::check_tensor<float>(run1<ops::gemm_mv_bt_of<float>>(kn, {{A}, {B, true}, {C, true}}, &pool), {M, N}, want,
                                  1e-4, 1e-4);
      }
  const auto A = rnd({1, 8}, 43), Bt = rnd({3, 8}, 44), B = rnd({8, 3}, 45);
  kernel_node bt{"Gemm"};
  bt.set("transB", std::int64_t{1});
  CHECK(ops::gemm_mv_bt_of<float>::supports(test::make_kernel_graph(bt, {{A}, {Bt}}), 0));
  CHECK(ops::gemm_mv_of<float>::supports(test::make_kernel_graph(bt, {{A}, {Bt}}), 0));
  for (const auto& [ta, tb] : {std::pair{0, 0}, std::pair{1, 1}, std::pair{1, 0}}) {
    CAPTURE(ta);
    CAPTURE(tb);
    kernel_node kn{"Gemm"};
    kn.set("transA", std::int64_t{ta}).set("transB", std::int64_t{tb});
    const graph g = test::make_kernel_graph(kn, {{ta ? rnd({8, 1}, 46) : A}, {tb ? Bt : B}});
    CHECK(ops::gemm_mv_of<float>::supports(g, 0));
    CHECK_FALSE(ops::gemm_mv_bt_of<float>::supports(g, 0));
    const auto fn = ops::gemm_mv_bt_of<float>::compile(g, 0);
    REQUIRE_FALSE(fn.has_value());
    CHECK(fn.status().code() == errc::not_implemented);
    CHECK(fn.status().message().find("transA = 0 and transB = 1") != std::string::npos);
  }
}

// gemm_mv_of<float> (what `epstack ops` names for Gemms of at most 4 static rows): every transpose, alpha, beta and C
// broadcast, columns split across 2 threads, against the reference; 5 rows are refused when it runs.
TEST_CASE("gemm_mv_of<float>: at most 4 rows on the matrix-vector kernels, every transpose, C broadcast, and 5 rows refused") {
  thread_pool pool(2);
  for (const std::int64_t M : {1, 3, 4})
    for (const std::int64_t N : {2, 70, 300})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          CAPTURE(M);
          CAPTURE(N);
          CAPTURE(ta);
          CAPTURE(tb);
          const std::int64_t K = 129;
          const auto A = rnd(ta ? std::vector<std::int64_t>{K, M} : std::vector<std::int64_t>{M, K}, 30);
          const auto B = rnd(tb ? std::vector<std::int64_t>{N, K} : std::vector<std::int64_t>{K, N}, 31);
          const auto C = rnd({M, 1}, 32);
          kernel_node kn{"Gemm"};
          kn.set("transA", std::int64_t{ta}).set("transB", std::int64_t{tb}).set("alpha", 0.5f).set("beta", 2.0f);
          auto want = product(1, M, N, K, [&](auto, auto i, auto k) { return A.typed<float>()[ta ? k * M + i : i * K + k]; },
                              [&](auto, auto k, auto j) { return B.typed<float>()[tb ? j * K + k : k * N + j]; }, 0.5);
          for (std::int64_t i = 0; i < M; ++i)
            for (std::int64_t j = 0; j < N; ++j) want[static_cast<std::size_t>(i * N + j)] += 2.0f * C.typed<float>()[i];
          test::check_tensor<float>(run1<ops::gemm_mv_of<float>>(kn, {{A}, {B, true}, {C}}, &pool), {M, N}, want, 1e-4, 1e-4);
        }
  // Five static rows: the kernel does not take the node; five rows fed where one was declared: refused as it runs.
  const auto A5 = rnd({5, 8}, 33), A1 = rnd({1, 8}, 35), B = rnd({8, 3}, 34);
  CHECK(test::run_kernel<ops::gemm_mv_of<float>>(kernel_node{"Gemm"}, {{A5}, {B}}).code() == errc::not_implemented);
  const graph g = test::make_kernel_graph(kernel_node{"Gemm"}, {{A1}, {B}});
  REQUIRE(ops::gemm_mv_of<float>::supports(g, 0));
  auto fn = ops::gemm_mv_of<float>::compile(g, 0);
  REQUIRE(fn.has_value());
  std::vector<ivalue> ins{ivalue(A5), ivalue(B)}, outs(1);
  compute_context ctx(ins, outs, nullptr, nullptr);
  const Status five = (*fn)(ctx);
  CHECK(five.code() == errc::not_implemented);
  CHECK(five.message().find("at most 4 rows of A, this product has 5") != std::string::npos);
}

// (K: A is packed in 16-deep register transposes, then the rest of its K block one by one. A B fed at run time is read
// in place up to K x N = 16384 floats, packed beyond: N 65 at K 257 and 300.)
TEST_CASE("MatMul at every panel edge of the packed SGEMM, B read in place and prepacked") {
  for (const std::int64_t M : {1, 12, 13, 18, 23, 24, 25, 37})
    for (const std::int64_t N : {1, 5, 16, 17, 31, 32, 33, 48, 65})
      for (const std::int64_t K : {1, 7, 16, 31, 256, 257, 300})
        for (const bool constant_b : {false, true}) {
          CAPTURE(M);
          CAPTURE(N);
          CAPTURE(K);
          CAPTURE(constant_b);
          const auto A = rnd({M, K}, 10), B = rnd({K, N}, 11);
          const auto want = product(1, M, N, K, [&](auto, auto i, auto k) { return A.typed<float>()[i * K + k]; },
                                    [&](auto, auto k, auto j) { return B.typed<float>()[k * N + j]; });
          test::check_tensor<float>(run1<ops::matmul>(kernel_node{"MatMul"}, {{A}, {B, constant_b}}), {M, N}, want, 1e-4, 1e-4);
        }
}

// A constant B that at most 4 rows of A meet, known at create (a decode step's weights, a batch-1 Linear layer), is
// packed in full-depth panels of 32 columns and read by the few-rows kernel: every panel edge and odd depths (the
// 16x16 transposing pack's edges for B [N, K]), batches stacked as rows, on 1 and 2 threads; Gemm's bias row (the
// epilogue), C of another shape (added first), alpha, transA and transB; and more rows fed than the graph declared
// (5 and 9: four rows at a time), against the reference.
TEST_CASE("MatMul and Gemm with a constant B and at most 4 static rows: full-depth panels") {
  thread_pool pool(2);
  for (thread_pool* threads : {static_cast<thread_pool*>(nullptr), &pool})
    for (const std::int64_t M : {1, 2, 3, 4})
      // 70: 3 panels (one row reads two at a time, then one); 161: 6 panels, the last of 1 column, split across the threads.
      for (const std::int64_t N : {1, 5, 17, 31, 32, 33, 70, 100, 161})
        for (const std::int64_t K : {1, 2, 7, 16, 17, 257, 700}) {  // 700: every M split across the threads
          CAPTURE(M);
          CAPTURE(N);
          CAPTURE(K);
          CAPTURE(threads != nullptr);
          const auto A = rnd({1, M, K}, 50), B = rnd({K, N}, 51);
          const auto want = product(1, M, N, K, [&](auto, auto i, auto k) { return A.typed<float>()[i * K + k]; },
                                    [&](auto, auto k, auto j) { return B.typed<float>()[k * N + j]; });
          test::check_tensor<float>(run1<ops::matmul>(kernel_node{"MatMul"}, {{A}, {B, true}}, threads), {1, M, N}, want,
                                    1e-4, 1e-4);
          const auto Bt = rnd({N, K}, 58);
          for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb)
              for (const bool row_bias : {true, false}) {
                CAPTURE(ta);
                CAPTURE(tb);
                CAPTURE(row_bias);
                const auto A2 = rnd(ta ? std::vector<std::int64_t>{K, M} : std::vector<std::int64_t>{M, K}, 52);
                const auto C = row_bias ? rnd({N}, 53) : rnd({M, 1}, 54);
                const float beta = row_bias ? 1.0f : 2.0f;
                kernel_node kn{"Gemm"};
                kn.set("transA", std::int64_t{ta}).set("transB", std::int64_t{tb}).set("alpha", 0.75f).set("beta", beta);
                auto w = product(
                    1, M, N, K, [&](auto, auto i, auto k) { return A2.typed<float>()[ta ? k * M + i : i * K + k]; },
                    [&](auto, auto k, auto j) { return tb ? Bt.typed<float>()[j * K + k] : B.typed<float>()[k * N + j]; }, 0.75);
                for (std::int64_t i = 0; i < M; ++i)
                  for (std::int64_t j = 0; j < N; ++j)
                    w[static_cast<std::size_t>(i * N + j)] += beta * C.typed<float>()[row_bias ? j : i];
                test::check_tensor<float>(run1<ops::gemm>(kn, {{A2}, {tb ? Bt : B, true}, {C, true}}, threads), {M, N}, w,
                                          1e-4, 1e-4);
              }
        }
  // Declared one row, fed 5 and 9: the panels are still read right, four rows at a time (on both threads).
  const std::int64_t K = 300, N = 70;
  const auto B = rnd({K, N}, 55);
  const graph g = test::make_kernel_graph(kernel_node{"MatMul"}, {{rnd({1, K}, 56)}, {B, true}});
  auto fn = ops::matmul::compile(g, 0);
  REQUIRE(fn.has_value());
  for (const std::int64_t M : {5, 9}) {
    CAPTURE(M);
    const auto A = rnd({M, K}, 57);
    std::vector<ivalue> ins{ivalue(A), ivalue(B)}, outs(1);
    compute_context ctx(ins, outs, nullptr, &pool);
    REQUIRE((*fn)(ctx).ok());
    const auto want = product(1, M, N, K, [&](auto, auto i, auto k) { return A.typed<float>()[i * K + k]; },
                              [&](auto, auto k, auto j) { return B.typed<float>()[k * N + j]; });
    test::check_tensor<float>(outs[0].as_tensor(), {M, N}, want, 1e-4, 1e-4);
  }
}

// A B stored transposed ([N, K]) is packed 16 columns by 16 depths at a time through registers: every edge of those
// blocks and of the 32-column panels and 256-deep K blocks, B constant (packed at create) and an activation (packed
// per run), against the reference.
TEST_CASE("Gemm with transB at every edge of the transposing pack (16x16 blocks, panels, K blocks)") {
  for (const std::int64_t N : {1, 15, 16, 17, 31, 32, 33, 47, 64, 100})
    for (const std::int64_t K : {1, 15, 16, 17, 255, 256, 257, 300})
      for (const bool constant_b : {false, true}) {
        CAPTURE(N);
        CAPTURE(K);
        CAPTURE(constant_b);
        const std::int64_t M = 29;
        const auto A = rnd({M, K}, 30), B = rnd({N, K}, 31);
        kernel_node kn{"Gemm"};
        kn.set("transB", std::int64_t{1});
        const auto want = product(1, M, N, K, [&](auto, auto i, auto k) { return A.typed<float>()[i * K + k]; },
                                  [&](auto, auto k, auto j) { return B.typed<float>()[j * K + k]; });
        test::check_tensor<float>(run1<ops::gemm>(kn, {{A}, {B, constant_b}}), {M, N}, want, 1e-4, 1e-4);
      }
}

// Products of matrix-vector shapes with no constant operand (at most 4 rows, or at most 2 columns: sgemv.cpp's
// kernels): every transpose, alpha and beta, columns around the 16-wide vectors, the 64-column register blocks, the
// 128-column switch to blocks summed in memory and its 512-column blocks; K around the 16-wide dot products and the
// 4-row steps, and K = 0 (Y is beta * C).
TEST_CASE("Gemm of matrix-vector shapes, every transpose, both operands activations") {
  std::vector<std::array<std::int64_t, 2>> shapes;
  for (const std::int64_t M : {1, 2, 3, 4})
    for (const std::int64_t N : {1, 2, 15, 16, 17, 64, 100, 128, 129, 600, 1100}) shapes.push_back({M, N});
  for (const std::int64_t M : {5, 9, 33, 300})
    for (const std::int64_t N : {1, 2}) shapes.push_back({M, N});
  for (const auto [M, N] : shapes)
    for (const std::int64_t K : {0, 1, 3, 16, 17, 64, 100})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          CAPTURE(M);
          CAPTURE(N);
          CAPTURE(K);
          CAPTURE(ta);
          CAPTURE(tb);
          const auto A = rnd(ta ? std::vector<std::int64_t>{K, M} : std::vector<std::int64_t>{M, K}, 21);
          const auto B = rnd(tb ? std::vector<std::int64_t>{N, K} : std::vector<std::int64_t>{K, N}, 22);
          const auto C = rnd({M, N}, 23);
          kernel_node kn{"Gemm"};
          kn.set("transA", std::int64_t{ta}).set("transB", std::int64_t{tb}).set("alpha", 1.5f).set("beta", 0.5f);
          auto want = product(1, M, N, K, [&](auto, auto i, auto k) { return A.typed<float>()[ta ? k * M + i : i * K + k]; },
                              [&](auto, auto k, auto j) { return B.typed<float>()[tb ? j * K + k : k * N + j]; }, 1.5);
          for (std::size_t i = 0; i < want.size(); ++i) want[i] += 0.5f * C.typed<float>()[i];
          test::check_tensor<float>(run1<ops::gemm>(kn, {{A}, {B}, {C}}), {M, N}, want, 1e-4, 1e-4);
        }
}

namespace {
// An MLP of batch 1 with the types a session's inference would give: each Gemm's output [1, its weight's rows], each
// Relu's its input's.
model batch1_mlp(const std::vector<std::int64_t>& widths) {
  model m = zoo::make_mlp(widths, dimension(std::int64_t{1}));
  graph& g = m.graph;
  for (node_id n = 0; n < g.node_count(); ++n) {
    const auto& nd = g.node(n);
    const auto& in = g.value(nd.inputs[0]).type;
    g.value(nd.outputs[0]).type =
        nd.op_type == "Gemm"
            ? type_info::tensor_of(element_type::float32, shape{std::int64_t{1}, g.value(nd.inputs[1]).initializer->sizes()[0]})
            : in;
  }
  return m;
}

std::vector<partition> single_node_partitions(const graph& g) {
  std::vector<partition> parts;
  for (node_id n = 0; n < g.node_count(); ++n) parts.push_back(partition{g.node(n).name, &g, {n}, std::nullopt, {}, {}});
  return parts;
}
}  // namespace

// The CPU provider compiles single-node partitions from the last node, on the caller alone under 1 MiB of weights and
// on two threads past it (a pack taken last had left the other thread waiting): every partition gets its function,
// and a failure names the graph's first failing node, not the first one compiled.
TEST_CASE("the CPU provider's compile: every partition, and the first failing node in graph order, with and without threads") {
  for (const auto& widths : {std::vector<std::int64_t>{8, 4, 2}, std::vector<std::int64_t>{256, 1024, 512, 10}}) {
    CAPTURE(widths.size());  // the second: 3 MiB of weights
    model m = batch1_mlp(widths);
    const graph& g = m.graph;
    const auto parts = single_node_partitions(g);
    const auto all = cpu_provider{}.compile(parts);
    REQUIRE_MESSAGE(all.has_value(), all.status().to_string());
    REQUIRE(all->size() == parts.size());
    for (const auto& fn : *all) CHECK(static_cast<bool>(fn));
    // Without Relu's kernel: every Relu fails; the first in the graph is named.
    const auto gemm_only = basic_cpu_provider<ops::gemm>{}.compile(parts);
    REQUIRE_FALSE(gemm_only.has_value());
    CHECK(gemm_only.code() == errc::not_implemented);
    CHECK(gemm_only.status().message().find("'/layer0/Relu' (Relu)") != std::string::npos);
  }
}

// The nodes a compile's helper threads take lay their weights out in the create's arena too (weight_memory.hpp's
// helper form of weight_arena_scope): in memory of their own they missed the huge pages and the reuse of released
// chunks, and which nodes did depended on timing. Six 1 MiB weights compiled together (on every core) take as many
// arena blocks as compiled one partition at a time (each alone: on this thread).
TEST_CASE("the CPU provider's compile lays out every weight in the create's arena, on each thread it compiles on") {
  WARN_MESSAGE(std::thread::hardware_concurrency() >= 2, "one core: the compile has no helper threads to check");
  const model m = batch1_mlp({512, 512, 512, 512, 512, 512, 512, 10});
  const auto parts = single_node_partitions(m.graph);
  weight_arena one_by_one;
  {
    const weight_arena_scope scope(&one_by_one);
    for (const auto& p : parts) {
      const auto fn = cpu_provider{}.compile(std::span(&p, 1));
      REQUIRE_MESSAGE(fn.has_value(), fn.status().to_string());
    }
  }
  CHECK(one_by_one.blocks() >= 6);
  weight_arena together;
  {
    const weight_arena_scope scope(&together);
    const auto fns = cpu_provider{}.compile(parts);
    REQUIRE_MESSAGE(fns.has_value(), fns.status().to_string());
  }
  CHECK(together.blocks() == one_by_one.blocks());
}
