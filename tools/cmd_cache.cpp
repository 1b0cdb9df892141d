// epstack cache ls|clear|verify DIR: the compile cache of epstack.cache_dir (runtime/compile_cache.hpp).
#include "cli.hpp"

#include <epstack/runtime/compile_cache.hpp>

#include <chrono>
#include <ctime>
#include <iomanip>
#include <iostream>

namespace epstack::cli {

namespace {
std::string age_of(std::filesystem::file_time_type t) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(std::filesystem::file_time_type::clock::now() - t).count();
  if (s < 120) return std::to_string(s) + " s ago";
  if (s < 7200) return std::to_string(s / 60) + " min ago";
  if (s < 172800) return std::to_string(s / 3600) + " h ago";
  return std::to_string(s / 86400) + " days ago";
}
}  // namespace

int cache(const std::vector<std::string>& argv) {
  if (argv.size() != 2 || (argv[0] != "ls" && argv[0] != "clear" && argv[0] != "verify"))
    return usage_error("cache takes ls, clear or verify and the cache folder: epstack cache ls DIR");
  const std::filesystem::path dir(argv[1]);
  if (argv[0] == "ls") {
    auto entries = epstack::cache::list(dir);
    if (!entries) return fail(entries.status());
    std::uint64_t total = 0;
    for (const auto& e : *entries) {
      total += e.bytes;
      std::cout << e.key << "  " << std::setw(12) << e.bytes << " bytes  used " << age_of(e.last_used) << "  "
                << (e.complete ? "" : "[incomplete] ") << (e.stack.empty() ? "?" : e.stack) << "  "
                << (e.source.empty() ? "?" : e.source) << "\n";
    }
    std::cout << entries->size() << " entries, " << total << " bytes (least recently used first)\n";
    return 0;
  }
  if (argv[0] == "clear") {
    auto n = epstack::cache::clear(dir);
    if (!n) return fail(n.status());
    std::cout << "removed " << *n << " entries from " << dir.string() << "\n";
    return 0;
  }
  auto verdicts = epstack::cache::verify(dir);
  if (!verdicts) return fail(verdicts.status());
  std::size_t bad = 0;
  for (const auto& v : *verdicts) {
    std::cout << v.key << "  " << (v.ok ? "ok" : "BAD: " + v.problem) << "\n";
    bad += v.ok ? 0 : 1;
  }
  std::cout << verdicts->size() << " entries, " << bad << " damaged"
            << (bad ? " (a session replaces a damaged entry when it next loads it; 'epstack cache clear' removes all)" : "")
            << "\n";
  return bad ? 1 : 0;
}

}  // namespace epstack::cli
