// Winograd F(2x2, 3x3) and F(4x4, 3x3) convolutions on the blocked layout (NCHWc, see nchwc.cpp), with filters the
// optimiser's layout pass transformed (src/runtime/nchwc_layout.cpp).
#include "nchwc_common.hpp"

#include <atomic>

namespace epstack::cpu::impl::nchwc {
namespace {

// ---- Winograd F(2x2, 3x3) and F(4x4, 3x3) on the blocked layout ----
// The layout pass transforms the filters (U = G g G^T, src/runtime/nchwc_layout.cpp) into P = (TM + 2)^2 blocked 1x1
// filter sets [P][Op/16][Cp/16][16 in][16 out] (TM: the output tile, 2 or 4). Per call: (1) every (TM + 2)^2 input
// patch at stride TM (a tile) of every channel block becomes P vectors V[xi][cb][tile] = B^T d B, computed on 16
// channels at once; (2) per work item (a set of output blocks and a run of tiles), P products V[xi] x U[xi], each a 1x1
// convolution over the run's tiles with the dense kernels' register blocking (NB output blocks x NO tiles in 24
// accumulators); (3) the item's own products, still in cache, become TM x TM output pixels per tile, Y = A^T M A,
// with bias, the residual and the activation (one of those applied in registers). One image at a time. Matrices (Lavin and Gray, 2016):
//   F(2x2): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]      A^T = [1 1 1 0; 0 1 -1 -1]
//   F(4x4): B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//           A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
struct wino_geom {
  std::int64_t CB = 0, MB = 0, IH = 0, IW = 0, OH = 0, OW = 0, pt = 0, pl = 0, TH = 0, TW = 0;
  [[nodiscard]] std::int64_t tiles() const { return TH * TW; }
};

// B^T d for one column (or row) of an input tile.
template <int TM>
inline void wino_in_1d(const v16* d, v16* t) {
  if constexpr (TM == 2) {
    t[0] = d[0] - d[2];
    t[1] = d[1] + d[2];
    t[2] = d[2] - d[1];
    t[3] = d[1] - d[3];
  } else {
    const v16 four = splat(4.0f), five = splat(5.0f), two = splat(2.0f);
    t[0] = four * d[0] - five * d[2] + d[4];
    t[1] = d[3] + d[4] - four * (d[1] + d[2]);
    t[2] = four * (d[1] - d[2]) + d[4] - d[3];
    t[3] = two * (d[3] - d[1]) + d[4] - d[2];
    t[4] = two * (d[1] - d[3]) + d[4] - d[2];
    t[5] = four * d[1] - five * d[3] + d[5];
  }
}

// A^T m for one column (or row) of a tile's products.
template <int TM>
inline void wino_out_1d(const v16* m, v16* o) {
  if constexpr (TM == 2) {
    o[0] = m[0] + m[1] + m[2];
    o[1] = m[1] - m[2] - m[3];
  } else {
    const v16 a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], d = m[3] - m[4];
    o[0] = m[0] + a + c;
    o[1] = b + splat(2.0f) * d;
    o[2] = a + splat(4.0f) * c;
    o[3] = b + splat(8.0f) * d + m[5];
  }
}

// Tiles [t0, t0 + n) of one channel block (plane `x`, IH x IW blocked pixels) to V (P planes `xs` floats apart;
// tile t0 + i at v + i * blk).
template <int TM>
void wino_input_run(const wino_geom& g, const float* x, std::int64_t t0, std::int64_t n, float* v, std::int64_t xs) {
  constexpr int L = TM + 2;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t ty = (t0 + i) / g.TW, tx = (t0 + i) % g.TW;
    v16 t[L][L];  // t[row][column] after the transform along each row
    const std::int64_t c0 = TM * tx - g.pl;
    for (int k = 0; k < L; ++k) {
      const std::int64_t r = TM * ty - g.pt + k;
      v16 d[L];
      for (int j = 0; j < L; ++j) {
        const std::int64_t c = c0 + j;
        d[j] = r >= 0 && r < g.IH && c >= 0 && c < g.IW ? load(x + (r * g.IW + c) * blk) : v16{};
      }
      wino_in_1d<TM>(d, t[k]);
    }
    float* out = v + i * blk;
    for (int j = 0; j < L; ++j) {
      v16 col[L], u[L];
      for (int k = 0; k < L; ++k) col[k] = t[k][j];
      wino_in_1d<TM>(col, u);
      for (int q = 0; q < L; ++q) store(out + (q * L + j) * xs, u[q]);
    }
  }
}

