// Lowering MatMul and Gemm to oneDNN's matmul primitive (plan_builder.hpp).
#include "plan_builder.hpp"

namespace epstack::dnnl_ep {

md_t plan_builder::matrix_md(const dims& d, bool trans) {
  dims phys = d;
  const std::size_t n = d.size();
  if (trans) std::swap(phys[n - 1], phys[n - 2]);
  dims ps(n, 1);
  for (std::size_t i = n - 1; i > 0; --i) ps[i - 1] = ps[i] * std::max<std::int64_t>(phys[i], 1);
  dims strides = ps;
  if (trans) std::swap(strides[n - 1], strides[n - 2]);
  return strided(d, strides);
}

namespace {

// A strided view as a matmul operand. Its leading size-1 (batch) dims take the stride of an outermost dim, the
// view's whole extent, not strided()'s row-major one: oneDNN 2.6.3's brgemm matmul refuses a view whose size-1 batch
// dim has a stride inside the others' ([1,12,128,64] with strides [768,64,768,1], BERT's heads read in place) and
// falls back to gemm:jit: bert_base_seq128's P x V took 0.28 ms a call, 0.11 ms on brgemm (ONEDNN_VERBOSE=1).
md_t operand_view(const dims& d, const dims& st) {
  dims s = *strides_of(strided(d, st));
  std::int64_t extent = 1;
  for (std::size_t i = 0; i < d.size(); ++i) extent = std::max(extent, s[i] * std::max<std::int64_t>(d[i], 1));
  for (std::size_t i = 0; i + 2 < d.size() && d[i] == 1; ++i) s[i] = extent;  // batch dims only, never a matrix's
  return md_t(d, dt::f32, s);
}

}  // namespace

dims plan_builder::transposed_dst(const ir_op& op, const dims& eo, const dims& onnx_out, bool collapse) {
  const ir_op* t = sole_reader(op.out);
  const std::size_t n = eo.size();
  if (t == nullptr || t->kind != op_kind::transpose || t->in.empty() || t->in[0] != op.out || collapse ||
      eo != onnx_out || n < 3 || t->perm.size() != n)
    return {};
  // Post-ops: element-wise ones and full-size additions (a sum) only. oneDNN 2.6.3's brgemm with this destination
  // and a broadcast binary post-op (a Mul by a row of N values) crashed in its jit kernel.
  for (const post_op& p : op.posts)
    if (p.binary && (p.alg != alg::binary_add || dims_of(p.src1) != onnx_out)) return {};
  // Only the heads merged back: the batch dim next to the rows swapped with them, (.., n-2, n-3, n-1). oneDNN 2.6.3's
  // brgemm takes that destination (acbd); with another order and a batch dim larger than 1 it runs gemm:jit, slower
  // than brgemm and a reorder ([2,12,128,64]: 147-180 us against 125-127).
  for (std::size_t i = 0; i + 3 < n; ++i)
    if (t->perm[i] != static_cast<std::int64_t>(i)) return {};
  if (t->perm[n - 3] != static_cast<std::int64_t>(n - 2) || t->perm[n - 2] != static_cast<std::int64_t>(n - 3) ||
      t->perm[n - 1] != static_cast<std::int64_t>(n - 1))
    return {};
  dims tout(n), row(n, 1), st(n);
  for (std::size_t i = 0; i < n; ++i) tout[i] = eo[static_cast<std::size_t>(t->perm[i])];
  for (std::size_t i = n - 1; i > 0; --i) row[i - 1] = row[i] * std::max<std::int64_t>(tout[i], 1);
  for (std::size_t i = 0; i < n; ++i) st[static_cast<std::size_t>(t->perm[i])] = row[i];
  return st;
}

Status plan_builder::matmul(const ir_op& op) {
  dims a = dims_of(op.in[0]), b = dims_of(op.in[1]);
  const dims a0 = a, b0 = b;
  if (a.empty() || b.empty()) return fail("matrix product of a scalar");
  const bool squeeze_a = a.size() == 1, squeeze_b = b.size() == 1;
  if (squeeze_a) a.insert(a.begin(), 1);
  if (squeeze_b) b.push_back(1);
  if (op.trans_a) std::swap(a[a.size() - 1], a[a.size() - 2]);
  if (op.trans_b) std::swap(b[b.size() - 1], b[b.size() - 2]);
  const std::size_t rank = std::max(a.size(), b.size());
  a = pad_front(a, rank);
  b = pad_front(b, rank);
  if (a[rank - 1] != b[rank - 2]) return fail("inner dimensions of " + str(a0) + " and " + str(b0) + " differ");
  dims out(rank);
  for (std::size_t k = 0; k + 2 < rank; ++k) {
    if (a[k] != b[k] && a[k] != 1 && b[k] != 1) return fail("batch dimensions of " + str(a0) + " and " + str(b0) + " do not broadcast");
    out[k] = a[k] == 1 ? b[k] : a[k];
  }
  out[rank - 2] = a[rank - 2];
  out[rank - 1] = b[rank - 1];
  dims onnx_out = out;  // ONNX's result: the promoted 1-D dims dropped
  if (squeeze_b) onnx_out.pop_back();
  if (squeeze_a) onnx_out.erase(onnx_out.end() - (squeeze_b ? 1 : 2));
  const bool const_b = r_.values[static_cast<std::size_t>(op.in[1])].constant.has_value();
  // Constant weights without batch dims against a batched A: one 2-D product [batch*M, K] x [K, N], for which
  // oneDNN packs the weights into its blocked format (it keeps batched weights plain).
  const bool collapse = rank > 2 && const_b && !op.trans_a && volume(b) == b[rank - 1] * b[rank - 2];
  dims ea = a, eb = b, eo = out;
  if (collapse) {
    ea = {volume(a) / a[rank - 1], a[rank - 1]};
    eb = {b[rank - 2], b[rank - 1]};
    eo = {ea[0], eb[1]};
    collapse_from_ = rank;
  }
  // Operand memory: ONNX dims, plain, possibly transposed; the padded leading dims have size 1.
  const auto operand = [&](int v, const dims& logical, bool trans) {
    const int s = slot_of(v);
    // A strided view (a transposition) of the operand's own rank is read in place.
    if (const auto st = strides_of(md_of(s)); st && !collapse && dims_of(v).size() == logical.size() && md_of(s) != plain(dims_of(v))) {
      dims vs = *st;
      if (trans) std::swap(vs[vs.size() - 1], vs[vs.size() - 2]);
      return alias(s, operand_view(logical, vs));
    }
    return alias(as_plain(s, dims_of(v)), matrix_md(logical, trans));
  };
  const int sa = operand(op.in[0], ea, op.trans_a);
  const md_t a_md = md_of(sa);
  const int sb_runtime = const_b ? -1 : operand(op.in[1], eb, op.trans_b);  // its md: plain, or a strided view
  const md_t b_md = const_b ? md_t(eb, dt::f32, tag::any) : md_of(sb_runtime);
  // A first post-op adding a constant row of N values (Gemm's C, a MatMul's bias Add) is oneDNN's bias argument.
  std::vector<post_op> posts = op.posts;
  const tensor* bias = nullptr;
  if (!posts.empty() && posts[0].binary && posts[0].alg == alg::binary_add && op.scale == 1.0f) {
    const auto& c = r_.values[static_cast<std::size_t>(posts[0].src1)].constant;
    if (c && c->type() == element_type::float32 && static_cast<std::int64_t>(c->element_count()) == eo.back() &&
        (c->rank() == 0 ? eo.back() == 1 : c->sizes().back() == eo.back())) {
      bias = &*c;
      posts.erase(posts.begin());
    }
  }
  dims bias_dims(eo.size(), 1);
  bias_dims.back() = eo.back();
  const md_t bias_md = bias != nullptr ? plain(bias_dims) : md_t();
  // A product whose sole reader merges its heads back (a Transpose (.., n-2, n-3, n-1): BERT's [1,12,128,64] to
  // [1,128,12,64]) is written in the transposed order: the Transpose is then a view of row-major memory and no
  // reorder runs (0.07 ms a layer of bert_base_seq128).
  dims out_strides = transposed_dst(op, eo, onnx_out, collapse);
  md_t dst_md = out_strides.empty() ? plain(eo) : operand_view(eo, out_strides);
  bool fused = false;
  std::vector<std::pair<int, int>> post_args;
  const auto make_pd = [&](const md_t& dmd) {
    return with_posts<dn::matmul::primitive_desc>(posts, eo, [&](dn::primitive_attr at) {
      if (op.scale != 1.0f) at.set_output_scales(0, {op.scale});
      dn::matmul::desc d(a_md, b_md, bias_md, dmd);
      return dn::matmul::primitive_desc(d, at, cpu_engine());
    }, fused, post_args);
  };
  auto pd = make_pd(dst_md);
  if (!out_strides.empty() && !fused && !posts.empty()) {
    // Post-ops that do not fuse run on a plain product: planned plain, or it would be reordered twice.
    out_strides.clear();
    dst_md = plain(eo);
    pd = make_pd(dst_md);
  }
  int sb = -1;
  if (const_b) {
    const tensor& bt = *r_.values[static_cast<std::size_t>(op.in[1])].constant;
    sb = reordered_constant(bt, matrix_md(eb, op.trans_b), pd.weights_desc());
  } else {
    sb = sb_runtime;
  }
  const int t = dst_slot(pd.dst_desc(), eo);
  collapse_from_ = 0;
  std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, sa}, {DNNL_ARG_WEIGHTS, sb}, {DNNL_ARG_DST, t}};
  if (bias != nullptr) args.emplace_back(DNNL_ARG_BIAS, constant_slot(*bias, bias_md));
  args.insert(args.end(), post_args.begin(), post_args.end());
  add_step(dn::matmul(pd), std::move(args), pd);
  dims res_dims = onnx_out;
  int res = !out_strides.empty() ? t : alias(as_plain(t, eo), plain(onnx_out));  // t's md is dst_md
  if (!fused) res = unfused_posts(posts, res, res_dims);
  define(op.out, res, res_dims);
  return {};
}
}  // namespace epstack::dnnl_ep
