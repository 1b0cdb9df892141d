// epstack perf: the measurement protocol of shared/bench/inputs.md (the ONNX Runtime peer harness's), so that
// compare.py can put the two engines side by side: one JSON line on stdout, progress on stderr.
#include "cli.hpp"

#include <epstack/testing/bench_inputs.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <map>
#include <numeric>
#include <limits>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

namespace epstack::cli {

Result<bench::input_rule> input_rule_from(const args& a);
Result<std::vector<named_tensor>> generated_inputs(const std::vector<io_info>& infos, const bench::input_rule& rule,
                                                   std::vector<std::string>& warnings);

namespace {
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}
double current_rss_mib() {
  std::ifstream f("/proc/self/statm");
  long long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1048576.0;
}
double peak_rss_mib() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux: KiB
}
// The CPU time this process has used (every thread, user and system), in seconds.
double self_cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
double self_cpu_ticks() { return self_cpu_seconds() * static_cast<double>(::sysconf(_SC_CLK_TCK)); }
struct cpu_sample {
  double busy = 0, total = 0, self = 0;
};
// The machine's CPU time from /proc/stat (all CPUs), as the peer harness counts it: user+nice+system+irq busy.
cpu_sample sample_cpu() {
  cpu_sample s;
  std::ifstream f("/proc/stat");
  std::string label;
  double user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0;
  f >> label >> user >> nice >> sys >> idle >> iowait >> irq;
  s.busy = user + nice + sys + irq;
  s.total = s.busy + idle;
  s.self = self_cpu_ticks();
  return s;
}
std::optional<double> foreign_cpu_pct(const cpu_sample& a, const cpu_sample& b) {
  const double total = b.total - a.total;
  if (total <= 0) return std::nullopt;
  return std::clamp(100.0 * (b.busy - a.busy - (b.self - a.self)) / total, 0.0, 100.0);
}
double loadavg1() {
  double l[1] = {0};
  return ::getloadavg(l, 1) == 1 ? l[0] : 0.0;
}
std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      auto s = line.substr(p + 1);
      s.erase(0, s.find_first_not_of(' '));
      return s;
    }
  return "unknown";
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto k = static_cast<std::size_t>(std::max(0.0, std::ceil(p / 100.0 * static_cast<double>(v.size())) - 1));
  return v[std::min(k, v.size() - 1)];
}
std::string safe_name(const std::string& s) {
  std::string r = s;
  for (auto& c : r)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return r;
}
const char* dtype_name(element_type e) {
  switch (e) {
    case element_type::float32: return "float32";
    case element_type::float64: return "float64";
    case element_type::int64: return "int64";
    case element_type::int32: return "int32";
    case element_type::int16: return "int16";
    case element_type::int8: return "int8";
    case element_type::uint8: return "uint8";
    case element_type::uint16: return "uint16";
    case element_type::uint32: return "uint32";
    case element_type::uint64: return "uint64";
    case element_type::boolean: return "bool";
    default: return nullptr;
  }
}
// One raw file of a dump and its manifest entry.
Status dump(json& j, const fs::path& dir, const std::string& prefix, std::size_t idx, const std::string& name, const ivalue& v) {
  j.begin_object().key("name").value(name);
  if (!v.is_tensor() || dtype_name(v.as_tensor().type()) == nullptr) {
    j.key("file").null().key("note").value("non-numeric value not written").end_object();
    return {};
  }
  const tensor& t = v.as_tensor();
  j.key("dtype").value(dtype_name(t.type())).key("dims").begin_array();
  for (auto d : t.sizes()) j.value(static_cast<long long>(d));
  j.end_array();
  const std::string file = prefix + "_" + std::to_string(idx) + "_" + safe_name(name) + ".bin";
  std::ofstream f(dir / file, std::ios::binary);
  f.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.byte_size()));
  if (!f) return Status(errc::fail, "cannot write '" + (dir / file).string() + "'");
  j.key("file").value(file).end_object();
  return {};
}

