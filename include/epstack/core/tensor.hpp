#pragma once
/// @file tensor.hpp
/// @brief Tensors: an element type, concrete sizes, and storage that is owned (64-byte aligned) or borrowed (a
/// memory-mapped file, a buffer the caller keeps alive). Typed views give hot loops plain pointers.

#include <epstack/core/element_type.hpp>
#include <epstack/core/errors.hpp>
#include <epstack/core/shape.hpp>

#include <epstack/detail/inline_vector.hpp>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__linux__)
// madvise from <sys/mman.h>, declared here rather than included: that header's macros (MAP_TYPE) clash with onnx's.
extern "C" int madvise(void* addr, std::size_t length, int advice) noexcept;
#endif

namespace epstack {

/// Alignment of storage that tensors own.
inline constexpr std::size_t tensor_alignment = 64;

namespace detail {
/// Allocations of at least this many bytes are 2 MiB aligned and asked to use transparent huge pages: one page fault
/// instead of 512 when they are first written, and fewer TLB misses when kernels stream through them (weights).
inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;
[[nodiscard]] inline std::size_t allocation_alignment(std::size_t bytes) noexcept {
  return bytes >= huge_page_bytes ? huge_page_bytes : tensor_alignment;
}
/// Allocates `bytes` (uninitialised), 64-byte aligned, huge-page backed when large. Free with `deallocate`.
[[nodiscard]] inline void* allocate(std::size_t bytes) {
  const std::size_t align = allocation_alignment(bytes);
  void* p = ::operator new(bytes, std::align_val_t{align});
#if defined(__linux__)
  constexpr int madv_hugepage = 14;  // MADV_HUGEPAGE
  if (align == huge_page_bytes) ::madvise(p, (bytes + align - 1) / align * align, madv_hugepage);
#endif
  return p;
}
inline void deallocate(void* p, std::size_t bytes) noexcept {
  ::operator delete(p, std::align_val_t{allocation_alignment(bytes)});
}
}  // namespace detail

/// Concrete sizes of a tensor, held inline up to rank 6 (no allocation for the shapes models use); converts to
/// `std::span<const std::int64_t>`.
using tensor_sizes = detail::inline_vector<std::int64_t, 6>;

/// @brief A typed view of a tensor's elements: a pointer and the sizes. Cheap to copy; does not own.
template <class T>
struct tensor_view {
  T* data = nullptr;
  std::span<const std::int64_t> sizes;
  std::size_t count = 0;

  [[nodiscard]] T* begin() const noexcept { return data; }
  [[nodiscard]] T* end() const noexcept { return data + count; }
  [[nodiscard]] T& operator[](std::size_t i) const noexcept { return data[i]; }
  [[nodiscard]] std::size_t size() const noexcept { return count; }
  [[nodiscard]] std::span<T> span() const noexcept { return {data, count}; }
};

/// @brief A tensor value. Copies share the storage (like a `std::shared_ptr`); `clone()` copies the elements.
///
/// String tensors own a `std::string` per element. Every other type is a contiguous, row-major array.
class tensor {
 public:
  tensor() = default;

  /// @brief Allocates zero-initialised, 64-byte aligned storage for `sizes` elements of `type`.
  /// @throws std::length_error when a size is negative or the byte count overflows.
  tensor(element_type type, std::span<const std::int64_t> sizes) : type_(type), sizes_(sizes.begin(), sizes.end()) {
    const auto n = epstack::element_count(sizes);
    if (!n || !is_valid(type)) throw std::length_error("tensor: invalid sizes or element type");
    count_ = static_cast<std::size_t>(*n);
    allocate();
  }
  tensor(element_type type, std::initializer_list<std::int64_t> sizes)
      : tensor(type, std::span<const std::int64_t>(sizes.begin(), sizes.size())) {}

  /// @brief Like the constructor, but the elements are left uninitialised (strings are still constructed empty):
  /// for outputs that a kernel overwrites whole.
  [[nodiscard]] static tensor uninitialized(element_type type, std::span<const std::int64_t> sizes) {
    tensor t;
    t.type_ = type;
    t.sizes_.assign(sizes.begin(), sizes.end());
    const auto n = epstack::element_count(sizes);
    if (!n || !is_valid(type)) throw std::length_error("tensor: invalid sizes or element type");
    t.count_ = static_cast<std::size_t>(*n);
    t.allocate(false);
    return t;
  }

