#pragma once
/// @file compile_model.hpp
/// @brief `compile_model<P...>`: ONNX Runtime's compile API (1.22+, `OrtCompileApi`) over a provider stack. A model,
/// from a path or a memory buffer, is compiled to an EPContext model written to a path or returned in a buffer,
/// without keeping a session for inference.
///
/// Everything is written in a fresh folder beside the output first and moved into place only when all of it was
/// written, so a failed or cancelled compile leaves nothing behind and replaces nothing.

#include <epstack/session.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace epstack {

/// @brief What `compile_model` reads, writes and how (ONNX Runtime's `OrtModelCompilationOptions`).
struct compile_options {
  std::filesystem::path input_path;               ///< the source model (or `input_bytes`: exactly one)
  std::span<const std::byte> input_bytes;
  std::filesystem::path output_path;              ///< the EPContext model (or `output_buffer`: exactly one)
  std::vector<std::byte>* output_buffer = nullptr;  ///< needs embed_mode 1 (a buffer has no folder for binaries)
  int embed_mode = 0;                             ///< ep.context_embed_mode
  std::string external_initializers_file;         ///< ep.context_model_external_initializers_file_name
  bool error_if_no_nodes_compiled = false;        ///< else the model is written even with nothing compiled
  bool error_if_output_file_exists = true;        ///< else existing outputs are replaced
  progress_callback progress;                     ///< may cancel (see session_options::set_progress_callback)
  session_options session;                        ///< everything else (threads, optimisation level, config entries)
};