// Per-op-type totals and the costliest steps, per run, on stderr.
void print_profile(const std::vector<session_core::step_profile>& steps, double runs) {
  std::map<std::string, std::pair<double, std::uint64_t>> by_kind;
  double total = 0;
  for (const auto& s : steps) {
    by_kind[s.kind].first += s.total_ms;
    by_kind[s.kind].second += s.calls;
    total += s.total_ms;
  }
  std::vector<std::pair<std::string, std::pair<double, std::uint64_t>>> kinds(by_kind.begin(), by_kind.end());
  std::sort(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  char line[256];
  std::snprintf(line, sizeof line, "[epstack perf] profile: %.3f ms per run in %zu steps\n", total / runs, steps.size());
  std::cerr << line;
  for (const auto& [k, v] : kinds) {
    std::snprintf(line, sizeof line, "  %-40s %8.3f ms/run %5.1f%%  %6.1f calls/run\n", k.c_str(), v.first / runs,
                  100.0 * v.first / std::max(total, 1e-9), static_cast<double>(v.second) / runs);
    std::cerr << line;
  }
  std::cerr << "  costliest steps:\n";
  for (std::size_t i = 0; i < steps.size() && i < (std::getenv("EPSTACK_PROFILE_ALL") ? steps.size() : 12); ++i) {
    std::snprintf(line, sizeof line, "    %8.3f ms/run  %s\n", steps[i].total_ms / runs, steps[i].label.c_str());
    std::cerr << line;
  }
}

// The physical floor of a create: read() every byte of the model file and the context binaries it names, from the
// page cache, into one reused 1 MiB buffer (no mapping, no page faults of a destination). Returns the bytes read.
std::uint64_t read_files(const std::vector<std::string>& files) {
  static std::vector<char> buf(std::size_t{1} << 20);
  std::uint64_t total = 0;
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) total += static_cast<std::uint64_t>(n);
    ::close(fd);
  }
  return total;
}

struct perf_options {
  std::string model;
  int threads = 2, warmup = 5, iters = 50, creates = 5, gap_ms = 0;
  double max_seconds = 0;
  std::string out_dir, opt = "all", providers = "cpu";
};

