// The blocked-channel layout pass (ONNX Runtime's NchwcTransformer, for the CPU provider): chains of float 2-D
// convolutions, pools and element-wise nodes placed on the CPU provider are rewritten into domain com.epstack.nchwc16,
// whose tensors hold 16 channels side by side ([N, C/16, H, W, 16], declared [N, Cp, H, W], Cp the channels rounded up
// to 16). Filters and biases are laid out here, once. A value enters the layout through ReorderInput (shared by its
// consumers; not needed by a first-layer convolution of fewer than 16 input channels, which reads NCHW directly) and
// leaves it through ReorderOutput, which writes the original value's name: every consumer outside the chain, graph
// outputs and subgraphs keep reading what they read before.
//
// Unlike ONNX Runtime, channel counts that are not multiples of 16 stay in the layout (MobileNetV2's 24): filters are
// zero for the padded input channels, so the padded lanes (bias 0, activation of 0) never reach a real channel.
#include "egraph.hpp"

#include <epstack/core/helper_threads.hpp>
#include <epstack/core/weight_memory.hpp>
#include <epstack/detail/winograd_f23.hpp>
#include <epstack/ir/node_facts.hpp>
#include <epstack/provider/cost_model.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace epstack {

using namespace opt;

namespace {

constexpr std::int64_t blk = 16;
// A 3x3 convolution at unit strides runs as Winograd on the blocked layout: F(4x4, 3x3) over at least 49 tiles of 4x4
// (28x28 and larger: 4x fewer multiplications than a direct kernel), else F(2x2, 3x3) over at least 16 tiles of 2x2
// (2.25x fewer). Per layer of ResNet-50 (2 threads): 64x56x56 0.21-0.29 ms as F(4x4), 0.35 as F(2x2), 0.49 as the NCHW
// Winograd of conv.cpp between reorders, about 0.48 direct; 128x28x28 0.22-0.28 against 0.28-0.29; at 256x14x14 F(2x2)
// wins (0.32 against 0.36-0.38: 16 tiles of 4x4 cover 16x16, and 9 MiB of transformed filters are read per call).
// 512x7x7 (16 tiles of 2x2, its transformed filters 16 MiB against 9 MiB laid out for the direct kernel): F(2x2)
// since each Winograd item transforms its own tiles (nchwc_winograd.cpp), 0.61-0.66 ms against 0.83-0.90 direct,
// the network 0.5-0.9 ms faster (three interleaved profiled pairs, Zen 5); before, with V transformed into shared
// scratch, the two were even on Zen 5 and the direct kernel was kept there (12 MB less peak memory, 5% shorter
// create). On Zen 4 (splitting 512-bit instructions in two) F(2x2) won at 7x7 then too: 32.6-32.7 against 33.5-33.7.
// An output of fewer than 16 tiles of 2x2 (6x6: 9, 7x6: 12) runs direct.
// On Intel's cores (machine_class::avx512_intel) an output of exactly 16 (7x7, 8x8) runs direct too: at 7x7 F(2x2) is
// bound by its 16 MiB of filters (each read for 16 tiles only; 15 GB/s a layer on a 2-vCPU Xeon VM whose memory
// gives a core 11-14), while the direct kernel, since its threads fetch their next set's filters during the current
// one, takes its 9 MiB at a compute-bound pace: ResNet-50's layer4.1 and 4.2 conv2 1.144 and 1.097 ms as F(2x2),
// 1.006 and 1.014 direct, layer4 7.04 -> 6.75 ms (eight interleaved profiled runs of 40).
constexpr std::int64_t winograd_min_tiles = 16;
constexpr std::int64_t winograd_min_tiles_intel = 17;
constexpr std::int64_t winograd4_min_tiles = 49;
// A PointwiseDepthwiseConv takes the projection after it (fuse_projection) from 28 output rows. MobileNetV2 on 2 threads
// in this VM: its six blocks at 112x112 (the stem's), 56x56 and 28x28 together 0.956 of the network's time (6
// alternated pairs; each block 29-47 us shorter); the 14x14 blocks as well, level node by node (0.993 over 8 pairs);
// the 7x7 ones, slower (960 channels: 0.178 -> 0.201 ms; a band's edge rows are a third of its expansion).
constexpr std::int64_t projection_min_rows = 28;

// W's floats where they lie, aligned or not (a tensor in a mapped file may start at any byte): read through memcpy,
// which compiles to plain loads (an aligned copy of each unaligned W, and its page faults, showed in MobileNetV2's
// create profile).
struct floats_at {
  const std::byte* p;
  float operator[](std::int64_t i) const {
    float f;
    std::memcpy(&f, p + i * static_cast<std::int64_t>(sizeof(float)), sizeof f);
    return f;
  }
};

// Winograd F(TM x TM, 3x3) filters U = G g G^T (TM = 2: detail::winograd_f23_filter, 4: winograd_f43_filter) of
// O x I 3x3 filters `src`, written blocked for the CPU provider's kernel (providers/cpu/src/nchwc.cpp): for each of the
// P = (TM + 2)^2 transformed positions xi, a 1x1 convolution's filters [Op/16][Ip/16][16 in][16 out], i.e.
// [xi][ob][ib][bi][bo]: every one of `dst`'s P * Op * Ip values, zeros where o >= O or i >= I.
void winograd_filters(int TM, floats_at src, std::int64_t O, std::int64_t I, std::int64_t Op, std::int64_t Ip, float* dst) {
  // 16 filters (one per output channel of a block) at once, a lane each: the transforms divide, and a vector divides
  // as fast as a scalar.
  typedef float lanes __attribute__((vector_size(blk * sizeof(float))));
  const std::int64_t per_xi = Op * Ip;
  const int P = (TM + 2) * (TM + 2);
  // One 16x16 block of filters at a time, into a local buffer, then 1 KiB to each plane: writing each filter's P values
  // straight to their P planes took 40 ms of ResNet-50's create (a TLB miss per store).
  std::vector<float> local(static_cast<std::size_t>(36 * blk * blk));
  for (std::int64_t ob = 0; ob < Op / blk; ++ob)
    for (std::int64_t ib = 0; ib < Ip / blk; ++ib) {
      std::fill(local.begin(), local.end(), 0.0f);
      for (std::int64_t bi = 0, i = ib * blk; bi < blk && i < I; ++bi, ++i) {
        lanes g[9] = {}, u[36];
        for (std::int64_t bo = 0, o = ob * blk; bo < blk && o < O; ++bo, ++o)
          for (int k = 0; k < 9; ++k) g[k][bo] = src[(o * I + i) * 9 + k];
        if (TM == 2) detail::winograd_f23_filter(g, u);
        else detail::winograd_f43_filter(g, u);
        for (int xi = 0; xi < P; ++xi) std::memcpy(&local[static_cast<std::size_t>((xi * blk + bi) * blk)], &u[xi], sizeof(lanes));
      }
      const std::int64_t at = (ob * (Ip / blk) + ib) * blk * blk;
      for (int xi = 0; xi < P; ++xi)
        std::memcpy(dst + xi * per_xi + at, local.data() + xi * blk * blk, blk * blk * sizeof(float));
    }
}
bool all_ones(const std::vector<std::int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](std::int64_t x) { return x == 1; });
}
constexpr std::int64_t round_up(std::int64_t c) { return (c + blk - 1) / blk * blk; }
// The window attributes the blocked kernels read (2-D strides, dilations and pads, a known auto_pad) are well formed.
bool window_attrs_2d(const node& n) {
  for (const char* a : {"strides", "dilations"})
    if (const auto v = attr_ints(n, a); !v.empty() && v.size() != 2) return false;
  if (const auto p = attr_ints(n, "pads"); !p.empty() && p.size() != 4) return false;
  const auto ap = attr_s(n, "auto_pad", "NOTSET");
  return ap == "NOTSET" || ap == "VALID" || ap == "SAME_UPPER" || ap == "SAME_LOWER";
}
tensor zeros(std::span<const std::int64_t> sizes) {
  tensor t = uninitialized_weight(element_type::float32, sizes);
  std::memset(t.mutable_data(), 0, t.byte_size());
  return t;
}