  /// @brief A tensor of new sizes over the same storage (same element count), as Reshape needs; shares ownership.
  [[nodiscard]] tensor reshaped(std::span<const std::int64_t> sizes) const {
    tensor t = *this;
    t.sizes_.assign(sizes.begin(), sizes.end());
    t.name_.clear();
    t.file_backed_ = false;  // a view may be written through
    if (static_cast<std::size_t>(epstack::element_count(sizes).value_or(-1)) != count_)
      throw std::length_error("tensor::reshaped: the element count differs");
    return t;
  }
  /// The storage's owner (null for storage borrowed without one).
  [[nodiscard]] const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

  /// @brief Borrows `data` (not copied). `owner` keeps the bytes alive (a mapped file, a buffer); may be null when the
  /// caller guarantees the lifetime. `data` must hold `storage_bytes(type, element_count(sizes))` bytes.
  [[nodiscard]] static tensor borrow(element_type type, std::span<const std::int64_t> sizes, void* data,
                                     std::shared_ptr<const void> owner) {
    tensor t;
    t.type_ = type;
    t.sizes_.assign(sizes.begin(), sizes.end());
    t.count_ = static_cast<std::size_t>(epstack::element_count(sizes).value_or(0));
    t.data_ = static_cast<std::byte*>(data);
    t.owner_ = std::move(owner);
    t.borrowed_ = true;
    return t;
  }

  /// @brief Borrows `data` inside a file mapped privately by `owner` (a mapped_file): as `borrow`, and the pages may
  /// be dropped from memory once read (see `is_file_backed`). Such a tensor is read-only: the providers lay weights
  /// out from the file itself (weight_memory.hpp's read_mapped), so a write through it would not reach them; to
  /// change an initializer loaded from a file, replace it with a tensor of its own.
  [[nodiscard]] static tensor borrow_file(element_type type, std::span<const std::int64_t> sizes, void* data,
                                          std::shared_ptr<const void> owner) {
    tensor t = borrow(type, sizes, data, std::move(owner));
    t.file_backed_ = true;
    return t;
  }

  /// @brief A tensor with the given elements (owned copy).
  template <onnx_element T>
  [[nodiscard]] static tensor from(std::span<const std::int64_t> sizes, std::span<const T> values) {
    tensor t(element_type_of_v<T>, sizes);
    if (values.size() != t.count_) throw std::length_error("tensor::from: value count does not match the sizes");
    std::copy(values.begin(), values.end(), t.typed<T>());
    return t;
  }
  template <onnx_element T>
  [[nodiscard]] static tensor from(std::initializer_list<std::int64_t> sizes, std::initializer_list<T> values) {
    return from<T>(std::span<const std::int64_t>(sizes.begin(), sizes.size()),
                   std::span<const T>(values.begin(), values.size()));
  }
  /// A scalar (rank 0).
  template <onnx_element T>
  [[nodiscard]] static tensor scalar(T value) {
    tensor t(element_type_of_v<T>, std::span<const std::int64_t>{});
    *t.typed<T>() = std::move(value);
    return t;
  }

  [[nodiscard]] element_type type() const noexcept { return type_; }
  [[nodiscard]] std::span<const std::int64_t> sizes() const noexcept { return sizes_; }
  [[nodiscard]] std::size_t rank() const noexcept { return sizes_.size(); }
  [[nodiscard]] std::size_t element_count() const noexcept { return count_; }
  /// Bytes of element data (for strings: count * sizeof(std::string)).
  [[nodiscard]] std::size_t byte_size() const noexcept { return storage_bytes(type_, count_); }
  [[nodiscard]] bool empty() const noexcept { return type_ == element_type::undefined; }
  /// True when the storage is borrowed (for example memory-mapped) rather than owned.
  [[nodiscard]] bool is_borrowed() const noexcept { return borrowed_; }
  /// True when the elements live in a privately mapped, unmodified file: dropping their pages from memory is safe,
  /// the next read maps them from the file again (a kernel that has packed a weight releases it so).
  [[nodiscard]] bool is_file_backed() const noexcept { return file_backed_; }
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::byte* mutable_data() noexcept { return data_; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return {data_, type_ == element_type::string ? 0 : byte_size()};
  }
  [[nodiscard]] shape get_shape() const { return shape::of(sizes_); }

