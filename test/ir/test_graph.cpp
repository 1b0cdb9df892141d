#include <epstack/ir/graph.hpp>
#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/ir/graph_view.hpp>

#include "../support/graphs.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace epstack;
using test::op;

namespace {
std::size_t position(const std::vector<node_id>& order, node_id n) {
  return static_cast<std::size_t>(std::find(order.begin(), order.end(), n) - order.begin());
}
// x -> a(Relu) -> b(Neg) -> d(Add) <- c(Exp) <- x ; y = d
graph diamond() {
  graph g("diamond");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{4}));
  g.add_node(op("a", "Relu"), {"x"}, {"ra"});
  g.add_node(op("b", "Neg"), {"ra"}, {"rb"});
  g.add_node(op("c", "Exp"), {"x"}, {"rc"});
  g.add_node(op("d", "Add"), {"rb", "rc"}, {"y"});
  g.add_output("y");
  return g;
}
}  // namespace

TEST_CASE("a graph records producers consumers and flow edges") {
  auto g = diamond();
  CHECK(validate(g).is_ok());
  CHECK(g.node_count() == 4);
  CHECK(g.flows().size() == 3);  // a->b, b->d, c->d (x is a graph input)
  CHECK(boost::num_edges(make_flow_graph(g)) == 3);
  const auto ra = g.find_value("ra");
  REQUIRE(ra != no_id);
  CHECK(g.value(ra).producer == 0);
  CHECK(g.value(ra).consumers.size() == 1);
  CHECK(g.value(g.find_value("x")).is_graph_input);
  CHECK(g.value(g.find_value("y")).is_graph_output);
  CHECK(g.find_value("nope") == no_id);
  CHECK(g.describe(3) == "'d' (Add)");
}

TEST_CASE("topological order puts producers first even when nodes are added out of order") {
  graph g("reversed");
  g.add_input("x");
  g.add_node(op("last", "Add"), {"m1", "m2"}, {"y"});
  g.add_node(op("mid2", "Relu"), {"m0"}, {"m2"});
  g.add_node(op("mid1", "Neg"), {"m0"}, {"m1"});
  g.add_node(op("first", "Exp"), {"x"}, {"m0"});
  g.add_output("y");
  REQUIRE(validate(g).is_ok());
  auto order = topological_order(g);
  REQUIRE(order.has_value());
  CHECK(order->size() == 4);
  CHECK(position(*order, 3) < position(*order, 1));
  CHECK(position(*order, 3) < position(*order, 2));
  CHECK(position(*order, 1) < position(*order, 0));
  CHECK(position(*order, 2) < position(*order, 0));
}

TEST_CASE("a cycle is found and named") {
  graph g("loop");
  g.add_input("x");
  g.add_node(op("p", "Add"), {"x", "q_out"}, {"p_out"});
  g.add_node(op("q", "Relu"), {"p_out"}, {"q_out"});
  g.add_node(op("r", "Neg"), {"p_out"}, {"y"});
  g.add_output("y");
  const auto cycle = find_cycle(make_flow_graph(g));
  REQUIRE(cycle.size() == 2);
  CHECK(std::find(cycle.begin(), cycle.end(), 0u) != cycle.end());
  CHECK(std::find(cycle.begin(), cycle.end(), 1u) != cycle.end());
  auto st = validate(g);
  CHECK(st.code() == errc::invalid_graph);
  CHECK(st.message().find("has a cycle") != std::string::npos);
  CHECK(st.message().find("'p' (Add)") != std::string::npos);
  CHECK(st.message().find("'q' (Relu)") != std::string::npos);
  CHECK(topological_order(g).code() == errc::invalid_graph);

  graph self("self");
  self.add_node(op("s", "Identity"), {"v"}, {"v"});
  CHECK(find_cycle(make_flow_graph(self)) == std::vector<std::size_t>{0});  // a node that feeds itself
  CHECK(validate(self).message().find("has a cycle: 's' (Identity) -> 's' (Identity)") != std::string::npos);
}

TEST_CASE("single assignment: a value defined twice is reported with both definitions") {
  graph g("twice");
  g.add_input("x");
  g.add_node(op("a", "Relu"), {"x"}, {"y"});
  g.add_node(op("b", "Neg"), {"x"}, {"y"});
  g.add_output("y");
  auto st = validate(g);
  CHECK(st.code() == errc::invalid_graph);
  CHECK(st.message() == "graph 'twice': value 'y' is defined twice: by node 'a' (Relu) and by node 'b' (Neg)");

  graph h("input-and-output");
  h.add_input("x");
  h.add_node(op("c", "Relu"), {"x"}, {"x"});
  CHECK(validate(h).message().find("value 'x' is defined twice: by a graph input and by node 'c' (Relu)") != std::string::npos);

  graph i("inits");
  i.add_initializer("w", tensor::from<float>({1}, {1.0f}));
  i.add_initializer("w", tensor::from<float>({1}, {2.0f}));
  CHECK(validate(i).message().find("initializer 'w' is defined twice") != std::string::npos);
}