struct blocked_value {
  std::string name;        // the blocked tensor
  std::int64_t channels;   // real channels
  bool from_reorder;       // made by ReorderInput: the original stays, no ReorderOutput needed
};

// The filter layouts: OIHWBiBo (dense), OIHWBo (a first layer of fewer than 16 channels; depthwise).
enum class conv_kind { dense, first_layer, depthwise };

// Laying out one W for the blocked kernels: read from `source`, written to `dst` (allocated, not yet written).
struct filter_job {
  tensor source;
  std::int64_t wino;  // 0: direct
  conv_kind kind;
  std::int64_t O, I, Op, KH, KW;
  tensor dst;

  // `staged`: W from the model file in one bulk read, not a page fault at a time.
  void run(weight_reader& staged) {
    const floats_at src{staged.read(source)};
    float* d = reinterpret_cast<float*>(dst.mutable_data());
    const std::int64_t Ip = dst.sizes()[1], KK = KH * KW;
    if (wino != 0) {
      winograd_filters(static_cast<int>(wino), src, O, I, Op, Ip, d);  // every value written (zeros included)
      return;
    }
    // The padding of channels that do not fill whole blocks stays zero.
    if (O != Op || I != Ip) std::memset(d, 0, dst.byte_size());
    if (kind == conv_kind::dense) {
      // Written in order: [ob][ib][k][bi][bo].
      for (std::int64_t ob = 0; ob < Op / blk; ++ob)
        for (std::int64_t ib = 0; ib < Ip / blk; ++ib)
          for (std::int64_t k = 0; k < KK; ++k)
            for (std::int64_t bi = 0, i = ib * blk; bi < blk; ++bi, ++i, d += blk)
              for (std::int64_t bo = 0, o = ob * blk; bo < blk && i < I; ++bo, ++o)
                if (o < O) d[bo] = src[(o * I + i) * KK + k];
    } else {
      // [ob][i][k][bo].
      for (std::int64_t ob = 0; ob < Op / blk; ++ob)
        for (std::int64_t i = 0; i < I; ++i)
          for (std::int64_t k = 0; k < KK; ++k, d += blk)
            for (std::int64_t bo = 0, o = ob * blk; bo < blk && o < O; ++bo, ++o) d[bo] = src[(o * I + i) * KK + k];
    }
  }
};