  /// Optional name (a TensorProto's name: initializers and attribute tensors carry one).
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  /// @brief The elements as `T*`. An error "no matching function" here means T is not an ONNX element type.
  /// @throws std::invalid_argument when T is not the tensor's element type.
  template <onnx_element T>
  [[nodiscard]] T* typed() {
    check_type<T>();
    return reinterpret_cast<T*>(data_);
  }
  template <onnx_element T>
  [[nodiscard]] const T* typed() const {
    check_type<T>();
    return reinterpret_cast<const T*>(data_);
  }
  template <onnx_element T>
  [[nodiscard]] tensor_view<T> view() {
    return {typed<T>(), sizes_, count_};
  }
  template <onnx_element T>
  [[nodiscard]] tensor_view<const T> view() const {
    return {typed<T>(), sizes_, count_};
  }

  /// @brief A deep copy with owned storage.
  [[nodiscard]] tensor clone() const {
    if (empty()) return {};
    tensor t = uninitialized(type_, sizes_);
    t.name_ = name_;
    if (type_ == element_type::string)
      std::copy_n(reinterpret_cast<const std::string*>(data_), count_, reinterpret_cast<std::string*>(t.data_));
    else if (count_ != 0)
      std::memcpy(t.data_, data_, byte_size());
    return t;
  }

  /// @brief Same type, sizes and element values (strings compared by content; floats bitwise).
  [[nodiscard]] bool same_content(const tensor& o) const {
    if (type_ != o.type_ || !std::equal(sizes_.begin(), sizes_.end(), o.sizes_.begin(), o.sizes_.end())) return false;
    if (type_ == element_type::string) {
      const auto* a = reinterpret_cast<const std::string*>(data_);
      const auto* b = reinterpret_cast<const std::string*>(o.data_);
      return std::equal(a, a + count_, b);
    }
    return count_ == 0 || std::memcmp(data_, o.data_, byte_size()) == 0;
  }

 private:
  template <class T>
  void check_type() const {
    if (element_type_of_v<T> != type_) [[unlikely]]
      type_mismatch(element_type_of_v<T>);
  }
  // Out of line and shared by every type: each typed<T>() keeps only the comparison.
  [[noreturn, gnu::noinline, gnu::cold]] void type_mismatch(element_type wanted) const {
    throw std::invalid_argument(std::string("tensor: element type is ") + std::string(to_string(type_)) + ", not " +
                                std::string(to_string(wanted)));
  }

  void allocate(bool zero = true) {
    const std::size_t es = element_size(type_);
    if (count_ > (std::size_t{1} << 62) / std::max<std::size_t>(es, 1)) throw std::length_error("tensor: too large");
    const std::size_t bytes = std::max<std::size_t>(storage_bytes(type_, count_), 1);
    auto* p = static_cast<std::byte*>(detail::allocate(bytes));
    if (type_ == element_type::string) std::uninitialized_value_construct_n(reinterpret_cast<std::string*>(p), count_);
    else if (zero) std::memset(p, 0, bytes);
    const bool strings = type_ == element_type::string;
    owner_ = std::shared_ptr<std::byte>(p, [n = count_, strings, bytes](std::byte* q) {
      if (strings) std::destroy_n(reinterpret_cast<std::string*>(q), n);
      detail::deallocate(q, bytes);
    });
    data_ = p;
  }

  element_type type_ = element_type::undefined;
  tensor_sizes sizes_;
  std::size_t count_ = 0;
  std::byte* data_ = nullptr;
  std::shared_ptr<const void> owner_;
  bool borrowed_ = false;
  bool file_backed_ = false;
  std::string name_;
};

/// @brief A sparse tensor (ONNX `SparseTensorProto`): values [NNZ], indices [NNZ] or [NNZ, rank], dense sizes.
struct sparse_tensor {
  tensor values;
  tensor indices;
  std::vector<std::int64_t> dims;
};

}  // namespace epstack
