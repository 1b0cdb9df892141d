// Work of a node and a provider's estimate of it (cost_model.hpp).
#include <epstack/provider/cost_model.hpp>

#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <string_view>
#include <cmath>
#include <optional>
#include <vector>

namespace epstack {
namespace {

// The sizes of value v, symbolic dimensions priced at `symbolic_as` (unknown when 0; `assumed` set when priced), and so
// are dimensions with neither value nor name (what a runtime Reshape or Slice leaves: BERT's sequence after its
// position embeddings) when the rank is known.
std::optional<std::vector<std::int64_t>> static_sizes(const graph& g, value_id v, std::int64_t symbolic_as,
                                                      bool& assumed) {
  if (v == no_id) return std::nullopt;
  const auto& t = g.value(v).type;
  if (!t.is_tensor() || !t.dims) return std::nullopt;
  std::vector<std::int64_t> sizes;
  sizes.reserve(t.dims->rank());
  for (const auto& d : t.dims->dims()) {
    if (d.is_known()) sizes.push_back(d.value);
    else if (symbolic_as > 0) {
      sizes.push_back(symbolic_as);
      assumed = true;
    } else return std::nullopt;
  }
  return sizes;
}

double count_of(const std::vector<std::int64_t>& sizes) {
  double c = 1;
  for (auto d : sizes) c *= static_cast<double>(d);
  return c;
}

double bytes_of(const graph& g, value_id v, std::int64_t symbolic_as, node_work& w) {
  if (v == no_id) return 0;
  const auto& t = g.value(v).type;
  if (!t.is_tensor()) return 0;  // sequences and maps: not estimated (they are small or rare on hot paths)
  const auto s = static_sizes(g, v, symbolic_as, w.assumed);
  if (!s) {
    w.known = false;
    return 0;
  }
  const double bits = static_cast<double>(element_bits(t.elem));
  return count_of(*s) * (bits > 0 ? bits : 32.0) / 8.0;
}

std::int64_t int_attr(const node& nd, std::string_view name, std::int64_t def) {
  if (const auto* a = nd.attributes.find(name))
    if (const auto* v = std::get_if<std::int64_t>(&a->value)) return *v;
  return def;
}

bool is_product(std::string_view op) {
  return op == "MatMul" || op == "Gemm" || op == "FusedMatMul" || op == "FusedGemm" || op == "MatMulInteger" ||
         op == "QLinearMatMul" || op == "MatMulBias" || op == "PermutedMatMul";
}
bool is_convolution(std::string_view op) { return op == "Conv" || op == "FusedConv" || op == "ConvInteger"; }

}  // namespace

node_work work_of(const graph& g, node_id n, std::int64_t symbolic_as) {
  const auto& nd = g.node(n);
  node_work w;
  w.known = true;
  for (value_id v : nd.inputs) w.bytes += bytes_of(g, v, symbolic_as, w);
  for (value_id v : nd.outputs) w.bytes += bytes_of(g, v, symbolic_as, w);
  if (!w.known) return w;
  const std::string_view op = nd.op_type;
  // com.epstack.nchwc16: the CPU provider's blocked layout (its Conv declares the filter's sizes; a Winograd one its
  // transformed tile's, which overstates its arithmetic); com.epstack.cpu: its fused products (MatMulBias,
  // PermutedMatMul).
  const bool standard = nd.domain.empty() || nd.domain == "ai.onnx" || nd.domain == "com.microsoft" ||
                        nd.domain == "com.epstack.nchwc16" || nd.domain == "com.epstack.cpu";
  if (standard && is_product(op) && nd.inputs.size() >= 2 && !nd.outputs.empty()) {
    const auto a = static_sizes(g, nd.inputs[0], symbolic_as, w.assumed);
    const auto y = static_sizes(g, nd.outputs[0], symbolic_as, w.assumed);
    if (!a || !y || a->empty() || y->empty()) return w;
    const bool trans_a = op == "Gemm" || op == "FusedGemm" ? int_attr(nd, "transA", 0) != 0 : false;
    // PermutedMatMul reads A through perm_a: K is the source dim its last logical dim comes from.
    std::size_t k_dim = a->size() - 1;
    if (op == "PermutedMatMul")
      if (const auto* p = nd.attributes.find("perm_a"))
        if (const auto* v = std::get_if<std::vector<std::int64_t>>(&p->value); v != nullptr && v->size() == a->size() &&
                                                                              v->back() >= 0 && static_cast<std::size_t>(v->back()) < a->size())
          k_dim = static_cast<std::size_t>(v->back());
    const double k = static_cast<double>(trans_a ? a->front() : (*a)[k_dim]);
    const double out = count_of(*y);
    w.kind = work_kind::matmul;
    w.flops = 2.0 * out * k;
    w.rows = y->size() >= 2 ? static_cast<std::int64_t>(out / static_cast<double>(y->back())) : 1;
    return w;
  }
  if (standard && is_convolution(op) && nd.inputs.size() >= 2 && !nd.outputs.empty()) {
    const auto x = static_sizes(g, nd.inputs[0], symbolic_as, w.assumed);
    const auto k = static_sizes(g, nd.inputs[1], symbolic_as, w.assumed);
    const auto y = static_sizes(g, nd.outputs[0], symbolic_as, w.assumed);
    if (!x || !k || !y || k->size() < 3 || x->size() < 3) return w;
    const std::int64_t group = int_attr(nd, "group", 1);
    double kernel = 1;
    for (std::size_t i = 2; i < k->size(); ++i) kernel *= static_cast<double>((*k)[i]);
    const double per_output = static_cast<double>((*k)[1]) * kernel;  // input channels per group x kernel
    w.flops = 2.0 * count_of(*y) * per_output;
    const auto ones = [&](std::string_view name) {
      const auto* a = nd.attributes.find(name);
      if (!a) return true;
      const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value);
      return v && std::all_of(v->begin(), v->end(), [](std::int64_t e) { return e == 1; });
    };
    if ((*k)[1] == 1 && group > 1) w.kind = work_kind::depthwise_conv;
    else if (kernel == 1) w.kind = work_kind::pointwise_conv;
    else if (k->size() == 4 && (*k)[2] == 3 && (*k)[3] == 3 && group == 1 && ones("strides") && ones("dilations"))
      w.kind = work_kind::conv3x3;
    else w.kind = work_kind::conv;
    return w;
  }
  return w;
}