// Runs the jobs on all the machine's cores, largest first (the filters of ResNet-50 take most of its start-up).
void lay_out_filters(std::vector<filter_job>& jobs) {
  std::sort(jobs.begin(), jobs.end(),
            [](const filter_job& a, const filter_job& b) { return a.dst.byte_size() > b.dst.byte_size(); });
  std::atomic<std::size_t> next{0};
  std::mutex failed_lock;
  std::exception_ptr failed;  // the first job that threw (out of memory): rethrown here, never out of a thread
  const auto work = [&] {
    try {
      weight_reader staged;  // one staging buffer for all of this thread's jobs
      for (std::size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < jobs.size();) jobs[k].run(staged);
    } catch (...) {
      next = jobs.size();
      const std::lock_guard lock(failed_lock);
      if (!failed) failed = std::current_exception();
    }
  };
  // A small model's filters are laid out on this thread: starting one costs more than they do.
  std::size_t total = 0;
  for (const auto& j : jobs) total += j.dst.byte_size();
  const std::size_t threads = total < (std::size_t{1} << 20) ? 1 :
      std::min<std::size_t>(std::max(1u, std::thread::hardware_concurrency()), jobs.size());
  run_with_helpers(threads, work);
  if (failed) std::rethrow_exception(failed);
}

struct layout_pass {
  egraph& e;
  std::unordered_map<std::string, blocked_value> blocked;  // original value -> its blocked form
  std::unordered_map<std::string, std::string> filters;   // original W (+ kind) -> laid-out W
  std::vector<enode> out;
  std::size_t converted = 0;
  std::vector<node_id> origins;  // the graph's nodes that were converted (enode::origin)
  void note_converted(const enode& en) {
    ++converted;
    if (en.origin != no_id) origins.push_back(en.origin);
  }
  bool winograd = true;  // 3x3 unit-stride convolutions as Winograd
  std::vector<filter_job> jobs;  // the laid-out filters to write
  bool fuse_depthwise = true;  // 1x1 convolutions into the depthwise convolutions that read them
  std::size_t fused = 0, projected = 0;
  // What the fusion needs to know of each converted convolution, by its (blocked) output.
  struct conv_facts {
    conv_kind kind;
    std::int64_t wino, KH, KW, Ip, I;  // I: the real input channels
    bool has_z;
  };
  std::unordered_map<std::string, conv_facts> convs;

  const type_info* type4(const std::string& v) const {
    const type_info* t = e.type_of(v);
    return t != nullptr && t->is_tensor() && t->elem == element_type::float32 && t->dims && t->dims->rank() == 4 ? t : nullptr;
  }
  type_info blocked_type(const type_info& t, std::int64_t cpad) const {
    type_info b = t;
    (*b.dims)[1] = dimension(cpad);
    return b;
  }
  static std::optional<std::int64_t> known_channels(const type_info* t) {
    if (t == nullptr || !(*t->dims)[1].is_known()) return std::nullopt;
    return (*t->dims)[1].value;
  }

