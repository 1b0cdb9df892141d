// Tests of the CPU provider's ImageDecoder (image_decoder.cpp): images made here, BMP, PNM, PNG and TIFF written byte
// by byte, JPEG, WebP and JPEG 2000 with the codecs' own encoders (linked through epstack::cpu); corrupt, truncated
// and unknown streams.
#include "misc_support.hpp"

#include <jpeglib.h>
#include <openjpeg-2.5/openjpeg.h>
#include <webp/encode.h>

#include <array>
#include <cmath>
#include <cstring>

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

namespace {

using bytes = std::vector<std::uint8_t>;

}  // namespace

// =================================================================================================================
// ImageDecoder

namespace {

struct rgb_image {
  int w = 0, h = 0;
  bytes px;  // RGB, row-major
  [[nodiscard]] const std::uint8_t* at(int x, int y) const { return px.data() + (static_cast<std::size_t>(y) * w + x) * 3; }
};

/// A w x h test picture: distinct colours, so that flips and channel swaps show.
rgb_image test_picture(int w, int h) {
  rgb_image im{w, h, bytes(static_cast<std::size_t>(w * h * 3))};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      std::uint8_t* p = im.px.data() + (static_cast<std::size_t>(y) * w + x) * 3;
      p[0] = static_cast<std::uint8_t>(x * 255 / std::max(1, w - 1));
      p[1] = static_cast<std::uint8_t>(y * 255 / std::max(1, h - 1));
      p[2] = static_cast<std::uint8_t>((x * 37 + y * 91) % 256);
    }
  return im;
}
/// A smooth picture (for the lossy JPEG).
rgb_image smooth_picture(int w, int h) {
  rgb_image im{w, h, bytes(static_cast<std::size_t>(w * h * 3))};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      std::uint8_t* p = im.px.data() + (static_cast<std::size_t>(y) * w + x) * 3;
      p[0] = static_cast<std::uint8_t>(40 + x * 8);
      p[1] = static_cast<std::uint8_t>(200 - y * 6);
      p[2] = static_cast<std::uint8_t>(90 + (x + y) * 3);
    }
  return im;
}

