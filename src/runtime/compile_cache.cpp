// The compile cache (see compile_cache.hpp): keys, entries written through a temporary folder and renamed, loads
// that fall back to compiling, least-recently-used eviction, and the listing and verification behind `epstack cache`.
#include <epstack/runtime/compile_cache.hpp>

#include <epstack/core/mapped_file.hpp>
#include <epstack/core/path_rules.hpp>
#include <epstack/detail/cat.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/provider/context_binary.hpp>
#include <epstack/provider/cost_model.hpp>

#include "../core/atomic_file.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <time.h>
#include <map>
#include <random>
#include <set>
#include <sstream>

namespace epstack::cache {

namespace fs = std::filesystem;
using detail::cat;

namespace {

// Bumped when what an entry holds or how the key is made changes.
constexpr std::string_view cache_format = "epstack compile cache 1";

// Config entries that do not change what is compiled (or that the cache sets itself).
bool ignored_key(std::string_view k) {
  static constexpr std::string_view exact[] = {
      config_keys::cache_dir, config_keys::cache_max_bytes, config_keys::cache_entry_used, config_keys::cache_entry_hit,
      config_keys::cache_warning, config_keys::ep_context_enable, config_keys::ep_context_file_path, config_keys::ep_context_embed_mode,
      config_keys::ep_context_node_name_prefix, config_keys::ep_share_contexts, config_keys::ep_stop_share_contexts,
      config_keys::ep_context_external_initializers_file, config_keys::ep_context_verify,
      config_keys::ep_context_embed_limit_bytes, config_keys::ep_context_refuse_existing_in,
      config_keys::ep_context_source_model_path, config_keys::external_initializers_folder,
      config_keys::disable_model_compile, config_keys::fail_on_suboptimal_compiled_model, config_keys::placement_budget_ms};
  return std::find(std::begin(exact), std::end(exact), k) != std::end(exact);
}

struct hasher {
  XXH3_state_t* s = XXH3_createState();
  hasher() { XXH3_128bits_reset(s); }
  ~hasher() { XXH3_freeState(s); }
  hasher(const hasher&) = delete;
  hasher& operator=(const hasher&) = delete;
  void bytes(const void* p, std::size_t n) {
    const std::uint64_t len = n;
    XXH3_128bits_update(s, &len, sizeof len);
    XXH3_128bits_update(s, p, n);
  }
  void text(std::string_view t) { bytes(t.data(), t.size()); }
  [[nodiscard]] std::string hex() const {
    const XXH128_hash_t h = XXH3_128bits_digest(s);
    static constexpr char digits[] = "0123456789abcdef";
    std::string r(32, '0');
    std::uint64_t parts[2] = {h.high64, h.low64};
    for (int p = 0; p < 2; ++p)
      for (int i = 15; i >= 0; --i, parts[p] >>= 4) r[static_cast<std::size_t>(p * 16 + i)] = digits[parts[p] & 0xf];
    return r;
  }
};

// The external data files a serialized model names: the `location` entries of its tensors' external_data
// (StringStringEntryProto{key: "location", value: name}, as protobuf writes it: field 1 then field 2). A false match
// only adds a file to the key.
std::set<std::string> external_files(std::span<const std::byte> model) {
  static constexpr char pattern[] = "\x0a\x08location\x12";
  constexpr std::size_t plen = sizeof pattern - 1;
  std::set<std::string> r;
  const char* p = reinterpret_cast<const char*>(model.data());
  const char* end = p + model.size();
  while (p < end) {
    const void* hit = memmem(p, static_cast<std::size_t>(end - p), pattern, plen);
    if (hit == nullptr) break;
    const char* q = static_cast<const char*>(hit) + plen;
    std::uint64_t len = 0;
    int shift = 0;
    while (q < end && shift < 35) {
      const auto b = static_cast<unsigned char>(*q++);
      len |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      shift += 7;
      if ((b & 0x80) == 0) break;
    }
    if (len > 0 && len < 4096 && static_cast<std::uint64_t>(end - q) >= len) r.emplace(q, static_cast<std::size_t>(len));
    p = static_cast<const char*>(hit) + 1;
  }
  return r;
}

std::uint64_t folder_bytes(const fs::path& dir) {
  std::uint64_t n = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    const auto size = it->file_size(e2);
    if (!e2) n += size;
  }
  return n;
}

// Removes a folder that another process may be reading or removing too: renamed away first (a reader that opened its
// files keeps them), then deleted; errors are not ours to report.
void remove_entry(const fs::path& folder) {
  std::error_code ec;
  static std::atomic<unsigned> n{0};
  const fs::path trash = folder.parent_path() / cat(".trash-", folder.filename().string(), "-", std::to_string(::getpid()),
                                                    "-", std::to_string(n.fetch_add(1)));
  fs::rename(folder, trash, ec);
  fs::remove_all(ec ? folder : trash, ec);
}

std::string stack_of(const std::vector<provider_binding>& providers) {
  std::string s;
  for (const auto& p : providers) s += cat(s.empty() ? "" : ",", p.type_key);
  return s;
}

// Removes the temporary folders of writes whose process is gone (`.tmp-<key>-<pid>-...`, `.trash-<key>-<pid>-...`;
// a live writer's stay), or that are a day old (another machine's, on a shared folder).
void sweep_temporaries(const fs::path& dir) {
  std::error_code ec;
  const auto day_ago = fs::file_time_type::clock::now() - std::chrono::hours(24);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    const bool tmp = name.starts_with(".tmp-"), trash = name.starts_with(".trash-");
    if (!tmp && !trash) continue;
    // The pid follows the 32-digit key.
    const std::size_t at = (tmp ? 5 : 7) + 33;
    long pid = 0;
    bool gone = false;
    if (name.size() > at) {
      const auto [p, e] = std::from_chars(name.data() + at, name.data() + name.size(), pid);
      gone = e == std::errc() && pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
      (void)p;
    }
    std::error_code e2;
    if (gone || fs::last_write_time(it->path(), e2) < day_ago) fs::remove_all(it->path(), e2);
  }
}

