#pragma once
// Small IR graphs for the core and provider tests.
#include <epstack/ir/graph.hpp>

#include <string>

namespace epstack::test {

inline node op(std::string name, std::string type, attribute_list attrs = {}) {
  node n;
  n.name = std::move(name);
  n.op_type = std::move(type);
  n.attributes = std::move(attrs);
  return n;
}

}  // namespace epstack::test
