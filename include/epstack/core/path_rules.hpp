#pragma once
/// @file path_rules.hpp
/// @brief Resolving a file name found in a model (external data location, context binary path) inside its folder.
/// Everything in a model is untrusted: the name must be relative, free of `..`, and must resolve (symbolic links
/// followed) to a regular file inside the folder.

#include <epstack/core/errors.hpp>

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace epstack {

/// True when `name` is a non-empty relative path without `..` (what a model may name inside its folder).
[[nodiscard]] inline bool is_plain_relative(const std::filesystem::path& name) {
  if (name.empty() || name.is_absolute() || name.has_root_name() || name.has_root_directory()) return false;
  for (const auto& part : name)
    if (part == "..") return false;
  return true;
}

/// @brief Resolves `name` against `folder`. `what` names the file's role for messages (e.g. "external data of
/// initializer 'w'"). invalid_graph for an empty, absolute or `..`-containing name, a path that leaves the folder
/// through a link, or one that is not a regular file; no_such_file when it does not exist.
[[nodiscard]] inline Result<std::filesystem::path> resolve_file_in_folder(const std::filesystem::path& folder,
                                                                          std::string_view name, std::string_view what) {
  namespace fs = std::filesystem;
  const auto fail = [&](errc code, const std::string& why) {
    return Status(code, std::string(what) + ": location '" + std::string(name) + "' " + why);
  };
  if (name.empty()) return fail(errc::invalid_graph, "is empty");
  if (name.find('\0') != std::string_view::npos) return fail(errc::invalid_graph, "contains a NUL character");
  const fs::path rel(name);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    return fail(errc::invalid_graph, "is absolute; it must be relative to the folder '" + folder.string() + "'");
  for (const auto& part : rel)
    if (part == "..") return fail(errc::invalid_graph, "contains '..'; it must stay inside '" + folder.string() + "'");
  const fs::path base = folder.empty() ? fs::path(".") : folder;
  const fs::path full = base / rel;
  std::error_code ec;
  const auto st = fs::status(full, ec);
  if (ec || !fs::exists(st)) return fail(errc::no_such_file, "does not exist (looked for '" + full.string() + "')");
  const fs::path canon_base = fs::canonical(base, ec);
  if (ec) return fail(errc::no_such_file, "cannot resolve the folder '" + base.string() + "': " + ec.message());
  const fs::path canon = fs::canonical(full, ec);
  if (ec) return fail(errc::no_such_file, "cannot be resolved: " + ec.message());
  auto b = canon_base.begin();
  auto c = canon.begin();
  for (; b != canon_base.end(); ++b, ++c)
    if (c == canon.end() || *b != *c)
      return fail(errc::invalid_graph, "resolves to '" + canon.string() + "', outside the folder '" + canon_base.string() + "'");
  if (!fs::is_regular_file(st)) return fail(errc::invalid_graph, "is not a regular file");
  return canon;
}

}  // namespace epstack