  // The blocked form of `v` (C real channels), made by a ReorderInput placed before the current node when needed.
  std::string blocked_input(const std::string& v, std::int64_t channels) {
    if (auto it = blocked.find(v); it != blocked.end()) return it->second.name;
    const type_info* t = type4(v);
    enode r;
    r.n.op_type = "ReorderInput";
    r.n.domain = std::string(nchwc_domain);
    r.n.since_version = 1;
    r.n.name = e.fresh(v + "_nchwc_reorder");
    const std::string name = e.fresh(v + "_nchwc");
    e.types[name] = blocked_type(*t, round_up(channels));
    r.inputs = {v};
    r.outputs = {name};
    out.push_back(std::move(r));
    blocked[v] = {name, channels, true};
    return name;
  }

  std::string new_output(const std::string& orig, std::int64_t channels) {
    const std::string name = e.fresh(orig + "_nchwc");
    e.types[name] = blocked_type(*type4(orig), round_up(channels));
    blocked[orig] = {name, channels, false};
    return name;
  }

  std::string add_tensor(const std::string& base, tensor t) {
    const std::string name = e.fresh(base);
    e.add_init(name, std::move(t));
    return name;
  }

  bool convert_conv(enode& en) {
    const bool fused = en.n.domain == contrib_domain && en.n.op_type == "FusedConv";
    if (!fused && !is_op(en, "Conv")) return false;
    if (en.inputs.size() < 2 || en.outputs.size() != 1 || (!fused && en.inputs.size() > 3) || en.inputs.size() > 4) return false;
    const type_info* yt = type4(en.outputs[0]);
    const type_info* xt = type4(en.inputs[0]);
    const tensor* w = e.constant(en.inputs[1]);
    if (yt == nullptr || xt == nullptr || w == nullptr || w->type() != element_type::float32 || w->rank() != 4) return false;
    const bool has_b = en.inputs.size() > 2 && !en.inputs[2].empty();
    const tensor* b = has_b ? e.constant(en.inputs[2]) : nullptr;
    const std::int64_t O = w->sizes()[0], I = w->sizes()[1], KH = w->sizes()[2], KW = w->sizes()[3];
    if (has_b && (b == nullptr || b->type() != element_type::float32 || b->element_count() != static_cast<std::size_t>(O))) return false;
    if (fused) {
      static constexpr std::string_view acts[] = {"", "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid"};
      if (std::find(std::begin(acts), std::end(acts), attr_s(en.n, "activation")) == std::end(acts)) return false;
    }
    const auto kernel = attr_ints(en.n, "kernel_shape");
    if (!kernel.empty() && (kernel.size() != 2 || kernel[0] != KH || kernel[1] != KW)) return false;
    if (!window_attrs_2d(en.n)) return false;
    const std::int64_t group = attr_i(en.n, "group", 1);
    const auto in_blocked = blocked.find(en.inputs[0]);
    const auto C = in_blocked != blocked.end() ? std::optional<std::int64_t>(in_blocked->second.channels) : known_channels(xt);
    if (!C) return false;
    // The residual: a float tensor of the output's shape.
    const bool has_z = fused && en.inputs.size() > 3 && !en.inputs[3].empty();
    if (has_z) {
      const type_info* zt = type4(en.inputs[3]);
      if (zt == nullptr || !(zt->dims == yt->dims)) return false;
    }

    using enum conv_kind;
    conv_kind kind;
    if (group == O && O == *C && I == 1 && group > 1) kind = depthwise;
    else if (group == 1 && I == *C && (in_blocked != blocked.end() || *C >= blk)) kind = dense;
    else if (group == 1 && I == *C && *C < blk) kind = first_layer;
    else return false;

    // A 3x3 convolution with unit strides runs as Winograd on the blocked layout, F(4x4, 3x3) or F(2x2, 3x3) by its
    // output's tiles (above): its filters are transformed here, once, and the node carries `winograd` = the output
    // tile. Only with the activations the kernel applies in registers.
    int wino = 0;  // the output tile: F(wino x wino, 3x3), or 0
    if (winograd && kind == dense && KH == 3 && KW == 3 && all_ones(attr_ints(en.n, "strides")) &&
        all_ones(attr_ints(en.n, "dilations"))) {
      const auto act = attr_s(en.n, "activation");
      const auto& od = *yt->dims;
      const auto tiles = [&](std::int64_t tm) { return ((od[2].value + tm - 1) / tm) * ((od[3].value + tm - 1) / tm); };
      if ((act.empty() || act == "Relu" || act == "Clip" || act == "LeakyRelu") && od[2].is_known() && od[3].is_known()) {
        if (tiles(4) >= winograd4_min_tiles) wino = 4;
        else if (tiles(2) >= (this_machine_class() == machine_class::avx512_intel ? winograd_min_tiles_intel : winograd_min_tiles))
          wino = 2;
      }
    }
    const std::int64_t Op = round_up(O), Ip = kind == dense ? round_up(I) : I;
    // The filters, laid out once per original W (a W shared by two convolutions is laid out once).
    const std::string key = en.inputs[1] + (wino != 0 ? "#wino" + std::to_string(wino) : kind == dense ? "#dense" : kind == depthwise ? "#dw" : "#first");
    std::string wname;
    if (auto it = filters.find(key); it != filters.end()) {
      wname = it->second;
    } else {
      // Allocated here, written by lay_out_filters once the pass is done (on all the machine's cores).
      filter_job job{*w, wino, kind, O, I, Op, KH, KW, {}};
      const std::int64_t sizes[] = {Op, wino != 0 || kind == dense ? Ip : I, wino != 0 ? wino + 2 : KH,
                                    wino != 0 ? wino + 2 : KW};
      tensor nw = uninitialized_weight(element_type::float32, sizes);
      job.dst = nw;  // shares the storage
      jobs.push_back(std::move(job));
      wname = add_tensor(en.inputs[1] + "_nchwc", std::move(nw));
      filters[key] = wname;
    }
    std::string bname;  // zero-padded to Op; without B the kernels add none
    if (has_b) {
      const std::int64_t sizes[] = {Op};
      tensor nb = zeros(sizes);
      std::memcpy(nb.mutable_data(), b->data(), b->byte_size());
      bname = add_tensor(en.inputs[2] + "_nchwc", std::move(nb));
    }

    enode c;
    c.origin = en.origin;
    c.n = en.n;
    c.n.op_type = "Conv";
    c.n.domain = std::string(nchwc_domain);
    c.n.since_version = 1;
    c.n.attributes.set("group", kind == depthwise ? Op : std::int64_t{1});
    // The real output channels of a dense convolution whose last block is part padding: its kernel computes only the
    // lanes below them when their filters are zero (nchwc.cpp, conv_view::y_half).
    if (kind == dense && O != Op) c.n.attributes.set("output_channels", O);
    if (!kernel.empty() || wino != 0) c.n.attributes.set("kernel_shape", std::vector<std::int64_t>{KH, KW});
    if (wino != 0) c.n.attributes.set("winograd", std::int64_t{wino});
    std::string x = en.inputs[0];
    if (kind != first_layer) x = blocked_input(en.inputs[0], *C);
    std::string z;
    if (has_z) z = blocked_input(en.inputs[3], O);
    c.inputs = {x, wname, bname};
    if (has_z) c.inputs.push_back(z);
    c.outputs = {new_output(en.outputs[0], O)};
    convs[c.outputs[0]] = {kind, wino, KH, KW, Ip, I, has_z};
    out.push_back(std::move(c));
    note_converted(en);
    return true;
  }

