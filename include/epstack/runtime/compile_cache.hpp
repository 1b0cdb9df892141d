#pragma once
/// @file compile_cache.hpp
/// @brief The compile cache (session option `epstack.cache_dir`; OpenVINO's `cache_dir` is the anchor, ONNX Runtime
/// has none). A session created from a source model looks for an EPContext model compiled from the same model on the
/// same stack with the same options; it loads it when it is there and usable, and otherwise compiles and writes it.
///
/// An entry is a folder `<cache_dir>/<key>/` holding `model_ctx.onnx`, its context binaries and external
/// initializers, and `entry.txt` (what it was compiled from, written last). The key is an XXH3-128 over: the source
/// model's bytes and those of every external data file it names; each provider's type, C++ type (a selective CPU
/// provider's kernel list), options, SDK version and hardware, in stack order; the optimisation level, free dimension
/// overrides and every config entry that can change what is compiled; the context format and epstack's version.
///
/// Entries are written in a `.tmp-*` folder and renamed into place, so a reader never sees half an entry and two
/// processes compiling the same model at once end with one valid entry (the later rename loses and is discarded). An
/// entry that does not load (damaged, truncated, from another machine) is reported as a warning in the session's
/// `ep_context().warnings`, removed and compiled again. With `epstack.cache_max_bytes`, the least recently used
/// entries are removed after each write until the cache fits. The model's content hash is remembered with its files'
/// size, time, inode and device (`<cache_dir>/.stat/`, ccache's direct mode), so a hit reads no byte of the model; a
/// file changed while it was hashed, or modified in the last two seconds, is hashed again next time, and a model that
/// changed while it was compiled is not stored. Compiled once in epstack::runtime.

#include <epstack/core/errors.hpp>
#include <epstack/core/session_options.hpp>
#include <epstack/ep_context/report.hpp>
#include <epstack/provider/binding.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace epstack {

namespace config_keys {
/// epstack's own: the compile cache's folder (created when missing). Empty or unset: no cache.
inline constexpr std::string_view cache_dir = "epstack.cache_dir";
/// epstack's own: the most bytes the cache may hold; after a write, the least recently used entries go until it fits
/// (the entry just written stays). Unset or 0: no limit.
inline constexpr std::string_view cache_max_bytes = "epstack.cache_max_bytes";
/// Set by the cache on the session it creates (the entry, and "1" when it was loaded): `ep_context().cache_entry`
/// and `cache_hit` report them. Not for users.
inline constexpr std::string_view cache_entry_used = "epstack.internal.cache_entry";
inline constexpr std::string_view cache_entry_hit = "epstack.internal.cache_hit";
inline constexpr std::string_view cache_warning = "epstack.internal.cache_warning";
}  // namespace config_keys

namespace cache {

/// The EPContext model of an entry, and its description (written last).
inline constexpr std::string_view entry_model = "model_ctx.onnx";
inline constexpr std::string_view entry_manifest = "entry.txt";

/// Creates the session through the cache: `from` is the path to create it from (the entry's `_ctx.onnx` on a hit, or
/// the source model's path), empty for the source bytes; `o` the options to create it with. It returns the session's
/// report (and keeps the session).
using session_maker = std::function<Result<ep_context_report>(const std::filesystem::path& from, const session_options& o)>;

/// The cache's side of `basic_session::create` with `epstack.cache_dir` set, for a source model at `path` or in
/// `bytes` (exactly one). invalid_argument when the options also ask for ep.context_enable; the cache folder's
/// errors; whatever creating the session reports (a failure to load an entry is not one: it is compiled again).
[[nodiscard]] Result<ep_context_report> create_through_cache(const std::filesystem::path& path, std::span<const std::byte> bytes,
                                                             const std::vector<provider_binding>& providers,
                                                             const session_options& options, const session_maker& make);

/// The key of a source model on a stack with these options (hex, 32 digits); errors reading the model or its data.
[[nodiscard]] Result<std::string> key_of(const std::filesystem::path& path, std::span<const std::byte> bytes,
                                         const std::vector<provider_binding>& providers, const session_options& options);

/// An entry of a cache folder.
struct entry {
  std::string key;
  std::filesystem::path folder;
  std::uint64_t bytes = 0;                          ///< every file of the entry
  std::filesystem::file_time_type last_used;        ///< its manifest's time, renewed by each load
  std::string source, stack;                        ///< from the manifest
  bool complete = false;                            ///< the manifest and the EPContext model are there
};
/// The entries of `dir`, least recently used first (temporary folders of writes in progress are not entries).
[[nodiscard]] Result<std::vector<entry>> list(const std::filesystem::path& dir);
/// Removes every entry, the content-hash memo and the temporary folders of writers that are gone; the number of
/// entries removed.
[[nodiscard]] Result<std::size_t> clear(const std::filesystem::path& dir);
/// Removes least recently used entries other than `keep` until the cache holds at most `max_bytes`, and the temporary
/// folders of writers that are gone (or a day old); the number of entries removed.
[[nodiscard]] Result<std::size_t> evict(const std::filesystem::path& dir, std::uint64_t max_bytes, std::string_view keep = {});
/// What `verify` found in one entry.
struct verdict {
  std::string key;
  bool ok = false;
  std::string problem;  ///< empty when ok
};
/// Reads each entry completely: the manifest, the EPContext model, and every byte of its context binaries against
/// their hashes (epstack::ep_context_binary::verify_all).
[[nodiscard]] Result<std::vector<verdict>> verify(const std::filesystem::path& dir);

}  // namespace cache
}  // namespace epstack
