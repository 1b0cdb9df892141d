#pragma once
// Concatenates string-like pieces into one std::string. Used for messages instead of chains of operator+, on which
// g++-12 -O3 reports false -Wrestrict warnings (GCC PR 105329).

#include <string>
#include <string_view>

namespace epstack::detail {

template <class... A>
[[nodiscard]] std::string cat(const A&... pieces) {
  std::string s;
  s.reserve((std::string_view(pieces).size() + ... + 0));
  (s.append(std::string_view(pieces)), ...);
  return s;
}

}  // namespace epstack::detail
