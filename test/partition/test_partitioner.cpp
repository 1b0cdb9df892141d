#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/partition/partitioner.hpp>
#include <epstack/provider/cost_model.hpp>

#include "../support/test_providers.hpp"

#include "../support/graphs.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

using namespace epstack;
using test::op;
using test::ops_provider;
using test::scripted_provider;
using test::test_cpu_provider;

namespace {


// x -> a(Relu) -> b(Exp) -> c(Neg) -> d(Add, with x) -> y
graph chain() {
  graph g("chain");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{4}));
  g.add_node(op("a", "Relu"), {"x"}, {"va"});
  g.add_node(op("b", "Exp"), {"va"}, {"vb"});
  g.add_node(op("c", "Neg"), {"vb"}, {"vc"});
  g.add_node(op("d", "Add"), {"vc", "x"}, {"y"});
  g.add_output("y");
  return g;
}

meta_def meta(std::string name) {
  meta_def m;
  m.name = std::move(name);
  return m;
}

using prov_a = scripted_provider<"AExecutionProvider">;
using prov_b = scripted_provider<"BExecutionProvider">;

// Every edge between partitions goes forward in the execution order.
void check_order(const graph_plan& gp) {
  std::vector<std::size_t> pos(gp.partitions.size());
  REQUIRE(gp.execution_order.size() == gp.partitions.size());
  for (std::size_t i = 0; i < gp.execution_order.size(); ++i) pos[gp.execution_order[i]] = i;
  for (const auto& f : gp.g->flows()) {
    const auto a = gp.nodes[f.from].partition, b = gp.nodes[f.to].partition;
    if (a != b) CHECK(pos[a] < pos[b]);
  }
}

}  // namespace

static_assert(execution_provider<prov_a>);
static_assert(execution_provider<test_cpu_provider>);
static_assert(!execution_provider<int>);

TEST_CASE("no provider at all is invalid_argument") {
  auto g = chain();
  auto r = partition_graph(g, {});
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.status().message() == "No provider specified");
}

TEST_CASE("providers are asked in priority order and single nodes go first come first served") {
  auto g = chain();
  ops_provider<"AExecutionProvider"> a{{"Relu", "Exp"}};
  ops_provider<"BExecutionProvider"> b{{"Exp", "Neg"}};
  auto plan = partition_with(g, std::tuple{a, b, test_cpu_provider{}});
  REQUIRE_MESSAGE(plan.has_value(), plan.status().to_string());
  const auto& gp = plan->main;
  CHECK(plan->providers == std::vector<std::string>{"AExecutionProvider", "BExecutionProvider", "CPUExecutionProvider"});
  CHECK(gp.nodes[0].provider == 0);  // Relu: A
  CHECK(gp.nodes[1].provider == 0);  // Exp: A first, B too late
  CHECK(gp.nodes[2].provider == 1);  // Neg: B
  CHECK(gp.nodes[3].provider == 2);  // Add: the CPU fallback
  CHECK(gp.partitions.size() == 4);
  CHECK(gp.partitions[0].name == "a");  // single partitions keep the node's name
  CHECK_FALSE(gp.partitions[0].is_fused());
  CHECK(gp.nodes[3].fallback_reason == "no provider before the CPU provider claimed it");
  CHECK(plan->fallback_count() == 1);
  check_order(gp);
}

TEST_CASE("a group becomes one fused partition named <type>_<meta>_<n> with its boundary") {
  auto g = chain();
  prov_a a;
  a.script = [](const graph_view<graph>&) { return std::vector<capability>{capability::group({1, 2}, meta("exp_neg"))}; };
  auto plan = partition_with(g, std::tuple{a, test_cpu_provider{}});
  REQUIRE(plan.has_value());
  const auto& gp = plan->main;
  REQUIRE(gp.partitions.size() == 3);  // the group, then the CPU's a and d
  const auto& fused = gp.partitions[0];
  CHECK(fused.is_fused());
  CHECK(fused.name == "AExecutionProvider_exp_neg_0");
  CHECK(fused.nodes == std::vector<node_id>{1, 2});
  REQUIRE(fused.inputs.size() == 1);
  CHECK(g.value(fused.inputs[0]).name == "va");
  REQUIRE(fused.outputs.size() == 1);
  CHECK(g.value(fused.outputs[0]).name == "vc");
  CHECK(fused.meta->inputs == std::vector<std::string>{"va"});
  CHECK(fused.meta->outputs == std::vector<std::string>{"vc"});
  check_order(gp);
  const auto table = plan->to_table();
  CHECK(table.find("partition AExecutionProvider_exp_neg_0 [AExecutionProvider]: 2 nodes, 1 inputs, 1 outputs") !=
        std::string::npos);
  CHECK(table.find("'b' (Exp) -> AExecutionProvider in AExecutionProvider_exp_neg_0") != std::string::npos);
  const auto dot = plan->to_dot();
  CHECK(dot.rfind("digraph partition_plan {", 0) == 0);
  CHECK(dot.find("subgraph cluster_p0 { label=\"AExecutionProvider_exp_neg_0\"") != std::string::npos);
  CHECK(dot.find("n1 -> n2 [label=\"vb\"") != std::string::npos);
}

TEST_CASE("a group overlapping nodes already taken is skipped whole and the plan says why") {
  auto g = chain();
  prov_a a;
  a.script = [](const graph_view<graph>&) { return std::vector<capability>{capability::single(1)}; };
  prov_b b;
  b.script = [](const graph_view<graph>& v) {
    CHECK_FALSE(v.contains(1));  // B sees only the nodes still unassigned
    return std::vector<capability>{capability::group({0, 1, 2}, meta("big"))};
  };
  auto plan = partition_with(g, std::tuple{a, b, test_cpu_provider{}});
  REQUIRE(plan.has_value());
  const auto& gp = plan->main;
  CHECK(gp.nodes[0].provider == 2);
  CHECK(gp.nodes[2].provider == 2);
  REQUIRE(gp.refused.size() == 1);
  CHECK(gp.refused[0].meta_name == "big");
  CHECK(gp.refused[0].reason == "node 'b' (Exp) is already assigned to AExecutionProvider");
  CHECK(gp.nodes[0].fallback_reason ==
        "group 'big' of BExecutionProvider was refused: node 'b' (Exp) is already assigned to AExecutionProvider");
}