  bool convert_pool(enode& en) {
    if (!is_onnx(en.n)) return false;
    const auto& op = en.n.op_type;
    const bool global = op == "GlobalMaxPool" || op == "GlobalAveragePool";
    if (!global && op != "MaxPool" && op != "AveragePool") return false;
    if (en.inputs.size() != 1 || en.outputs.empty() || (en.outputs.size() > 1 && !en.outputs[1].empty())) return false;
    const auto it = blocked.find(en.inputs[0]);
    if (it == blocked.end() || type4(en.outputs[0]) == nullptr) return false;
    if (!global) {
      const auto k = attr_ints(en.n, "kernel_shape");
      if (k.size() != 2 || !window_attrs_2d(en.n)) return false;
      // AveragePool's divisor under ceil_mode (windows past the padding) is left to the NCHW kernel.
      if (op == "AveragePool" && (attr_i(en.n, "ceil_mode", 0) != 0 || !attr_ints(en.n, "dilations").empty())) return false;
    }
    enode p;
    p.origin = en.origin;
    p.n = en.n;
    p.n.domain = std::string(nchwc_domain);
    p.n.since_version = 1;
    p.inputs = {it->second.name};
    p.outputs = {new_output(en.outputs[0], it->second.channels)};
    out.push_back(std::move(p));
    note_converted(en);
    return true;
  }