const char* to_string(machine_class c) noexcept {
  switch (c) {
    case machine_class::avx512_split: return "avx512_split";
    case machine_class::avx512_intel: return "avx512_intel";
    case machine_class::avx512_full: break;
  }
  return "avx512_full";
}

std::optional<machine_class> machine_class_named(std::string_view name) noexcept {
  for (const auto c : {machine_class::avx512_full, machine_class::avx512_split, machine_class::avx512_intel})
    if (name == to_string(c)) return c;
  return std::nullopt;
}

namespace {
std::atomic<int> pinned_class{-1};
}  // namespace

void set_machine_class(std::optional<machine_class> c) noexcept {
  pinned_class.store(c ? static_cast<int>(*c) : -1, std::memory_order_relaxed);
}

machine_class this_machine_class() noexcept {
  if (const int p = pinned_class.load(std::memory_order_relaxed); p >= 0) return static_cast<machine_class>(p);
  static const machine_class cls = [] {
    if (const char* e = std::getenv("EPSTACK_MACHINE_CLASS"))
      if (const auto named = machine_class_named(e)) return *named;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d) == 0) return machine_class::avx512_full;
    const bool amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;    // "AuthenticAMD"
    const bool intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;  // "GenuineIntel"
    if (!(amd || intel) || a < 7 || __get_cpuid(1, &a, &b, &c, &d) == 0) return machine_class::avx512_full;
    const unsigned base = (a >> 8) & 0xfu;
    const unsigned family = base == 0xfu ? base + ((a >> 20) & 0xffu) : base;
    unsigned b7 = 0;
    __cpuid_count(7, 0, a, b7, c, d);
    const bool avx512f = (b7 >> 16) & 1u;
    if (intel && avx512f) return machine_class::avx512_intel;
    if (amd && family == 0x19 && avx512f) return machine_class::avx512_split;
#endif
    return machine_class::avx512_full;
  }();
  return cls;
}

double last_level_cache_bytes() noexcept {
  // sysfs first (what lscpu reports), else cpuid's figure through sysconf; either is believed up to 16 MiB per CPU this
  // machine has. A virtual machine may be shown its host socket's whole cache, which its few CPUs share with every
  // other guest: cpuid gave 508 MiB on a 2-vCPU Zen 5 VM, and sysfs 300 MiB on a 2-vCPU Xeon (Emerald Rapids) VM
  // whose reads run at 20 GB/s up to 32 MiB and fall to main memory's 12 GB/s from 50 MiB on. Believed whole, batch-1
  // products over 50 MB of weights were priced as if they stayed in cache.
  static const double bytes = [] {
    const double cap = 16.0 * 1024 * 1024 * std::max(1u, std::thread::hardware_concurrency());
    double best = 0;
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
      std::ifstream level(dir + "level"), size(dir + "size");
      int l = 0;
      std::string text;
      if (!(level >> l) || !(size >> text) || text.empty()) continue;
      double v = std::strtod(text.c_str(), nullptr);
      if (text.back() == 'K') v *= 1024;
      else if (text.back() == 'M') v *= 1024 * 1024;
      if (l >= 2 && v > best) best = v;
    }
    if (best > 0) return std::min(best, cap);
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) return std::min(static_cast<double>(l3), cap);
#endif
    return std::min(16.0 * 1024 * 1024, cap);
  }();
  return bytes;
}