/// Pillow's luma (ITU-R 601-2 in 16-bit fixed point).
std::uint8_t luma(const std::uint8_t* p) { return static_cast<std::uint8_t>((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16); }

tensor stream(const bytes& b) { return make<std::uint8_t>({static_cast<i64>(b.size())}, b); }

kernel_node decoder(const std::string& format = "RGB") { return op("ImageDecoder", 20).set("pixel_format", format); }

tensor decode(const bytes& b, const std::string& format = "RGB") { return run1<ops::image_decoder>(decoder(format), {{stream(b)}}); }

/// Checks an RGB output against `want` within `tol` per sample.
void check_rgb(const tensor& got, const rgb_image& want, int tol = 0) {
  REQUIRE(got.type() == element_type::uint8);
  REQUIRE(dims_of(got) == ints{want.h, want.w, 3});
  int worst = 0;
  for (std::size_t i = 0; i < want.px.size(); ++i) worst = std::max(worst, std::abs(int(got.typed<std::uint8_t>()[i]) - int(want.px[i])));
  CHECK_MESSAGE(worst <= tol, "largest difference ", worst);
}

void put16(bytes& b, std::uint32_t v) {
  b.push_back(static_cast<std::uint8_t>(v));
  b.push_back(static_cast<std::uint8_t>(v >> 8));
}
void put32(bytes& b, std::uint32_t v) {
  put16(b, v & 0xffff);
  put16(b, v >> 16);
}
void put32be(bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

// ---- BMP ----
/// A BMP with a 40-byte header: 24-bit (bgr), or 8-bit indexed with `palette`, bottom-up unless top_down.
bytes bmp_file(int w, int h, int bpp, const bytes& pixel_rows /*file order, padded*/, const std::vector<std::array<std::uint8_t, 3>>& palette,
               bool top_down, std::uint32_t compression = 0, const std::vector<std::uint32_t>& masks = {}) {
  const std::uint32_t header = 14 + 40 + static_cast<std::uint32_t>(masks.size() * 4 + palette.size() * 4);
  bytes b = {'B', 'M'};
  put32(b, header + static_cast<std::uint32_t>(pixel_rows.size()));
  put32(b, 0);
  put32(b, header);
  put32(b, 40);
  put32(b, static_cast<std::uint32_t>(w));
  put32(b, static_cast<std::uint32_t>(top_down ? -h : h));
  put16(b, 1);
  put16(b, static_cast<std::uint32_t>(bpp));
  put32(b, compression);
  put32(b, static_cast<std::uint32_t>(pixel_rows.size()));
  put32(b, 2835);
  put32(b, 2835);
  put32(b, static_cast<std::uint32_t>(palette.size()));
  put32(b, 0);
  for (auto m : masks) put32(b, m);
  for (const auto& c : palette) b.insert(b.end(), {c[2], c[1], c[0], 0});
  b.insert(b.end(), pixel_rows.begin(), pixel_rows.end());
  return b;
}
bytes bmp24(const rgb_image& im, bool top_down) {
  const int stride = (im.w * 3 + 3) / 4 * 4;
  bytes rows;
  for (int fy = 0; fy < im.h; ++fy) {
    const int y = top_down ? fy : im.h - 1 - fy;
    for (int x = 0; x < im.w; ++x) rows.insert(rows.end(), {im.at(x, y)[2], im.at(x, y)[1], im.at(x, y)[0]});
    rows.resize(rows.size() + static_cast<std::size_t>(stride - im.w * 3), 0);
  }
  return bmp_file(im.w, im.h, 24, rows, {}, top_down);
}

// ---- PNG, written by hand: zlib "stored" blocks, CRC-32 and Adler-32 ----
std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
  std::uint32_t c = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}
void png_chunk(bytes& out, const char* type, const bytes& data) {
  put32be(out, static_cast<std::uint32_t>(data.size()));
  bytes body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  out.insert(out.end(), body.begin(), body.end());
  put32be(out, crc32(body.data(), body.size()));
}
/// A PNG of `raw` scanlines (each `row_bytes` long, filter type 0 added here).
bytes png_file(int w, int h, int depth, int color_type, const bytes& raw, std::size_t row_bytes, const bytes& plte = {}) {
  bytes filtered;
  for (int y = 0; y < h; ++y) {
    filtered.push_back(0);
    filtered.insert(filtered.end(), raw.begin() + static_cast<std::ptrdiff_t>(y * row_bytes),
                    raw.begin() + static_cast<std::ptrdiff_t>((y + 1) * row_bytes));
  }
  bytes z = {0x78, 0x01};
  for (std::size_t at = 0; at < filtered.size() || at == 0;) {
    const std::size_t n = std::min<std::size_t>(65535, filtered.size() - at);
    const bool last = at + n == filtered.size();
    z.push_back(last ? 1 : 0);
    put16(z, static_cast<std::uint32_t>(n));
    put16(z, static_cast<std::uint32_t>(~n & 0xffff));
    z.insert(z.end(), filtered.begin() + static_cast<std::ptrdiff_t>(at), filtered.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
    if (last) break;
  }
  std::uint32_t a = 1, b2 = 0;
  for (auto c : filtered) {
    a = (a + c) % 65521;
    b2 = (b2 + a) % 65521;
  }
  put32be(z, (b2 << 16) | a);
  bytes out = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  bytes ihdr;
  put32be(ihdr, static_cast<std::uint32_t>(w));
  put32be(ihdr, static_cast<std::uint32_t>(h));
  ihdr.insert(ihdr.end(), {static_cast<std::uint8_t>(depth), static_cast<std::uint8_t>(color_type), 0, 0, 0});
  png_chunk(out, "IHDR", ihdr);
  if (!plte.empty()) png_chunk(out, "PLTE", plte);
  png_chunk(out, "IDAT", z);
  png_chunk(out, "IEND", {});
  return out;
}
bytes png_rgb(const rgb_image& im) { return png_file(im.w, im.h, 8, 2, im.px, static_cast<std::size_t>(im.w) * 3); }

// ---- TIFF, written by hand: one uncompressed strip ----
bytes tiff_file(int w, int h, int spp, int photometric, const bytes& samples) {
  struct entry {
    std::uint16_t tag, type;
    std::uint32_t count, value;
  };
  const std::uint32_t n_entries = 10;
  const std::uint32_t ifd_size = 2 + n_entries * 12 + 4;
  const std::uint32_t bps_at = 8 + ifd_size, data_at = bps_at + 8;
  const std::vector<entry> entries = {
      {256, 3, 1, static_cast<std::uint32_t>(w)}, {257, 3, 1, static_cast<std::uint32_t>(h)},
      {258, 3, static_cast<std::uint32_t>(spp), spp == 1 ? 8u : bps_at},
      {259, 3, 1, 1}, {262, 3, 1, static_cast<std::uint32_t>(photometric)}, {273, 4, 1, data_at},
      {277, 3, 1, static_cast<std::uint32_t>(spp)}, {278, 3, 1, static_cast<std::uint32_t>(h)},
      {279, 4, 1, static_cast<std::uint32_t>(samples.size())}, {284, 3, 1, 1}};
  bytes b = {'I', 'I', 42, 0};
  put32(b, 8);
  put16(b, n_entries);
  for (const auto& e : entries) {
    put16(b, e.tag);
    put16(b, e.type);
    put32(b, e.count);
    if (e.type == 3 && e.count == 1) {
      put16(b, e.value);
      put16(b, 0);
    } else {
      put32(b, e.value);
    }
  }
  put32(b, 0);
  for (int k = 0; k < 4; ++k) put16(b, 8);  // BitsPerSample values (3 used)
  b.insert(b.end(), samples.begin(), samples.end());
  return b;
}

// ---- JPEG, WebP and JPEG 2000 through the libraries' encoders ----
bytes jpeg_encode(const bytes& px, int w, int h, int components, int quality) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = components;
  c.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  for (int i = 0; i < c.num_components; ++i) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;  // 4:4:4
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<std::uint8_t*>(px.data()) + static_cast<std::size_t>(c.next_scanline) * w * components;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  bytes out(buf, buf + size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

bytes webp_lossless(const rgb_image& im) {
  std::uint8_t* out = nullptr;
  const std::size_t n = WebPEncodeLosslessRGB(im.px.data(), im.w, im.h, im.w * 3, &out);
  REQUIRE(n > 0);
  bytes b(out, out + n);
  WebPFree(out);
  return b;
}

struct opj_sink {
  bytes data;
  std::size_t pos = 0;
};
bytes jpeg2000_lossless(const rgb_image& im, bool jp2) {
  opj_cparameters_t p;
  opj_set_default_encoder_parameters(&p);
  p.tcp_numlayers = 1;
  p.tcp_rates[0] = 0;  // lossless
  p.cp_disto_alloc = 1;
  p.numresolution = 2;
  opj_image_cmptparm_t cp[3];
  std::memset(cp, 0, sizeof cp);
  for (auto& c : cp) {
    c.dx = c.dy = 1;
    c.w = static_cast<OPJ_UINT32>(im.w);
    c.h = static_cast<OPJ_UINT32>(im.h);
    c.prec = 8;
  }
  opj_image_t* img = opj_image_create(3, cp, OPJ_CLRSPC_SRGB);
  REQUIRE(img != nullptr);
  img->x1 = static_cast<OPJ_UINT32>(im.w);
  img->y1 = static_cast<OPJ_UINT32>(im.h);
  for (int c = 0; c < 3; ++c)
    for (std::size_t i = 0; i < static_cast<std::size_t>(im.w * im.h); ++i) img->comps[c].data[i] = im.px[i * 3 + static_cast<std::size_t>(c)];
  opj_codec_t* codec = opj_create_compress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  REQUIRE(opj_setup_encoder(codec, &p, img));
  opj_sink sink;
  opj_stream_t* s = opj_stream_create(1 << 16, OPJ_FALSE);
  opj_stream_set_user_data(s, &sink, nullptr);
  opj_stream_set_write_function(s, [](void* buf, OPJ_SIZE_T n, void* u) -> OPJ_SIZE_T {
    auto* k = static_cast<opj_sink*>(u);
    if (k->pos + n > k->data.size()) k->data.resize(k->pos + n);
    std::memcpy(k->data.data() + k->pos, buf, n);
    k->pos += n;
    return n;
  });
  opj_stream_set_skip_function(s, [](OPJ_OFF_T n, void* u) -> OPJ_OFF_T {
    auto* k = static_cast<opj_sink*>(u);
    k->pos = static_cast<std::size_t>(static_cast<OPJ_OFF_T>(k->pos) + n);
    if (k->pos > k->data.size()) k->data.resize(k->pos);
    return n;
  });
  opj_stream_set_seek_function(s, [](OPJ_OFF_T n, void* u) -> OPJ_BOOL {
    auto* k = static_cast<opj_sink*>(u);
    k->pos = static_cast<std::size_t>(n);
    if (k->pos > k->data.size()) k->data.resize(k->pos);
    return OPJ_TRUE;
  });
  const bool ok = opj_start_compress(codec, img, s) && opj_encode(codec, s) && opj_end_compress(codec, s);
  opj_stream_destroy(s);
  opj_destroy_codec(codec);
  opj_image_destroy(img);
  REQUIRE(ok);
  return sink.data;
}

}  // namespace

TEST_CASE("ImageDecoder: a 24-bit BMP, bottom-up and top-down, with padded rows, in RGB, BGR and Grayscale") {
  const rgb_image im = test_picture(5, 3);  // 15-byte rows padded to 16
  for (bool top_down : {false, true}) {
    CAPTURE(top_down);
    const bytes b = bmp24(im, top_down);
    check_rgb(decode(b), im);
    const tensor bgr = decode(b, "BGR");
    REQUIRE(dims_of(bgr) == ints{3, 5, 3});
    for (int i = 0; i < 15; ++i)
      for (int c = 0; c < 3; ++c) CHECK(bgr.typed<std::uint8_t>()[i * 3 + c] == im.px[static_cast<std::size_t>(i * 3 + 2 - c)]);
    const tensor gray = decode(b, "Grayscale");
    REQUIRE(dims_of(gray) == ints{3, 5, 1});
    for (int i = 0; i < 15; ++i) CHECK(gray.typed<std::uint8_t>()[i] == luma(&im.px[static_cast<std::size_t>(i * 3)]));
  }
}

TEST_CASE("ImageDecoder: Grayscale uses Pillow's luma: pure red, green, blue give 76, 150, 29") {
  rgb_image im{4, 1, {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255}};
  check_tensor<std::uint8_t>(decode(png_rgb(im), "Grayscale"), {1, 4, 1}, {76, 150, 29, 255});
}

TEST_CASE("ImageDecoder: indexed BMPs (1, 4 and 8 bits, RLE8, RLE4) and 16/32-bit bit fields") {
  const std::vector<std::array<std::uint8_t, 3>> pal = {{10, 20, 30}, {200, 100, 50}, {0, 255, 0}, {1, 2, 3}};
  // 8 bits, 3x2, bottom-up: file row 0 is the bottom row.
  {
    const bytes rows = {2, 1, 0, 0, /* bottom */ 0, 3, 1, 0 /* top */};
    const tensor y = decode(bmp_file(3, 2, 8, rows, pal, false));
    check_tensor<std::uint8_t>(y, {2, 3, 3}, {10, 20, 30, 1, 2, 3, 200, 100, 50, 0, 255, 0, 200, 100, 50, 10, 20, 30});
  }
  // 1 bit, 10x1: 1011001110 -> two bytes (padded to 4).
  {
    const std::vector<std::array<std::uint8_t, 3>> bw = {{0, 0, 0}, {255, 255, 255}};
    const bytes rows = {0b10110011, 0b10000000, 0, 0};
    const tensor y = decode(bmp_file(10, 1, 1, rows, bw, true), "Grayscale");
    check_tensor<std::uint8_t>(y, {1, 10, 1}, {255, 0, 255, 255, 0, 0, 255, 255, 255, 0});
  }
  // 4 bits, 3x1: indices 1, 2, 3.
  {
    const tensor y = decode(bmp_file(3, 1, 4, {0x12, 0x30, 0, 0}, pal, false));
    check_tensor<std::uint8_t>(y, {1, 3, 3}, {200, 100, 50, 0, 255, 0, 1, 2, 3});
  }
  // RLE8, 4x2: bottom row "run of 3 x index 1, absolute [2]", end of line, top row "delta right 2, run 2 x 3", end.
  {
    // bottom: a run of 3 x index 1, then an absolute run "0 3 | 2 2 2 | pad" (one pixel fits, two are dropped);
    // "0 0" end of line; top: a delta "0 2 | 2 0" (two pixels right), a run of 2 x index 3; "0 1" end of bitmap.
    const bytes rle = {3, 1, 0, 3, 2, 2, 2, 0, 0, 0, 0, 2, 2, 0, 2, 3, 0, 1};
    const tensor y = decode(bmp_file(4, 2, 8, rle, pal, false, 1));
    REQUIRE(dims_of(y) == ints{2, 4, 3});
    const std::uint8_t* p = y.typed<std::uint8_t>();
    // top row: entries 0 0 (skipped by the delta: palette entry 0), then 3 3
    CHECK(std::vector<std::uint8_t>(p, p + 12) == bytes{10, 20, 30, 10, 20, 30, 1, 2, 3, 1, 2, 3});
    CHECK(std::vector<std::uint8_t>(p + 12, p + 24) == bytes{200, 100, 50, 200, 100, 50, 200, 100, 50, 0, 255, 0});
  }
  // RLE4, 5x1: a run of 5 alternating 1, 2; end of bitmap.
  {
    const tensor y = decode(bmp_file(5, 1, 4, {5, 0x12, 0, 1}, pal, false, 2));
    check_tensor<std::uint8_t>(y, {1, 5, 3}, {200, 100, 50, 0, 255, 0, 200, 100, 50, 0, 255, 0, 200, 100, 50});
  }
  // 16 bits, default 5-5-5: white, pure red (0x7c00), pure blue (0x001f); row padded to 8 bytes.
  {
    bytes rows;
    for (std::uint32_t v : {0x7fffu, 0x7c00u, 0x001fu}) put16(rows, v);
    put16(rows, 0);
    check_tensor<std::uint8_t>(decode(bmp_file(3, 1, 16, rows, {}, false)), {1, 3, 3}, {255, 255, 255, 255, 0, 0, 0, 0, 255});
  }
  // 16 bits, 5-6-5 bit fields; 32 bits, explicit fields with alpha in the low byte (dropped).
  {
    bytes rows;
    for (std::uint32_t v : {0xf800u, 0x07e0u}) put16(rows, v);
    check_tensor<std::uint8_t>(decode(bmp_file(2, 1, 16, rows, {}, false, 3, {0xf800, 0x07e0, 0x001f})), {1, 2, 3},
                               {255, 0, 0, 0, 255, 0});
    bytes rows32;
    put32(rows32, 0x11223344u);
    check_tensor<std::uint8_t>(decode(bmp_file(1, 1, 32, rows32, {}, false, 3, {0xff000000u, 0x00ff0000u, 0x0000ff00u})), {1, 1, 3},
                               {0x11, 0x22, 0x33});
  }
}

TEST_CASE("ImageDecoder: PNM in every variant (P1-P7), comments, maxval scaling, 16-bit samples") {
  const auto text = [](const std::string& s) { return bytes(s.begin(), s.end()); };
  // P6 binary with a comment in the header.
  {
    const rgb_image im = test_picture(4, 3);
    bytes b = text("P6\n# a comment\n4 3\n255\n");
    b.insert(b.end(), im.px.begin(), im.px.end());
    check_rgb(decode(b), im);
  }
  check_tensor<std::uint8_t>(decode(text("P3\n2 1\n255\n1 2 3  250 251 252\n")), {1, 2, 3}, {1, 2, 3, 250, 251, 252});
  check_tensor<std::uint8_t>(decode(text("P2 3 1 15 0 15 5"), "Grayscale"), {1, 3, 1}, {0, 255, 85});
  check_tensor<std::uint8_t>(decode(text("P2 2 1 255 7 9")), {1, 2, 3}, {7, 7, 7, 9, 9, 9});  // gray replicated
  check_tensor<std::uint8_t>(decode(text("P1\n3 2\n1 0 1\n011\n"), "Grayscale"), {2, 3, 1}, {0, 255, 0, 255, 0, 0});
  {
    bytes b = text("P4\n10 1\n");
    b.insert(b.end(), {0b10110011, 0b10000000});
    check_tensor<std::uint8_t>(decode(b, "Grayscale"), {1, 10, 1}, {0, 255, 0, 0, 255, 255, 0, 0, 0, 255});
  }
  {
    bytes b = text("P5\n2 1\n65535\n");
    b.insert(b.end(), {0xff, 0xff, 0x80, 0x00});
    check_tensor<std::uint8_t>(decode(b, "Grayscale"), {1, 2, 1}, {255, 127});
  }
  {
    bytes b = text("P7\nWIDTH 2\nHEIGHT 1\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n");
    b.insert(b.end(), {1, 2, 3, 0, 4, 5, 6, 255});
    check_tensor<std::uint8_t>(decode(b), {1, 2, 3}, {1, 2, 3, 4, 5, 6});
  }
}

TEST_CASE("ImageDecoder: PNG (hand-written) as RGB, gray, gray + alpha, RGBA, palette, 16-bit and 1-bit") {
  const rgb_image im = test_picture(6, 4);
  check_rgb(decode(png_rgb(im)), im);
  check_tensor<std::uint8_t>(decode(png_file(3, 1, 8, 0, {0, 128, 255}, 3)), {1, 3, 3}, {0, 0, 0, 128, 128, 128, 255, 255, 255});
  check_tensor<std::uint8_t>(decode(png_file(3, 1, 8, 0, {0, 128, 255}, 3), "Grayscale"), {1, 3, 1}, {0, 128, 255});
  check_tensor<std::uint8_t>(decode(png_file(2, 1, 8, 4, {10, 0, 20, 255}, 4), "Grayscale"), {1, 2, 1}, {10, 20});  // alpha dropped
  check_tensor<std::uint8_t>(decode(png_file(2, 1, 8, 6, {1, 2, 3, 0, 4, 5, 6, 9}, 8)), {1, 2, 3}, {1, 2, 3, 4, 5, 6});
  check_tensor<std::uint8_t>(decode(png_file(3, 1, 8, 3, {2, 0, 1}, 3, {10, 20, 30, 40, 50, 60, 70, 80, 90})), {1, 3, 3},
                             {70, 80, 90, 10, 20, 30, 40, 50, 60});
  check_tensor<std::uint8_t>(decode(png_file(2, 1, 16, 2, {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xff, 0xff, 0, 1, 0x80, 0}, 12)),
                             {1, 2, 3}, {0x12, 0x56, 0x9a, 0xff, 0, 0x80});  // the high bytes
  check_tensor<std::uint8_t>(decode(png_file(4, 1, 1, 0, {0b10100000}, 1), "Grayscale"), {1, 4, 1}, {255, 0, 255, 0});
}

TEST_CASE("ImageDecoder: TIFF (hand-written, uncompressed) RGB and gray") {
  const rgb_image im = test_picture(5, 4);
  check_rgb(decode(tiff_file(5, 4, 3, 2, im.px)), im);
  check_tensor<std::uint8_t>(decode(tiff_file(3, 1, 1, 1, {0, 100, 255}), "Grayscale"), {1, 3, 1}, {0, 100, 255});
  check_tensor<std::uint8_t>(decode(tiff_file(2, 1, 1, 1, {7, 9})), {1, 2, 3}, {7, 7, 7, 9, 9, 9});
}

TEST_CASE("ImageDecoder: JPEG from libjpeg's encoder (colour and gray), BGR and Grayscale consistent with RGB") {
  const rgb_image im = smooth_picture(16, 16);
  const bytes jpg = jpeg_encode(im.px, 16, 16, 3, 100);
  const tensor rgb = decode(jpg);
  check_rgb(rgb, im, 6);
  const tensor bgr = decode(jpg, "BGR");
  const tensor gray = decode(jpg, "Grayscale");
  REQUIRE(dims_of(gray) == ints{16, 16, 1});
  for (std::size_t i = 0; i < 256; ++i) {
    const std::uint8_t* p = rgb.typed<std::uint8_t>() + i * 3;
    CHECK(bgr.typed<std::uint8_t>()[i * 3] == p[2]);
    CHECK(bgr.typed<std::uint8_t>()[i * 3 + 2] == p[0]);
    CHECK(gray.typed<std::uint8_t>()[i] == luma(p));  // luma of the decoded RGB, as Pillow converts
  }
  bytes g(64);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<std::uint8_t>(60 + i);
  const tensor y = decode(jpeg_encode(g, 8, 8, 1, 100), "Grayscale");
  REQUIRE(dims_of(y) == ints{8, 8, 1});
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(std::abs(int(y.typed<std::uint8_t>()[i]) - int(g[i])) <= 2);
}

TEST_CASE("ImageDecoder: lossless WebP and JPEG 2000 (JP2 file and J2K codestream) round-trip exactly") {
  const rgb_image im = test_picture(9, 7);
  check_rgb(decode(webp_lossless(im)), im);
  check_rgb(decode(jpeg2000_lossless(im, true)), im);
  check_rgb(decode(jpeg2000_lossless(im, false)), im);
  const tensor gray = decode(jpeg2000_lossless(im, true), "Grayscale");
  for (std::size_t i = 0; i < 63; ++i) CHECK(gray.typed<std::uint8_t>()[i] == luma(&im.px[i * 3]));
}

TEST_CASE("ImageDecoder: corrupt, truncated and unknown streams are errors naming encoded_stream, never crashes") {
  const kernel_node kn = decoder();
  const auto fails = [&](const bytes& b, const std::string& needle) {
    CAPTURE(b.size());
    check_fails<ops::image_decoder>(kn, {{stream(b)}}, needle);
  };
  const rgb_image im = test_picture(8, 8);
  fails({}, "encoded_stream is empty");
  fails({1, 2, 3, 4, 5}, "not an image in a supported format");
  const std::vector<std::pair<std::string, bytes>> files = {
      {"BMP", bmp24(im, false)},           {"PNG", png_rgb(im)},
      {"TIFF", tiff_file(8, 8, 3, 2, im.px)}, {"JPEG", jpeg_encode(im.px, 8, 8, 3, 90)},
      {"WebP", webp_lossless(im)},         {"JPEG 2000", jpeg2000_lossless(im, true)}};
  for (const auto& [name, file] : files) {
    CAPTURE(name);
    // Every cut before the last quarter of the data fails (PNG may lose its IEND chunk, JPEG its EOI marker).
    for (std::size_t n = 12; n < file.size() * 3 / 4; n += 1 + file.size() / 40)
      fails(bytes(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n)), std::string("cannot decode the ").append(name).append(" image"));
    // Flipped bytes: an error or an image, no crash (the sanitizer builds check the rest).
    lcg g(7);
    for (int t = 0; t < 200; ++t) {
      bytes c = file;
      for (int k = 0; k < 3; ++k) c[g.next() % c.size()] ^= static_cast<std::uint8_t>(1 + g.next() % 255);
      auto r = run_kernel<ops::image_decoder>(kn, {{stream(c)}});
      if (!r.has_value()) CHECK(r.status().code() == errc::invalid_argument);
    }
  }
  // Headers that claim absurd sizes are refused before anything is allocated.
  {
    bytes b = bmp24(im, false);
    b[18] = 0xff, b[19] = 0xff, b[20] = 0xff, b[21] = 0x7f;  // width 2^31 - 1
    fails(b, "invalid BMP size");
    const std::string pnm = "P6\n100000 100000\n255\n";
    fails(bytes(pnm.begin(), pnm.end()), "truncated PNM pixel data");
    const std::string zero = "P5\n2 2\n0\n";
    fails(bytes(zero.begin(), zero.end()), "invalid PNM maxval");
    bytes png = png_rgb(im);
    png[29] ^= 0xff;  // the IHDR CRC
    fails(png, "cannot decode the PNG image");
  }
}

TEST_CASE("ImageDecoder: pixel_format must be RGB, BGR or Grayscale") {
  check_fails<ops::image_decoder>(decoder("YUV"), {{stream(bmp24(test_picture(2, 2), false))}}, "attribute 'pixel_format'");
}

// =================================================================================================================
// TreeEnsemble
