// A deployable: MobileNetV2 from its deployment model on the CPU provider, with the kernels `epstack ops` found the
// model needs and no other; it links neither protobuf nor onnx (CMake checks that after every link, and its size).
//
//   epstack compile mobilenetv2.onnx --format deploy --providers cpu --dims N=1   # mobilenetv2.deploy
//   epstack ops mobilenetv2.deploy -o mobilenetv2_kernels.hpp --namespace mobilenetv2_deploy
//   deploy_mobilenetv2 mobilenetv2.deploy --runs 100
#include "mobilenetv2_kernels.hpp"  // written by `epstack ops` at build time

#include "../deploy_run.hpp"

int main(int argc, char** argv) {
  return deploy_example::run<epstack::session<mobilenetv2_deploy::cpu_provider>>(argc, argv);
}