std::map<std::string, std::string> read_manifest(const fs::path& p) {
  std::map<std::string, std::string> r;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (auto eq = line.find('='); eq != std::string::npos) r[line.substr(0, eq)] = line.substr(eq + 1);
  return r;
}

// The key from the model's content hash and the rest.
std::string key_with(std::string_view content, const std::vector<provider_binding>& providers, const session_options& options) {
  hasher h;
  h.text(cache_format);
  h.text(cat("context format ", std::to_string(ep_context_format_version)));
  // The library and the compiler that built it: another build may optimise, partition or compile differently.
  h.text(cat("epstack ", EPSTACK_VERSION_STRING, " ", __VERSION__));
  h.text(cat("content ", content));
  for (const auto& p : providers) {
    h.text(cat("provider ", p.type_key, " ", p.identity));
    if (p.context) h.text(cat("sdk ", p.context->sdk_version, " hardware ", p.context->hardware));
  }
  // The machine class the plan was made for: placement's estimates and the blocked layout's choice of Winograd or
  // direct kernels depend on it (cost_model.hpp), so another class, or a pinned one, compiles its own entry.
  h.text(cat("machine ", to_string(this_machine_class())));
  h.text(cat("level ", std::to_string(static_cast<int>(options.optimization_level()))));
  for (const auto& [k, v] : options.free_dimension_overrides()) h.text(cat("dim ", k, "=", std::to_string(v)));
  for (const auto& [k, v] : options.config_entries())
    if (!ignored_key(k)) h.text(cat("config ", k, "=", v));
  return h.hex();
}

// What identifies a file's version without reading it: size, modification time (ns), inode and device.
std::string stat_of(const fs::path& p) {
  struct ::stat st {};
  if (::stat(p.c_str(), &st) != 0) return {};
  return cat(std::to_string(st.st_size), " ", std::to_string(st.st_mtim.tv_sec), ".", std::to_string(st.st_mtim.tv_nsec), " ",
             std::to_string(st.st_ino), " ", std::to_string(st.st_dev));
}

// Whether a file was modified within the last two seconds (a rewrite within the same timestamp tick could go
// unseen by its size and time, so such a file's hash is not remembered).
bool recently_modified(const fs::path& p) {
  struct ::stat st {};
  if (::stat(p.c_str(), &st) != 0) return true;
  struct ::timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return now.tv_sec - st.st_mtim.tv_sec < 2;
}