TEST_CASE("a provider's own single nodes join its group") {
  auto g = chain();
  prov_a a;
  a.script = [](const graph_view<graph>&) {
    return std::vector<capability>{capability::single(1), capability::group({1, 2}, meta("g"))};
  };
  auto plan = partition_with(g, std::tuple{a, test_cpu_provider{}});
  REQUIRE(plan.has_value());
  CHECK(plan->main.nodes[1].partition == plan->main.nodes[2].partition);
  CHECK(plan->main.partitions[plan->main.nodes[1].partition].is_fused());
  CHECK(plan->main.partitions.size() == 3);
  check_order(plan->main);
}

TEST_CASE("a group that would make the graph cyclic is split into acyclic pieces") {
  // a -> b -> c: fusing {a, c} without b would give fused -> b -> fused.
  auto g = chain();
  prov_a a;
  a.script = [](const graph_view<graph>&) { return std::vector<capability>{capability::group({0, 2}, meta("ac"))}; };
  auto plan = partition_with(g, std::tuple{a, test_cpu_provider{}});
  REQUIRE(plan.has_value());
  const auto& gp = plan->main;
  REQUIRE(gp.refused.size() == 1);
  CHECK(gp.refused[0].pieces == 2);
  CHECK(gp.refused[0].reason == "fused whole, it would make the graph cyclic");
  CHECK(gp.nodes[0].partition != gp.nodes[2].partition);
  CHECK(gp.partitions[gp.nodes[0].partition].name == "AExecutionProvider_ac_part0_0");
  CHECK(gp.partitions[gp.nodes[2].partition].name == "AExecutionProvider_ac_part1_1");
  check_order(gp);
  CHECK(plan->to_table().find("split group 'ac' of AExecutionProvider (2 nodes): fused whole, it would make the graph "
                              "cyclic; taken as 2 acyclic pieces") != std::string::npos);
}

TEST_CASE("two groups that are acyclic alone but cyclic together are caught") {
  // x -> p -> q -> t and x -> r -> s -> t.
  graph g("pair");
  g.add_input("x");
  g.add_node(op("p", "Relu"), {"x"}, {"vp"});
  g.add_node(op("q", "Exp"), {"vp"}, {"vq"});
  g.add_node(op("r", "Neg"), {"x"}, {"vr"});
  g.add_node(op("s", "Add"), {"vr", "x"}, {"vs"});
  g.add_node(op("t", "Add"), {"vq", "vs"}, {"y"});
  g.add_output("y");
  // G1 = {p, s} is acyclic alone (no path p ~> s outside); G2 = {q, r} too. Together: G1 -> G2 (p -> q) and
  // G2 -> G1 (r -> s): a cycle. The partitioner checks the second group against the first.
  prov_a a;
  a.script = [](const graph_view<graph>&) {
    return std::vector<capability>{capability::group({0, 3}, meta("ps")), capability::group({1, 2}, meta("qr"))};
  };
  auto plan = partition_with(g, std::tuple{a, test_cpu_provider{}});
  REQUIRE(plan.has_value());
  const auto& gp = plan->main;
  CHECK(gp.nodes[0].partition == gp.nodes[3].partition);  // the first group was taken whole
  CHECK(gp.nodes[1].partition != gp.nodes[2].partition);  // the second was split
  REQUIRE(gp.refused.size() == 1);
  CHECK(gp.refused[0].meta_name == "qr");
  check_order(gp);
}

TEST_CASE("fused names are unique model-wide and subgraphs are partitioned before their parent") {
  graph body("body");
  body.add_node(op("inner_relu", "Relu"), {"x"}, {"r1"});
  body.add_node(op("inner_exp", "Exp"), {"r1"}, {"r"});
  body.add_output("r");
  graph g("main");
  g.add_input("cond");
  g.add_input("x");
  g.add_node(op("pre", "Relu"), {"x"}, {"px"});
  g.add_node(op("post", "Exp"), {"px"}, {"py"});
  node ifn = op("if", "If");
  ifn.attributes.set("then_branch", make_subgraph(body));
  ifn.attributes.set("else_branch", make_subgraph(body));
  g.add_node(std::move(ifn), {"cond"}, {"y"});
  g.add_output("y");
  g.add_output("py");
  REQUIRE(validate(g).is_ok());

  prov_a a;
  a.script = [](const graph_view<graph>& v) {
    std::vector<node_id> relu_exp;
    for (node_id n : v.nodes())
      if (v.graph().node(n).op_type != "If") relu_exp.push_back(n);
    return std::vector<capability>{capability::group(relu_exp, meta("blk"))};
  };
  auto plan = partition_with(g, std::tuple{a, test_cpu_provider{}});
  REQUIRE_MESSAGE(plan.has_value(), plan.status().to_string());
  CHECK(*a.asked == std::vector<std::string>{"body", "body", "main"});
  REQUIRE(plan->main.subgraphs.size() == 2);
  std::vector<std::string> names;
  for (const auto& s : plan->main.subgraphs)
    for (const auto& p : s.plan->partitions) names.push_back(p.name);
  for (const auto& p : plan->main.partitions) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"AExecutionProvider_blk_0", "AExecutionProvider_blk_1",
                                          "AExecutionProvider_blk_2", "if"});
  // In the subgraph the outer value x is an input of the fused partition.
  const auto& sp = plan->main.subgraphs[0].plan->partitions[0];
  REQUIRE(sp.inputs.size() == 1);
  CHECK(body.value(sp.inputs[0]).name == "x");
  CHECK(plan->to_table().find("subgraph of 'if' (If) attribute 'then_branch':") != std::string::npos);
}