TEST_CASE("every use must be defined and an initializer may also be a graph input") {
  graph g("undefined");
  g.add_input("x");
  g.add_node(op("a", "Add"), {"x", "ghost"}, {"y"});
  g.add_output("y");
  auto st = validate(g);
  CHECK(st.code() == errc::invalid_graph);
  CHECK(st.message() == "graph 'undefined': node 'a' (Add) uses value 'ghost', which is not defined");

  graph o("missing-output");
  o.add_input("x");
  o.add_output("z");
  CHECK(validate(o).message() == "graph 'missing-output': graph output 'z' is not defined");

  graph d("default-input");
  d.add_input("w");
  d.add_initializer("w", tensor::from<float>({1}, {1.0f}));
  d.add_node(op("n", "Relu"), {"w"}, {"y"});
  d.add_output("y");
  CHECK(validate(d).is_ok());

  graph opt("optional-inputs");
  opt.add_input("x");
  opt.add_node(op("clip", "Clip"), {"x", "", ""}, {"y"});
  opt.add_output("y");
  CHECK(validate(opt).is_ok());
  CHECK(opt.node(0).inputs[1] == no_id);
}

TEST_CASE("subgraphs may use values of enclosing graphs but not undefined ones") {
  graph body("then");
  body.add_node(op("inner", "Neg"), {"outer_x"}, {"r"});
  body.add_output("r");

  graph g("main");
  g.add_input("cond");
  g.add_input("outer_x");
  node ifn = op("if", "If");
  ifn.attributes.set("then_branch", make_subgraph(body));
  ifn.attributes.set("else_branch", make_subgraph(body));
  g.add_node(std::move(ifn), {"cond"}, {"y"});
  g.add_output("y");
  CHECK(validate(g).is_ok());

  // Subgraph copies are deep.
  graph copy = g;
  auto* sg = std::get_if<subgraph>(&copy.node(0).attributes.find("then_branch")->value);
  REQUIRE(sg != nullptr);
  (*sg)->set_name("changed");
  CHECK(std::get<subgraph>(g.node(0).attributes.find("then_branch")->value)->name() == "then");

  graph bad_body("else");
  bad_body.add_node(op("inner2", "Neg"), {"nowhere"}, {"r"});
  bad_body.add_output("r");
  graph h("main2");
  h.add_input("cond");
  node ifm = op("if2", "If");
  ifm.attributes.set("then_branch", make_subgraph(body));
  ifm.attributes.set("else_branch", make_subgraph(bad_body));
  h.add_node(std::move(ifm), {"cond"}, {"y"});
  h.add_output("y");
  auto st = validate(h);
  CHECK(st.code() == errc::invalid_graph);
  CHECK(st.message().find("attribute 'then_branch'") != std::string::npos);  // outer_x is not defined in main2
  CHECK(st.message().find("uses value 'outer_x', which is not defined here or in an enclosing graph") != std::string::npos);
}

TEST_CASE("graph views filter nodes and expose their boundary") {
  auto g = diamond();
  graph_view<graph> v(g, [](node_id n) { return n == 0 || n == 1; });  // a, b
  CHECK(v.node_count() == 2);
  CHECK(v.contains(1));
  CHECK_FALSE(v.contains(2));
  const auto ins = v.inputs();
  REQUIRE(ins.size() == 1);
  CHECK(g.value(ins[0]).name == "x");
  const auto outs = v.outputs();
  REQUIRE(outs.size() == 1);
  CHECK(g.value(outs[0]).name == "rb");
  auto order = topological_order(v);
  REQUIRE(order.has_value());
  CHECK(*order == std::vector<node_id>{0, 1});
  const view_flow_graph<graph> vfg(v);  // Boost iterators refer to the filtered graph object: keep it alive
  CHECK(boost::num_edges(vfg.get()) == 3);  // filtered_graph counts the underlying edges
  std::size_t visible_edges = 0;
  auto [eb, ee] = boost::edges(vfg.get());
  for (; eb != ee; ++eb) ++visible_edges;
  CHECK(visible_edges == 1);  // only a -> b lies inside the view

  graph_view<graph> all(g);
  CHECK(all.node_count() == 4);
  CHECK(all.outputs().size() == 1);  // y, the graph output
}
