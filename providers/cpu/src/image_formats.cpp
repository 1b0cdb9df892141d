// The BMP and PNM decoders of ImageDecoder (see image_formats.hpp).
#include "image_formats.hpp"

#include <array>
#include <bit>

namespace epstack::cpu::impl {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// BMP (Windows and OS/2 bitmaps): 1, 2, 4, 8 bits indexed (uncompressed, RLE8, RLE4), 16 and 32 bits with default or
// explicit bit fields, 24 bits.

struct byte_reader {
  std::span<const std::uint8_t> s;
  [[nodiscard]] bool has(std::uint64_t off, std::uint64_t n) const { return off <= s.size() && n <= s.size() - off; }
  [[nodiscard]] std::uint32_t u16(std::uint64_t o) const { return static_cast<std::uint32_t>(s[o] | (s[o + 1] << 8)); }
  [[nodiscard]] std::uint32_t u32(std::uint64_t o) const {
    return static_cast<std::uint32_t>(s[o]) | (static_cast<std::uint32_t>(s[o + 1]) << 8) |
           (static_cast<std::uint32_t>(s[o + 2]) << 16) | (static_cast<std::uint32_t>(s[o + 3]) << 24);
  }
};

struct bit_field {
  std::uint32_t mask = 0;
  int shift = 0;
  std::uint64_t max = 0;
  explicit bit_field(std::uint32_t m = 0) : mask(m) {
    if (m == 0) return;
    shift = std::countr_zero(m);
    max = (std::uint64_t{1} << std::popcount(m >> shift)) - 1;
  }
  [[nodiscard]] std::uint8_t operator()(std::uint32_t px) const {
    if (mask == 0) return 0;
    return static_cast<std::uint8_t>(std::min<std::uint64_t>(((px & mask) >> shift) * 255 / max, 255));
  }
};

}  // namespace

