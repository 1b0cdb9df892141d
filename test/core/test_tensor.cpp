#include <epstack/core/mapped_file.hpp>
#include <epstack/core/shape.hpp>
#include <epstack/core/tensor.hpp>
#include <epstack/core/type_info.hpp>

#include "../support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <vector>

using namespace epstack;

TEST_CASE("shapes hold known symbolic and unknown dimensions") {
  shape s{dimension("batch"), 3, dimension(), 224};
  CHECK(s.rank() == 4);
  CHECK(s[0].is_symbolic());
  CHECK_FALSE(s[2].is_known());
  CHECK_FALSE(s[2].is_symbolic());
  CHECK(s[3].value == 224);
  CHECK_FALSE(s.is_static());
  CHECK_FALSE(s.sizes().has_value());
  CHECK(s.to_string() == "[batch,3,?,224]");
  const shape st{2, 3};
  CHECK(st.is_static());
  CHECK(*st.sizes() == std::vector<std::int64_t>{2, 3});
  CHECK(shape{}.to_string() == "[]");
}

TEST_CASE("element_count rejects negative sizes and overflow") {
  const std::int64_t ok[] = {2, 3, 4};
  CHECK(element_count(ok) == 24);
  const std::int64_t zero[] = {5, 0, 7};
  CHECK(element_count(zero) == 0);
  const std::int64_t neg[] = {2, -1};
  CHECK_FALSE(element_count(neg).has_value());
  const std::int64_t big[] = {std::int64_t{1} << 40, std::int64_t{1} << 40};
  CHECK_FALSE(element_count(big).has_value());
  CHECK(element_count(std::span<const std::int64_t>{}) == 1);  // a scalar
}

TEST_CASE("owned tensors are zeroed 64-byte aligned typed") {
  tensor t(element_type::float32, {2, 3});
  CHECK(t.element_count() == 6);
  CHECK(t.byte_size() == 24);
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % tensor_alignment == 0);
  CHECK_FALSE(t.is_borrowed());
  for (float v : t.view<float>()) CHECK(v == 0.0f);
  t.typed<float>()[4] = 2.5f;
  CHECK(t.view<float>()[4] == 2.5f);
  CHECK_THROWS_AS((void)t.typed<std::int32_t>(), std::invalid_argument);
  CHECK_THROWS_AS(tensor(element_type::float32, {-1, 2}), std::length_error);
  CHECK_THROWS_AS(tensor(element_type::undefined, {2}), std::length_error);
}

TEST_CASE("copies share storage and clone copies the elements") {
  auto a = tensor::from<std::int64_t>({3}, {1, 2, 3});
  tensor b = a;
  b.typed<std::int64_t>()[0] = 7;
  CHECK(a.typed<std::int64_t>()[0] == 7);
  tensor c = a.clone();
  c.typed<std::int64_t>()[1] = 9;
  CHECK(a.typed<std::int64_t>()[1] == 2);
  CHECK(c.same_content(c.clone()));
  CHECK_FALSE(c.same_content(a));
  CHECK_THROWS_AS((void)tensor::from<float>({2}, {1.0f}), std::length_error);
}

TEST_CASE("string tensors own a std::string per element") {
  auto t = tensor::from<std::string>({2}, {std::string("alpha"), std::string("beta")});
  CHECK(t.type() == element_type::string);
  CHECK(t.typed<std::string>()[1] == "beta");
  auto u = t.clone();
  u.typed<std::string>()[1] = "gamma";
  CHECK(t.typed<std::string>()[1] == "beta");
  CHECK(t.bytes().empty());
  auto s = tensor::scalar<std::string>("x");
  CHECK(s.rank() == 0);
  CHECK(s.element_count() == 1);
}

TEST_CASE("borrowed tensors keep their owner alive including a memory-mapped file") {
  test::temp_dir dir;
  std::vector<float> v{1.5f, -2.0f, 3.25f, 4.0f};
  test::write_file(dir / "w.bin", std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  tensor t;
  {
    auto f = mapped_file::open(dir / "w.bin");
    REQUIRE(f.has_value());
    CHECK((*f)->size() == 16);
    const std::int64_t sizes[] = {2, 2};
    t = tensor::borrow(element_type::float32, sizes, (*f)->data(), *f);
  }  // the tensor now holds the only reference to the mapping
  CHECK(t.is_borrowed());
  CHECK(t.view<float>()[2] == 3.25f);
  t.typed<float>()[0] = 9.0f;  // copy-on-write: the file is untouched
  const auto bytes = test::read_file(dir / "w.bin");
  float first = 0;
  std::memcpy(&first, bytes.data(), sizeof first);
  CHECK(first == 1.5f);

  auto missing = mapped_file::open(dir / "nope.bin");
  CHECK(missing.code() == errc::no_such_file);
  auto folder = mapped_file::open(dir.path());
  CHECK(folder.code() == errc::invalid_argument);
}

TEST_CASE("type_info describes tensors sequences maps and optionals") {
  auto t = type_info::tensor_of(element_type::float32, shape{dimension("N"), 3});
  CHECK(t.to_string() == "float[N,3]");
  CHECK(type_info::tensor_of(element_type::int64).to_string() == "int64[...]");
  CHECK(type_info::sequence_of(t).to_string() == "seq(float[N,3])");
  CHECK(type_info::optional_of(t).to_string() == "opt(float[N,3])");
  CHECK(type_info::map_of(element_type::string, type_info::tensor_of(element_type::float32, shape{})).to_string() ==
        "map(string,float[])");
  CHECK(type_info::sequence_of(t) == type_info::sequence_of(t));
  CHECK_FALSE(type_info::sequence_of(t) == type_info::optional_of(t));
}
