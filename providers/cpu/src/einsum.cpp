// Einsum. Two-operand contractions map onto batched matrix products (gemm_block / gemm_parallel for float); every
// other equation is evaluated with a general loop over all index combinations.
#include "gemm.hpp"
#include "row_util.hpp"

#include <array>
#include <utility>

namespace epstack::cpu {
namespace impl {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Einsum

constexpr int letter_count = 52;
int letter_id(char ch) { return ch >= 'A' && ch <= 'Z' ? ch - 'A' : (ch >= 'a' && ch <= 'z' ? 26 + (ch - 'a') : -1); }
char letter_char(int id) { return id < 26 ? static_cast<char>('A' + id) : static_cast<char>('a' + (id - 26)); }

struct einsum_term {
  std::vector<int> letters;  // letter ids, in order
  int ellipsis = -1;         // '...' stands before letters[ellipsis] (-1: no ellipsis)
};
struct einsum_spec {
  std::vector<einsum_term> inputs;
  einsum_term output;
};

Result<einsum_term> parse_einsum_term(std::string_view s, const std::string& eq) {
  einsum_term t;
  for (std::size_t i = 0; i < s.size();) {
    const char ch = s[i];
    if (letter_id(ch) >= 0) {
      t.letters.push_back(letter_id(ch));
      ++i;
    } else if (ch == '.') {
      if (s.substr(i, 3) != "...") return invalid(cat("malformed ellipsis in equation '", eq, "'"));
      if (t.ellipsis >= 0) return invalid(cat("a term of equation '", eq, "' has more than one ellipsis"));
      t.ellipsis = static_cast<int>(t.letters.size());
      i += 3;
    } else {
      return invalid(cat("unexpected character '", std::string(1, ch), "' in equation '", eq, "'"));
    }
  }
  return t;
}

Result<einsum_spec> parse_einsum(const std::string& eq, std::size_t inputs) {
  std::string e;
  for (char ch : eq)
    if (ch != ' ') e.push_back(ch);
  const auto arrow = e.find("->");
  const std::string lhs = e.substr(0, arrow);
  einsum_spec sp;
  std::size_t from = 0;
  while (true) {
    const auto comma = lhs.find(',', from);
    EPSTACK_ASSIGN_OR_RETURN(auto t, parse_einsum_term(std::string_view(lhs).substr(from, comma == std::string::npos ? std::string::npos : comma - from), eq));
    sp.inputs.push_back(std::move(t));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (sp.inputs.size() != inputs)
    return invalid(cat("equation '", eq, "' has ", str(static_cast<std::int64_t>(sp.inputs.size())), " input terms but the node has ",
                       str(static_cast<std::int64_t>(inputs)), " inputs"));
  std::array<int, letter_count> uses{};
  bool any_ellipsis = false;
  for (const auto& t : sp.inputs) {
    for (int l : t.letters) ++uses[static_cast<std::size_t>(l)];
    any_ellipsis = any_ellipsis || t.ellipsis >= 0;
  }
  if (arrow != std::string::npos) {
    const std::string rhs = e.substr(arrow + 2);
    if (rhs.find(',') != std::string::npos || rhs.find("->") != std::string::npos)
      return invalid(cat("equation '", eq, "' has a malformed output term"));
    EPSTACK_ASSIGN_OR_RETURN(sp.output, parse_einsum_term(rhs, eq));
    std::array<bool, letter_count> seen{};
    for (int l : sp.output.letters) {
      if (seen[static_cast<std::size_t>(l)])
        return invalid(cat("output label '", std::string(1, letter_char(l)), "' appears twice in equation '", eq, "'"));
      seen[static_cast<std::size_t>(l)] = true;
      if (uses[static_cast<std::size_t>(l)] == 0)
        return invalid(cat("output label '", std::string(1, letter_char(l)), "' does not appear in the inputs of equation '", eq, "'"));
    }
  } else {
    // Implicit output: the ellipsis dimensions, then the labels used exactly once, in alphabetical (ASCII) order.
    if (any_ellipsis) sp.output.ellipsis = 0;
    for (int l = 0; l < letter_count; ++l)
      if (uses[static_cast<std::size_t>(l)] == 1) sp.output.letters.push_back(l);
  }
  return sp;
}

/// dst (axes labelled dst_labels) = src (axes labelled src_labels, sizes from lsize) with its axes permuted.
template <class T>
void permute_copy(const compute_context& ctx, const T* src, const std::vector<int>& src_labels,
                  const std::vector<int>& dst_labels, const dims_t& lsize, T* dst) {
  const std::size_t r = dst_labels.size();
  dims_t sdims(src_labels.size());
  for (std::size_t a = 0; a < src_labels.size(); ++a) sdims[a] = lsize[static_cast<std::size_t>(src_labels[a])];
  const dims_t sstr = strides_of(sdims);
  dims_t ddims(r), dstr(r);  // dstr: the source stride of each destination axis
  for (std::size_t p = 0; p < r; ++p) {
    const auto a = static_cast<std::size_t>(std::find(src_labels.begin(), src_labels.end(), dst_labels[p]) - src_labels.begin());
    ddims[p] = sdims[a];
    dstr[p] = sstr[a];
  }
  const std::int64_t count = product(ddims);
  if (count == 0) return;
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const std::int64_t L = ddims[r - 1], ls = dstr[r - 1];
  parallel_items(ctx, static_cast<std::size_t>(count / L), static_cast<std::size_t>(L), [&](std::size_t r0, std::size_t r1) {
    for (std::size_t row = r0; row < r1; ++row) {
      std::int64_t rem = static_cast<std::int64_t>(row), base = 0;
      for (std::size_t d = r - 1; d-- > 0;) {
        base += (rem % ddims[d]) * dstr[d];
        rem /= ddims[d];
      }
      T* o = dst + static_cast<std::int64_t>(row) * L;
      for (std::int64_t j = 0; j < L; ++j) o[j] = src[base + j * ls];
    }
  });
}

/// Rows [r0, r1) of Y[M,N] = op(A) op(B) for the types gemm_block is not instantiated for.
template <class T>
void naive_gemm_rows(bool ta, bool tb, std::int64_t r0, std::int64_t r1, std::int64_t M, std::int64_t N, std::int64_t K,
                     const T* a, const T* b, T* y) {
  const std::int64_t lda = ta ? M : K, ldb = tb ? K : N;
  for (std::int64_t i = r0; i < r1; ++i) {
    T* yr = y + i * N;
    if (tb) {
      for (std::int64_t j = 0; j < N; ++j) {
        T acc = T(0);
        for (std::int64_t k = 0; k < K; ++k) acc = static_cast<T>(acc + (ta ? a[k * lda + i] : a[i * lda + k]) * b[j * ldb + k]);
        yr[j] = acc;
      }
    } else {
      std::fill_n(yr, N, T(0));
      for (std::int64_t k = 0; k < K; ++k) {
        const T av = ta ? a[k * lda + i] : a[i * lda + k];
        const T* br = b + k * ldb;
        for (std::int64_t j = 0; j < N; ++j) yr[j] = static_cast<T>(yr[j] + av * br[j]);
      }
    }
  }
}

/// nb independent products Y_i[M,N] = op(A_i) op(B_i), each operand packed contiguously per batch.
template <class T>
void batched_gemm(const compute_context& ctx, bool ta, bool tb, std::int64_t nb, std::int64_t M, std::int64_t N,
                  std::int64_t K, const T* a, const T* b, T* y) {
  if (nb == 0 || M == 0 || N == 0) return;
  const std::size_t cost = static_cast<std::size_t>(std::max<std::int64_t>(M * N * std::max<std::int64_t>(K, 1), 1));
  if constexpr (std::is_same_v<T, float>) {
    const std::int64_t lda = ta ? M : K, ldb = tb ? K : N;
    if (nb >= ctx.thread_count()) {
      parallel_items(ctx, static_cast<std::size_t>(nb), cost, [&](std::size_t b0, std::size_t b1) {
        for (std::size_t i = b0; i < b1; ++i) {
          const auto bi = static_cast<std::int64_t>(i);
          gemm_block<float>(ta, tb, M, N, K, 1.0f, a + bi * M * K, lda, b + bi * K * N, ldb, y + bi * M * N, N, false);
        }
      });
    } else {
      for (std::int64_t bi = 0; bi < nb; ++bi)
        gemm_parallel<float>(ctx, ta, tb, M, N, K, 1.0f, a + bi * M * K, lda, b + bi * K * N, ldb, y + bi * M * N, N, false);
    }
  } else {
    // Items are (batch, row) pairs.
    parallel_items(ctx, static_cast<std::size_t>(nb * M), static_cast<std::size_t>(std::max<std::int64_t>(N * K, 1)),
                   [&](std::size_t i0, std::size_t i1) {
                     for (std::size_t i = i0; i < i1;) {
                       const std::int64_t bi = static_cast<std::int64_t>(i) / M, r0 = static_cast<std::int64_t>(i) % M;
                       const std::int64_t r1 = std::min<std::int64_t>(M, r0 + static_cast<std::int64_t>(i1 - i));
                       naive_gemm_rows<T>(ta, tb, r0, r1, M, N, K, a + bi * M * K, b + bi * K * N, y + bi * M * N);
                       i += static_cast<std::size_t>(r1 - r0);
                     }
                   });
  }
}

/// The fast path: two operands without diagonals, broadcasting or single-operand reductions, as a batched matrix
/// product (operands and result permuted only when their layout is not already [batch, rows, inner] or its
/// transpose). False when the equation does not have that form.
template <class T>
bool einsum_pair(compute_context& ctx, const tensor& ta_, const tensor& tb_, const std::vector<int>& la,
                 const std::vector<int>& lb, const std::vector<int>& lo, const dims_t& lsize, T* py) {
  const auto has = [](const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); };
  for (const auto* lv : {&la, &lb}) {
    std::vector<int> s = *lv;
    std::sort(s.begin(), s.end());
    if (std::adjacent_find(s.begin(), s.end()) != s.end()) return false;  // a diagonal
  }
  for (std::size_t i = 0; i < la.size(); ++i)
    if (ta_.sizes()[i] != lsize[static_cast<std::size_t>(la[i])] || (!has(lb, la[i]) && !has(lo, la[i]))) return false;
  for (std::size_t i = 0; i < lb.size(); ++i)
    if (tb_.sizes()[i] != lsize[static_cast<std::size_t>(lb[i])] || (!has(la, lb[i]) && !has(lo, lb[i]))) return false;
  std::vector<int> batch, m, n;
  for (int l : lo) (has(la, l) && has(lb, l) ? batch : has(la, l) ? m : n).push_back(l);
  const auto concat = [](std::initializer_list<const std::vector<int>*> parts) {
    std::vector<int> r;
    for (const auto* p : parts) r.insert(r.end(), p->begin(), p->end());
    return r;
  };
  const auto count_of = [&](const std::vector<int>& labels) {
    std::int64_t c = 1;
    for (int l : labels) c *= lsize[static_cast<std::size_t>(l)];
    return c;
  };

  // Choose which operand plays A, and the order of the contracted labels, to minimise the elements copied.
  struct choice {
    bool swap = false, ta = false, tb = false, pa = false, pb = false, po = false;
    std::vector<int> k;
    std::int64_t cost = 0;
  };
  std::optional<choice> best;
  for (const bool swap : {false, true}) {
    const auto& LA = swap ? lb : la;
    const auto& LB = swap ? la : lb;
    const auto& M_ = swap ? n : m;
    const auto& N_ = swap ? m : n;
    for (const auto* korder_src : {&LA, &LB}) {
      choice ch;
      ch.swap = swap;
      for (int l : *korder_src)
        if (has(LA, l) && has(LB, l) && !has(lo, l)) ch.k.push_back(l);
      const bool a_n = LA == concat({&batch, &M_, &ch.k}), a_t = LA == concat({&batch, &ch.k, &M_});
      const bool b_n = LB == concat({&batch, &ch.k, &N_}), b_t = LB == concat({&batch, &N_, &ch.k});
      ch.pa = !a_n && !a_t;
      ch.ta = !a_n && a_t;
      ch.pb = !b_n && !b_t;
      ch.tb = !b_n && b_t;
      ch.po = lo != concat({&batch, &M_, &N_});
      ch.cost = (ch.pa ? count_of(LA) : 0) + (ch.pb ? count_of(LB) : 0) + (ch.po ? count_of(lo) : 0);
      if (!best || ch.cost < best->cost) best = std::move(ch);
    }
  }
  const choice& ch = *best;
  const tensor& A = ch.swap ? tb_ : ta_;
  const tensor& B = ch.swap ? ta_ : tb_;
  const auto& LA = ch.swap ? lb : la;
  const auto& LB = ch.swap ? la : lb;
  const auto& M_ = ch.swap ? n : m;
  const auto& N_ = ch.swap ? m : n;
  const T* pa = A.typed<T>();
  const T* pb = B.typed<T>();
  tensor sa, sb, so;
  if (ch.pa) {
    sa = ctx.scratch(element_type_of_v<T>, static_cast<std::size_t>(count_of(LA)));
    permute_copy<T>(ctx, pa, LA, concat({&batch, &M_, &ch.k}), lsize, sa.typed<T>());
    pa = sa.typed<T>();
  }
  if (ch.pb) {
    sb = ctx.scratch(element_type_of_v<T>, static_cast<std::size_t>(count_of(LB)));
    permute_copy<T>(ctx, pb, LB, concat({&batch, &ch.k, &N_}), lsize, sb.typed<T>());
    pb = sb.typed<T>();
  }
  T* pc = py;
  if (ch.po) {
    so = ctx.scratch(element_type_of_v<T>, static_cast<std::size_t>(count_of(lo)));
    pc = so.typed<T>();
  }
  batched_gemm<T>(ctx, ch.ta, ch.tb, count_of(batch), count_of(M_), count_of(N_), count_of(ch.k), pa, pb, pc);
  if (ch.po) permute_copy<T>(ctx, pc, concat({&batch, &M_, &N_}), lo, lsize, py);
  return true;
}

template <class T>
Status einsum_compute(compute_context& ctx, const einsum_spec& sp) {
  const std::size_t nops = sp.inputs.size();
  if (ctx.input_count() < nops)
    return invalid(cat("the equation names ", str(static_cast<std::int64_t>(nops)), " operands but ",
                       str(static_cast<std::int64_t>(ctx.input_count())), " inputs were given"));
  std::vector<const tensor*> xs(nops);
  for (std::size_t i = 0; i < nops; ++i) {
    xs[i] = &ctx.input(i);
    if (xs[i]->type() != element_type_of_v<T>)
      return invalid(cat("input ", str(static_cast<std::int64_t>(i)), " has element type ", std::string(to_string(xs[i]->type())),
                         ", expected ", std::string(to_string(element_type_of_v<T>))));
  }
  // Labels: the ellipsis dimensions are 0..max_ell-1 (right-aligned across operands), letters follow.
  std::vector<int> ell(nops);
  int max_ell = 0;
  for (std::size_t i = 0; i < nops; ++i) {
    const auto& t = sp.inputs[i];
    const int rank = static_cast<int>(xs[i]->rank()), named = static_cast<int>(t.letters.size());
    if (t.ellipsis < 0 ? rank != named : rank < named)
      return invalid(cat("input ", str(i), " has rank ", str(rank), " but its term names ", str(named), " dimensions",
                         t.ellipsis < 0 ? "" : " besides the ellipsis"));
    ell[i] = t.ellipsis < 0 ? 0 : rank - named;
    max_ell = std::max(max_ell, ell[i]);
  }
  const auto label_of = [&](int letter) { return max_ell + letter; };
  const auto label_name = [&](int l) { return l < max_ell ? std::string("...") : std::string(1, letter_char(l - max_ell)); };
  const std::size_t L = static_cast<std::size_t>(max_ell + letter_count);
  dims_t lsize(L, -1);
  std::vector<std::vector<int>> labs(nops);
  for (std::size_t i = 0; i < nops; ++i) {
    const auto& t = sp.inputs[i];
    for (std::size_t p = 0; p <= t.letters.size(); ++p) {
      if (static_cast<int>(p) == t.ellipsis)
        for (int e = 0; e < ell[i]; ++e) labs[i].push_back(max_ell - ell[i] + e);
      if (p < t.letters.size()) labs[i].push_back(label_of(t.letters[p]));
    }
    const auto dims = xs[i]->sizes();
    for (std::size_t a = 0; a < labs[i].size(); ++a) {
      const auto l = static_cast<std::size_t>(labs[i][a]);
      for (std::size_t b = 0; b < a; ++b)
        if (labs[i][b] == labs[i][a] && dims[b] != dims[a])
          return invalid(cat("input ", str(static_cast<std::int64_t>(i)), " repeats label '", label_name(labs[i][a]),
                             "' over dimensions of different sizes ", str(dims[b]), " and ", str(dims[a])));
      if (lsize[l] < 0 || lsize[l] == 1) lsize[l] = dims[a];  // a size-1 dimension broadcasts against any size
      else if (dims[a] != 1 && dims[a] != lsize[l])
        return invalid(cat("label '", label_name(labs[i][a]), "' has size ", str(lsize[l]), " in one input and ", str(dims[a]),
                           " in input ", str(static_cast<std::int64_t>(i))));
    }
  }
  std::vector<int> lo;
  if (sp.output.ellipsis < 0 && max_ell > 0)
    return invalid(cat("the inputs' ellipsis covers ", str(max_ell), " dimensions but the output term has no ellipsis"));
  for (std::size_t p = 0; p <= sp.output.letters.size(); ++p) {
    if (static_cast<int>(p) == sp.output.ellipsis)
      for (int e = 0; e < max_ell; ++e) lo.push_back(e);
    if (p < sp.output.letters.size()) lo.push_back(label_of(sp.output.letters[p]));
  }
  dims_t odims(lo.size());
  for (std::size_t p = 0; p < lo.size(); ++p) odims[p] = lsize[static_cast<std::size_t>(lo[p])];
  tensor& y = ctx.allocate_output(0, element_type_of_v<T>, odims);
  T* py = y.typed<T>();
  const std::size_t nout = y.element_count();
  if (nout == 0) return {};

  if (nops == 2 && einsum_pair<T>(ctx, *xs[0], *xs[1], labs[0], labs[1], lo, lsize, py)) return {};

  // General path: for each output element, sum the product of the operands over every combination of the labels
  // that are not in the output. Repeated labels in one operand add their strides (a diagonal); a size-1 dimension
  // against a larger label size has stride 0 (broadcasting).
  std::vector<dims_t> st(nops, dims_t(L, 0));
  std::vector<bool> used(L, false);
  for (std::size_t i = 0; i < nops; ++i) {
    const auto dims = xs[i]->sizes();
    const dims_t s = strides_of(dims);
    for (std::size_t a = 0; a < labs[i].size(); ++a) {
      used[static_cast<std::size_t>(labs[i][a])] = true;
      if (dims[a] != 1) st[i][static_cast<std::size_t>(labs[i][a])] += s[a];
    }
  }
  std::vector<int> sum_labels;
  for (std::size_t l = 0; l < L; ++l)
    if (used[l] && std::find(lo.begin(), lo.end(), static_cast<int>(l)) == lo.end()) sum_labels.push_back(static_cast<int>(l));
  const std::size_t ro = lo.size(), ns = sum_labels.size();
  dims_t ost(nops * ro), sst(nops * ns), sdim(ns);
  std::int64_t total_sum = 1;
  for (std::size_t q = 0; q < ns; ++q) {
    sdim[q] = lsize[static_cast<std::size_t>(sum_labels[q])];
    total_sum *= sdim[q];
  }
  for (std::size_t i = 0; i < nops; ++i) {
    for (std::size_t p = 0; p < ro; ++p) ost[i * ro + p] = st[i][static_cast<std::size_t>(lo[p])];
    for (std::size_t q = 0; q < ns; ++q) sst[i * ns + q] = st[i][static_cast<std::size_t>(sum_labels[q])];
  }
  std::vector<const T*> data(nops);
  for (std::size_t i = 0; i < nops; ++i) data[i] = xs[i]->typed<T>();
  const std::size_t pieces = piece_count(ctx, nout, static_cast<std::size_t>(total_sum) * nops);
  const std::size_t per = ro + ns + nops;
  dims_t work(pieces * per);
  for_pieces(ctx, nout, pieces, [&](std::size_t piece, std::size_t b, std::size_t e) {
    std::int64_t* oi = work.data() + piece * per;  // output multi-index
    std::int64_t* cnt = oi + ro;                    // summation odometer
    std::int64_t* off = cnt + ns;                   // operand offsets
    std::size_t rem = b;
    for (std::size_t p = ro; p-- > 0;) {
      oi[p] = static_cast<std::int64_t>(rem % static_cast<std::size_t>(odims[p]));
      rem /= static_cast<std::size_t>(odims[p]);
    }
    for (std::size_t o = b; o < e; ++o) {
      for (std::size_t i = 0; i < nops; ++i) {
        std::int64_t base = 0;
        for (std::size_t p = 0; p < ro; ++p) base += oi[p] * ost[i * ro + p];
        off[i] = base;
      }
      std::fill_n(cnt, ns, 0);
      T acc = T(0);
      for (std::int64_t s = 0; s < total_sum; ++s) {
        T prod = data[0][off[0]];
        for (std::size_t i = 1; i < nops; ++i) prod = static_cast<T>(prod * data[i][off[i]]);
        acc = static_cast<T>(acc + prod);
        for (std::size_t q = ns; q-- > 0;) {
          ++cnt[q];
          for (std::size_t i = 0; i < nops; ++i) off[i] += sst[i * ns + q];
          if (cnt[q] < sdim[q]) break;
          for (std::size_t i = 0; i < nops; ++i) off[i] -= sst[i * ns + q] * sdim[q];
          cnt[q] = 0;
        }
      }
      py[o] = acc;
      for (std::size_t p = ro; p-- > 0;) {
        if (++oi[p] < odims[p]) break;
        oi[p] = 0;
      }
    }
  });
  return {};
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

bool einsum::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  return !g.node(n).inputs.empty() && type_in<EPSTACK_NUMERIC_TYPES>(t) && all_inputs(g, n, t);
}
Result<compute_function> einsum::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!has_attr(nd, "equation")) return invalid("Einsum needs the attribute equation");
  EPSTACK_ASSIGN_OR_RETURN(einsum_spec sp, parse_einsum(attr_s(nd, "equation"), nd.inputs.size()));
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_NUMERIC_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Einsum", [sp](compute_context& ctx) { return einsum_compute<T>(ctx, sp); });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu
