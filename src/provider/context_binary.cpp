// The EP context binary: building, writing (temporary name, then rename) and verified reading, in place.
#include <epstack/provider/context_binary.hpp>
#include <epstack/core/helper_threads.hpp>
#include <epstack/core/mapped_file.hpp>

#include "../core/atomic_file.hpp"
#include "ep_context_generated.h"
#include "sectioned_file.hpp"

#include <algorithm>
#include <atomic>
#include <array>
#include <cstring>
#include <limits>

namespace epstack {

namespace {

// The header and sections are those of sectioned_file.hpp, with this format's magic.
constexpr detail::sectioned_magic magic = {'E', 'P', 'S', 'T', 'K', 'C', 'T', 'X'};
constexpr std::size_t header_size = detail::sectioned_header_size, alignment = detail::sectioned_alignment;
std::uint64_t hash_of(std::span<const std::byte> b) { return detail::content_hash(b); }
std::uint64_t align_up(std::uint64_t x) { return detail::align64(x); }
std::string hex(std::uint64_t v) { return detail::hex64(v); }
std::uint64_t file_hash_of(std::span<const std::byte> b, unsigned threads = 1) { return detail::sectioned_file_hash(b, threads); }

}  // namespace

std::uint64_t ep_context_hash(std::span<const std::byte> bytes) noexcept { return hash_of(bytes); }

// ---- building ----

ep_context_builder::ep_context_builder(std::string provider, std::string sdk_version, std::string hardware_architecture)
    : provider_(std::move(provider)), sdk_version_(std::move(sdk_version)), hardware_(std::move(hardware_architecture)) {}

std::uint32_t ep_context_builder::add_tensor(std::string_view name, element_type type, std::span<const std::int64_t> shape,
                                             std::span<const std::byte> bytes) {
  const std::uint64_t h = hash_of(bytes);
  const auto ref = source_ && !bytes.empty() ? source_(type, bytes, h) : std::nullopt;
  const std::string source = ref ? ref->name : std::string();
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    if (t.hash != h || t.type != type || !std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end()) ||
        t.length != bytes.size() || t.source != source || (ref && t.derived != ref->derived))
      continue;
    if (!source.empty() || std::memcmp(t.bytes.data(), bytes.data(), bytes.size()) == 0) return static_cast<std::uint32_t>(i);
  }
  tensor_rec r{std::string(name), type, std::vector<std::int64_t>(shape.begin(), shape.end()), {}, h, source,
               ref && ref->derived, bytes.size()};
  if (source.empty()) r.bytes.assign(bytes.begin(), bytes.end());
  tensors_.push_back(std::move(r));
  return static_cast<std::uint32_t>(tensors_.size() - 1);
}

Status ep_context_builder::add_graph(std::string name, std::vector<std::string> inputs, std::vector<std::string> outputs,
                                     std::vector<std::byte> payload, std::vector<std::uint32_t> tensors) {
  for (const auto& g : graphs_)
    if (g.name == name) return Status(errc::invalid_argument, "EP context: a graph named '" + name + "' was added already");
  for (auto t : tensors)
    if (t >= tensors_.size())
      return Status(errc::invalid_argument, "EP context: graph '" + name + "' refers to tensor " + std::to_string(t) +
                                                " of " + std::to_string(tensors_.size()));
  graphs_.push_back({std::move(name), std::move(inputs), std::move(outputs), std::move(payload), std::move(tensors)});
  return {};
}

std::uint64_t ep_context_builder::tensor_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& t : tensors_) n += t.bytes.size();
  return n;
}

std::uint64_t ep_context_builder::referenced_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& t : tensors_)
    if (!t.source.empty()) n += t.length;
  return n;
}

Result<std::vector<std::byte>> ep_context_builder::serialize() const {
  flatbuffers::FlatBufferBuilder fbb(1024);
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  std::uint64_t data_size = 0;
  std::vector<std::uint64_t> offsets;
  for (const auto& t : tensors_) {
    if (!t.source.empty()) {  // a reference: nothing in the data section
      offsets.push_back(0);
      tensors.push_back(fb::CreateTensor(fbb, fbb.CreateString(t.name), static_cast<std::int32_t>(t.type),
                                         fbb.CreateVector(t.shape), 0, t.length, t.hash, fbb.CreateString(t.source), t.derived));
      continue;
    }
    offsets.push_back(data_size);
    tensors.push_back(fb::CreateTensor(fbb, fbb.CreateString(t.name), static_cast<std::int32_t>(t.type),
                                       fbb.CreateVector(t.shape), data_size, t.bytes.size(), t.hash));
    data_size = align_up(data_size + t.bytes.size());
  }
  std::vector<flatbuffers::Offset<fb::Graph>> graphs;
  for (const auto& g : graphs_) {
    const auto name = fbb.CreateString(g.name);
    const auto ins = fbb.CreateVectorOfStrings(g.inputs);
    const auto outs = fbb.CreateVectorOfStrings(g.outputs);
    const auto payload = fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(g.payload.data()), g.payload.size());
    const auto refs = fbb.CreateVector(g.tensors);
    graphs.push_back(fb::CreateGraph(fbb, name, ins, outs, payload, refs));
  }
  const auto root = fb::CreateContext(fbb, fbb.CreateString(provider_), fbb.CreateString(sdk_version_),
                                      fbb.CreateString(hardware_), fbb.CreateVector(graphs), fbb.CreateVector(tensors));
  fb::FinishContextBuffer(fbb, root);
  return detail::make_sectioned(magic, ep_context_format_version, {fbb.GetBufferPointer(), fbb.GetSize()}, data_size,
                                [&](std::byte* data) {
                                  for (std::size_t i = 0; i < tensors_.size(); ++i)
                                    if (!tensors_[i].bytes.empty())
                                      std::memcpy(data + offsets[i], tensors_[i].bytes.data(), tensors_[i].bytes.size());
                                });
}

Status ep_context_builder::write(const std::filesystem::path& path, bool overwrite) const {
  std::error_code ec;
  if (!overwrite && std::filesystem::exists(path, ec))
    return Status(errc::invalid_argument, "EP context binary '" + path.string() + "' exists already");
  EPSTACK_ASSIGN_OR_RETURN(auto bytes, serialize());
  detail::atomic_file f(path);
  f.write(bytes.data(), bytes.size());
  return f.commit();
}

// ---- reading ----

Result<ep_context_binary> ep_context_binary::open(const std::filesystem::path& path) {
  auto f = mapped_file::open(path);
  if (!f) return Status(errc::invalid_graph, "EP context binary: " + f.status().message());
  const std::span<const std::byte> bytes = (*f)->bytes();
  return from_bytes(bytes, std::shared_ptr<const void>(*f), "EP context binary '" + path.string() + "'");
}

Result<ep_context_binary> ep_context_binary::from_bytes(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                                                        std::string what) {
  const auto bad = [&](const std::string& msg) { return Status(errc::invalid_graph, what + ": " + msg); };
  // Version 4 is version 5 without weightless references (flatbuffers fields added at the end): both read.
  EPSTACK_ASSIGN_OR_RETURN(const auto sections,
                           detail::open_sectioned(bytes, magic, what, "an epstack EP context binary",
                                                  [](std::uint32_t v) { return v == ep_context_format_version || v == 4; },
                                                  "4 or " + std::to_string(ep_context_format_version)));
  const std::uint32_t version = sections.version;
  const std::uint64_t fb_size = sections.table.size();
  const auto* fbp = reinterpret_cast<const std::uint8_t*>(sections.table.data());
  flatbuffers::Verifier verifier(fbp, static_cast<std::size_t>(fb_size));
  // (The verifier checks the file identifier within bounds; ContextBufferHasIdentifier alone would read 8 bytes of a
  // flatbuffer that may be shorter: the fuzzer found that.)
  if (fb_size < 8 || !fb::VerifyContextBuffer(verifier))
    return bad("its table of graphs and tensors fails the flatbuffers verifier");
  const fb::Context* c = fb::GetContext(fbp);

  ep_context_binary b;
  b.owner_ = std::move(owner);
  b.origin_ = what;
  b.version_ = version;
  const auto str = [](const flatbuffers::String* s) { return s != nullptr ? s->str() : std::string(); };
  b.provider_ = str(c->provider());
  b.sdk_version_ = str(c->sdk_version());
  b.hardware_ = str(c->hardware_architecture());
  const std::span<const std::byte> data = sections.data;
  b.data_ = data;
  b.whole_ = bytes;
  b.file_hash_ = sections.file_hash;
  if (c->tensors() != nullptr)
    for (const fb::Tensor* t : *c->tensors()) {
      ep_context_tensor et;
      et.name = str(t->name());
      if (!is_valid(static_cast<element_type>(t->element_type())))
        return bad("tensor '" + et.name + "' has unknown element type " + std::to_string(t->element_type()));
      et.type = static_cast<element_type>(t->element_type());
      if (t->shape() != nullptr) {
        // Copied bytewise: the verifier aligns a vector's length, not its 8-byte elements, in crafted input.
        et.shape.resize(t->shape()->size());
        if (!et.shape.empty()) std::memcpy(et.shape.data(), t->shape()->Data(), et.shape.size() * sizeof(std::int64_t));
      }
      std::uint64_t count = 1;
      for (auto d : et.shape) {
        if (d < 0 || (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(d)))
          return bad("tensor '" + et.name + "' has an invalid shape");
        count *= static_cast<std::uint64_t>(d);
      }
      const std::uint64_t off = t->offset(), len = t->length();
      if (et.type != element_type::string && (element_size(et.type) == 0 || count > len || count * element_size(et.type) != len))
        return bad("tensor '" + et.name + "' has " + std::to_string(len) + " bytes for its shape");
      et.source = str(t->source());
      et.derived = t->derived();
      et.length = len;
      et.hash = t->xxh3_64();  // checked before the bytes are used (verify_tensors)
      if (!et.source.empty()) {
        // A weight of the source model: bound (and checked) before anything reads it.
        if (off != 0 || et.type == element_type::string)
          return bad("tensor '" + et.name + "' refers to source initializer '" + et.source + "' but has an offset or is a string");
        b.weightless_ = true;
        b.tensors_.push_back(std::move(et));
        continue;
      }
      if (off % alignment != 0 || off > data.size() || len > data.size() - off)
        return bad("tensor '" + et.name + "' at " + std::to_string(off) + "+" + std::to_string(len) +
                   " lies outside the " + std::to_string(data.size()) + "-byte data section");
      et.data = data.subspan(off, len);
      b.tensors_.push_back(std::move(et));
    }
  if (c->graphs() != nullptr)
    for (const fb::Graph* g : *c->graphs()) {
      ep_context_graph eg;
      eg.name = str(g->name());
      if (g->inputs() != nullptr)
        for (const auto* s : *g->inputs()) eg.inputs.push_back(str(s));
      if (g->outputs() != nullptr)
        for (const auto* s : *g->outputs()) eg.outputs.push_back(str(s));
      if (g->payload() != nullptr)
        eg.payload = {reinterpret_cast<const std::byte*>(g->payload()->data()), g->payload()->size()};
      if (g->tensors() != nullptr)
        for (auto i : *g->tensors()) {
          if (i >= b.tensors_.size())
            return bad("graph '" + eg.name + "' refers to tensor " + std::to_string(i) + " of " + std::to_string(b.tensors_.size()));
          eg.tensors.push_back(i);
        }
      if (b.find_graph(eg.name) != nullptr) return bad("two graphs are named '" + eg.name + "'");
      b.graphs_.push_back(std::move(eg));
    }
  b.verified_ = std::shared_ptr<std::atomic<std::uint8_t>[]>(new std::atomic<std::uint8_t>[b.tensors_.size()]());
  return b;
}

// ---- verifying tensors ----

bool ep_context_binary::verified(std::uint32_t i) const noexcept {
  return i < tensors_.size() && verified_[i].load(std::memory_order_acquire) != 0;
}

Status ep_context_binary::verify_tensors(std::span<const std::uint32_t> indices, unsigned threads) const {
  std::vector<std::uint32_t> todo;
  for (auto i : indices) {
    if (i >= tensors_.size())
      return Status(errc::invalid_graph, origin_ + ": tensor " + std::to_string(i) + " of " + std::to_string(tensors_.size()));
    if (!verified(i)) todo.push_back(i);
  }
  if (todo.empty()) return {};
  // Largest first, taken one at a time by each thread: the threads finish close together.
  std::sort(todo.begin(), todo.end(), [&](std::uint32_t a, std::uint32_t b) {
    return tensors_[a].data.size() != tensors_[b].data.size() ? tensors_[a].data.size() > tensors_[b].data.size() : a < b;
  });
  todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> first_bad{todo.size()};
  const auto work = [&] {
    for (std::size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < todo.size();) {
      const auto i = todo[k];
      if (tensors_[i].data.size() == tensors_[i].length && hash_of(tensors_[i].data) == tensors_[i].hash) {
        verified_[i].store(1, std::memory_order_release);
      } else {
        for (std::size_t b = first_bad.load(); k < b && !first_bad.compare_exchange_weak(b, k);) {
        }
      }
    }
  };
  {
    std::uint64_t bytes = 0;
    for (auto i : todo) bytes += tensors_[i].data.size();
    // A thread costs tens of microseconds: only worth it for a few MB of hashing each.
    const std::size_t useful = std::max<std::uint64_t>(1, bytes / (std::uint64_t{4} << 20));
    run_with_helpers(std::min<std::size_t>({threads, todo.size(), useful}), work);
  }
  if (const std::size_t k = first_bad.load(); k < todo.size()) {
    const auto& t = tensors_[todo[k]];
    if (!t.source.empty() && t.data.size() != t.length)
      return Status(errc::invalid_graph, origin_ + ": tensor '" + t.name + "' is initializer '" + t.source +
                                             "' of the source model (a weightless context), and no source model was bound");
    if (!t.source.empty())
      return Status(errc::invalid_graph,
                    origin_ + ": weight '" + t.source + (t.derived ? "' (derived by optimisation)" : "'") +
                        " of the source model differs from the one this weightless context "
                    "was compiled against (its bytes hash to " + hex(hash_of(t.data)) + ", expected " + hex(t.hash) +
                    "): recompile the model, or give the source model it was compiled from");
    return Status(errc::invalid_graph,
                  origin_ + ": corrupted: tensor '" + t.name + "' (" + std::to_string(t.data.size()) + " bytes at offset " +
                      std::to_string(t.data.data() - data_.data()) + " of the data section) hashes to " +
                      hex(hash_of(t.data)) + ", expected " + hex(t.hash));
  }
  return {};
}

