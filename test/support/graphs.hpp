#pragma once
// Small IR graphs for the core and provider tests.
#include <epstack/ir/graph.hpp>

#include <map>
#include <string>

namespace epstack::test {

inline node op(std::string name, std::string type, attribute_list attrs = {}) {
  node n;
  n.name = std::move(name);
  n.op_type = std::move(type);
  n.attributes = std::move(attrs);
  return n;
}

/// How many nodes of each operator `g` has, keyed "domain.op" ("op" for the ONNX domain).
inline std::map<std::string, int> op_counts(const graph& g) {
  std::map<std::string, int> r;
  for (node_id n = 0; n < g.node_count(); ++n)
    r[(g.node(n).domain.empty() ? std::string() : g.node(n).domain + ".") + g.node(n).op_type]++;
  return r;
}

}  // namespace epstack::test