// The content hash of a model and its external data, and the version (stat_of, taken before each file is read) of
// every file it covers.
struct content_info {
  std::string hash;
  std::vector<std::pair<fs::path, std::string>> files;
  bool complete = true;  ///< every external data file it names was there
};
Result<content_info> content_of(const fs::path& path, std::span<const std::byte> bytes, const session_options& options) {
  content_info r;
  hasher h;
  std::shared_ptr<mapped_file> file;
  if (!path.empty()) {
    r.files.emplace_back(path, stat_of(path));
    auto f = mapped_file::open(path);
    if (!f) return f.status();
    file = std::move(*f);
    bytes = file->bytes();
  }
  h.text("model");
  h.bytes(bytes.data(), bytes.size());
  // The external data: found beside the model, or where the options say for a buffer.
  fs::path folder = path.empty() ? fs::path(std::string(options.config(config_keys::external_initializers_folder).value_or("")))
                                 : path.parent_path();
  for (const auto& name : external_files(bytes)) {
    h.text(cat("external ", name));
    std::error_code ec;
    const fs::path p = folder / name;
    if (!is_plain_relative(fs::path(name)) || !fs::is_regular_file(p, ec)) {  // loading the model reports it
      r.complete = false;
      continue;
    }
    r.files.emplace_back(p, stat_of(p));
    auto f = mapped_file::open(p);
    if (!f) return f.status();
    h.bytes((*f)->bytes().data(), (*f)->bytes().size());
  }
  r.hash = h.hex();
  return r;
}

// Whether every file still has the version recorded.
bool unchanged(const std::vector<std::pair<fs::path, std::string>>& files) {
  for (const auto& [p, st] : files)
    if (st.empty() || stat_of(p) != st) return false;
  return true;
}

// A model file's content hash, remembered in `<cache>/.stat/` with the size, time (ns), inode and device of each
// file it covers (ccache's direct mode): a later create reads no byte of the model when none of them changed. Not
// remembered when a file changed while it was hashed, was modified in the last two seconds, or an external data
// file it names is missing.
Result<content_info> remembered_content_of(const fs::path& dir, const fs::path& model, const session_options& options) {
  std::error_code ec;
  const fs::path abs = fs::absolute(model, ec);
  const fs::path memo = dir / ".stat" / cat(std::to_string(XXH3_64bits(abs.native().data(), abs.native().size())), ".txt");
  {
    std::ifstream in(memo);
    std::string line;
    content_info r;
    bool valid = false;
    std::getline(in, line);
    while (line == "model " + abs.string() && std::getline(in, line)) {
      if (line.starts_with("content ")) {
        r.hash = line.substr(8);
        valid = r.hash.size() == 32 && !r.files.empty();
        break;
      }
      // file <size> <time> <inode> <device> <path>
      if (!line.starts_with("file ")) break;
      std::istringstream ls(line.substr(5));
      std::string a, b, c, d;
      ls >> a >> b >> c >> d;
      std::string p;
      std::getline(ls, p);
      if (!p.empty() && p.front() == ' ') p.erase(0, 1);
      r.files.emplace_back(p, cat(a, " ", b, " ", c, " ", d));
    }
    if (valid && unchanged(r.files)) return r;
  }
  EPSTACK_ASSIGN_OR_RETURN(auto r, content_of(abs, {}, options));
  if (!r.complete || !unchanged(r.files)) return r;
  std::string text = "model " + abs.string() + "\n";
  for (const auto& [p, st] : r.files) {
    if (recently_modified(p)) return r;
    text += cat("file ", st, " ", fs::absolute(p, ec).string(), "\n");
  }
  text += cat("content ", r.hash, "\n");
  fs::create_directories(memo.parent_path(), ec);
  detail::atomic_file out(memo);
  out.write(text.data(), text.size());
  (void)out.commit();  // only a memo: without it the next create hashes again
  return r;
}

}  // namespace

Result<std::string> key_of(const fs::path& path, std::span<const std::byte> bytes, const std::vector<provider_binding>& providers,
                           const session_options& options) {
  EPSTACK_ASSIGN_OR_RETURN(const auto content, content_of(path, bytes, options));
  return key_with(content.hash, providers, options);
}