namespace detail {
inline Result<std::filesystem::path> make_temp_folder(const std::filesystem::path& beside) {
  std::string tmpl = (beside / ".epstack-compile-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    return Status(errc::invalid_argument, "cannot create a working folder in '" + beside.string() + "'");
  return std::filesystem::path(tmpl);
}
struct folder_guard {
  std::filesystem::path p;
  ~folder_guard() {
    std::error_code ec;
    if (!p.empty()) std::filesystem::remove_all(p, ec);
  }
};
}  // namespace detail

/// @brief Compiles the model of `o` on the stack `session<P...>` (the CPU provider appended) to an EPContext model.
/// Errors: invalid_argument for options that contradict (no or two inputs or outputs, a buffer output with
/// embed_mode 0, an existing output with `error_if_output_file_exists`), ep_fail when nothing was compiled and
/// `error_if_no_nodes_compiled`, and whatever creating the session reports.
template <class... P>
[[nodiscard]] Result<ep_context_report> compile_model(const compile_options& o,
                                                      typename session<P...>::providers_type providers = {});

/// `compile_model` for a session type `S` (a `basic_session<...>`, e.g. `session<dnnl_provider>`).
template <class S>
[[nodiscard]] Result<ep_context_report> compile_model_for(const compile_options& o,
                                                          typename S::providers_type providers = {}) {
  namespace fs = std::filesystem;
  if (o.input_path.empty() == o.input_bytes.empty())
    return Status(errc::invalid_argument, "compile_model: give exactly one input, a path or a buffer");
  if (o.output_path.empty() == (o.output_buffer == nullptr))
    return Status(errc::invalid_argument, "compile_model: give exactly one output, a path or a buffer");
  if (o.embed_mode != 0 && o.embed_mode != 1)
    return Status(errc::invalid_argument, "compile_model: embed_mode must be 0 or 1");
  if (o.output_buffer != nullptr && o.embed_mode != 1)
    return Status(errc::invalid_argument,
                  "compile_model: an output buffer needs embed_mode 1 (context binaries need a folder beside the model)");
  if (o.output_buffer != nullptr && !o.external_initializers_file.empty())
    return Status(errc::invalid_argument, "compile_model: an output buffer holds the whole model: an external "
                                          "initializers file ('" + o.external_initializers_file +
                                              "') needs an output path");
  std::error_code ec;
  const fs::path final_path = o.output_buffer != nullptr ? fs::path() : fs::absolute(o.output_path, ec);
  if (!final_path.empty() && (!final_path.has_extension() || fs::is_directory(final_path, ec)))
    return Status(errc::invalid_argument, "compile_model: the output path should not point to a folder: '" +
                                              o.output_path.string() + "'");
  if (!final_path.empty() && o.error_if_output_file_exists && fs::exists(final_path, ec))
    return Status(errc::invalid_argument, "compile_model: '" + final_path.string() + "' exists already");
  const fs::path beside = final_path.empty() ? fs::temp_directory_path() : final_path.parent_path();
  EPSTACK_ASSIGN_OR_RETURN(auto work, detail::make_temp_folder(beside));
  detail::folder_guard guard{work};
  const fs::path out = work / (final_path.empty() ? fs::path("model_ctx.onnx") : final_path.filename());

  session_options so = o.session;
  so.set_config(config_keys::ep_context_enable, "1");
  so.set_config(config_keys::ep_context_embed_mode, o.embed_mode == 1 ? "1" : "0");
  so.set_config(config_keys::ep_context_file_path, out.string());
  if (!o.external_initializers_file.empty())
    so.set_config(config_keys::ep_context_external_initializers_file, o.external_initializers_file);
  // The session writes into the working folder; the files it would write must not exist in the output's folder
  // either, and that is checked before anything is compiled.
  if (!final_path.empty() && o.error_if_output_file_exists)
    so.set_config(config_keys::ep_context_refuse_existing_in, final_path.parent_path().string());
  if (o.progress) so.set_progress_callback(o.progress);
  auto s = o.input_path.empty() ? S::create(o.input_bytes, so, std::move(providers))
                                : S::create(o.input_path, so, std::move(providers));
  if (!s) return s.status();
  ep_context_report report = s->ep_context();
  if (report.nodes_written == 0) {
    if (o.error_if_no_nodes_compiled)
      return Status(errc::ep_fail, "compile_model: no provider of the stack compiled any node of the model");
    // ONNX Runtime writes the model anyway: the source, self-contained.
    load_options lo;
    if (auto f = o.session.config(config_keys::external_initializers_folder)) lo.external_data_folder = std::string(*f);
    auto m = o.input_path.empty() ? load_model(o.input_bytes, lo) : load_model(o.input_path, lo);
    if (!m) return m.status();
    save_options sv;
    if (!o.external_initializers_file.empty()) {
      sv.mode = external_data_mode::all_external;
      sv.external_file_name = o.external_initializers_file;
    }
    EPSTACK_RETURN_IF_ERROR(save_model(*m, out, sv));
    report.model_written = out;
  }
  { [[maybe_unused]] S released = std::move(*s); }  // the session goes before its files move
  if (o.output_buffer != nullptr) {
    std::ifstream f(out, std::ios::binary | std::ios::ate);
    if (!f) return Status(errc::fail, "compile_model: cannot read back '" + out.string() + "'");
    o.output_buffer->resize(static_cast<std::size_t>(f.tellg()));
    f.seekg(0);
    f.read(reinterpret_cast<char*>(o.output_buffer->data()), static_cast<std::streamsize>(o.output_buffer->size()));
    if (!f) return Status(errc::fail, "compile_model: cannot read back '" + out.string() + "'");
    report.model_written.clear();
    return report;
  }
  // Every file into place: refused first if any exists (with the flag), so nothing is half replaced. The files the
  // model names go first and the model last, so the model never names a file that is not there yet; if a move fails,
  // the files moved before it that did not replace anything are removed again.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(work))
    if (e.path().filename() != out.filename()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  files.push_back(out);
  if (o.error_if_output_file_exists)
    for (const auto& f : files)
      if (fs::exists(final_path.parent_path() / f.filename(), ec))
        return Status(errc::invalid_argument, "compile_model: '" + (final_path.parent_path() / f.filename()).string() +
                                                  "' exists already");
  std::vector<fs::path> placed;  // moved into place where nothing was
  for (const auto& f : files) {
    const fs::path to = final_path.parent_path() / f.filename();
    const bool existed = fs::exists(to, ec);
    fs::rename(f, to, ec);
    if (ec) {
      const Status st(errc::fail, "compile_model: cannot move '" + f.string() + "' into place: " + ec.message());
      for (const auto& p : placed) fs::remove(p, ec);
      return st;
    }
    if (!existed) placed.push_back(to);
  }
  report.model_written = final_path;
  for (auto& b : report.binaries_written) b = final_path.parent_path() / b.filename();
  return report;
}

template <class... P>
Result<ep_context_report> compile_model(const compile_options& o, typename session<P...>::providers_type providers) {
  return compile_model_for<session<P...>>(o, std::move(providers));
}

}  // namespace epstack
