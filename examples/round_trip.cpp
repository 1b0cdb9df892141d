// Builds a small model with epstack's IR, saves it with its weights in external data, loads it back (weights
// memory-mapped) and prints what it holds. Used by the consumer tests (find_package and add_subdirectory).
#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/testing/model_zoo.hpp>
#include <epstack/onnx/onnx_io.hpp>

#include <filesystem>
#include <iostream>

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path out = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / "epstack_example.onnx";
  const auto m = epstack::zoo::make_mlp({32, 64, 10});
  epstack::save_options so;
  so.mode = epstack::external_data_mode::all_external;
  if (auto st = epstack::save_model(m, out, so); !st) {
    std::cerr << st.to_string() << "\n";
    return 1;
  }
  auto back = epstack::load_model(out);
  if (!back) {
    std::cerr << back.status().to_string() << "\n";
    return 1;
  }
  auto order = epstack::topological_order(back->graph);
  if (!order) {
    std::cerr << order.status().to_string() << "\n";
    return 1;
  }
  std::cout << "round trip ok: " << back->graph.node_count() << " nodes in order:";
  for (auto n : *order) std::cout << " " << back->graph.node(n).op_type;
  std::cout << "\n";
  return back->graph.node_count() == 3 ? 0 : 1;
}
