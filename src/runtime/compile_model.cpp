// compile_model's runtime-typed body (compile_model.hpp): checks, a working folder, the files moved into place.
#include <epstack/runtime/compile_model.hpp>

#include <algorithm>
#include <fstream>
#include <system_error>

#include <unistd.h>

namespace epstack {
namespace {
Result<std::filesystem::path> make_temp_folder(const std::filesystem::path& beside) {
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

Status read_back(const std::filesystem::path& p, std::vector<std::byte>& bytes) {
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  if (!f) return Status(errc::fail, "compile_model: cannot read back '" + p.string() + "'");
  bytes.resize(static_cast<std::size_t>(f.tellg()));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) return Status(errc::fail, "compile_model: cannot read back '" + p.string() + "'");
  return {};
}

// The written files to the application's functions or buffer, or moved from the working folder into place.
Result<ep_context_report> place_outputs(const compile_options& o, const std::filesystem::path& work,
                                        const std::filesystem::path& out, const std::filesystem::path& final_path,
                                        ep_context_report report) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Context binaries to the application's write function, under the names the model gives them; none stays here.
  if (o.write_context) {
    for (auto& b : report.binaries_written) {
      const fs::path in_work = work / b.filename();
      std::vector<std::byte> bytes;
      EPSTACK_RETURN_IF_ERROR(read_back(in_work, bytes));
      EPSTACK_RETURN_IF_ERROR(o.write_context(b.filename().string(), bytes).with_context("compile_model: the context write function"));
      fs::remove(in_work, ec);
    }
    report.binaries_written.clear();
  }
  if (o.output_buffer != nullptr || o.write_model) {
    std::vector<std::byte> local;
    std::vector<std::byte>& bytes = o.output_buffer != nullptr ? *o.output_buffer : local;
    EPSTACK_RETURN_IF_ERROR(read_back(out, bytes));
    if (o.write_model) EPSTACK_RETURN_IF_ERROR(o.write_model(bytes).with_context("compile_model: the model write function"));
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

}  // namespace

Result<ep_context_report> compile_model_with(const compile_options& o, const session_runner& create_session) {
  namespace fs = std::filesystem;
  if (o.input_path.empty() == o.input_bytes.empty())
    return Status(errc::invalid_argument, "compile_model: give exactly one input, a path or a buffer");
  if (int(!o.output_path.empty()) + int(o.output_buffer != nullptr) + int(bool(o.write_model)) != 1)
    return Status(errc::invalid_argument, "compile_model: give exactly one output, a path, a buffer or a write function");
  if (o.write_model && o.embed_mode == 0 && !o.write_context && o.format != compile_format::deploy)
    return Status(errc::invalid_argument, "compile_model: a model write function with embed_mode 0 needs a context "
                                          "write function for the binaries (or embed_mode 1)");
  if (o.write_model && !o.external_initializers_file.empty())
    return Status(errc::invalid_argument, "compile_model: a model write function takes the whole model: an external "
                                          "initializers file ('" + o.external_initializers_file + "') needs an output path");
  const bool deploy = o.format == compile_format::deploy;
  if (deploy && o.write_context)
    return Status(errc::invalid_argument, "compile_model: a deployment model holds its compiled partitions: a context "
                                          "write function does not apply");
  if (deploy && !o.external_initializers_file.empty())
    return Status(errc::invalid_argument, "compile_model: a deployment model holds its weights: an external initializers "
                                          "file ('" + o.external_initializers_file + "') does not apply");
  if (o.embed_mode != 0 && o.embed_mode != 1)
    return Status(errc::invalid_argument, "compile_model: embed_mode must be 0 or 1");
  if (o.output_buffer != nullptr && o.embed_mode != 1 && !deploy)
    return Status(errc::invalid_argument,
                  "compile_model: an output buffer needs embed_mode 1 (context binaries need a folder beside the model)");
  if (o.output_buffer != nullptr && !o.external_initializers_file.empty())
    return Status(errc::invalid_argument, "compile_model: an output buffer holds the whole model: an external "
                                          "initializers file ('" + o.external_initializers_file +
                                              "') needs an output path");
  std::error_code ec;
  const fs::path final_path = o.output_path.empty() ? fs::path() : fs::absolute(o.output_path, ec);
  if (!final_path.empty() && (!final_path.has_extension() || fs::is_directory(final_path, ec)))
    return Status(errc::invalid_argument, "compile_model: the output path should not point to a folder: '" +
                                              o.output_path.string() + "'");
  if (!final_path.empty() && o.error_if_output_file_exists && fs::exists(final_path, ec))
    return Status(errc::invalid_argument, "compile_model: '" + final_path.string() + "' exists already");
  const fs::path beside = final_path.empty() ? fs::temp_directory_path() : final_path.parent_path();
  EPSTACK_ASSIGN_OR_RETURN(auto work, make_temp_folder(beside));
  folder_guard guard{work};
  const fs::path out = work / (final_path.empty() ? fs::path(deploy ? "model.deploy" : "model_ctx.onnx") : final_path.filename());

  session_options so = o.session;
  if (deploy) {
    so.set_config(config_keys::deploy_file_path, out.string());
    if (o.progress) so.set_progress_callback(o.progress);
    EPSTACK_ASSIGN_OR_RETURN(ep_context_report report, create_session(so));
    if (report.model_written.empty()) return Status(errc::fail, "compile_model: the session wrote no deployment model");
    if (report.nodes_written == 0 && o.error_if_no_nodes_compiled)
      return Status(errc::ep_fail, "compile_model: no provider of the stack compiled any node of the model");
    return place_outputs(o, work, out, final_path, std::move(report));
  }
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
  EPSTACK_ASSIGN_OR_RETURN(ep_context_report report, create_session(so));
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
  return place_outputs(o, work, out, final_path, std::move(report));
}



}  // namespace epstack