template <class S>
int perf_with(const args& a, const perf_options& po) {
  warn_unknown_machine_class();
  auto so = session_options_from(a);
  if (!so) return fail(so.status());
  so->set_intra_op_threads(po.threads);
  if (a.flag("--profile")) so->enable_profiling();
  auto rule = input_rule_from(a);
  if (!rule) return fail(rule.status());
  const std::string model_name = fs::path(po.model).stem().string();
  const double baseline_rss = current_rss_mib();
  const double load_start = loadavg1();
  std::cerr << "[epstack perf] " << model_name << ": providers=" << po.providers << " threads=" << po.threads
            << " opt=" << po.opt << "\n";

  auto t0 = clock_type::now();
  auto s = S::create(po.model, *so, providers_for<S>(*so));
  if (!s) return fail(s.status());
  const double first_create_ms = ms_since(t0);
  std::vector<std::string> files{po.model};
  for (const auto& b : s->ep_context().binaries_read) files.push_back(b);

  std::vector<std::string> warnings;
  auto gen = generated_inputs(s->inputs(), *rule, warnings);
  if (!gen) return fail(gen.status());
  for (const auto& w : warnings) std::cerr << "[epstack perf] warning: " << w << "\n";
  std::vector<named_value> feeds;
  json dims_json;
  dims_json.begin_object();
  std::map<std::string, std::int64_t> used_dims;
  for (std::size_t k = 0; k < gen->size(); ++k) {
    const auto& info = s->inputs()[k];
    if (info.type.dims)
      for (std::size_t i = 0; i < info.type.dims->rank(); ++i)
        if (!(*info.type.dims)[i].param.empty()) used_dims[(*info.type.dims)[i].param] = (*gen)[k].value.sizes()[i];
    feeds.push_back({(*gen)[k].name, (*gen)[k].value});
  }
  for (const auto& [k, v] : used_dims) dims_json.key(k).value(static_cast<long long>(v));
  dims_json.end_object();

  Result<std::vector<ivalue>> out = std::vector<ivalue>{};
  // The first run on its own: what it does once (plans for new shapes, verifying an EP context's weights, pages
  // mapped in) is not in the medians.
  double first_run_ms = 0;
  for (int i = 0; i < po.warmup; ++i) {
    t0 = clock_type::now();
    out = s->run_values(feeds);
    if (i == 0) first_run_ms = ms_since(t0);
    if (!out) return fail(out.status());
  }
  std::vector<double> times;
  const auto cpu0 = sample_cpu();
  const double self0 = self_cpu_seconds();
  const auto loop0 = clock_type::now();
  for (int i = 0; i < po.iters; ++i) {
    t0 = clock_type::now();
    out = s->run_values(feeds);
    times.push_back(ms_since(t0));
    if (po.warmup == 0 && i == 0) first_run_ms = times.back();
    if (!out) return fail(out.status());
    // --gap-ms: an application that runs the model now and then; what the session's threads do in between (spin
    // or sleep: session.intra_op.allow_spinning) shows in the CPU time per run.
    if (po.gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(po.gap_ms));
    if (po.max_seconds > 0 && times.size() >= 3 && ms_since(loop0) / 1000.0 > po.max_seconds) break;
  }
  // The process's CPU time per timed run (every thread: the caller, the intra-op threads working and waiting).
  const double cpu_per_run_ms = (self_cpu_seconds() - self0) * 1e3 / static_cast<double>(times.size());
  if (const auto tf = a.get("--times")) {
    // Each timed run's milliseconds, one a line, in order (where a tail comes from: every other run, a burst...).
    std::ofstream f(*tf);
    for (double t : times) f << t << '\n';
    if (!f) return fail(Status(errc::fail, "perf: cannot write " + *tf));
  }
  const double peak_rss = peak_rss_mib();
  const double loop_ms = ms_since(loop0);
  // The activation plan: what the session's run arenas reserved (intermediates, and a fused partition's buffers).
  const double arena_mb = static_cast<double>(s->memory().arena_bytes) / (1024.0 * 1024.0);
  if (a.flag("--profile")) print_profile(s->profile(), static_cast<double>(po.warmup + static_cast<int>(times.size())));
  std::optional<double> foreign;
  if (loop_ms >= 1000) foreign = foreign_cpu_pct(cpu0, sample_cpu());
  if (foreign && *foreign > 10)
    std::cerr << "[epstack perf] warning: other processes used " << static_cast<int>(*foreign)
              << "% of the machine's CPU time during the timed runs\n";
  char line[128];
  std::snprintf(line, sizeof line, "%.3f ms over %zu runs, %.3f ms of CPU time a run", median(times), times.size(),
                cpu_per_run_ms);
  std::cerr << "[epstack perf] " << model_name << ": run median " << line << "\n";

  if (!po.out_dir.empty()) {
    const fs::path dir(po.out_dir);
    std::error_code ec;
    fs::create_directories(dir, ec);
    json m;
    m.begin_object().key("engine").value("epstack").key("version").value("0.1.0").key("model").value(model_name);
    m.key("model_file").value(fs::path(po.model).filename().string());
    m.key("providers").value(po.providers);
    m.key("dims").begin_object();
    for (const auto& [k, v] : used_dims) m.key(k).value(static_cast<long long>(v));
    m.end_object();
    m.key("seed").value(static_cast<long long>(rule->seed)).key("id_max").value(static_cast<long long>(rule->id_max));
    m.key("byte_order").value("little").key("inputs").begin_array();
    for (std::size_t k = 0; k < feeds.size(); ++k)
      if (auto st = dump(m, dir, "input", k, feeds[k].name, feeds[k].value); !st) return fail(st);
    m.end_array().key("outputs").begin_array();
    for (std::size_t k = 0; k < out->size(); ++k)
      if (auto st = dump(m, dir, "output", k, s->outputs()[k].name, (*out)[k]); !st) return fail(st);
    m.end_array().end_object();
    std::ofstream f(dir / "manifest.json");
    f << m.str() << "\n";
    if (!f) return fail(Status(errc::fail, "cannot write the manifest in '" + po.out_dir + "'"));
    std::cerr << "[epstack perf] " << model_name << ": wrote inputs/outputs + manifest.json to " << po.out_dir << "\n";
  }
  out = std::vector<ivalue>{};
  s = Status(errc::fail, "released");  // release the session before timing fresh creations

  std::vector<double> creates, reads;
  std::uint64_t read_bytes = 0;
  // Where a create's time goes: the milliseconds from its start to the first call of each preparation stage (the
  // progress callback), so each stage's share is the difference to the next one (the last one's to the end).
  std::vector<std::pair<std::string, std::vector<double>>> stages;
  {
    auto timed = *so;
    timed.set_progress_callback([&](const compile_progress& p) {
      const double at = ms_since(t0);
      auto it = std::find_if(stages.begin(), stages.end(), [&](const auto& s) { return s.first == p.stage; });
      if (it == stages.end()) it = stages.insert(stages.end(), {std::string(p.stage), {}});
      if (it->second.size() < creates.size() + 1) it->second.push_back(at);
      return true;
    });
    for (int i = 0; i < po.creates; ++i) {
      t0 = clock_type::now();
      auto c = S::create(po.model, timed, providers_for<S>(timed));
      if (!c) return fail(c.status());
      creates.push_back(ms_since(t0));
    }
  }
  for (int i = 0; i < po.creates; ++i) {  // after the creates: reading between them slows them down
    t0 = clock_type::now();
    read_bytes = read_files(files);
    reads.push_back(ms_since(t0));
  }

  json j;
  j.begin_object().key("engine").value("epstack").key("version").value("0.1.0").key("model").value(model_name);
  j.key("threads").value(po.threads).key("providers").value(po.providers);
  j.key("create_ms").begin_object();
  if (creates.empty()) j.key("median").null().key("min").null().key("max").null();
  else
    j.key("median").value(median(creates)).key("min").value(*std::min_element(creates.begin(), creates.end()))
        .key("max").value(*std::max_element(creates.begin(), creates.end()));
  j.end_object();
  // Each stage's median milliseconds from the start of a create, in order ("load" reads and checks the model).
  j.key("create_stages_ms").begin_object();
  for (const auto& [name, at] : stages)
    if (at.size() == creates.size()) j.key(name).value(median(at));
  j.end_object();
  // The floor a create from an EP context model is measured against (the same files' bytes, read in the same run).
  j.key("read_ms").begin_object();
  if (reads.empty()) j.key("median").null();
  else j.key("median").value(median(reads));
  j.key("bytes").value(static_cast<long long>(read_bytes)).key("files").value(static_cast<long long>(files.size()));
  j.end_object();
  j.key("run_ms").begin_object().key("median").value(median(times)).key("p90").value(percentile(times, 90));
  j.key("p99").value(percentile(times, 99));
  j.key("min").value(*std::min_element(times.begin(), times.end()));
  j.key("mean").value(std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size()));
  j.key("max").value(*std::max_element(times.begin(), times.end())).end_object();
  j.key("peak_rss_mb").value(peak_rss).key("baseline_rss_mb").value(baseline_rss).key("first_create_ms").value(first_create_ms);
  j.key("first_run_ms").value(first_run_ms);
  j.key("cpu_ms_per_run").value(cpu_per_run_ms).key("gap_ms").value(po.gap_ms);
  j.key("arena_mb").value(arena_mb);
  j.key("iters").value(times.size()).key("warmup").value(po.warmup).key("creates").value(creates.size());
  j.key("opt").value(po.opt).key("dims").begin_object();
  for (const auto& [k, v] : used_dims) j.key(k).value(static_cast<long long>(v));
  j.end_object();
  std::error_code ec;
  j.key("model_bytes").value(static_cast<long long>(fs::file_size(po.model, ec)));
  utsname u{};
  ::uname(&u);
  j.key("host").begin_object().key("platform").value(std::string(u.sysname) + "-" + u.machine);
  j.key("cpu").value(cpu_model()).key("logical_cpus").value(static_cast<int>(std::thread::hardware_concurrency()));
  j.key("loadavg_1m_start").value(load_start).key("loadavg_1m_end").value(loadavg1());
  j.key("foreign_cpu_pct");
  if (foreign) j.value(std::round(*foreign * 10) / 10, 1);
  else j.null();
  j.end_object();
  if (!warnings.empty()) {
    j.key("warnings").begin_array();
    for (const auto& w : warnings) j.value(w);
    j.end_array();
  }
  j.end_object();
  (void)dims_json;
  std::cout << j.str() << std::endl;
  return 0;
}

}  // namespace

