// libFuzzer target: any bytes given to the model loader must give a model or a Status, never a crash or a hang.
// Build: -DEPSTACK_BUILD_FUZZERS=ON with clang; run: fuzz_load_model CORPUS_DIR -max_total_time=60
#include <epstack/onnx/onnx_io.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto m = epstack::load_model(std::as_bytes(std::span(data, size)));
  if (m) {
    auto bytes = epstack::serialize_model(*m);
    if (bytes) {
      auto again = epstack::load_model(std::as_bytes(std::span(bytes->data(), bytes->size())));
      (void)again;
    }
  }
  return 0;
}