  // Element-wise nodes whose tensor inputs are all blocked with the same shape run on the blocked tensors as they
  // are: finite values stay finite in the padded lanes.
  bool convert_elementwise(enode& en) {
    if (!is_onnx(en.n) || en.outputs.size() != 1 || en.inputs.empty()) return false;
    static constexpr std::string_view unary[] = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Clip"};
    static constexpr std::string_view nary[] = {"Add", "Mul", "Sum", "Max", "Min"};
    const auto& op = en.n.op_type;
    const bool is_unary = std::find(std::begin(unary), std::end(unary), op) != std::end(unary);
    const bool is_nary = std::find(std::begin(nary), std::end(nary), op) != std::end(nary);
    if (!is_unary && !is_nary) return false;
    const type_info* yt = type4(en.outputs[0]);
    if (yt == nullptr) return false;
    const std::size_t tensors = is_unary ? 1 : en.inputs.size();
    if (is_unary)
      for (std::size_t k = 1; k < en.inputs.size(); ++k)
        if (!en.inputs[k].empty() && e.constant(en.inputs[k]) == nullptr) return false;
    std::optional<std::int64_t> channels;
    for (std::size_t k = 0; k < tensors; ++k) {
      const auto it = blocked.find(en.inputs[k]);
      const type_info* t = type4(en.inputs[k]);
      if (it == blocked.end() || t == nullptr || !(t->dims == yt->dims)) return false;
      if (channels && *channels != it->second.channels) return false;
      channels = it->second.channels;
    }
    // Shapes equal and fully known: nothing is broadcast.
    for (const auto& d : yt->dims->dims())
      if (!d.is_known()) return false;
    enode x;
    x.origin = en.origin;
    x.n = en.n;
    x.inputs = en.inputs;
    for (std::size_t k = 0; k < tensors; ++k) x.inputs[k] = blocked.at(en.inputs[k]).name;
    x.outputs = {new_output(en.outputs[0], *channels)};
    out.push_back(std::move(x));
    note_converted(en);
    return true;
  }

