#pragma once
/// @file detail/inline_vector.hpp
/// @brief A vector of trivially copyable values held inline up to N (spilling to the heap beyond), with pointer
/// iterators so that it converts to `std::span` (Boost's small_vector does not model a contiguous range in C++20's
/// sense). Tensor sizes use it: no allocation for the shapes models use.

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <span>
#include <type_traits>

namespace epstack::detail {

template <class T, std::size_t N>
class inline_vector {
  static_assert(std::is_trivially_copyable_v<T>, "inline_vector holds trivially copyable values");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using iterator = T*;
  using const_iterator = const T*;
  using reference = T&;
  using const_reference = const T&;

  inline_vector() noexcept = default;
  inline_vector(size_type n, const T& v) { assign_fill(n, v); }
  explicit inline_vector(size_type n) { assign_fill(n, T{}); }
  inline_vector(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  template <class It, class = typename std::iterator_traits<It>::iterator_category>
  inline_vector(It first, It last) {
    assign(first, last);
  }
  inline_vector(const inline_vector& o) { assign(o.begin(), o.end()); }
  inline_vector(inline_vector&& o) noexcept { take(std::move(o)); }
  inline_vector& operator=(const inline_vector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  inline_vector& operator=(inline_vector&& o) noexcept {
    if (this != &o) {
      heap_.reset();
      take(std::move(o));
    }
    return *this;
  }
  inline_vector& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }

  template <class It>
  void assign(It first, It last) {
    const auto n = static_cast<size_type>(std::distance(first, last));
    if (n > capacity()) grow_discard(n);
    std::copy(first, last, data());
    size_ = n;
  }

  [[nodiscard]] T* data() noexcept { return heap_ ? heap_.get() : inline_; }
  [[nodiscard]] const T* data() const noexcept { return heap_ ? heap_.get() : inline_; }
  [[nodiscard]] size_type size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] size_type capacity() const noexcept { return heap_ ? cap_ : N; }
  [[nodiscard]] iterator begin() noexcept { return data(); }
  [[nodiscard]] iterator end() noexcept { return data() + size_; }
  [[nodiscard]] const_iterator begin() const noexcept { return data(); }
  [[nodiscard]] const_iterator end() const noexcept { return data() + size_; }
  [[nodiscard]] T& operator[](size_type i) noexcept { return data()[i]; }
  [[nodiscard]] const T& operator[](size_type i) const noexcept { return data()[i]; }
  [[nodiscard]] T& front() noexcept { return data()[0]; }
  [[nodiscard]] const T& front() const noexcept { return data()[0]; }
  [[nodiscard]] T& back() noexcept { return data()[size_ - 1]; }
  [[nodiscard]] const T& back() const noexcept { return data()[size_ - 1]; }

  void clear() noexcept { size_ = 0; }
  void reserve(size_type n) {
    if (n > capacity()) grow_keep(n);
  }
  void resize(size_type n, const T& v = T{}) {
    reserve(n);
    if (n > size_) std::fill(data() + size_, data() + n, v);
    size_ = n;
  }
  void push_back(const T& v) {
    if (size_ == capacity()) {
      const T copy = v;  // v may live in this vector
      grow_keep(size_ * 2 + 1);
      data()[size_++] = copy;
      return;
    }
    data()[size_++] = v;
  }
  void pop_back() noexcept { --size_; }
  iterator insert(const_iterator pos, const T& v) {
    const T copy = v;
    const auto i = static_cast<size_type>(pos - begin());
    if (size_ == capacity()) grow_keep(size_ * 2 + 1);
    std::copy_backward(data() + i, data() + size_, data() + size_ + 1);
    data()[i] = copy;
    ++size_;
    return data() + i;
  }
  template <class It, class = typename std::iterator_traits<It>::iterator_category>
  iterator insert(const_iterator pos, It first, It last) {
    const auto i = static_cast<size_type>(pos - begin());
    const auto n = static_cast<size_type>(std::distance(first, last));
    inline_vector tail(begin() + i, end());
    resize(i);
    reserve(i + n + tail.size());
    for (; first != last; ++first) data()[size_++] = *first;
    for (const auto& t : tail) data()[size_++] = t;
    return data() + i;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto i = static_cast<size_type>(first - begin()), j = static_cast<size_type>(last - begin());
    std::copy(data() + j, data() + size_, data() + i);
    size_ -= j - i;
    return data() + i;
  }

  operator std::span<const T>() const noexcept { return {data(), size_}; }  // NOLINT(google-explicit-constructor)
  operator std::span<T>() noexcept { return {data(), size_}; }              // NOLINT(google-explicit-constructor)

  friend bool operator==(const inline_vector& a, const inline_vector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void assign_fill(size_type n, const T& v) {
    if (n > capacity()) grow_discard(n);
    std::fill_n(data(), n, v);
    size_ = n;
  }
  void grow_discard(size_type n) {
    heap_ = std::make_unique_for_overwrite<T[]>(n);
    cap_ = n;
  }
  void grow_keep(size_type n) {
    auto p = std::make_unique_for_overwrite<T[]>(n);
    std::copy_n(data(), size_, p.get());
    heap_ = std::move(p);
    cap_ = n;
  }
  void take(inline_vector&& o) noexcept {
    size_ = o.size_;
    if (o.heap_) {
      heap_ = std::move(o.heap_);
      cap_ = o.cap_;
    } else {
      std::copy_n(o.inline_, o.size_, inline_);
    }
    o.size_ = 0;
  }

  T inline_[N]{};
  std::unique_ptr<T[]> heap_;
  size_type size_ = 0;
  size_type cap_ = 0;
};

}  // namespace epstack::detail
