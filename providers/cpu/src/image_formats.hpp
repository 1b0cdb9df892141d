#pragma once
// The image decoders of ImageDecoder written in epstack (BMP and PNM), and what they share with image_decoder.cpp: the
// decoded image and the size limits. The stream is untrusted: every malformed, truncated or oversized input is an
// invalid_argument error, never a crash. Private to the epstack::cpu library.
#include "kernel_util.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace epstack::cpu::impl {

/// The largest image decoded, in pixels (2^27: 128 megapixels, 384 MiB as RGB).
constexpr std::uint64_t max_image_pixels = std::uint64_t{1} << 27;
/// The largest width or height.
constexpr std::uint64_t max_image_side = std::uint64_t{1} << 20;

/// A decoded image: rows of `channels` (1: gray, 3: RGB) 8-bit samples.
struct decoded {
  std::int64_t height = 0, width = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;

  /// Sizes the image; false with `why` set when it is empty, too large, or memory runs out. Never throws (it is
  /// called between a codec's setjmp and its longjmp).
  bool allocate(std::uint64_t w, std::uint64_t h, int c, std::string& why) noexcept {
    try {
      if (w == 0 || h == 0) {
        why = cat("the image is empty (", std::to_string(w), "x", std::to_string(h), ")");
        return false;
      }
      if (w > max_image_side || h > max_image_side || w * h > max_image_pixels) {
        why = cat("the image is ", std::to_string(w), "x", std::to_string(h), ", larger than the decoder's limit of ",
                  std::to_string(max_image_pixels), " pixels");
        return false;
      }
      width = static_cast<std::int64_t>(w);
      height = static_cast<std::int64_t>(h);
      channels = c;
      pixels.assign(static_cast<std::size_t>(w * h) * static_cast<std::size_t>(c), 0);
      return true;
    } catch (const std::bad_alloc&) {
      why = "out of memory";
      return false;
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// PNM: P1 (PBM text), P2 (PGM text), P3 (PPM text), P4, P5, P6 (binary) and P7 (PAM), maxval up to 65535. The
// header parser is here because image_decoder.cpp's format sniffing uses its whitespace test.

struct pnm_parser {
  std::span<const std::uint8_t> s;
  std::size_t pos = 0;
  static bool space(std::uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
  void skip() {
    while (pos < s.size()) {
      if (space(s[pos])) ++pos;
      else if (s[pos] == '#')
        while (pos < s.size() && s[pos] != '\n' && s[pos] != '\r') ++pos;
      else break;
    }
  }
  /// The next decimal number of the header; nullopt when there is none.
  std::optional<std::uint64_t> number() {
    skip();
    if (pos >= s.size() || s[pos] < '0' || s[pos] > '9') return std::nullopt;
    std::uint64_t v = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      v = std::min<std::uint64_t>(v * 10 + (s[pos] - '0'), std::uint64_t{1} << 40);
      ++pos;
    }
    return v;
  }
  /// The next word (a PAM header keyword or value).
  std::string word() {
    skip();
    std::string w;
    while (pos < s.size() && !space(s[pos]) && w.size() < 64) w.push_back(static_cast<char>(s[pos++]));
    return w;
  }
};

/// BMP (Windows and OS/2 bitmaps) into `out` as RGB; on failure `why` says what is wrong.
Status decode_bmp(std::span<const std::uint8_t> s, decoded& out, std::string& why);
/// PNM (PBM, PGM, PPM, PAM) into `out` as gray or RGB; on failure `why` says what is wrong.
Status decode_pnm(std::span<const std::uint8_t> s, decoded& out, std::string& why);

}  // namespace epstack::cpu::impl