  // Removes the nodes of `out` marked gone (fused into another), keeping the order of the rest.
  void drop(const std::vector<bool>& gone) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < out.size(); ++i)
      if (!gone[i]) {
        if (k != i) out[k] = std::move(out[i]);
        ++k;
      }
    out.resize(k);
  }

  // A 1x1 convolution (unit strides, no padding, no residual) whose only reader is a depthwise convolution (no
  // residual) becomes one PointwiseDepthwiseConv(X, W, B, depthwise W, depthwise B) with the depthwise one's window and
  // activation and the 1x1's activation as pointwise_activation: the 1x1's output (the expansion of MobileNet's
  // blocks, 6x the channels of its input) is never stored. Not when that output is also read outside the chain, is a
  // graph output or is read by a subgraph. A first layer (plain X, any undilated window) likewise, its window as
  // pointwise_kernel_shape, pointwise_strides, pointwise_pads and pointwise_auto_pad.
  void fuse_pointwise_depthwise() {
    std::unordered_map<std::string, std::size_t> producer, readers;
    std::unordered_set<std::string> read;
    for (std::size_t i = 0; i < out.size(); ++i) {
      for (const auto& o : out[i].outputs) producer[o] = i;
      for (const auto& in : out[i].inputs) {
        if (!in.empty()) ++readers[in];
        read.insert(in);
      }
    }
    std::unordered_map<std::string, std::string> original;  // blocked name -> original
    for (const auto& [orig, bv] : blocked) original[bv.name] = orig;
    std::vector<bool> gone(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      enode& dw = out[i];
      if (dw.n.domain != nchwc_domain || dw.n.op_type != "Conv" || dw.inputs.empty()) continue;
      const auto df = convs.find(dw.outputs[0]);
      if (df == convs.end() || df->second.kind != conv_kind::depthwise || df->second.has_z) continue;
      const std::string mid = dw.inputs[0];
      const auto pf = convs.find(mid);
      const auto pi = producer.find(mid);
      if (pf == convs.end() || pi == producer.end() || gone[pi->second]) continue;
      const conv_facts& f = pf->second;
      const enode& pw = out[pi->second];
      // A first layer (plain X of a few channels, any kernel, strides and pads, undilated: MobileNet's stem) too.
      const bool first = f.kind == conv_kind::first_layer;
      if (first) {
        if (f.has_z || !all_ones(attr_ints(pw.n, "dilations"))) continue;
      } else {
        if (f.kind != conv_kind::dense || f.wino != 0 || f.KH != 1 || f.KW != 1 || f.has_z || f.Ip > 2048) continue;
        const auto pads = attr_ints(pw.n, "pads");
        if (!all_ones(attr_ints(pw.n, "strides")) || std::any_of(pads.begin(), pads.end(), [](std::int64_t v) { return v != 0; }))
          continue;
      }
      const auto orig = original.find(mid);
      if (readers[mid] != 1 || orig == original.end() || read.count(orig->second) || e.graph_outputs.count(orig->second) ||
          e.implicit.count(orig->second))
        continue;
      enode fusedn;
      fusedn.origin = dw.origin;
      fusedn.n = dw.n;
      fusedn.n.op_type = "PointwiseDepthwiseConv";
      fusedn.n.name = pw.n.name.empty() && dw.n.name.empty() ? std::string() : pw.n.name + "+" + dw.n.name;
      // The 1x1's real input channels: its kernel skips the padded ones of the last block (their filters are zero).
      if (f.I != f.Ip) fusedn.n.attributes.set("input_channels", f.I);
      if (const attribute* a = pw.n.attributes.find("activation")) {
        attribute r = *a;
        r.name = "pointwise_activation";
        fusedn.n.attributes.set(std::move(r));
      }
      if (const attribute* a = pw.n.attributes.find("activation_params")) {
        attribute r = *a;
        r.name = "pointwise_activation_params";
        fusedn.n.attributes.set(std::move(r));
      }
      // The first layer's window: pointwise_kernel_shape, _strides, _pads and _auto_pad (absent: 1x1, unit strides,
      // no padding).
      if (first) {
        fusedn.n.attributes.set("pointwise_kernel_shape", std::vector<std::int64_t>{f.KH, f.KW});
        for (const char* name : {"strides", "pads", "auto_pad"})
          if (const attribute* a = pw.n.attributes.find(name)) {
            attribute r = *a;
            r.name = cat("pointwise_", name);
            fusedn.n.attributes.set(std::move(r));
          }
      }
      fusedn.inputs = {pw.inputs[0], pw.inputs[1], pw.inputs.size() > 2 ? pw.inputs[2] : std::string(), dw.inputs[1],
                       dw.inputs.size() > 2 ? dw.inputs[2] : std::string()};
      fusedn.outputs = dw.outputs;
      gone[pi->second] = true;
      dw = std::move(fusedn);
      ++fused;
    }
    drop(gone);
  }

  // A PointwiseDepthwiseConv whose output only a 1x1 convolution reads (unit strides, no padding, a residual or not:
  // MobileNet's projection) takes it as inputs 5-7 (its W, B and Sum), its activation as projection_activation: the
  // depthwise output rows go from a buffer of the thread's straight into the projection, never to memory. Each work
  // item then takes every channel block (the projection reads them all), so the work splits by bands of rows only,
  // and each band recomputes the expansion rows at its edges: only outputs of at least `projection_min_rows` rows.
  void fuse_projection() {
    std::unordered_map<std::string, std::size_t> readers;
    std::unordered_map<std::string, std::size_t> reader_of;
    std::unordered_set<std::string> read;
    for (std::size_t i = 0; i < out.size(); ++i)
      for (const auto& in : out[i].inputs) {
        if (!in.empty()) {
          ++readers[in];
          reader_of[in] = i;
        }
        read.insert(in);
      }
    std::unordered_map<std::string, std::string> original;  // blocked name -> original
    for (const auto& [orig, bv] : blocked) original[bv.name] = orig;
    std::vector<bool> gone(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const enode& pd = out[i];
      if (pd.n.domain != nchwc_domain || pd.n.op_type != "PointwiseDepthwiseConv" || pd.inputs.size() > 5 || pd.outputs.size() != 1) continue;
      const std::string& mid = pd.outputs[0];
      const auto ri = reader_of.find(mid);
      const auto orig = original.find(mid);
      if (ri == reader_of.end() || readers[mid] != 1 || orig == original.end() || read.count(orig->second) ||
          e.graph_outputs.count(orig->second) || e.implicit.count(orig->second))
        continue;
      enode& pc = out[ri->second];
      const auto pf = convs.find(pc.outputs.empty() ? std::string() : pc.outputs[0]);
      if (ri->second <= i || pc.n.domain != nchwc_domain || pc.n.op_type != "Conv" || pc.inputs.empty() || pc.inputs[0] != mid ||
          pf == convs.end())
        continue;
      const conv_facts& f = pf->second;
      const auto pads = attr_ints(pc.n, "pads");
      if (f.kind != conv_kind::dense || f.wino != 0 || f.KH != 1 || f.KW != 1 || !all_ones(attr_ints(pc.n, "strides")) ||
          std::any_of(pads.begin(), pads.end(), [](std::int64_t v) { return v != 0; }))
        continue;
      const type_info* t = type4(mid);
      if (t == nullptr || !(*t->dims)[2].is_known() || (*t->dims)[2].value < projection_min_rows) continue;
      enode fusedn;
      fusedn.origin = pc.origin;
      fusedn.n = pd.n;
      fusedn.n.name = pd.n.name.empty() && pc.n.name.empty() ? std::string() : pd.n.name + "+" + pc.n.name;
      for (const char* name : {"activation", "activation_params", "output_channels"})
        if (const attribute* a = pc.n.attributes.find(name)) {
          attribute r = *a;
          r.name = cat("projection_", name);
          fusedn.n.attributes.set(std::move(r));
        }
      // The depthwise output's real channels: the projection's kernel skips the padded ones of the last block.
      if (f.I != f.Ip) fusedn.n.attributes.set("projection_input_channels", f.I);
      fusedn.inputs = pd.inputs;
      fusedn.inputs.resize(5);
      fusedn.inputs.push_back(pc.inputs[1]);
      fusedn.inputs.push_back(pc.inputs.size() > 2 ? pc.inputs[2] : std::string());
      if (f.has_z) fusedn.inputs.push_back(pc.inputs[3]);
      fusedn.outputs = pc.outputs;
      gone[i] = true;
      pc = std::move(fusedn);
      ++projected;
    }
    drop(gone);
  }

  void run(const std::vector<bool>& eligible) {
    for (auto& en : e.nodes) {
      if (en.dead) continue;
      const bool may = en.origin != no_id && en.origin < eligible.size() && eligible[en.origin];
      if (may && (convert_conv(en) || convert_pool(en) || convert_elementwise(en))) continue;
      out.push_back(std::move(en));
    }
    if (fuse_depthwise) {
      fuse_pointwise_depthwise();
      fuse_projection();
    }
    // Values whose original name is still read (by a node left in NCHW, as a graph output or by a subgraph): a
    // ReorderOutput right after the producer writes that name.
    std::unordered_map<std::string, std::string> leaves;  // blocked name -> original
    std::unordered_set<std::string> read;
    for (const auto& en : out)
      for (const auto& in : en.inputs) read.insert(in);
    for (const auto& [orig, bv] : blocked)
      if (!bv.from_reorder && (read.count(orig) || e.graph_outputs.count(orig) || e.implicit.count(orig))) leaves[bv.name] = orig;
    std::vector<enode> done;
    done.reserve(out.size() + leaves.size());
    for (auto& en : out) {
      std::vector<std::string> made;
      for (const auto& o : en.outputs)
        if (leaves.count(o)) made.push_back(o);
      done.push_back(std::move(en));
      for (const auto& o : made) {
        enode r;
        r.n.op_type = "ReorderOutput";
        r.n.domain = std::string(nchwc_domain);
        r.n.since_version = 1;
        r.n.name = e.fresh(leaves[o] + "_nchwc_out");
        r.n.attributes.set("channels", blocked.at(leaves[o]).channels);
        r.inputs = {o};
        r.outputs = {leaves[o]};
        done.push_back(std::move(r));
      }
    }
    e.nodes = std::move(done);
  }
};

}  // namespace

