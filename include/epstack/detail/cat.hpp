#pragma once
// Concatenates string-like pieces into one std::string. Used for messages instead of chains of operator+, on which
// g++-12 -O3 reports false -Wrestrict warnings (GCC PR 105329). The template only takes views of its pieces; the
// joining is one function for every message of a program (each message's own copy of it cost a deployable 23 kB).

#include <initializer_list>
#include <string>
#include <string_view>

namespace epstack::detail {

[[gnu::noinline]] inline std::string cat_views(std::initializer_list<std::string_view> pieces) {
  std::size_t n = 0;
  for (const auto p : pieces) n += p.size();
  std::string s;
  s.reserve(n);
  for (const auto p : pieces) s.append(p);
  return s;
}

template <class... A>
[[nodiscard]] std::string cat(const A&... pieces) {
  return cat_views({std::string_view(pieces)...});
}

}  // namespace epstack::detail