TEST_CASE("nodes no provider takes are not_implemented, naming them and the stack") {
  auto g = chain();
  ops_provider<"AExecutionProvider"> a{{"Relu", "Exp", "Neg"}};
  auto r = partition_with(g, std::tuple{a});
  CHECK(r.code() == errc::not_implemented);
  CHECK(r.status().message() == "graph 'chain': no provider of the stack [AExecutionProvider] can run: 'd' (Add)");
}

TEST_CASE("session.disable_cpu_ep_fallback fails when nodes are left for the CPU provider") {
  auto g = chain();
  ops_provider<"AExecutionProvider"> a{{"Relu", "Exp"}};
  partition_options o;
  o.disable_cpu_fallback = true;
  auto r = partition_with(g, std::tuple{a, test_cpu_provider{}}, o);
  CHECK(r.code() == errc::fail);
  CHECK(r.status().message().find("'c' (Neg), 'd' (Add)") != std::string::npos);
  // A stack of the CPU provider alone has nothing to fall back from.
  CHECK(partition_with(g, std::tuple{test_cpu_provider{}}, o).has_value());
}

TEST_CASE("explicit meta inputs and outputs are kept in order and unknown names are ep_fail") {
  auto g = chain();
  prov_a a;
  a.script = [](const graph_view<graph>&) {
    meta_def m = meta("ordered");
    m.inputs = {"x", "vb"};
    m.outputs = {"y"};
    return std::vector<capability>{capability::group({2, 3}, m)};
  };
  auto plan = partition_with(g, std::tuple{a, test_cpu_provider{}});
  REQUIRE(plan.has_value());
  const auto& p = plan->main.partitions[0];
  CHECK(p.meta->inputs == std::vector<std::string>{"x", "vb"});

  prov_a bad;
  bad.script = [](const graph_view<graph>&) {
    meta_def m = meta("bad");
    m.inputs = {"nowhere"};
    return std::vector<capability>{capability::group({2}, m)};
  };
  auto r = partition_with(g, std::tuple{bad, test_cpu_provider{}});
  CHECK(r.code() == errc::ep_fail);
  CHECK(r.status().message().find("names value 'nowhere'") != std::string::npos);
}

TEST_CASE("a provider answering nonsense is ep_fail") {
  auto g = chain();
  prov_a out_of_range;
  out_of_range.script = [](const graph_view<graph>&) { return std::vector<capability>{capability::single(99)}; };
  CHECK(partition_with(g, std::tuple{out_of_range}).status().message() ==
        "provider AExecutionProvider returned node 99, but graph 'chain' has 4 nodes");
  prov_a two_singles;
  two_singles.script = [](const graph_view<graph>&) { return std::vector<capability>{capability{{0, 1}, std::nullopt}}; };
  CHECK(partition_with(g, std::tuple{two_singles}).code() == errc::ep_fail);
}

TEST_CASE("compiled partitions run: the fused and single functions compute the chain") {
  auto g = chain();
  prov_a a;
  a.script = [](const graph_view<graph>&) { return std::vector<capability>{capability::group({0, 1, 2}, meta("abc"))}; };
  auto plan = partition_with(g, std::tuple{a, test_cpu_provider{}});
  REQUIRE(plan.has_value());
  const auto& gp = plan->main;
  // Compile each provider's partitions in one call, as the session will.
  std::vector<partition> for_a, for_cpu;
  for (std::size_t k = 0; k < gp.partitions.size(); ++k) (gp.partition_provider[k] == 0 ? for_a : for_cpu).push_back(gp.partitions[k]);
  auto fa = a.compile(for_a);
  auto fc = test_cpu_provider{}.compile(for_cpu);
  REQUIRE(fa.has_value());
  REQUIRE(fc.has_value());
  CHECK(*a.compile_calls == 1);
  std::vector<tensor> env(g.value_count());
  env[g.find_value("x")] = tensor::from<float>({4}, {-1.0f, 0.0f, 1.0f, 2.0f});
  std::size_t ia = 0, ic = 0;
  for (std::size_t k : gp.execution_order) {
    const auto& part = gp.partitions[k];
    std::vector<ivalue> ins, outs(part.outputs.size());
    for (auto v : part.inputs) ins.emplace_back(env[v]);
    compute_context ctx(ins, outs);
    const auto& fn = gp.partition_provider[k] == 0 ? (*fa)[ia++] : (*fc)[ic++];
    REQUIRE(fn(ctx).is_ok());
    for (std::size_t i = 0; i < outs.size(); ++i) env[part.outputs[i]] = outs[i].as_tensor();
  }
  const auto y = env[g.find_value("y")].view<float>();
  const float xs[] = {-1, 0, 1, 2};
  for (int i = 0; i < 4; ++i) CHECK(y[i] == doctest::Approx(-std::exp(std::max(0.0f, xs[i])) + xs[i]));
}