Result<std::size_t> nchwc_layout(model& m, const std::vector<bool>& eligible, optimization_report& rep, bool winograd,
                                 bool fuse_depthwise, std::vector<bool>* rewritten) {
  const std::size_t before = m.graph.node_count();
  if (rewritten != nullptr) rewritten->assign(before, false);
  // Every blocked chain starts at a convolution the CPU provider got (pooling and element-wise nodes join only a
  // chain): without one, the graph is not copied into the editable form at all.
  bool any = false;
  for (node_id n = 0; n < before && n < eligible.size() && !any; ++n) {
    const node& nd = m.graph.node(n);
    any = eligible[n] && ((is_onnx(nd) && nd.op_type == "Conv") || (nd.domain == contrib_domain && nd.op_type == "FusedConv"));
  }
  if (!any) return std::size_t{0};
  EPSTACK_ASSIGN_OR_RETURN(egraph e, to_egraph(m.graph));
  layout_pass pass{e, {}, {}, {}, 0, {}, winograd, {}, fuse_depthwise, 0, 0, {}};
  pass.run(eligible);
  if (pass.converted == 0) return std::size_t{0};
  if (rewritten != nullptr)
    for (node_id n : pass.origins)
      if (n < before) (*rewritten)[n] = true;
  lay_out_filters(pass.jobs);
  e.index();
  dead_node_elimination(e, rep);  // the original filters and biases, now unread
  m.graph = from_egraph(e);
  if (m.opset(nchwc_domain) < 0) m.opsets.push_back({std::string(nchwc_domain), 1});
  rep.fusions.push_back(cat("NCHWc layout: ", std::to_string(pass.converted), " nodes"));
  if (pass.fused > 0) rep.fusions.push_back(cat("PointwiseDepthwiseConv: ", std::to_string(pass.fused), " 1x1 and depthwise pairs"));
  if (pass.projected > 0) rep.fusions.push_back(cat("PointwiseDepthwiseConv: ", std::to_string(pass.projected), " with their projection"));
  rep.nodes_after = m.graph.node_count();
  return pass.converted;
}

}  // namespace epstack
