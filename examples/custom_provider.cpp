// A provider written from the contract alone (<epstack/provider/contract.hpp>): it fuses the connected Relu and Add
// nodes of float32 tensors of one shape into groups, runs each group as one compiled loop over the elements, takes
// part in a stack (the CPU provider runs the rest), and writes its compiled groups to an EP context and restores them
// without compiling. The program checks its answers against the CPU provider alone, and that the EPContext model
// loads without compiling; it exits 0 when all of that holds.
#include <epstack/epstack.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {
using namespace epstack;

// A compiled group: steps over slots. Slots [0, inputs) are the partition's inputs (from the caller, or constants
// restored from a context binary), the rest the values the steps write; `outputs` names the slots that leave.
struct program {
  struct step {
    std::uint8_t op;  // 'R' Relu, 'A' Add
    std::uint32_t a, b, out;
  };
  std::uint32_t inputs = 0, slots = 0;
  std::vector<step> steps;
  std::vector<std::uint32_t> outputs;
  std::vector<std::int64_t> sizes;  // every slot has these
  std::vector<tensor> constants;    // restored: the slots the caller does not give, by index (empty tensor: given)
};

Status run(const program& p, compute_context& ctx) {
  std::int64_t n = 1;
  for (auto d : p.sizes) n *= d;
  std::vector<const float*> in(p.slots, nullptr);
  std::vector<tensor> scratch(p.slots);
  for (std::uint32_t i = 0, next = 0; i < p.inputs; ++i) {
    const tensor& t = i < p.constants.size() && p.constants[i].type() == element_type::float32 ? p.constants[i]
                                                                                                  : ctx.input(next++);
    if (t.type() != element_type::float32 || std::int64_t(t.element_count()) != n)
      return Status(errc::invalid_argument, "relu_add: an input is not float32 of the compiled shape");
    in[i] = t.typed<float>();
  }
  for (const auto& s : p.steps) {
    scratch[s.out] = ctx.scratch(element_type::float32, static_cast<std::size_t>(n));
    float* y = scratch[s.out].typed<float>();
    const float* a = in[s.a];
    const float* b = in[s.b];
    if (s.op == 'R')
      for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] > 0.0f ? a[i] : 0.0f;
    else
      for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
    in[s.out] = y;
  }
  for (std::size_t k = 0; k < p.outputs.size(); ++k) {
    float* y = ctx.allocate_output(k, element_type::float32, p.sizes).typed<float>();
    std::memcpy(y, in[p.outputs[k]], static_cast<std::size_t>(n) * sizeof(float));
  }
  return {};
}

struct relu_add_provider {
  // Required: the opt-in, the key, get_capability, compile (and copyable).
  using provider_concept = execution_provider_tag;
  static constexpr std::string_view type_key = "ReluAddExecutionProvider";
  // Optional: the short name (`[model]_reluadd.bin`) and why a node was refused.
  static constexpr std::string_view short_name = "reluadd";

  // A node it runs: Relu, or Add of two inputs of the same known float32 shape.
  static bool takes(const graph& g, node_id n) { return why(g, n).empty(); }
  static std::string why(const graph& g, node_id n) {
    const auto& nd = g.node(n);
    if (!nd.domain.empty() || (nd.op_type != "Relu" && nd.op_type != "Add")) return "only Relu and Add";
    const auto& t0 = g.value(nd.inputs[0]).type;
    if (t0.elem != element_type::float32 || !t0.dims || !t0.dims->is_static()) return "needs float32 of a known shape";
    if (nd.op_type == "Add" && (nd.inputs.size() != 2 || !(g.value(nd.inputs[1]).type == t0)))
      return "Add without broadcasting only";
    return {};
  }
  [[nodiscard]] std::string why_not(const graph& g, node_id n) const { return why(g, n); }