namespace {

// A provider claiming what its script says, with a cost per node (microseconds; negative: unknown).
template <test::fixed_string Key>
struct costed_provider : scripted_provider<Key> {
  double per_node = 1;
  double per_group = 0;
  [[nodiscard]] double estimate_cost(const graph&, std::span<const node_id> nodes) const {
    return per_node < 0 ? -1 : per_group + per_node * static_cast<double>(nodes.size());
  }
};
// The CPU fallback taking every node singly, at a cost per node.
struct costed_cpu : test_cpu_provider {
  double per_node = 1;
  [[nodiscard]] double estimate_cost(const graph&, std::span<const node_id> nodes) const {
    return per_node * static_cast<double>(nodes.size());
  }
};

using costed_a = costed_provider<"AExecutionProvider">;
static_assert(provider_traits<costed_a>::has_cost_estimate);
static_assert(!provider_traits<prov_a>::has_cost_estimate);

costed_a group_of_b_and_c(double per_node, double per_group = 0) {
  costed_a a;
  a.per_node = per_node;
  a.per_group = per_group;
  a.script = [](const graph_view<graph>& v) {
    std::vector<capability> r;
    if (v.contains(1) && v.contains(2)) r.push_back(capability::group({1, 2}, meta("exp_neg")));
    return r;
  };
  return a;
}

}  // namespace

TEST_CASE("placement by estimate: a group goes to a later provider that runs it clearly cheaper, and the plan says so") {
  auto g = chain();
  costed_cpu cpu;
  cpu.per_node = 10;
  SUBCASE("the later provider is cheaper: A leaves its group to the CPU provider") {
    auto plan = partition_with(g, std::tuple{group_of_b_and_c(40), cpu});
    REQUIRE_MESSAGE(plan.has_value(), plan.status().to_string());
    const auto& gp = plan->main;
    CHECK(gp.nodes[1].provider == 1);
    CHECK(gp.nodes[2].provider == 1);
    REQUIRE(gp.choices.size() == 1);
    const auto& c = gp.choices[0];
    CHECK(c.group == "exp_neg");
    CHECK(c.nodes == std::vector<node_id>{1, 2});
    CHECK(c.basis == "estimate");
    CHECK(c.chosen == 1);
    REQUIRE(c.costs.size() == 2);
    CHECK(c.costs[0] == std::pair<std::size_t, double>{0, 80.0});
    CHECK(c.costs[1] == std::pair<std::size_t, double>{1, 20.0});
    const auto table = plan->to_table();
    CHECK(table.find("placement of 'exp_neg' (2 nodes, by estimate): AExecutionProvider 80.0 us CPUExecutionProvider "
                     "20.0 us -> CPUExecutionProvider") != std::string::npos);
    check_order(gp);
  }
  SUBCASE("the earlier provider is cheaper: it keeps the group, and the choice is recorded") {
    auto plan = partition_with(g, std::tuple{group_of_b_and_c(2), cpu});
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[1].provider == 0);
    CHECK(plan->main.partitions[0].is_fused());
    REQUIRE(plan->main.choices.size() == 1);
    CHECK(plan->main.choices[0].chosen == 0);
  }
  SUBCASE("within the margin (10%) the stack's order stands") {
    auto plan = partition_with(g, std::tuple{group_of_b_and_c(10.5), cpu});  // 21 against 20: under 10% cheaper
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[1].provider == 0);
    CHECK(plan->main.choices.at(0).chosen == 0);
  }
  SUBCASE("priority placement is ONNX Runtime's: no costs asked, the first claimant takes it") {
    partition_options po;
    po.placement = placement_policy::priority;
    auto plan = partition_with(g, std::tuple{group_of_b_and_c(40), cpu}, po);
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[1].provider == 0);
    CHECK(plan->main.choices.empty());
  }
  SUBCASE("an unknown estimate keeps the stack's order, and the plan says why") {
    auto plan = partition_with(g, std::tuple{group_of_b_and_c(-1), cpu});
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[1].provider == 0);
    REQUIRE(plan->main.choices.size() == 1);
    CHECK(plan->main.choices[0].chosen == 0);
    CHECK(plan->main.choices[0].costs.at(0).second < 0);
    CHECK(plan->to_table().find("by estimate, unknown shapes: the stack's order): AExecutionProvider ? "
                                "CPUExecutionProvider 20.0 us -> AExecutionProvider") != std::string::npos);
  }
  SUBCASE("a later provider that cannot run every node of the group is no alternative") {
    costed_cpu partial;
    partial.per_node = 0.001;
    partial.ops = {"Relu", "Exp", "Add"};  // not Neg
    // The stack still needs a fallback for Neg: A's group is the only way to run it.
    auto plan = partition_with(g, std::tuple{group_of_b_and_c(40), partial});
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[2].provider == 0);
    CHECK(plan->main.choices.empty());
  }
  SUBCASE("measure: the timer sees the candidates as partitions with their boundaries, in order") {
    partition_options po;
    po.placement = placement_policy::measure;
    std::vector<std::pair<std::size_t, std::vector<std::vector<node_id>>>> seen;
    po.measure = [&](std::size_t p, std::span<const partition> parts) {
      std::vector<std::vector<node_id>> nodes;
      for (const auto& part : parts) {
        CHECK_FALSE(part.inputs.empty());
        CHECK_FALSE(part.outputs.empty());
        nodes.push_back(part.nodes);
      }
      seen.emplace_back(p, nodes);
      return p == 0 ? 5.0 : 50.0;  // measured: A is faster, whatever the estimates say
    };
    auto plan = partition_with(g, std::tuple{group_of_b_and_c(40), cpu}, po);
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[1].provider == 0);
    REQUIRE(plan->main.choices.size() == 1);
    CHECK(plan->main.choices[0].basis == "measure");
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].second == std::vector<std::vector<node_id>>{{1, 2}});
    CHECK(seen[1].second == std::vector<std::vector<node_id>>{{1}, {2}});  // the CPU's singles, producer first
  }
  SUBCASE("measure falls back to the estimates where the timer cannot say") {
    partition_options po;
    po.placement = placement_policy::measure;
    po.measure = [](std::size_t, std::span<const partition>) { return -1.0; };
    auto plan = partition_with(g, std::tuple{group_of_b_and_c(40), cpu}, po);
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[1].provider == 1);
    CHECK(plan->main.choices.at(0).basis == "estimate");
  }
}