namespace {

// The estimate with symbolic dimensions priced at `symbolic_as` (unknown when 0): microseconds, negative when a shape
// is unknown.
double estimate_at(const cost_profile& profile, const graph& g, std::span<const node_id> nodes,
                   std::int64_t symbolic_as) {
  static constexpr double rows_at[] = {1, 4, 16, 64, 256};
  const auto matmul_rate = [&](std::int64_t rows) {
    const double r = std::clamp(static_cast<double>(std::max<std::int64_t>(rows, 1)), 1.0, 256.0);
    std::size_t i = 0;
    while (i + 2 < std::size(rows_at) && r > rows_at[i + 1]) ++i;
    const double t = (std::log(r) - std::log(rows_at[i])) / (std::log(rows_at[i + 1]) - std::log(rows_at[i]));
    return profile.matmul_gflops[i] + std::clamp(t, 0.0, 1.0) * (profile.matmul_gflops[i + 1] - profile.matmul_gflops[i]);
  };
  // Weights stay in the last-level cache from one run to the next only when all of the graph's fit: otherwise every
  // run streams them from memory, whichever provider runs which part. Summed once, when a product or convolution
  // is priced (the partitioner asks the CPU provider node by node).
  std::optional<bool> streams;
  const auto weights_stream = [&] {
    if (!streams) {
      double weights = 0;
      for (value_id v = 0; v < g.value_count(); ++v)
        if (const auto& rec = g.value(v); rec.initializer) weights += static_cast<double>(rec.initializer->byte_size());
      streams = weights > last_level_cache_bytes();
    }
    return *streams;
  };
  double us = nodes.empty() ? 0 : profile.partition_us;
  for (node_id n : nodes) {
    const auto w = work_of(g, n, symbolic_as);
    if (!w.known) return -1;
    double gflops = 0;
    switch (w.kind) {
      case work_kind::matmul: gflops = matmul_rate(w.rows); break;
      case work_kind::conv: gflops = profile.conv_gflops; break;
      case work_kind::conv3x3: gflops = profile.conv3x3_gflops > 0 ? profile.conv3x3_gflops : profile.conv_gflops; break;
      case work_kind::pointwise_conv: gflops = profile.pointwise_gflops; break;
      case work_kind::depthwise_conv: gflops = profile.depthwise_gflops; break;
      case work_kind::streaming: break;
    }
    // GFLOP/s is flops per nanosecond (GB/s bytes per nanosecond): x 1e-3 for microseconds. Products and
    // convolutions were measured with operands in cache; beyond the last-level cache they stream from memory.
    const double compute_us = gflops > 0 ? w.flops / gflops * 1e-3 : 0;
    double memory_us = 0;
    if (w.kind == work_kind::streaming) memory_us = profile.stream_gbps > 0 ? w.bytes / profile.stream_gbps * 1e-3 : 0;
    else if (profile.dram_gbps > 0 && weights_stream()) {
      double constant = 0;
      for (value_id v : g.node(n).inputs)
        if (v != no_id && g.value(v).initializer) constant += static_cast<double>(g.value(v).initializer->byte_size());
      memory_us = constant / profile.dram_gbps * 1e-3;
    }
    const double fixed_us = w.kind == work_kind::streaming                              ? 0.0
                            : memory_us > compute_us && profile.stream_kernel_us >= 0 ? profile.stream_kernel_us
                                                                                       : profile.kernel_us;
    us += profile.node_us + fixed_us + std::max(compute_us, memory_us);
  }
  return us;
}

}  // namespace

namespace {
thread_local std::int64_t symbolic_price = 0;  // symbolic_pricing's value on this thread; 0: none
}  // namespace

symbolic_pricing::symbolic_pricing(std::int64_t value) noexcept : previous_(symbolic_price) {
  symbolic_price = value > 0 ? value : 0;
}
symbolic_pricing::~symbolic_pricing() { symbolic_price = previous_; }

double estimate_microseconds(const cost_profile& profile, const graph& g, std::span<const node_id> nodes) {
  if (symbolic_price > 0) return estimate_at(profile, g, nodes, symbolic_price);
  if (const double us = estimate_at(profile, g, nodes, 0); us >= 0) return us;
  return estimate_at(profile, g, nodes, 1);
}

double symbolic_products_share(const graph& g, std::span<const node_id> nodes) {
  double all = 0, assumed = 0;
  for (node_id n : nodes) {
    const auto w = work_of(g, n, 1);
    if (!w.known) return -1;
    all += w.flops;
    if (w.kind == work_kind::matmul && w.assumed) assumed += w.flops;
  }
  return all > 0 ? assumed / all : 0;
}

}  // namespace epstack
