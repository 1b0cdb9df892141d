// A deployable: a multi-layer perceptron from its deployment model on the CPU provider, with the kernels `epstack
// ops` found the model needs and no other; it links neither protobuf nor onnx.
//
//   epstack compile mlp.onnx --format deploy --providers cpu --dims batch=1   # mlp.deploy
//   epstack ops mlp.deploy -o mlp_kernels.hpp --namespace mlp_deploy
//   deploy_mlp mlp.deploy --runs 100
#include "mlp_kernels.hpp"  // written by `epstack ops` at build time

#include "../deploy_run.hpp"

int main(int argc, char** argv) { return deploy_example::run<epstack::session<mlp_deploy::cpu_provider>>(argc, argv); }
