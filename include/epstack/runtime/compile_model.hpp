#pragma once
/// @file compile_model.hpp
/// @brief `compile_model<P...>`: ONNX Runtime's compile API (1.22+, `OrtCompileApi`) over a provider stack. A model,
/// from a path or a memory buffer, is compiled to an EPContext model written to a path or returned in a buffer,
/// without keeping a session for inference.
///
/// Everything is written in a fresh folder beside the output first and moved into place only when all of it was
/// written, so a failed or cancelled compile leaves nothing behind and replaces nothing.

#include <epstack/runtime/session.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace epstack {

/// What `compile_model` writes.
enum class compile_format : std::uint8_t {
  onnx,    ///< an EPContext model (ONNX), with context binaries beside it or embedded: ONNX Runtime's
  deploy,  ///< a deployment model (deploy/deployment.hpp): the graph as compiled, weights and compiled partitions in
           ///< one file that `session<P...>::create_deployed` runs without protobuf, onnx or the graph optimiser
};

/// @brief What `compile_model` reads, writes and how (ONNX Runtime's `OrtModelCompilationOptions`).
struct compile_options {
  std::filesystem::path input_path;               ///< the source model (or `input_bytes`: exactly one)
  std::span<const std::byte> input_bytes;
  std::filesystem::path output_path;              ///< the EPContext model (or `output_buffer`, or `write_model`: one)
  std::vector<std::byte>* output_buffer = nullptr;  ///< needs embed_mode 1 (a buffer has no folder for binaries)
  /// The EPContext model's bytes, to the application (ONNX Runtime's SetOutputModelWriteFunc): called once, after
  /// everything compiled. With embed_mode 0 it needs `write_context` for the binaries.
  std::function<Status(std::span<const std::byte> bytes)> write_model;
  /// Each context binary's bytes with the name the model refers to it by (its `ep_cache_context`), instead of a file
  /// beside the model (ONNX Runtime's EP-context data write function): encrypt, sign or store them anywhere, and give
  /// the session a `session_options::set_context_reader` that returns them. Called before the model is written.
  std::function<Status(std::string_view name, std::span<const std::byte> bytes)> write_context;
  compile_format format = compile_format::onnx;   ///< deploy: embed_mode, write_context and the external
                                                  ///< initializers file do not apply (one file holds everything)
  int embed_mode = 0;                             ///< ep.context_embed_mode
  std::string external_initializers_file;         ///< ep.context_model_external_initializers_file_name
  bool error_if_no_nodes_compiled = false;        ///< else the model is written even with nothing compiled
  bool error_if_output_file_exists = true;        ///< else existing outputs are replaced
  progress_callback progress;                     ///< may cancel (see session_options::set_progress_callback)
  session_options session;                        ///< everything else (threads, optimisation level, config entries)
};

/// The part of `compile_model` that does not depend on the provider types (compiled once in epstack::runtime):
/// checks `o`, calls `create_session` with the session options that generate the EPContext model into a working
/// folder (it creates the session, and returns its report once the session is gone), and moves the files into place.
using session_runner = std::function<Result<ep_context_report>(const session_options&)>;
[[nodiscard]] Result<ep_context_report> compile_model_with(const compile_options& o, const session_runner& create_session);


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
  return compile_model_with(o, [&o, &providers](const session_options& so) -> Result<ep_context_report> {
    auto s = o.input_path.empty() ? S::create(o.input_bytes, so, std::move(providers))
                                  : S::create(o.input_path, so, std::move(providers));
    if (!s) return s.status();
    return s->ep_context();  // the session goes before its files move
  });
}

template <class... P>
Result<ep_context_report> compile_model(const compile_options& o, typename session<P...>::providers_type providers) {
  return compile_model_for<session<P...>>(o, std::move(providers));
}

}  // namespace epstack