namespace {

// A costed provider whose library brings a thread runtime of its own (as oneDNN's OpenMP).
struct runtime_a : costed_a {
  static parallel_runtime intra_op_runtime() noexcept {
    return {[](void (*fn)(void*), void* data, unsigned) { fn(data); }, "fake", nullptr};
  }
};
static_assert(provider_traits<runtime_a>::has_intra_op_runtime);

// The CPU fallback at a cost per node, with node `heavy` costing `heavy_us` (the rest of a large graph).
struct weighted_cpu : costed_cpu {
  node_id heavy = 0;
  double heavy_us = 500;
  [[nodiscard]] double estimate_cost(const graph&, std::span<const node_id> nodes) const {
    double us = 0;
    for (node_id n : nodes) us += n == heavy ? heavy_us : per_node;
    return us;
  }
};

template <class A>
A runtime_group(double per_node) {
  A a;
  static_cast<costed_a&>(a) = group_of_b_and_c(per_node);
  return a;
}

}  // namespace

TEST_CASE("placement by estimate: a provider with its own thread runtime keeps its groups only if they save the margin and 1% of the graph") {
  auto g = chain();
  weighted_cpu cpu;
  cpu.per_node = 10;  // b and c: 20 us on the CPU; a: 500 us, so the graph is about 530 us and 1% of it 5.3 us
  const std::string note = "AExecutionProvider's thread runtime is not worth what its partitions save";
  SUBCASE("A's group is no cheaper (within the margin): the runtime-free CPU provider takes it, and the plan says why") {
    auto plan = partition_with(g, std::tuple{runtime_group<runtime_a>(10.5), cpu});
    REQUIRE_MESSAGE(plan.has_value(), plan.status().to_string());
    const auto& gp = plan->main;
    for (node_id n = 0; n < 4; ++n) CHECK(gp.nodes[n].provider == 1);
    REQUIRE(gp.choices.size() == 1);
    CHECK(gp.choices[0].chosen == 1);
    CHECK(gp.choices[0].costs[0] == std::pair<std::size_t, double>{0, 21.0});
    CHECK(gp.choices[0].costs[1] == std::pair<std::size_t, double>{1, 20.0});
    CHECK(gp.choices[0].note == note);
    CHECK(plan->to_table().find("-> CPUExecutionProvider (" + note + ")") != std::string::npos);
    CHECK(gp.nodes[1].fallback_reason == "placed by estimate ('exp_neg'), " + note);
    CHECK(plan->yielded == std::vector<bool>{true, false});
    check_order(gp);
  }
  SUBCASE("A is cheaper by the margin (10%), but saves under 1% of the graph: it leaves the group even so") {
    auto plan = partition_with(g, std::tuple{runtime_group<runtime_a>(9.0), cpu});  // 18 against 20: saves 2 us
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[1].provider == 1);
    CHECK(plan->main.nodes[2].provider == 1);
    CHECK(plan->main.choices.at(0).chosen == 1);
    CHECK(plan->main.choices.at(0).note == note);
  }
  SUBCASE("A saves more than 1% of the graph: it keeps its group, runtime and all") {
    auto plan = partition_with(g, std::tuple{runtime_group<runtime_a>(5.0), cpu});  // 10 against 20: saves 10 us
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[1].provider == 0);
    CHECK(plan->main.nodes[2].provider == 0);
    CHECK(plan->main.choices.at(0).chosen == 0);
    CHECK(plan->main.choices.at(0).note.empty());
  }
  SUBCASE("a provider without a runtime of its own keeps the stack's order within the margin") {
    auto plan = partition_with(g, std::tuple{group_of_b_and_c(10.5), cpu});
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[1].provider == 0);
    CHECK(plan->main.choices.at(0).note.empty());
  }
  SUBCASE("more than a sliver of the graph: A keeps its group only when it is cheaper by the margin") {
    cpu.heavy_us = 1000;
    cpu.per_node = 1000;  // b and c: 2000 us on the CPU; the graph about 4000 us, half of it A's
    // 1820 against 2000: cheaper by 9%, within the margin (10%): A leaves the group.
    auto level = partition_with(g, std::tuple{runtime_group<runtime_a>(910), cpu});
    REQUIRE(level.has_value());
    CHECK(level->main.nodes[1].provider == 1);
    CHECK(level->main.nodes[2].provider == 1);
    CHECK(level->main.choices.at(0).chosen == 1);
    CHECK(level->main.choices.at(0).note == note);
    CHECK(level->yielded == std::vector<bool>{true, false});
    check_order(level->main);
    // 1780 against 2000: A saves 11%, more than the margin: it keeps its group, runtime and all.
    auto clear = partition_with(g, std::tuple{runtime_group<runtime_a>(890), cpu});
    REQUIRE(clear.has_value());
    CHECK(clear->main.nodes[1].provider == 0);
    CHECK(clear->main.choices.at(0).chosen == 0);
    CHECK(clear->main.choices.at(0).note.empty());
    CHECK(clear->yielded.empty());
  }
  SUBCASE("yielding is for estimates: not under measure, nor with CPU fallback disabled") {
    partition_options po;
    po.placement = placement_policy::measure;
    po.measure = [](std::size_t p, std::span<const partition>) { return p == 0 ? 21.0 : 20.0; };
    auto measured = partition_with(g, std::tuple{runtime_group<runtime_a>(10.5), cpu}, po);
    REQUIRE(measured.has_value());
    CHECK(measured->main.nodes[1].provider == 0);
    CHECK(measured->yielded.empty());
    partition_options strict;
    strict.disable_cpu_fallback = true;
    auto kept = partition_with(g, std::tuple{runtime_group<runtime_a>(10.5), cpu}, strict);
    CHECK_FALSE(kept.has_value());  // a and d go to the CPU provider whatever: refused, as before, naming them
    CHECK(kept.status().message().find("'b'") == std::string::npos);
  }
  SUBCASE("a yield decided before (partition_options::yield) holds without the estimate's test") {
    cpu.heavy_us = 10;  // 16 of 36 us, saving 4 (20%): A keeps its group when asked again
    auto again = partition_with(g, std::tuple{runtime_group<runtime_a>(8.0), cpu});
    REQUIRE(again.has_value());
    CHECK(again->main.nodes[1].provider == 0);
    CHECK(again->yielded.empty());
    partition_options po;
    po.yield = {true, false};
    auto kept = partition_with(g, std::tuple{runtime_group<runtime_a>(8.0), cpu}, po);
    REQUIRE(kept.has_value());
    CHECK(kept->main.nodes[1].provider == 1);
    CHECK(kept->yielded == std::vector<bool>{true, false});
  }
  SUBCASE("a yield decided before that no longer holds is dropped: A keeps the group no one else can run") {
    // As after the blocked layout's rewrite, when the graph partitioned again is not the one the yield was decided on:
    // here the CPU provider runs neither Exp nor Neg, so the plan made with the yield still gives A its group, and
    // the plan made without it stands.
    cpu.ops = {"Relu", "Add"};
    partition_options po;
    po.yield = {true, false};
    auto plan = partition_with(g, std::tuple{runtime_group<runtime_a>(10.5), cpu}, po);
    REQUIRE_MESSAGE(plan.has_value(), plan.status().to_string());
    CHECK(plan->main.nodes[0].provider == 1);
    CHECK(plan->main.nodes[1].provider == 0);
    CHECK(plan->main.nodes[2].provider == 0);
    CHECK(plan->main.nodes[3].provider == 1);
    CHECK(plan->yielded.empty());
    CHECK(plan->main.choices.empty());  // not contested: nothing else runs Exp and Neg
    check_order(plan->main);
  }
  SUBCASE("the fractions are options: a share of 0 turns it off, larger ones leave larger groups") {
    partition_options po;
    po.runtime_share = 0;
    auto off = partition_with(g, std::tuple{runtime_group<runtime_a>(10.5), cpu}, po);
    REQUIRE(off.has_value());
    CHECK(off->main.nodes[1].provider == 0);  // within the margin: the stack's order
    cpu.heavy_us = 10;
    po.runtime_share = 0.5;
    po.runtime_gain = 0.1;
    auto wide = partition_with(g, std::tuple{runtime_group<runtime_a>(9.0), cpu}, po);  // 18 of 38, saving 2 us
    REQUIRE(wide.has_value());
    CHECK(wide->main.nodes[1].provider == 1);
  }
  SUBCASE("priority placement is ONNX Runtime's: the runtime does not matter") {
    partition_options po;
    po.placement = placement_policy::priority;
    auto plan = partition_with(g, std::tuple{runtime_group<runtime_a>(10.5), cpu}, po);
    REQUIRE(plan.has_value());
    CHECK(plan->main.nodes[1].provider == 0);
  }
  SUBCASE("a provider that the stack needs elsewhere keeps its runtime, and its group") {
    // The CPU provider cannot run Add: A's single d stays A's, so its threads run anyway.
    auto a = runtime_group<runtime_a>(10.5);
    a.script = [](const graph_view<graph>& v) {
      std::vector<capability> r;
      if (v.contains(1) && v.contains(2)) r.push_back(capability::group({1, 2}, meta("exp_neg")));
      if (v.contains(3)) r.push_back(capability::single(3));
      return r;
    };
    cpu.ops = {"Relu", "Exp", "Neg"};
    auto plan = partition_with(g, std::tuple{a, cpu});
    REQUIRE_MESSAGE(plan.has_value(), plan.status().to_string());
    CHECK(plan->main.nodes[3].provider == 0);
    CHECK(plan->main.nodes[1].provider == 0);
    CHECK(plan->main.nodes[2].provider == 0);
  }
}