Status decode_bmp(std::span<const std::uint8_t> s, decoded& out, std::string& why) {
  const byte_reader r{s};
  const auto fail = [&](std::string w) {
    why = std::move(w);
    return invalid(why);
  };
  if (!r.has(0, 18)) return fail("the data ends early (truncated BMP header)");
  const std::uint64_t bits_at = r.u32(10), hsize = r.u32(14);
  if (!r.has(14, hsize)) return fail("the data ends early (truncated BMP header)");
  std::int64_t w = 0, h = 0;
  std::uint32_t bpp = 0, comp = 0, used = 0;
  if (hsize == 12) {  // OS/2 1.x BITMAPCOREHEADER
    w = r.u16(18);
    h = static_cast<std::int16_t>(r.u16(20));
    bpp = r.u16(24);
  } else if (hsize >= 40) {
    w = static_cast<std::int32_t>(r.u32(18));
    h = static_cast<std::int32_t>(r.u32(22));
    bpp = r.u16(28);
    comp = r.u32(30);
    used = r.u32(46);
    if (hsize == 64 && comp >= 3) return fail("OS/2 Huffman or RLE24 bitmaps are not supported");
  } else {
    return fail(cat("unsupported BMP header size ", std::to_string(hsize)));
  }
  const bool top_down = h < 0;
  if (top_down) h = -h;
  if (w <= 0 || h <= 0 || static_cast<std::uint64_t>(w) > max_image_side || static_cast<std::uint64_t>(h) > max_image_side)
    return fail(cat("invalid BMP size ", std::to_string(w), "x", std::to_string(h)));
  if (comp == 4 || comp == 5) return fail("BMP with an embedded JPEG or PNG is not supported");
  if (comp > 3 && comp != 6) return fail(cat("unsupported BMP compression ", std::to_string(comp)));
  const bool rle = comp == 1 || comp == 2, fields = comp == 3 || comp == 6;
  if ((comp == 1 && bpp != 8) || (comp == 2 && bpp != 4) || (fields && bpp != 16 && bpp != 32))
    return fail(cat("BMP compression ", std::to_string(comp), " does not go with ", std::to_string(bpp), " bits a pixel"));
  if (bpp != 1 && bpp != 2 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32)
    return fail(cat("unsupported BMP depth of ", std::to_string(bpp), " bits"));
  if (rle && top_down) return fail("a top-down BMP cannot be RLE-compressed");

  // Bit fields: in the header (V2 and later), after a 40-byte header, or the defaults.
  bit_field red, green, blue;
  if (fields) {
    const std::uint64_t at = hsize >= 52 ? 54 : 14 + hsize;
    if (!r.has(at, 12)) return fail("the data ends early (truncated BMP bit fields)");
    red = bit_field(r.u32(at));
    green = bit_field(r.u32(at + 4));
    blue = bit_field(r.u32(at + 8));
  } else if (bpp == 16) {
    red = bit_field(0x7c00);
    green = bit_field(0x03e0);
    blue = bit_field(0x001f);
  } else if (bpp == 32) {
    red = bit_field(0x00ff0000);
    green = bit_field(0x0000ff00);
    blue = bit_field(0x000000ff);
  }
  // The palette.
  std::vector<std::array<std::uint8_t, 3>> pal;
  if (bpp <= 8) {
    const std::uint64_t entry = hsize == 12 ? 3 : 4;
    const std::uint64_t at = 14 + hsize + (comp == 3 && hsize == 40 ? 12 : comp == 6 && hsize == 40 ? 16 : 0);
    std::uint64_t n = std::uint64_t{1} << bpp;
    if (used != 0 && used < n) n = used;
    const std::uint64_t end = std::min<std::uint64_t>(bits_at > at ? bits_at : s.size(), s.size());
    if (end < at) return fail("the data ends early (truncated BMP palette)");
    n = std::min(n, (end - at) / entry);
    if (n == 0) return fail("the BMP palette is missing");
    pal.resize(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint8_t* p = s.data() + at + i * entry;
      pal[i] = {p[2], p[1], p[0]};
    }
  }
  if (bits_at >= s.size()) return fail("the data ends early (no BMP pixel data)");
  const std::uint64_t stride = ((static_cast<std::uint64_t>(w) * bpp + 31) / 32) * 4;
  if (!rle && (stride * static_cast<std::uint64_t>(h) > s.size() - bits_at))
    return fail("the data ends early (truncated BMP pixel data)");
  if (!out.allocate(static_cast<std::uint64_t>(w), static_cast<std::uint64_t>(h), 3, why)) return invalid(why);
  std::uint8_t* dst = out.pixels.data();
  const auto put_index = [&](std::int64_t x, std::int64_t file_row, std::uint32_t idx) {
    const std::int64_t y = top_down ? file_row : h - 1 - file_row;
    std::uint8_t* p = dst + (y * w + x) * 3;
    if (idx < pal.size()) std::copy(pal[idx].begin(), pal[idx].end(), p);
    else p[0] = p[1] = p[2] = 0;
  };
  if (rle) {
    // Unwritten pixels keep palette entry 0.
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x) put_index(x, y, 0);
    std::uint64_t pos = bits_at;
    std::int64_t x = 0, y = 0;
    bool done = false;
    const auto put = [&](std::uint32_t idx) {
      if (x < w && y < h) put_index(x, y, idx);
      ++x;
    };
    while (!done && y < h) {
      if (!r.has(pos, 2)) return fail("the data ends early (truncated BMP RLE data)");
      const std::uint32_t n = s[pos], c = s[pos + 1];
      pos += 2;
      if (n > 0) {  // a run
        for (std::uint32_t k = 0; k < n; ++k) put(comp == 1 ? c : (k % 2 == 0 ? c >> 4 : c & 15));
      } else if (c == 0) {  // end of line
        x = 0;
        ++y;
      } else if (c == 1) {  // end of bitmap
        done = true;
      } else if (c == 2) {  // delta
        if (!r.has(pos, 2)) return fail("the data ends early (truncated BMP RLE data)");
        x += s[pos];
        y += s[pos + 1];
        pos += 2;
      } else {  // absolute run of c pixels, padded to 16 bits
        const std::uint64_t bytes = comp == 1 ? c : (c + 1) / 2;
        if (!r.has(pos, bytes)) return fail("the data ends early (truncated BMP RLE data)");
        for (std::uint32_t k = 0; k < c; ++k) {
          const std::uint8_t b = s[pos + (comp == 1 ? k : k / 2)];
          put(comp == 1 ? b : (k % 2 == 0 ? b >> 4 : b & 15));
        }
        pos += bytes + (bytes & 1);
      }
    }
    return {};
  }
  for (std::int64_t fy = 0; fy < h; ++fy) {
    const std::uint8_t* row = s.data() + bits_at + static_cast<std::uint64_t>(fy) * stride;
    const std::int64_t y = top_down ? fy : h - 1 - fy;
    std::uint8_t* o = dst + y * w * 3;
    for (std::int64_t x = 0; x < w; ++x) {
      switch (bpp) {
        case 1: case 2: case 4: case 8: {
          const std::uint64_t bit = static_cast<std::uint64_t>(x) * bpp;
          const std::uint32_t idx = (row[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
          put_index(x, fy, idx);
          break;
        }
        case 24:
          o[x * 3] = row[x * 3 + 2];
          o[x * 3 + 1] = row[x * 3 + 1];
          o[x * 3 + 2] = row[x * 3];
          break;
        default: {
          const std::uint32_t px = bpp == 16 ? static_cast<std::uint32_t>(row[x * 2] | (row[x * 2 + 1] << 8))
                                             : byte_reader{std::span<const std::uint8_t>(row + x * 4, 4)}.u32(0);
          o[x * 3] = red(px);
          o[x * 3 + 1] = green(px);
          o[x * 3 + 2] = blue(px);
        }
      }
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// PNM (the header parser, pnm_parser, is in image_formats.hpp).

Status decode_pnm(std::span<const std::uint8_t> s, decoded& out, std::string& why) {
  const auto fail = [&](std::string w) {
    why = std::move(w);
    return invalid(why);
  };
  if (s.size() < 3) return fail("the data ends early (truncated PNM header)");
  const int kind = s[1] - '0';
  pnm_parser p{s, 2};
  // PAM has no defaults: a missing DEPTH or MAXVAL stays 0 and is rejected below.
  std::uint64_t w = 0, h = 0, maxval = kind == 7 ? 0 : 1, depth = kind == 7 ? 0 : 1;
  if (kind == 7) {
    bool end = false;
    while (!end) {
      const std::string key = p.word();
      if (key.empty()) return fail("the data ends early (truncated PAM header)");
      if (key == "ENDHDR") end = true;
      else if (key == "TUPLTYPE") {
        while (p.pos < s.size() && s[p.pos] != '\n') ++p.pos;  // the type follows from DEPTH
      } else {
        const auto v = p.number();
        if (!v) return fail(cat("PAM header field ", key, " has no number"));
        if (key == "WIDTH") w = *v;
        else if (key == "HEIGHT") h = *v;
        else if (key == "DEPTH") depth = *v;
        else if (key == "MAXVAL") maxval = *v;
        else return fail(cat("unknown PAM header field ", key));
      }
    }
    if (depth < 1 || depth > 4) return fail(cat("unsupported PAM depth ", std::to_string(depth)));
  } else {
    const auto pw = p.number(), ph = p.number();
    if (!pw || !ph) return fail("the PNM header has no valid size");
    w = *pw;
    h = *ph;
    if (kind != 1 && kind != 4) {
      const auto m = p.number();
      if (!m) return fail("the PNM header has no valid maxval");
      maxval = *m;
    }
    depth = kind == 3 || kind == 6 ? 3 : 1;
  }
  if (maxval < 1 || maxval > 65535) return fail(cat("invalid PNM maxval ", std::to_string(maxval)));
  const bool text = kind <= 3;
  if (!text) {  // exactly one whitespace character before the samples
    if (p.pos >= s.size() || !pnm_parser::space(s[p.pos])) return fail("the data ends early (truncated PNM header)");
    ++p.pos;
  }
  if (w == 0 || h == 0 || w > max_image_side || h > max_image_side)
    return fail(cat("invalid PNM size ", std::to_string(w), "x", std::to_string(h)));
  const std::uint64_t samples = w * h * depth;
  const std::uint64_t sample_bytes = maxval > 255 ? 2 : 1;
  const std::uint64_t left = s.size() - p.pos;
  // Enough data for every sample (text samples take at least a byte each) before anything is allocated.
  const std::uint64_t need = kind == 4 ? (w + 7) / 8 * h : text ? samples : samples * sample_bytes;
  if (need > left) return fail("the data ends early (truncated PNM pixel data)");
  const int channels = depth >= 3 ? 3 : 1;
  if (!out.allocate(w, h, channels, why)) return invalid(why);
  const auto scale = [&](std::uint64_t v) {
    return static_cast<std::uint8_t>(std::min(v, maxval) * 255 / maxval);
  };
  std::uint8_t* dst = out.pixels.data();
  const std::uint64_t pixels = w * h;
  if (kind == 4) {
    const std::uint64_t row = (w + 7) / 8;
    for (std::uint64_t y = 0; y < h; ++y)
      for (std::uint64_t x = 0; x < w; ++x) {
        const bool black = (s[p.pos + y * row + x / 8] >> (7 - x % 8)) & 1;
        dst[y * w + x] = black ? 0 : 255;
      }
    return {};
  }
  for (std::uint64_t i = 0; i < pixels; ++i) {
    std::uint8_t v[4] = {};
    for (std::uint64_t c = 0; c < depth; ++c) {
      std::uint64_t raw = 0;
      if (kind == 1) {  // '0' white, '1' black, separators optional
        p.skip();
        if (p.pos >= s.size() || (s[p.pos] != '0' && s[p.pos] != '1')) return fail("the data ends early (truncated PBM samples)");
        v[c] = s[p.pos++] == '1' ? 0 : 255;
        continue;
      }
      if (text) {
        const auto n = p.number();
        if (!n) return fail("the data ends early (truncated or invalid PNM text samples)");
        raw = *n;
      } else if (sample_bytes == 2) {
        raw = (std::uint64_t{s[p.pos]} << 8) | s[p.pos + 1];
        p.pos += 2;
      } else {
        raw = s[p.pos++];
      }
      v[c] = scale(raw);
    }
    if (channels == 1) dst[i] = v[0];
    else std::copy_n(v, 3, dst + i * 3);
  }
  return {};
}

}  // namespace epstack::cpu::impl