Result<ep_context_report> create_through_cache(const fs::path& path, std::span<const std::byte> bytes,
                                               const std::vector<provider_binding>& providers, const session_options& options,
                                               const session_maker& make) {
  const fs::path dir(std::string(options.config(config_keys::cache_dir).value_or("")));
  if (options.flag(config_keys::ep_context_enable))
    return Status(errc::invalid_argument, cat(config_keys::cache_dir, " compiles through the cache: ",
                                              config_keys::ep_context_enable, " cannot be set as well"));
  std::uint64_t max_bytes = 0;
  if (auto v = options.config(config_keys::cache_max_bytes); v && !v->empty()) {
    const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), max_bytes);
    if (ec != std::errc() || p != v->data() + v->size())
      return Status(errc::invalid_argument, cat(config_keys::cache_max_bytes, " must be a number of bytes, found '", *v, "'"));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    return Status(errc::invalid_argument, cat(config_keys::cache_dir, " '", dir.string(), "' is not a folder that can be made"));
  content_info content;
  if (path.empty()) {
    EPSTACK_ASSIGN_OR_RETURN(content, content_of(path, bytes, options));
  } else {
    EPSTACK_ASSIGN_OR_RETURN(content, remembered_content_of(dir, path, options));
  }
  const std::string key = key_with(content.hash, providers, options);
  const fs::path entry = dir / key;
  const fs::path ctx_model = entry / entry_model;
  // Weightless entries read their weights from the source model itself.
  const auto with_source = [&](session_options o) {
    if (o.flag(config_keys::ep_enable_weightless) || o.config(config_keys::ep_enable_weightless_mode) == std::optional<std::string_view>("2")) {
      if (!path.empty()) o.set_config(config_keys::ep_context_source_model_path, fs::absolute(path, ec).string());
      else o.set_weightless_source_model(bytes);
    }
    return o;
  };

  std::vector<std::string> warnings;
  if (fs::is_regular_file(entry / entry_manifest, ec)) {
    session_options o = with_source(options);
    // The entry's binaries, from its folder: not where the caller's options would look for a context model's.
    o.set_config(config_keys::ep_context_file_path, ctx_model.string());
    o.set_context_reader({});
    o.set_config(config_keys::cache_entry_used, entry.string());
    o.set_config(config_keys::cache_entry_hit, "1");
    auto r = make(ctx_model, o);
    if (r) {
      fs::last_write_time(entry / entry_manifest, fs::file_time_type::clock::now(), ec);  // least recently used
      return r;
    }
    // Anything the entry itself is wrong about is compiled again; errors of the options or the stack are the caller's.
    if (r.code() == errc::invalid_argument || r.code() == errc::fail) return r.status();
    warnings.push_back(cat("compile cache: entry ", key, " in '", dir.string(), "' does not load (", r.status().message(),
                           "): removed, and the model compiled again"));
    remove_entry(entry);
  } else if (fs::exists(entry, ec)) {
    warnings.push_back(cat("compile cache: entry ", key, " in '", dir.string(), "' is incomplete (no ", entry_manifest,
                           "): removed, and the model compiled again"));
    remove_entry(entry);
  }

  // A miss: compiled from the source into a folder of this process's own, then renamed into place.
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  const fs::path tmp = dir / cat(".tmp-", key, "-", std::to_string(::getpid()), "-", std::to_string(counter.fetch_add(1)), "-",
                                 std::to_string(rd()));
  if (!fs::create_directory(tmp, ec) || ec)
    return Status(errc::invalid_argument, cat("compile cache: cannot create a folder in '", dir.string(), "': ", ec.message()));
  struct cleanup {
    fs::path p;
    ~cleanup() {
      std::error_code e;
      if (!p.empty()) fs::remove_all(p, e);
    }
  } guard{tmp};
  session_options o = options;
  o.set_config(config_keys::ep_context_enable, "1");
  o.set_config(config_keys::ep_context_embed_mode, "0");
  o.set_config(config_keys::ep_context_file_path, (tmp / entry_model).string());
  o.set_config(config_keys::ep_context_external_initializers_file, cat(entry_model, ".data"));
  o.set_config(config_keys::ep_share_contexts, "0");  // an entry's binaries are its own
  o.set_config(config_keys::ep_stop_share_contexts, "0");
  o.set_context_reader({});
  o.set_config(config_keys::cache_entry_used, entry.string());
  o.set_config(config_keys::cache_entry_hit, "0");
  if (!warnings.empty()) o.set_config(config_keys::cache_warning, warnings.front());
  auto r = make(path, o);
  if (!r) return r.status();
  if (r->model_written.empty()) return r;  // nothing compiled that a context holds: nothing to cache
  // A model that changed while it was compiled is not stored under the key of what was hashed.
  if (!content.files.empty() && !unchanged(content.files)) return r;
  {
    std::ostringstream m;
    m << "key=" << key << "\nsource=" << (path.empty() ? std::string("<buffer>") : fs::absolute(path, ec).string())
      << "\nstack=" << stack_of(providers) << "\nnodes=" << r->nodes_written << "\n";
    const std::string text = m.str();
    detail::atomic_file f(tmp / entry_manifest);
    f.write(text.data(), text.size());
    if (auto st = f.commit(); !st) return st;
  }
  fs::rename(tmp, entry, ec);
  if (!ec) guard.p.clear();
  // else another process wrote the entry first: ours goes, theirs stays.
  (void)evict(dir, max_bytes > 0 ? max_bytes : std::numeric_limits<std::uint64_t>::max(), key);
  return r;
}

