// The plan builder's machinery: the walk over the operations, constants and their reorders, post-ops, the
// partition's outputs and the scratch memory planned by liveness (plan_builder.hpp).
#include "plan_builder.hpp"

namespace epstack::dnnl_ep {

Result<std::shared_ptr<plan>> plan_builder::build() {
  try {
    for (std::size_t i = 0; i < r_.inputs.size(); ++i) {
      const int v = r_.inputs[i];
      const auto& val = r_.values[static_cast<std::size_t>(v)];
      if (val.constant) continue;
      vd_[static_cast<std::size_t>(v)] = in_.sizes[i];
      if (in_.is_values[i] || in_.dims_only[i]) {
        hv_[static_cast<std::size_t>(v)] = in_.values[i];  // an int64 input: a host value, no memory
        continue;
      }
      vslot_[static_cast<std::size_t>(v)] = add_slot({where::input, static_cast<int>(i), plain(in_.sizes[i])});
    }
    last_use_.assign(r_.values.size(), -1);
    for (std::size_t i = 0; i < r_.ops.size(); ++i) {
      for (int v : r_.ops[i].in)
        if (v >= 0) last_use_[static_cast<std::size_t>(v)] = static_cast<int>(i);
      for (const auto& p : r_.ops[i].posts)
        if (p.binary) last_use_[static_cast<std::size_t>(p.src1)] = static_cast<int>(i);
    }
    for (int v : r_.outputs) last_use_[static_cast<std::size_t>(v)] = INT_MAX;
    for (const auto& op : r_.ops) {
      current_ = &op;
      op_index_ = static_cast<int>(&op - r_.ops.data());
      if (auto st = lower(op); !st) return st;
    }
    current_ = nullptr;
    finish_outputs();
    allocate_scratch();
    return pl_;
  } catch (const damaged_context& e) {
    return e.status;
  } catch (const dn::error& e) {
    return Status(errc::ep_fail, cat("oneDNN provider: partition '", r_.name, "'", where_text(), ": oneDNN: ", e.what()));
  } catch (const std::bad_alloc&) {
    return Status(errc::fail, cat("oneDNN provider: partition '", r_.name, "': out of memory while planning"));
  } catch (const std::exception& e) {
    return Status(errc::ep_fail, cat("oneDNN provider: partition '", r_.name, "'", where_text(), ": ", e.what()));
  }
}

const tensor& plan_builder::plain_of(const tensor& t) {
  if (deferred_ == nullptr || t.empty()) return t;
  for (const auto& d : *deferred_) {
    if (d.at != t.data()) continue;
    if (auto it = materialized_.find(d.at); it != materialized_.end()) return it->second;
    const auto& w = (*stored_)[d.laid];
    verify_source(w.data.get(), w.md.get_size());
    tensor out = tensor::uninitialized(t.type(), t.sizes());
    dn::memory src(w.md, cpu_engine(), const_cast<void*>(w.data.get()));
    dn::memory dst(w.from, cpu_engine(), out.mutable_data());
    dn::stream s(cpu_engine());
    dn::reorder(src, dst).execute(s, src, dst);
    s.wait();
    return materialized_.emplace(d.at, std::move(out)).first->second;
  }
  return t;
}

int plan_builder::reordered_constant(const tensor& source, const md_t& from, const md_t& to) {
  const std::size_t k = laid_count_++;
  if (prelaid_ != nullptr && k < prelaid_->size() && (*prelaid_)[k].md == to) {
    const auto& w = (*prelaid_)[k];
    pl_->laid.push_back(w);
    return constant_slot(w.data.get(), w.data, to);
  }
  weight_reorders.fetch_add(1, std::memory_order_relaxed);
  const tensor& plain = plain_of(source);
  verify_source(plain.data(), plain.byte_size());
  auto block = aligned_block(to.get_size());
  // A weight of the model file is read in one bulk copy, not a page fault at a time (weight_memory.hpp); one of a
  // context binary is reordered from the bytes just verified.
  weight_reader staged;
  const std::byte* bytes = source_ == nullptr ? staged.read(plain) : plain.data();
  dn::memory src(from, cpu_engine(), const_cast<std::byte*>(bytes));
  dn::memory dst(to, cpu_engine(), block.get());
  dn::stream s(cpu_engine());
  dn::reorder(src, dst).execute(s, src, dst);
  s.wait();
  if (plain.is_file_backed()) release_file_pages(plain.data(), plain.byte_size());
  // Only a blocked layout reorders back (not Winograd's): only then may a context store this copy alone.
  const bool whole = source.type() == element_type::float32 && from.get_size() == source.byte_size() &&
                     to.data.format_kind == dnnl_blocked;
  pl_->laid.push_back({to, block, whole ? from : md_t(), whole ? source.data() : nullptr});
  return constant_slot(block.get(), block, to);
}

std::optional<dims> plan_builder::post_dims(const dims& d1, const dims& dst) const {
  if (collapse_from_ > 0) {
    if (d1.size() > collapse_from_) return std::nullopt;
    const dims pd = pad_front(mdims(d1), collapse_from_);
    const std::int64_t lead = volume(pd) / std::max<std::int64_t>(pd.back(), 1);
    if ((lead != 1 && lead != dst[0]) || (pd.back() != 1 && pd.back() != dst[1])) return std::nullopt;
    return dims{lead, pd.back()};
  }
  if (d1.size() > dst.size()) return std::nullopt;
  const dims pd = pad_front(mdims(d1), dst.size());
  for (std::size_t k = 0; k < dst.size(); ++k)
    if (pd[k] != dst[k] && pd[k] != 1) return std::nullopt;
  return pd;
}

int plan_builder::dst_slot(const md_t& md, const dims& dst) {
  if (sum_src_ < 0) return scratch_slot(md);
  int rs = slot_of(sum_src_);
  const dims d1 = dims_of(sum_src_);
  if (d1.size() != dst.size()) rs = alias(as_plain(rs, d1), plain(dst));
  const auto& sl = pl_->slots[static_cast<std::size_t>(rs)];
  bool read_here = false;  // the primitive must not read the buffer it adds into
  for (int v : current_->in)
    if (v >= 0 && vslot_[static_cast<std::size_t>(v)] >= 0) {
      const auto& in = pl_->slots[static_cast<std::size_t>(vslot_[static_cast<std::size_t>(v)])];
      read_here = read_here || (in.w == where::scratch && in.index == sl.index);
    }
  for (const auto& p : current_->posts)
    if (p.binary && p.src1 != sum_src_ && vslot_[static_cast<std::size_t>(p.src1)] >= 0) {
      const auto& in = pl_->slots[static_cast<std::size_t>(vslot_[static_cast<std::size_t>(p.src1)])];
      read_here = read_here || (in.w == where::scratch && in.index == sl.index);
    }
  if (sl.w == where::scratch && sl.md == md && !read_here && buf_last_op_[static_cast<std::size_t>(sl.index)] <= op_index_)
    return rs;
  const int t = scratch_slot(md);
  reorder_into(rs, t);
  return t;
}

int plan_builder::unfused_posts(const std::vector<post_op>& posts, int s, dims& d) {
  for (const auto& p : posts) {
    if (!p.binary) s = eltwise(s, p.alg, p.alpha, p.beta);
    else {
      dims out;
      s = binary(p.alg, s, d, slot_of(p.src1), dims_of(p.src1), {}, out);
      d = out;
    }
  }
  return s;
}

int plan_builder::binary(alg a, int sa, dims da0, int sb, dims db0, const std::vector<post_op>& posts, dims& out) {
  const std::size_t rank = std::max({da0.size(), db0.size(), std::size_t{1}});
  dims da = pad_front(mdims(da0), rank), db = pad_front(mdims(db0), rank);
  out.assign(rank, 1);
  for (std::size_t k = 0; k < rank; ++k) {
    if (da[k] != db[k] && da[k] != 1 && db[k] != 1)
      throw std::invalid_argument("operands " + str(da0) + " and " + str(db0) + " do not broadcast");
    out[k] = da[k] == 1 ? db[k] : da[k];
  }
  std::vector<post_op> fix;
  if (da != out) {
    if (db != out) throw std::invalid_argument("both operands " + str(da0) + " and " + str(db0) + " broadcast");
    std::swap(sa, sb);
    std::swap(da, db);
    std::swap(da0, db0);
    if (a == alg::binary_sub) fix.push_back(post_op{false, alg::eltwise_linear, -1.0f, 0.0f, -1});
    if (a == alg::binary_div) fix.push_back(post_op{false, alg::eltwise_pow, 1.0f, -1.0f, -1});
  }
  // src0 keeps its layout when it has the output's rank; src1 matches it, or is plain when it broadcasts.
  int s0 = canonical(da0.size() == rank ? sa : alias(as_plain(sa, da0), plain(da)));
  const md_t md0 = md_of(s0);
  int s1 = db == out ? canonical(as_md(db0.size() == rank ? sb : alias(as_plain(sb, db0), plain(db)), md0))
                     : alias(as_plain(sb, db0), plain(db));
  std::vector<post_op> all = fix;
  for (const auto& p : posts) append_post(all, p);
  // oneDNN 2.6.3's jit binary kernel applies a binary post-op that broadcasts (a per-channel [1,C,1,1] operand) at
  // wrong offsets, whatever the layout (checked with oneDNN alone: [2,5,1,1], [2,16,4,4], a Transpose read in
  // place). The post-ops before the first such one are fused; it and the rest run as binary primitives of their
  // own, whose broadcast operand oneDNN computes right.
  std::vector<post_op> rest;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].binary && post_dims(dims_of(all[i].src1), out) != std::optional<dims>(out)) {
      rest.assign(all.begin() + static_cast<std::ptrdiff_t>(i), all.end());
      all.resize(i);
      break;
    }
  bool fused = false;
  std::vector<std::pair<int, int>> post_args;
  const md_t md1 = md_of(s1);
  auto pd = with_posts<dn::binary::primitive_desc>(all, out, [&](const dn::primitive_attr& at) {
    dn::binary::desc d(a, md0, md1, md0);
    return dn::binary::primitive_desc(d, at, cpu_engine());
  }, fused, post_args);
  const int t = dst_slot(pd.dst_desc(), out);
  std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC_0, s0}, {DNNL_ARG_SRC_1, s1}, {DNNL_ARG_DST, t}};
  args.insert(args.end(), post_args.begin(), post_args.end());
  add_step(dn::binary(pd), std::move(args), pd);
  if (!fused) rest.insert(rest.begin(), all.begin(), all.end());
  return unfused_posts(rest, t, out);
}