TEST_CASE("placement policies by name") {
  CHECK(placement_policy_from("priority") == placement_policy::priority);
  CHECK(placement_policy_from("estimate") == placement_policy::estimate);
  CHECK(placement_policy_from("measure") == placement_policy::measure);
  CHECK_FALSE(placement_policy_from("fastest").has_value());
  CHECK(to_string(placement_policy::measure) == "measure");
}

namespace {

type_info f32(std::initializer_list<dimension> dims) { return type_info::tensor_of(element_type::float32, shape(dims)); }

// x [N,16,8,8] -> Conv(W, 3x3, strides s) -> y; the output's type as inference would give it.
graph one_conv(std::int64_t kernel, std::int64_t stride, std::int64_t group, dimension batch) {
  graph g("conv");
  g.add_input("x", f32({batch, 16, 8, 8}));
  g.add_initializer("W", tensor(element_type::float32, {16, 16 / group, kernel, kernel}));
  attribute_list a;
  a.set("strides", std::vector<std::int64_t>{stride, stride});
  a.set("pads", std::vector<std::int64_t>(4, kernel / 2));
  a.set("group", group);
  g.add_node(op("conv", "Conv", a), {"x", "W"}, {"y"});
  const std::int64_t out = (8 + 2 * (kernel / 2) - kernel) / stride + 1;
  g.value(g.find_value("y")).type = f32({batch, 16, out, out});
  g.add_output("y");
  return g;
}

// one_conv at a symbolic batch N, then Flatten -> MatMul [1024, k] -> z: the product's rows are the batch.
graph conv_then_product(std::int64_t k) {
  auto g = one_conv(3, 1, 1, dimension("N"));
  g.add_node(op("flat", "Flatten"), {"y"}, {"f"});
  g.value(g.find_value("f")).type = f32({dimension("N"), 1024});
  g.add_initializer("M", tensor(element_type::float32, {1024, k}));
  g.add_node(op("fc", "MatMul"), {"f", "M"}, {"z"});
  g.value(g.find_value("z")).type = f32({dimension("N"), k});
  g.add_output("z");
  return g;
}

// Providers priced by a profile of one rate (GFLOP/s) for convolutions and products.
cost_profile flat_profile(double gflops) {
  cost_profile p;
  p.conv_gflops = gflops;
  p.matmul_gflops = {gflops, gflops, gflops, gflops, gflops};
  return p;
}
struct slow_a : scripted_provider<"AExecutionProvider"> {
  [[nodiscard]] double estimate_cost(const graph& g, std::span<const node_id> nodes) const {
    return estimate_microseconds(flat_profile(100), g, nodes);
  }
};
struct fast_cpu : test_cpu_provider {
  [[nodiscard]] double estimate_cost(const graph& g, std::span<const node_id> nodes) const {
    return estimate_microseconds(flat_profile(400), g, nodes);
  }
};

}  // namespace

