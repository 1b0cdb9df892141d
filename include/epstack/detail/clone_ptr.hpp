#pragma once
// A copyable owning pointer whose copies deep-copy the pointee. The cloner and deleter are captured where T is
// complete, so clone_ptr<T> can be a member while T is still incomplete (a graph inside an attribute inside a graph).

#include <utility>

namespace epstack::detail {

template <class T>
class clone_ptr {
 public:
  clone_ptr() noexcept = default;
  /// Takes ownership of `p`; instantiate where T is complete.
  explicit clone_ptr(T* p) noexcept
      : p_(p), clone_([](const T& t) { return new T(t); }), delete_([](T* t) { delete t; }) {}
  template <class... A>
  [[nodiscard]] static clone_ptr make(A&&... a) { return clone_ptr(new T(std::forward<A>(a)...)); }

  clone_ptr(const clone_ptr& o) : p_(o.p_ ? o.clone_(*o.p_) : nullptr), clone_(o.clone_), delete_(o.delete_) {}
  clone_ptr(clone_ptr&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), clone_(o.clone_), delete_(o.delete_) {}
  clone_ptr& operator=(clone_ptr o) noexcept {
    swap(o);
    return *this;
  }
  ~clone_ptr() {
    if (p_) delete_(p_);
  }
  void swap(clone_ptr& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(clone_, o.clone_);
    std::swap(delete_, o.delete_);
  }

  [[nodiscard]] T* get() const noexcept { return p_; }
  [[nodiscard]] T& operator*() const noexcept { return *p_; }
  [[nodiscard]] T* operator->() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
  T* (*clone_)(const T&) = nullptr;
  void (*delete_)(T*) = nullptr;
};

}  // namespace epstack::detail