int perf(const std::vector<std::string>& argv) {
  auto a = args::parse(argv, {"--model", "--providers", "--threads", "--warmup", "--iters", "--creates", "--dims",
                              "--out-dir", "--max-seconds", "--seed", "--id-max", "--opt", "--config", "--free-dims",
                              "--times", "--gap-ms"},
                       {"--profile"});
  if (!a) return usage_error(a.status().message());
  perf_options po;
  po.model = a->get("--model").value_or(a->positional.empty() ? std::string() : a->positional[0]);
  if (po.model.empty()) return usage_error("perf: --model is required");
  const auto int_opt = [&](const char* k, int& dst, int min) -> Status {
    if (auto v = a->get(k)) {
      EPSTACK_ASSIGN_OR_RETURN(auto n, to_int(*v, k));
      if (n < min) return Status(errc::invalid_argument, std::string(k) + " must be at least " + std::to_string(min));
      if (n > std::numeric_limits<int>::max())
        return Status(errc::invalid_argument, std::string(k) + " must be at most " + std::to_string(std::numeric_limits<int>::max()));
      dst = static_cast<int>(n);
    }
    return {};
  };
  for (auto [k, dst, min] : {std::tuple{"--threads", &po.threads, 1}, std::tuple{"--warmup", &po.warmup, 0},
                             std::tuple{"--iters", &po.iters, 1}, std::tuple{"--creates", &po.creates, 0},
                             std::tuple{"--gap-ms", &po.gap_ms, 0}})
    if (auto st = int_opt(k, *dst, min); !st) return usage_error(st.message());
  if (auto v = a->get("--max-seconds")) po.max_seconds = std::atof(v->c_str());
  po.out_dir = a->get("--out-dir").value_or("");
  po.opt = a->get("--opt").value_or("all");
  po.providers = a->get("--providers").value_or("cpu");
  int rc = 0;
  const auto st = with_stack(po.providers, [&](auto tag) { rc = perf_with<typename decltype(tag)::type>(*a, po); });
  return st ? rc : fail(st);
}

}  // namespace epstack::cli