std::vector<std::uint32_t> ep_context_binary::tensors_in(const void* p, std::size_t n) const {
  std::vector<std::uint32_t> r;
  const auto* b = static_cast<const std::byte*>(p);
  const auto* lo = data_.data();
  const auto* hi = lo + data_.size();
  if (data_.empty() || b == nullptr || b >= hi || b + n <= lo) return r;
  for (std::uint32_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    if (t.data.data() < b + n && b < t.data.data() + t.data.size()) r.push_back(i);
  }
  return r;
}

Status ep_context_binary::verify_bytes(const void* p, std::size_t n) const {
  const auto idx = tensors_in(p, n);
  return verify_tensors(idx);
}

Result<ep_context_binary> ep_context_binary::bind_weights(const weight_finder& find, std::shared_ptr<const void> keep,
                                                         unsigned threads) const {
  ep_context_binary b = *this;
  if (!weightless_) return b;
  b.weights_owner_ = std::move(keep);
  b.verified_ = std::shared_ptr<std::atomic<std::uint8_t>[]>(new std::atomic<std::uint8_t>[tensors_.size()]());
  std::vector<std::uint32_t> refs;
  for (std::uint32_t i = 0; i < tensors_.size(); ++i) {
    auto& t = b.tensors_[i];
    if (t.source.empty()) {
      b.verified_[i].store(verified(i) ? 1 : 0, std::memory_order_relaxed);
      continue;
    }
    auto bytes = find(t);
    if (!bytes)
      return Status(errc::invalid_graph, origin_ + ": weight '" + t.source + "' (tensor '" + t.name + "'): " +
                                             bytes.status().message());
    if (bytes->size() != t.length)
      return Status(errc::invalid_graph, origin_ + ": weight '" + t.source + "' of the source model has " +
                                             std::to_string(bytes->size()) + " bytes; this weightless context was compiled "
                                             "against " + std::to_string(t.length));
    t.data = *bytes;
    refs.push_back(i);
  }
  b.bound_ = true;
  EPSTACK_RETURN_IF_ERROR(b.verify_tensors(refs, threads));
  return b;
}

Status ep_context_binary::verify_all(unsigned threads) const {
  // Every tensor whose bytes are here (and references bound to a source model); an unbound reference has none.
  std::vector<std::uint32_t> all;
  for (std::uint32_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].source.empty() || bound_) all.push_back(i);
  EPSTACK_RETURN_IF_ERROR(verify_tensors(all, threads));
  // Between and after the tensors: zeros, as written.
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (const auto& t : tensors_)
    if (t.source.empty()) spans.emplace_back(static_cast<std::size_t>(t.data.data() - data_.data()), t.data.size());
  std::sort(spans.begin(), spans.end());
  std::size_t at = 0;
  const auto zeros = [&](std::size_t from, std::size_t to) -> Status {
    for (std::size_t k = from; k < to; ++k)
      if (data_[k] != std::byte{0})
        return Status(errc::invalid_graph, origin_ + ": corrupted: byte " + std::to_string(k) +
                                               " of the data section lies outside every tensor and is not zero");
    return {};
  };
  for (const auto& [off, len] : spans) {
    if (off > at) EPSTACK_RETURN_IF_ERROR(zeros(at, off));
    at = std::max(at, off + len);
  }
  EPSTACK_RETURN_IF_ERROR(zeros(at, data_.size()));
  // And the whole-file hash, which the pieces above cover between them: the file is the one that was written.
  const std::uint64_t got = file_hash_of(whole_.subspan(header_size), threads);
  if (got != file_hash_)
    return Status(errc::invalid_graph, origin_ + ": corrupted: the whole-file hash is " + hex(got) + ", expected " + hex(file_hash_));
  return {};
}

}  // namespace epstack