Status plan_builder::lower(const ir_op& op) {
  switch (op.kind) {
    case op_kind::conv:
    case op_kind::deconv: return conv(op);
    case op_kind::matmul: return matmul(op);
    case op_kind::pool: return pool(op);
    case op_kind::eltwise: {
      const int s = slot_of(op.in[0]);
      define(op.out, eltwise(s, op.alg, op.alpha, op.beta), dims_of(op.in[0]));
      return {};
    }
    case op_kind::binary: {
      dims out;
      const int s0 = slot_of(op.in[0]), s1 = slot_of(op.in[1]);
      const int t = binary(op.alg, s0, dims_of(op.in[0]), s1, dims_of(op.in[1]), op.posts, out);
      define(op.out, t, out);
      return {};
    }
    case op_kind::softmax: return softmax(op);
    case op_kind::layernorm: return layernorm(op);
    case op_kind::batchnorm: return batchnorm(op);
    case op_kind::transpose: return transpose(op);
    case op_kind::reshape: return reshape(op);
    case op_kind::concat: return concat(op);
    case op_kind::split: return split(op);
    case op_kind::host: return host(op);
    case op_kind::resample: return resample(op);
  }
  return fail("unknown operation");
}

void plan_builder::finish_outputs() {
  std::vector<bool> taken(bufs_.size(), false);
  for (std::size_t k = 0; k < r_.outputs.size(); ++k) {
    const int v = r_.outputs[k];
    if (const auto& h = hv_[static_cast<std::size_t>(v)]) {  // an int64 result of a shape computation
      pl_->out_dims.push_back(vd_[static_cast<std::size_t>(v)]);
      pl_->out_types.push_back(element_type::int64);
      pl_->host_out.push_back(*h);
      continue;
    }
    pl_->out_types.push_back(element_type::float32);
    pl_->host_out.emplace_back();
    const int s = slot_of(v);
    const dims d = dims_of(v);
    pl_->out_dims.push_back(d);
    const md_t target = plain(d);
    const slot sl = pl_->slots[static_cast<std::size_t>(s)];
    if (sl.w == where::scratch && sl.md == target && !taken[static_cast<std::size_t>(sl.index)] &&
        bufs_[static_cast<std::size_t>(sl.index)].bytes == target.get_size()) {
      taken[static_cast<std::size_t>(sl.index)] = true;
      for (auto& x : pl_->slots)
        if (x.w == where::scratch && x.index == sl.index) x.w = where::output, x.index = static_cast<int>(k);
      continue;
    }
    if (volume(d) == 0) continue;
    const int t = add_slot({where::output, static_cast<int>(k), target});
    reorder_into(s, t);
  }
}

void plan_builder::allocate_scratch() {
  std::vector<std::size_t> order(bufs_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bufs_[a].first < bufs_[b].first; });
  struct block {
    std::size_t offset, bytes;
    int last;
  };
  std::vector<block> blocks;
  pl_->buffer_offset.assign(bufs_.size(), 0);
  std::size_t end = 0;
  for (std::size_t i : order) {
    const auto& b = bufs_[i];
    if (b.last < 0) continue;  // never used (an output now)
    const std::size_t need = (b.bytes + 63) / 64 * 64;
    block* best = nullptr;
    for (auto& bl : blocks)
      if (bl.last < b.first && bl.bytes >= need && (best == nullptr || bl.bytes < best->bytes)) best = &bl;
    if (best == nullptr) {
      blocks.push_back({end, need, b.last});
      end += need;
      pl_->buffer_offset[i] = blocks.back().offset;
    } else {
      best->last = b.last;
      pl_->buffer_offset[i] = best->offset;
    }
  }
  pl_->pad_offset = end;
  pl_->scratch_bytes = end + (pl_->pad_bytes + 63) / 64 * 64;
}
}  // namespace epstack::dnnl_ep