// NB output blocks x NO tiles of one product: v at the first tile of input block 0 (`vcb` floats between input
// blocks), u at output block 0's filters (`uob` floats between output blocks), p at the first tile of output block 0
// (`pob` floats between output blocks).
template <int NB, int NO>
void wino_product_tile(const float* v, std::int64_t vcb, const float* u, std::int64_t uob, std::int64_t CB, float* p,
                       std::int64_t pob) {
  v16 acc[NB][NO] = {};
  for (std::int64_t cb = 0; cb < CB; ++cb, v += vcb, u += blk * blk) {
#pragma GCC unroll 2
    for (std::int64_t bi = 0; bi < blk; ++bi) {
      v16 wv[NB];
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) wv[b] = load(u + b * uob + bi * blk);
#pragma GCC unroll 24
      for (int o = 0; o < NO; ++o) {
        const v16 xs = splat(v[o * blk + bi]);
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) acc[b][o] += wv[b] * xs;
      }
    }
  }
  for (int b = 0; b < NB; ++b)
    for (int o = 0; o < NO; ++o) store(p + b * pob + o * blk, acc[b][o]);
}

// Tiles [0, n) of one product for NB output blocks: whole tiles of 24 / NB, the rest in tiles of 4, 3, 2 and 1.
template <int NB>
void wino_product_run(const float* v, std::int64_t vcb, const float* u, std::int64_t uob, std::int64_t CB, float* p,
                      std::int64_t pob, std::int64_t n) {
  constexpr int full = 24 / NB;
  std::int64_t t = 0;
  for (; t + full <= n; t += full) wino_product_tile<NB, full>(v + t * blk, vcb, u, uob, CB, p + t * blk, pob);
  for (; t + 4 <= n; t += 4) wino_product_tile<NB, 4>(v + t * blk, vcb, u, uob, CB, p + t * blk, pob);
  switch (n - t) {
    case 3: wino_product_tile<NB, 3>(v + t * blk, vcb, u, uob, CB, p + t * blk, pob); break;
    case 2: wino_product_tile<NB, 2>(v + t * blk, vcb, u, uob, CB, p + t * blk, pob); break;
    case 1: wino_product_tile<NB, 1>(v + t * blk, vcb, u, uob, CB, p + t * blk, pob); break;
    default: break;
  }
}

// Output block `ob`, tiles [t0, t0 + n) from their products p (P planes `ps` floats apart, tile t0 at p) to y (one
// image, blocked), with bias, the residual (blocked like y, or null) and the activation.
template <int TM>
void wino_output_run(const wino_geom& g, const float* p, std::int64_t ps, std::int64_t ob, std::int64_t t0, std::int64_t n,
                     const conv_epilogue& ep, const float* sum, float* y) {
  constexpr int L = TM + 2;
  const v16 bias = ep.bias != nullptr ? load(ep.bias + ob * blk) : v16{};
  const register_activation act(ep.act);  // in_register: checked when the call was set up
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t t = t0 + i, ty = t / g.TW, tx = t % g.TW;
    v16 s[TM][L];  // A^T M: the transform down each column
    for (int j = 0; j < L; ++j) {
      v16 col[L], o[TM];
      for (int k = 0; k < L; ++k) col[k] = load(p + (k * L + j) * ps + i * blk);
      wino_out_1d<TM>(col, o);
      for (int r = 0; r < TM; ++r) s[r][j] = o[r];
    }
    for (int r = 0; r < TM; ++r) {
      const std::int64_t oh = TM * ty + r;
      if (oh >= g.OH) break;
      v16 out[TM];
      wino_out_1d<TM>(s[r], out);
      for (int c = 0; c < TM; ++c) {
        const std::int64_t ow = TM * tx + c;
        if (ow >= g.OW) break;
        const std::int64_t at = ((ob * g.OH + oh) * g.OW + ow) * blk;
        v16 val = out[c] + bias;
        if (sum != nullptr) val += load(sum + at);
        val = act(val);
        store(y + at, val);
      }
    }
  }
}