TEST_CASE("cost model: the work of a convolution by kind, and symbolic dimensions priced at 1 where asked") {
  SUBCASE("kinds") {
    CHECK(work_of(one_conv(3, 1, 1, 2), 0).kind == work_kind::conv3x3);
    CHECK(work_of(one_conv(3, 2, 1, 2), 0).kind == work_kind::conv);
    CHECK(work_of(one_conv(5, 1, 1, 2), 0).kind == work_kind::conv);
    CHECK(work_of(one_conv(1, 1, 1, 2), 0).kind == work_kind::pointwise_conv);
    CHECK(work_of(one_conv(3, 1, 16, 2), 0).kind == work_kind::depthwise_conv);
    CHECK(work_of(one_conv(3, 1, 2, 2), 0).kind == work_kind::conv);  // grouped, not depthwise: not Winograd's
  }
  SUBCASE("arithmetic and bytes") {
    const auto w = work_of(one_conv(3, 1, 1, 2), 0);
    CHECK(w.known);
    CHECK_FALSE(w.assumed);
    CHECK(w.flops == doctest::Approx(2.0 * (2 * 16 * 8 * 8) * (16 * 9)));
    CHECK(w.bytes == doctest::Approx(4.0 * (2 * 16 * 64 + 16 * 16 * 9 + 2 * 16 * 64)));
  }
  SUBCASE("a symbolic batch: unknown, or priced at 1 and said so") {
    const auto g = one_conv(3, 1, 1, dimension("N"));
    CHECK_FALSE(work_of(g, 0).known);
    const auto w = work_of(g, 0, 1);
    CHECK(w.known);
    CHECK(w.assumed);
    CHECK(w.flops == doctest::Approx(work_of(one_conv(3, 1, 1, 1), 0).flops));
    // A dimension with neither value nor name (what a runtime Reshape leaves) is priced as a symbolic one; a value
    // whose rank is unknown stays unknown.
    const auto anonymous = work_of(one_conv(3, 1, 1, dimension()), 0, 1);
    CHECK(anonymous.known);
    CHECK(anonymous.assumed);
    CHECK_FALSE(work_of(one_conv(3, 1, 1, dimension()), 0, 0).known);
    auto no_rank = one_conv(3, 1, 1, dimension());
    no_rank.value(no_rank.find_value("x")).type = type_info::tensor_of(element_type::float32);
    CHECK_FALSE(work_of(no_rank, 0, 1).known);
  }
  SUBCASE("estimates: the 3x3 rate where the profile has one, else the dense rate; symbolic dims at 1") {
    cost_profile p;
    p.conv_gflops = 100;
    p.conv3x3_gflops = 400;
    const node_id nodes[] = {0};
    const double flops = work_of(one_conv(3, 1, 1, 1), 0).flops;
    CHECK(estimate_microseconds(p, one_conv(3, 1, 1, 1), nodes) == doctest::Approx(flops / 400 * 1e-3));
    CHECK(estimate_microseconds(p, one_conv(3, 1, 1, dimension("N")), nodes) ==
          doctest::Approx(flops / 400 * 1e-3));
    CHECK(estimate_microseconds(p, one_conv(3, 1, 1, dimension()), nodes) == doctest::Approx(flops / 400 * 1e-3));
    auto no_rank = one_conv(3, 1, 1, 1);
    no_rank.value(no_rank.find_value("y")).type = type_info::tensor_of(element_type::float32);
    CHECK(estimate_microseconds(p, no_rank, nodes) < 0);
    p.conv3x3_gflops = 0;
    CHECK(estimate_microseconds(p, one_conv(3, 1, 1, 1), nodes) == doctest::Approx(flops / 100 * 1e-3));
  }
}

TEST_CASE("cost model: the share of products with symbolic rows") {
  const node_id all[] = {0, 1, 2};
  // Conv: 2 x 1024 x 144 = 294,912 flops at batch 1; MatMul: 2 x 1024 x k.
  CHECK(symbolic_products_share(conv_then_product(10), all) == doctest::Approx(20480.0 / (294912 + 20480)));
  CHECK(symbolic_products_share(conv_then_product(1000), all) == doctest::Approx(2048000.0 / (294912 + 2048000)));
  auto anonymous = conv_then_product(10);  // rows with neither value nor name: priced, and counted, as symbolic ones
  anonymous.value(anonymous.find_value("f")).type = f32({dimension(), 1024});
  CHECK(symbolic_products_share(anonymous, all) == doctest::Approx(20480.0 / (294912 + 20480)));
  auto unknown = conv_then_product(10);
  unknown.value(unknown.find_value("f")).type = type_info::tensor_of(element_type::float32);
  CHECK(symbolic_products_share(unknown, all) < 0);
  const node_id conv_only[] = {0};
  CHECK(symbolic_products_share(conv_then_product(10), conv_only) == 0);
}

