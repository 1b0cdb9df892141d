// libFuzzer target: bytes given to the deployment model reader must give a verified model or invalid_graph, and a
// model it accepts must give a session (its plan, every partition compiled, the executor's plans) or an error, never a
// crash, a hang or a read outside the bytes. Random bytes would never pass the header's hashes, so the input is the
// part after the header (its first 4 bytes say where the table ends and the data section begins) and the target
// writes a header with matching hashes: the flatbuffers verifier, every index, offset and length behind it, the
// tensors' hashes, the graph checks and the session's preparation are what gets fuzzed. The session's provider takes
// the CPU provider's place and compiles every node to a function that does nothing: the kernels are not in this
// target (building them instrumented would double CI's fuzzing step; a run over the CPU provider's kernels found
// nothing in 2.7 million inputs, see the README).
// With EPSTACK_FUZZ_SEED_FROM=a.deploy,b.deploy and EPSTACK_FUZZ_SEED_DIR=DIR, it first writes each deployment model
// as an input into DIR (CI makes them with `epstack compile --format deploy`). With EPSTACK_FUZZ_EXPECT_VALID=1, an
// input the reader or the session refuses aborts: CI runs the seeds so, to know that fuzzing starts past the header.
#include <epstack/deploy/prepare.hpp>
#include <epstack/provider/contract.hpp>

#include "../../src/deploy/deploy_format.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace {

// In the CPU provider's place: every node compiled, to a function that computes nothing.
struct any_node_provider {
  using provider_concept = epstack::execution_provider_tag;
  static constexpr std::string_view type_key = epstack::cpu_provider_key;
  [[nodiscard]] std::vector<epstack::capability> get_capability(const epstack::graph_view<epstack::graph>&) const {
    return {};
  }
  [[nodiscard]] epstack::Result<std::vector<epstack::compute_function>> compile(std::span<const epstack::partition> parts) const {
    std::vector<epstack::compute_function> r(parts.size(), [](epstack::compute_context&) { return epstack::Status{}; });
    return r;
  }
};

std::uint64_t get64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}

// Each seed deployment model as an input: the table's size (4 bytes), the table, the data section.
void write_seeds(const std::string& from, const std::filesystem::path& dir) {
  std::size_t at = 0, k = 0;
  while (at <= from.size()) {
    const auto end = std::min(from.find(',', at), from.size());
    std::ifstream f(from.substr(at, end - at), std::ios::binary);
    const std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    at = end + 1;
    if (b.size() < epstack::detail::sectioned_header_size) continue;
    const auto* p = reinterpret_cast<const std::byte*>(b.data());
    const std::uint64_t fb_off = get64(p + 16), fb_size = get64(p + 24), data_off = get64(p + 32);
    if (fb_off + fb_size > b.size() || data_off > b.size()) continue;
    const auto size32 = static_cast<std::uint32_t>(fb_size);
    std::ofstream out(dir / ("seed" + std::to_string(k++)), std::ios::binary);
    out.write(reinterpret_cast<const char*>(&size32), 4);
    out.write(b.data() + fb_off, static_cast<std::streamsize>(fb_size));
    out.write(b.data() + data_off, static_cast<std::streamsize>(b.size() - data_off));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* from = std::getenv("EPSTACK_FUZZ_SEED_FROM");
  const char* dir = std::getenv("EPSTACK_FUZZ_SEED_DIR");
  if (from != nullptr && dir != nullptr) write_seeds(from, dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const bool expect_valid = std::getenv("EPSTACK_FUZZ_EXPECT_VALID") != nullptr;
  if (size < 4) return 0;
  std::uint32_t fb_size = 0;
  std::memcpy(&fb_size, data, 4);
  const std::size_t rest = size - 4;
  fb_size = static_cast<std::uint32_t>(std::min<std::size_t>(fb_size, rest));
  const std::span<const std::uint8_t> table(data + 4, fb_size);
  const std::span<const std::uint8_t> section(data + 4 + fb_size, rest - fb_size);
  const auto file = epstack::detail::make_sectioned(epstack::deploy_magic, epstack::deployment_format_version, table,
                                                    section.size(), [&](std::byte* p) {
                                                      if (!section.empty()) std::memcpy(p, section.data(), section.size());
                                                    });
  // In 64-byte aligned memory, as a mapped file is.
  auto keep = std::make_shared<epstack::tensor>(
      epstack::tensor::uninitialized(epstack::element_type::uint8, std::array{static_cast<std::int64_t>(file.size())}));
  std::memcpy(keep->mutable_data(), file.data(), file.size());
  const auto bytes = keep->bytes();
  auto d = epstack::read_deployment(bytes, keep, "fuzz.deploy");
  if (!d) {
    if (expect_valid) std::abort();
    return 0;
  }
  static const std::tuple<any_node_provider> providers;
  epstack::session_options so;
  so.set_intra_op_threads(1);
  auto s = epstack::assemble_deployment(std::move(*d), epstack::make_runtime_bindings(providers), so);
  if (!s && expect_valid) std::abort();
  return 0;
}