Result<std::vector<entry>> list(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status(errc::no_such_file, cat("compile cache '", dir.string(), "' is not a folder"));
  std::vector<entry> r;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.empty() || name.front() == '.' || !it->is_directory(ec)) continue;
    entry e;
    e.key = name;
    e.folder = it->path();
    e.bytes = folder_bytes(e.folder);
    std::error_code e2;  // an entry another process removes meanwhile is listed as it was seen, never an error
    e.complete = fs::is_regular_file(e.folder / entry_manifest, e2) && fs::is_regular_file(e.folder / entry_model, e2);
    e.last_used = fs::last_write_time(e.complete ? e.folder / entry_manifest : e.folder, e2);
    if (e2) e.last_used = {};
    const auto m = read_manifest(e.folder / entry_manifest);
    if (auto x = m.find("source"); x != m.end()) e.source = x->second;
    if (auto x = m.find("stack"); x != m.end()) e.stack = x->second;
    r.push_back(std::move(e));
  }
  if (ec) return Status(errc::fail, cat("compile cache '", dir.string(), "': ", ec.message()));
  std::sort(r.begin(), r.end(), [](const entry& a, const entry& b) { return a.last_used < b.last_used; });
  return r;
}

Result<std::size_t> clear(const fs::path& dir) {
  EPSTACK_ASSIGN_OR_RETURN(auto entries, list(dir));
  for (const auto& e : entries) remove_entry(e.folder);
  std::error_code ec;
  fs::remove_all(dir / ".stat", ec);
  sweep_temporaries(dir);
  return entries.size();
}

Result<std::size_t> evict(const fs::path& dir, std::uint64_t max_bytes, std::string_view keep) {
  EPSTACK_ASSIGN_OR_RETURN(auto entries, list(dir));
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  std::size_t removed = 0;
  for (const auto& e : entries) {  // least recently used first
    if (total <= max_bytes) break;
    if (e.key == keep) continue;
    remove_entry(e.folder);
    total -= e.bytes;
    ++removed;
  }
  sweep_temporaries(dir);
  return removed;
}

Result<std::vector<verdict>> verify(const fs::path& dir) {
  EPSTACK_ASSIGN_OR_RETURN(auto entries, list(dir));
  std::vector<verdict> r;
  for (const auto& e : entries) {
    verdict v;
    v.key = e.key;
    const auto check = [&]() -> Status {
      if (!e.complete) return Status(errc::invalid_graph, cat("incomplete: no ", entry_manifest, " or ", entry_model));
      load_options lo;
      lo.shape_inference = shape_inference_mode::off;
      EPSTACK_ASSIGN_OR_RETURN(auto m, load_model(e.folder / entry_model, lo));
      std::set<std::string> binaries;
      // EPContext nodes of every graph (control-flow bodies hold them too).
      std::function<Status(const graph&)> walk = [&](const graph& g) -> Status {
        for (node_id n = 0; n < g.node_count(); ++n) {
          const auto& nd = g.node(n);
          EPSTACK_RETURN_IF_ERROR(nd.attributes.for_each_subgraph(walk));
          if (nd.op_type != ep_context_op_type || nd.domain != ep_context_domain) continue;
          EPSTACK_ASSIGN_OR_RETURN(auto a, read_attributes<ep_context_attributes>(nd.attributes, nd.name));
          if (a.embed_mode == 0 && a.main_context == 1) binaries.insert(a.ep_cache_context);
        }
        return {};
      };
      EPSTACK_RETURN_IF_ERROR(walk(m.graph));
      for (const auto& b : binaries) {
        EPSTACK_ASSIGN_OR_RETURN(auto full, resolve_file_in_folder(e.folder, b, "context binary"));
        EPSTACK_ASSIGN_OR_RETURN(auto bin, ep_context_binary::open(full));
        // (A weightless binary: every byte it holds; its references are checked when a session binds them.)
        EPSTACK_RETURN_IF_ERROR(bin.verify_all(2));
      }
      return {};
    };
    if (auto st = check(); !st) v.problem = st.message();
    v.ok = v.problem.empty();
    r.push_back(std::move(v));
  }
  return r;
}

}  // namespace epstack::cache