namespace {
// conv_then_product placed over A (which claims the whole network as one group) and a CPU fallback that runs its
// three operators, each priced by its own estimate.
template <class A, class Cpu>
partition_plan place_network(const graph& g) {
  A a;
  a.script = [](const graph_view<graph>& v) {
    std::vector<capability> r;
    if (v.contains(0) && v.contains(2)) r.push_back(capability::group({0, 1, 2}, meta("net")));
    return r;
  };
  Cpu cpu;
  cpu.ops = {"Conv", "Flatten", "MatMul"};
  auto plan = partition_with(g, std::tuple{a, cpu});
  REQUIRE_MESSAGE(plan.has_value(), plan.status().to_string());
  return std::move(*plan);
}
}  // namespace

TEST_CASE("placement by estimate: symbolic dims priced at 1 stand unless products with symbolic rows dominate") {
  // A claims the whole network; the CPU fallback is priced at 4x A's rates. The plan points into the graph: each
  // subcase keeps its own.
  const auto run = [](const graph& g) { return place_network<slow_a, fast_cpu>(g); };
  SUBCASE("a small product: priced at batch 1, the CPU provider is 4x cheaper and takes it") {
    const auto g = conv_then_product(10);
    const auto plan = run(g);
    REQUIRE(plan.main.choices.size() == 1);
    CHECK(plan.main.choices[0].basis == "estimate, symbolic dims at 1");
    CHECK(plan.main.choices[0].chosen == 1);
    CHECK(plan.main.nodes[0].provider == 1);
    CHECK(plan.to_table().find("(3 nodes, by estimate, symbolic dims at 1): AExecutionProvider ") != std::string::npos);
  }
  SUBCASE("products with symbolic rows over a tenth of the work: priced at 1 to 256; 4x cheaper at each, the CPU takes it") {
    const auto g = conv_then_product(1000);
    const auto plan = run(g);
    REQUIRE(plan.main.choices.size() == 1);
    const auto& c = plan.main.choices[0];
    CHECK(c.basis == "estimate, symbolic dims at 1 to 256, shown where AExecutionProvider fares best");
    CHECK(c.chosen == 1);
    CHECK(plan.main.nodes[0].provider == 1);
    REQUIRE(c.costs.size() == 2);
    CHECK(c.costs[0].second == doctest::Approx(4 * c.costs[1].second));
  }
  SUBCASE("a dimension with neither value nor name is priced as a symbolic one; an unknown rank is unknown even so") {
    auto g = conv_then_product(1000);
    g.value(g.find_value("f")).type = f32({dimension(), 1024});
    const auto anonymous = run(g);
    REQUIRE(anonymous.main.choices.size() == 1);
    CHECK(anonymous.main.choices[0].basis == "estimate, symbolic dims at 1 to 256, shown where AExecutionProvider fares best");
    CHECK(anonymous.main.choices[0].chosen == 1);
    g.value(g.find_value("f")).type = type_info::tensor_of(element_type::float32);
    const auto plan = run(g);
    REQUIRE(plan.main.choices.size() == 1);
    CHECK(plan.main.choices[0].basis == "estimate, unknown shapes: the stack's order");
    CHECK(plan.main.choices[0].chosen == 0);
    CHECK(plan.main.nodes[0].provider == 0);
  }
}

namespace {
// Products' rates by rows (1, 4, 16, 64, 256) and one rate for convolutions.
cost_profile rows_profile(std::array<double, 5> matmul, double conv) {
  cost_profile p;
  p.conv_gflops = conv;
  p.matmul_gflops = matmul;
  return p;
}
struct big_batch_a : scripted_provider<"AExecutionProvider"> {  // 4x the CPU's speed on products of 64 rows or more
  [[nodiscard]] double estimate_cost(const graph& g, std::span<const node_id> nodes) const {
    return estimate_microseconds(rows_profile({100, 100, 100, 400, 400}, 400), g, nodes);
  }
};
struct small_batch_cpu : test_cpu_provider {  // 4x A's on products of 16 rows or fewer
  [[nodiscard]] double estimate_cost(const graph& g, std::span<const node_id> nodes) const {
    return estimate_microseconds(rows_profile({400, 400, 400, 100, 100}, 400), g, nodes);
  }
};
}  // namespace

TEST_CASE("placement by estimate: where the cheaper provider changes with a symbolic batch, the stack's order holds") {
  const auto g = conv_then_product(1000);
  const auto plan = place_network<big_batch_a, small_batch_cpu>(g);
  REQUIRE(plan.main.choices.size() == 1);
  const auto& c = plan.main.choices[0];
  CHECK(c.basis == "estimate, symbolic dims at 1 to 256, shown where AExecutionProvider fares best");
  // At batch 1 the CPU provider would be cheaper by far (its products 4x faster, the convolution level), but not at
  // every batch: A keeps the group, and the costs shown are at a batch of 64 or more, where A's products are faster.
  CHECK(c.chosen == 0);
  CHECK(plan.main.nodes[0].provider == 0);
  REQUIRE(c.costs.size() == 2);
  CHECK(c.costs[0].second < c.costs[1].second);
  const node_id all[] = {0, 1, 2};
  CHECK(small_batch_cpu{}.estimate_cost(g, all) < 0.5 * big_batch_a{}.estimate_cost(g, all));  // at batch 1
  {
    const symbolic_pricing at_256(256);  // as at 64: the products' rates are the same there, and they scale alike
    const double a = big_batch_a{}.estimate_cost(g, all), c256 = small_batch_cpu{}.estimate_cost(g, all);
    CHECK(c256 > 3 * a);
    CHECK(c.costs[1].second / c.costs[0].second == doctest::Approx(c256 / a).epsilon(0.01));
  }
  // The scope ended: batch 1 again.
  CHECK(small_batch_cpu{}.estimate_cost(g, all) < 0.5 * big_batch_a{}.estimate_cost(g, all));
}
