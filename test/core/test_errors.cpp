#include <epstack/core/errors.hpp>

#include <doctest/doctest.h>

#include <string>

using namespace epstack;

namespace {
Result<int> parse_positive(int x) {
  if (x <= 0) return Status(errc::invalid_argument, "input 'x': " + std::to_string(x) + " is not positive");
  return x;
}
Result<int> twice_positive(int x) {
  EPSTACK_ASSIGN_OR_RETURN(int v, parse_positive(x));
  return 2 * v;
}
Status check_both(int a, int b) {
  EPSTACK_RETURN_IF_ERROR(parse_positive(a));
  EPSTACK_RETURN_IF_ERROR(parse_positive(b));
  return {};
}
}  // namespace

TEST_CASE("errc names mirror ONNX Runtime's status codes") {
  CHECK(to_string(errc::ok) == "ok");
  CHECK(to_string(errc::invalid_graph) == "invalid_graph");
  CHECK(to_string(errc::model_requires_compilation) == "model_requires_compilation");
  CHECK(to_string(errc::not_found) == "not_found");
  CHECK(to_string(errc::invalid_protobuf) == "invalid_protobuf");
  CHECK(to_string(errc::no_such_file) == "no_such_file");
}

TEST_CASE("Status carries a code and a message with context") {
  Status ok;
  CHECK(ok.is_ok());
  CHECK(ok.to_string() == "ok");
  Status bad(errc::invalid_graph, "node 'n1' (Relu): input 'x' is not defined");
  CHECK_FALSE(bad.is_ok());
  CHECK(bad.code() == errc::invalid_graph);
  bad.with_context("model 'm.onnx'");
  CHECK(bad.message() == "model 'm.onnx': node 'n1' (Relu): input 'x' is not defined");
  CHECK(bad.to_string() == "invalid_graph: model 'm.onnx': node 'n1' (Relu): input 'x' is not defined");
}

TEST_CASE("Result holds a value or the failure and the helper macros propagate") {
  auto r = twice_positive(21);
  REQUIRE(r.has_value());
  CHECK(*r == 42);
  auto e = twice_positive(-1);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.code() == errc::invalid_argument);
  CHECK(e.status().message() == "input 'x': -1 is not positive");
  CHECK(check_both(1, 2).is_ok());
  CHECK(check_both(1, 0).code() == errc::invalid_argument);
  // A Result built from an ok Status is a failure: there is no value to give.
  Result<int> odd{Status{}};
  CHECK(odd.code() == errc::fail);
}