template <int TM>
Status wino_conv_compute(const conv_geom& cg, const float* px, const float* u, const conv_epilogue& ep, float* py,
                         compute_context& ctx) {
  constexpr std::int64_t P = (TM + 2) * (TM + 2);
  wino_geom g;
  g.CB = cg.CB;
  g.MB = cg.MB;
  g.IH = cg.h.in;
  g.IW = cg.w.in;
  g.OH = cg.h.out;
  g.OW = cg.w.out;
  g.pt = cg.h.pb;
  g.pl = cg.w.pb;
  g.TH = (g.OH + TM - 1) / TM;
  g.TW = (g.OW + TM - 1) / TM;
  const std::int64_t T = g.tiles();
  const std::int64_t in_image = g.CB * g.IH * g.IW * blk, out_image = g.MB * g.OH * g.OW * blk;
  const std::int64_t v_plane = g.CB * T * blk, v_image = P * v_plane;
  // (2, 3) Items: sets of up to 4 output blocks (as even as they can be) x runs of tiles. A run's P products stay
  // within about 256 KiB; more runs only while each set's filters (P x CB x 1 KiB a block) are small enough to be
  // read again per run from L2, and while there are fewer than 4 items per thread. Larger filters are read once per
  // run from L3 or memory: they are split into only as many runs as give every thread the same count of items
  // (ResNet-50's 28x28 and 14x14 layers, 1-1.2 MiB of filters a set, had 2 to 4 runs each on two threads, reading
  // 8-9 MiB of filters a layer where 4.6 do; the whole network on two threads, four interleaved pairs: medians
  // 23.86-24.61 -> 23.43-24.06 ms).
  const std::int64_t groups = (g.MB + 3) / 4, per_group = g.MB / groups, wider = g.MB % groups;
  const std::int64_t nb_max = per_group + (wider > 0 ? 1 : 0);
  const auto threads = static_cast<std::int64_t>(ctx.thread_count());
  const std::int64_t u_group_bytes = P * g.CB * nb_max * blk * blk * 4;
  std::int64_t run = std::min<std::int64_t>(T, std::max<std::int64_t>(12, (256 * 1024) / (P * nb_max * blk * 4)));
  if (u_group_bytes > 512 * 1024) {
    std::int64_t k = 1;
    while (groups * k % threads != 0 && (T + k) / (k + 1) >= 12) ++k;
    run = (T + k - 1) / k;
  } else {
    while (groups * ((T + run - 1) / run) < 4 * threads && run > 24) run = (run + 1) / 2;
  }
  const std::int64_t runs = (T + run - 1) / run;
  const std::int64_t items = groups * runs;
  const std::int64_t p_item = P * nb_max * run * blk;
  const std::int64_t u_xi = g.MB * g.CB * blk * blk, u_ob = g.CB * blk * blk;
  // Where V is made. With at most two threads or two sets of output blocks, each item transforms its own run of
  // tiles into a buffer of its thread's, and the thread's next items, the other sets on the same run (items are
  // numbered run by run here), reuse it: V is written where the same core wrote it the call before, and read by the
  // core that wrote it. Transformed once for all items into a scratch V (shared with other nodes, read by both
  // threads), its stores ran at 13-20 GB/s: 65-120 us a call of ResNet-50's 3x3 layers, 13-43 us when done twice in
  // a row. Now those layers take 4.6-5.3 ms of the network's run in all, 6.3-6.6 before (three interleaved pairs).
  // The cost is transforming a run once per thread that uses it: at most twice on two threads (at 14x14 and 28x28
  // each thread has the one run of all tiles). With more threads and sets, V is transformed once for all items, in
  // parallel, as before (items numbered set by set, so that a thread reads the filters of few sets).
  const bool local_v = std::min(threads, groups) <= 2;
  const auto run_of = [&](std::int64_t ii) { return local_v ? ii / groups : ii % runs; };
  const auto set_of = [&](std::int64_t ii) { return local_v ? ii % groups : ii / runs; };
  const std::int64_t v_run = P * g.CB * run * blk;  // one run's V: [xi][cb][tile][16]
  const auto item_cost = static_cast<std::size_t>(run * g.CB * nb_max * P * blk * blk);
  // One image at a time: the scratch (V, and each item's products) is one image's, whatever the batch.
  tensor vbuf, pbuf;
  float* pv = nullptr;
  float* pp = nullptr;
  if (!local_v) {
    vbuf = ctx.scratch(element_type::float32, static_cast<std::size_t>(v_image));
    pbuf = ctx.scratch(element_type::float32, static_cast<std::size_t>(items * p_item));
    pv = vbuf.typed<float>();
    pp = pbuf.typed<float>();
  }
  // Item ii's products from V (`vx` floats between its P planes, `vcb` between input blocks, tile t0 at v0), then
  // their output transform.
  const auto item = [&](std::int64_t ii, const float* v0, std::int64_t vx, std::int64_t vcb, float* p, const float* sum, float* y) {
    const std::int64_t rn = run_of(ii), grp = set_of(ii);
    const std::int64_t ob0 = grp * per_group + std::min(grp, wider);
    const int nb = static_cast<int>(per_group + (grp < wider ? 1 : 0));
    const std::int64_t t0 = rn * run, len = std::min(T, t0 + run) - t0;
    const std::int64_t ps = nb * len * blk;  // floats between the P products in p
    for (std::int64_t xi = 0; xi < P; ++xi) {
      const float* v = v0 + xi * vx;
      const float* uu = u + xi * u_xi + ob0 * u_ob;
      float* q = p + xi * ps;
      switch (nb) {
        case 4: wino_product_run<4>(v, vcb, uu, u_ob, g.CB, q, len * blk, len); break;
        case 3: wino_product_run<3>(v, vcb, uu, u_ob, g.CB, q, len * blk, len); break;
        case 2: wino_product_run<2>(v, vcb, uu, u_ob, g.CB, q, len * blk, len); break;
        default: wino_product_run<1>(v, vcb, uu, u_ob, g.CB, q, len * blk, len); break;
      }
    }
    for (int b = 0; b < nb; ++b) wino_output_run<TM>(g, p + b * len * blk, ps, ob0 + b, t0, len, ep, sum, y);
  };
  std::atomic<bool> no_memory{false};
  for (std::int64_t n = 0; n < cg.N && !no_memory; ++n) {
    const float* x = px + n * in_image;
    float* y = py + n * out_image;
    const float* sum = ep.sum != nullptr ? ep.sum + n * out_image : nullptr;
    if (local_v) {
      const std::uint64_t token = new_call_token();
      parallel_items(ctx, static_cast<std::size_t>(items), item_cost, [&](std::size_t i0, std::size_t i1) {
        const thread_buffer tb = thread_rows_for(static_cast<std::size_t>(v_run + p_item), token);
        if (tb.data == nullptr) {
          no_memory = true;
          return;
        }
        float* buf = tb.data;
        for (std::size_t i = i0; i < i1; ++i) {
          const auto ii = static_cast<std::int64_t>(i);
          const std::int64_t rn = run_of(ii), t0 = rn * run, len = std::min(T, t0 + run) - t0;
          const std::int64_t vcb = len * blk, vx = g.CB * vcb;
          if (*tb.tag != rn)  // the tag: the run whose V the buffer holds (an earlier chunk's, on this thread)
            for (std::int64_t cb = 0; cb < g.CB; ++cb) wino_input_run<TM>(g, x + cb * g.IH * g.IW * blk, t0, len, buf + cb * vcb, vx);
          *tb.tag = rn;
          item(ii, buf, vx, vcb, buf + v_run, sum, y);
        }
      });
      continue;
    }
    // (1) V[xi][cb][t][16], rows of tiles of channel blocks across the threads.
    parallel_items(ctx, static_cast<std::size_t>(g.CB * g.TH), static_cast<std::size_t>(g.TW * P * blk * 2),
                   [&](std::size_t r0, std::size_t r1) {
                     for (std::size_t r = r0; r < r1; ++r) {
                       const std::int64_t cb = static_cast<std::int64_t>(r) / g.TH, ty = static_cast<std::int64_t>(r) % g.TH;
                       wino_input_run<TM>(g, x + cb * g.IH * g.IW * blk, ty * g.TW, g.TW, pv + cb * T * blk + ty * g.TW * blk, v_plane);
                     }
                   });
    // (2, 3) Each item's products, then their output transform.
    parallel_items(ctx, static_cast<std::size_t>(items), item_cost, [&](std::size_t i0, std::size_t i1) {
      for (std::size_t i = i0; i < i1; ++i) {
        const auto ii = static_cast<std::int64_t>(i);
        item(ii, pv + run_of(ii) * run * blk, v_plane, T * blk, pp + ii * p_item, sum, y);
      }
    });
  }
  if (no_memory)
    return Status(errc::fail, cat("Conv (NCHWc, Winograd): no memory for a buffer of ", std::to_string((v_run + p_item) * 4), " bytes"));
  return {};
}

}  // namespace

// A Winograd convolution (attribute winograd = 2 or 4): a kernel of its own, so that a deployable whose convolutions are
// all direct links none of it.
Status nchwc_winograd_compute(const nchwc_conv_plan& p, compute_context& ctx) {
  EPSTACK_ASSIGN_OR_RETURN(const conv_call c, nchwc_conv_setup(p, ctx));
  if (c.empty) return {};
  return p.winograd == 4 ? wino_conv_compute<4>(c.g, c.x, c.w, c.ep, c.y, ctx) : wino_conv_compute<2>(c.g, c.x, c.w, c.ep, c.y, ctx);
}

}  // namespace epstack::cpu::impl::nchwc