  [[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>& v) const {
    // One group per connected set of nodes it takes (the partitioner splits a group that would make a cycle).
    const graph& g = v.graph();
    std::vector<int> group(g.node_count(), -1);
    std::vector<capability> caps;
    for (node_id seed : v.nodes()) {
      if (group[seed] >= 0 || !takes(g, seed)) continue;
      std::vector<node_id> members{seed}, frontier{seed};
      group[seed] = static_cast<int>(caps.size());
      while (!frontier.empty()) {
        const node_id n = frontier.back();
        frontier.pop_back();
        std::vector<node_id> near;
        for (value_id x : g.node(n).inputs)
          if (x != no_id && g.value(x).producer != no_id) near.push_back(g.value(x).producer);
        for (value_id x : g.node(n).outputs) near.insert(near.end(), g.value(x).consumers.begin(), g.value(x).consumers.end());
        for (node_id m : near)
          if (group[m] < 0 && v.contains(m) && takes(g, m)) {
            group[m] = group[seed];
            members.push_back(m);
            frontier.push_back(m);
          }
      }
      meta_def md;
      md.name = "relu_add";
      caps.push_back(capability::group(std::move(members), std::move(md)));
    }
    return caps;
  }

  [[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition> parts) const {
    std::vector<compute_function> fns;
    for (const auto& part : parts) {
      EPSTACK_ASSIGN_OR_RETURN(auto p, plan(part));
      fns.push_back([p = std::make_shared<const program>(std::move(p))](compute_context& ctx) { return run(*p, ctx); });
    }
    return fns;
  }

  // EP context: the opt-in and every member it asks for.
  using ep_context_concept = ep_context_tag;
  static constexpr std::array<std::string_view, 1> source_keys{type_key};
  static constexpr bool multi_graph_context = true;
  [[nodiscard]] std::string ep_sdk_version() const { return "relu-add 1.0"; }
  [[nodiscard]] std::string hardware_architecture() const { return "any"; }

  // The program as words (u32, little-endian on the machines this example runs on): inputs, slots, the shape, the
  // steps, the outputs, then for each input whether it is a constant and which tensor of the record holds it.
  [[nodiscard]] Result<ep_context_record> serialize(const partition& part, const compute_function&,
                                                    ep_context_builder& b) const {
    EPSTACK_ASSIGN_OR_RETURN(auto p, plan(part));
    ep_context_record rec;
    std::vector<std::uint32_t> w{p.inputs, p.slots, std::uint32_t(p.sizes.size())};
    for (auto d : p.sizes) w.push_back(static_cast<std::uint32_t>(d));
    w.push_back(std::uint32_t(p.steps.size()));
    for (const auto& s : p.steps) w.insert(w.end(), {s.op, s.a, s.b, s.out});
    w.push_back(std::uint32_t(p.outputs.size()));
    w.insert(w.end(), p.outputs.begin(), p.outputs.end());
    const graph& g = *part.g;
    for (value_id v : part.inputs) {
      const auto& init = g.value(v).initializer;
      if (!init) {
        w.push_back(0);
        continue;
      }
      const auto idx = b.add_tensor(g.value(v).name, init->type(), init->sizes(),
                                    std::span<const std::byte>(static_cast<const std::byte*>(init->data()), init->byte_size()));
      w.insert(w.end(), {1u, static_cast<std::uint32_t>(rec.tensors.size())});
      rec.tensors.push_back(idx);
    }
    rec.payload.resize(w.size() * 4);
    std::memcpy(rec.payload.data(), w.data(), rec.payload.size());
    return rec;
  }

  // Untrusted input: every count and index is checked before use.
  [[nodiscard]] Result<compute_function> restore(const ep_context_restore& r) const {
    const auto& bytes = r.graph->payload;
    const auto bad = [] { return Status(errc::invalid_graph, "relu_add context: malformed payload"); };
    if (bytes.size() % 4 != 0) return bad();
    std::vector<std::uint32_t> w(bytes.size() / 4);
    std::memcpy(w.data(), bytes.data(), bytes.size());
    std::size_t at = 0;
    const auto next = [&](std::uint32_t& x) { return at < w.size() ? (x = w[at++], true) : false; };
    program p;
    std::uint32_t rank = 0, count = 0;
    if (!next(p.inputs) || !next(p.slots) || !next(rank) || p.inputs > p.slots || p.slots > (1u << 20) || rank > 8) return bad();
    for (std::uint32_t i = 0, d = 0; i < rank; ++i) {
      if (!next(d)) return bad();
      p.sizes.push_back(d);
    }
    if (!next(count) || count > w.size()) return bad();
    for (std::uint32_t i = 0; i < count; ++i) {
      program::step s{};
      std::uint32_t op = 0;
      if (!next(op) || !next(s.a) || !next(s.b) || !next(s.out)) return bad();
      s.op = static_cast<std::uint8_t>(op);
      if ((s.op != 'R' && s.op != 'A') || s.a >= s.out || s.b >= s.out || s.out >= p.slots) return bad();
      p.steps.push_back(s);
    }
    if (!next(count) || count > w.size()) return bad();
    for (std::uint32_t i = 0, o = 0; i < count; ++i) {
      if (!next(o) || o >= p.slots) return bad();
      p.outputs.push_back(o);
    }
    const auto tensors = r.tensors();
    std::int64_t n = 1;
    for (auto d : p.sizes) n *= d;
    p.constants.resize(p.inputs);
    for (std::uint32_t i = 0, is_const = 0; i < p.inputs; ++i) {
      if (!next(is_const)) return bad();
      if (is_const == 0) continue;
      std::uint32_t k = 0;
      if (!next(k) || k >= tensors.size() || tensors[k]->type != element_type::float32 ||
          tensors[k]->data.size() != static_cast<std::size_t>(n) * sizeof(float))
        return bad();
      // A copy keeps the example short; epstack's oneDNN provider reads mapped weights in place.
      p.constants[i] = tensor(element_type::float32, p.sizes);
      std::memcpy(p.constants[i].mutable_data(), tensors[k]->data.data(), tensors[k]->data.size());
    }
    if (at != w.size()) return bad();
    return compute_function([p = std::make_shared<const program>(std::move(p))](compute_context& ctx) { return run(*p, ctx); });
  }

 private:
  // Slots: the partition's inputs in order, then each node's output as the nodes come (topological order).
  static Result<program> plan(const partition& part) {
    const graph& g = *part.g;
    program p;
    std::vector<std::int64_t> slot(g.value_count(), -1);
    for (value_id v : part.inputs) slot[v] = p.slots++;
    p.inputs = p.slots;
    for (node_id n : part.nodes) {
      const auto& nd = g.node(n);
      if (!takes(g, n)) return Status(errc::ep_fail, "relu_add: node " + g.describe(n) + ": " + why(g, n));
      if (p.sizes.empty()) p.sizes = *g.value(nd.inputs[0]).type.dims->sizes();
      const value_id b = nd.op_type == "Add" ? nd.inputs[1] : nd.inputs[0];
      if (slot[nd.inputs[0]] < 0 || slot[b] < 0) return Status(errc::ep_fail, "relu_add: an input has no slot");
      slot[nd.outputs[0]] = p.slots++;
      p.steps.push_back({static_cast<std::uint8_t>(nd.op_type == "Relu" ? 'R' : 'A'), std::uint32_t(slot[nd.inputs[0]]),
                         std::uint32_t(slot[b]), std::uint32_t(slot[nd.outputs[0]])});
    }
    for (value_id v : part.outputs) p.outputs.push_back(std::uint32_t(slot[v]));
    return p;
  }
};
static_assert(ep_context_provider<relu_add_provider>);

// A node of `type` named `name` (designated initializers would leave the other members to -Wextra's complaint).
epstack::node op(const char* name, const char* type) {
  epstack::node n;
  n.name = name;
  n.op_type = type;
  return n;
}

// y = Sigmoid(Relu(x + w) + x): Add, Relu and the second Add fuse; Sigmoid runs on the CPU provider.
model make_model() {
  model m;
  m.opsets = {{"", 17}};
  m.graph.set_name("relu_add_example");
  const auto t = type_info::tensor_of(element_type::float32, shape{2, 4});
  m.graph.add_input("x", t);
  std::vector<float> w(8);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i) - 1.0f;
  m.graph.add_initializer("w", tensor::from<float>(std::vector<std::int64_t>{2, 4}, w));
  m.graph.add_node(op("add", "Add"), {"x", "w"}, {"s"});
  m.graph.add_node(op("relu", "Relu"), {"s"}, {"r"});
  m.graph.add_node(op("add2", "Add"), {"r", "x"}, {"q"});
  m.graph.add_node(op("sigmoid", "Sigmoid"), {"q"}, {"y"});
  m.graph.add_output("y", t);
  return m;
}

bool same(const tensor& a, const tensor& b) {
  if (a.element_count() != b.element_count()) return false;
  for (std::size_t i = 0; i < a.element_count(); ++i)
    if (!(std::fabs(a.typed<float>()[i] - b.typed<float>()[i]) <= 1e-6f)) return false;  // NaN fails
  return true;
}

int fail(const std::string& what) {
  std::cerr << "custom_provider: " << what << "\n";
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path dir = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / "epstack-custom-provider";
  fs::remove_all(dir);
  fs::create_directories(dir);
  if (auto st = save_model(make_model(), dir / "model.onnx"); !st) return fail(st.to_string());

  std::vector<float> xs(8);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = 0.5f * static_cast<float>(i) - 2.0f;
  const std::vector<named_tensor> feeds{{"x", tensor::from<float>(std::vector<std::int64_t>{2, 4}, xs)}};

  // The reference: the CPU provider alone.
  auto cpu = session<>::create(dir / "model.onnx");
  if (!cpu) return fail(cpu.status().to_string());
  auto want = cpu->run(feeds);
  if (!want) return fail(want.status().to_string());

  // The stack, generating the EPContext model as it compiles (what `compile_model` does too).
  session_options gen;
  gen.set_config(config_keys::ep_context_enable, "1");
  auto s = session<relu_add_provider>::create(dir / "model.onnx", gen);
  if (!s) return fail(s.status().to_string());
  std::cout << s->plan().to_table() << "\n";
  auto got = s->run(feeds);
  if (!got) return fail(got.status().to_string());
  if (!same((*got)[0], (*want)[0])) return fail("the stack's answer differs from the CPU provider's");
  if (s->ep_context().nodes_written != 1) return fail("expected one EPContext node written");

  // The EPContext model loads without compiling, and gives the same answer.
  auto loaded = session<relu_add_provider>::create(dir / "model_ctx.onnx");
  if (!loaded) return fail(loaded.status().to_string());
  if (loaded->ep_context().nodes_loaded != 1) return fail("expected one EPContext node restored");
  auto again = loaded->run(feeds);
  if (!again) return fail(again.status().to_string());
  if (!same((*again)[0], (*want)[0])) return fail("the restored context's answer differs");
  std::cout << "custom provider: same answers as the CPU provider; " << s->ep_context().binaries_written.size()
            << " context binary written, restored without compiling\n";
  fs::remove_all(dir);
  return 0;
}
