// ImageDecoder (opset 20): an encoded image (a 1-D uint8 tensor) decoded to [H, W, C] uint8 in RGB, BGR or
// Grayscale. JPEG (libjpeg-turbo), PNG (libpng), TIFF (libtiff), WebP (libwebp) and JPEG 2000 (OpenJPEG) go through
// their libraries; BMP and PNM (PBM, PGM, PPM, PAM) are decoded here (image_formats.cpp). The stream is untrusted:
// every malformed, truncated or oversized input is an invalid_argument error, never a crash.
//
// Colour conventions follow the ONNX reference (Pillow): alpha is dropped (not composited), 16-bit samples keep their
// high byte, and Grayscale from colour is Pillow's ITU-R 601-2 luma, L = (19595 R + 38470 G + 7471 B + 2^15) >> 16.
#include "image_formats.hpp"

#include <csetjmp>
#include <cstdarg>
#include <cstdio>

#include <jerror.h>
#include <jpeglib.h>
#include <openjpeg-2.5/openjpeg.h>
#include <png.h>
#include <tiffio.h>
#include <webp/decode.h>

namespace epstack::cpu {
namespace impl {
namespace {

/// Sizes a byte buffer without throwing.
bool resize_bytes(std::vector<std::uint8_t>& v, std::size_t n) noexcept {
  try {
    v.resize(n);
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

std::uint8_t luma(unsigned r, unsigned g, unsigned b) {
  return static_cast<std::uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}
/// a * b / 255, rounded as Pillow does.
unsigned mul_div_255(unsigned a, unsigned b) {
  const unsigned t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}
/// A CMYK pixel (not inverted) as RGB, Pillow's conversion.
void cmyk_to_rgb(const std::uint8_t* in, std::uint8_t* out) {
  const unsigned nk = 255u - in[3];
  for (int k = 0; k < 3; ++k) out[k] = static_cast<std::uint8_t>(nk - mul_div_255(in[k], nk));
}

// ---------------------------------------------------------------------------------------------------------------
// JPEG (libjpeg-turbo). Errors longjmp back to jpeg_run, whose frame holds no object with a destructor; all state
// lives in the job.

struct jpeg_job {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr mgr{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  decoded* out = nullptr;
  std::vector<std::uint8_t> row;  // a CMYK scanline
  std::string why;
};

[[noreturn]] void jpeg_fail(j_common_ptr c) {
  auto* job = static_cast<jpeg_job*>(c->client_data);
  (*c->err->format_message)(c, job->message);
  std::longjmp(job->jump, 1);
}
void jpeg_on_error(j_common_ptr c) { jpeg_fail(c); }
/// Warnings are ignored, except those saying data is missing (a truncated or cut stream), which are errors.
void jpeg_on_message(j_common_ptr c, int level) {
  if (level < 0 && (c->err->msg_code == JWRN_JPEG_EOF || c->err->msg_code == JWRN_HIT_MARKER)) jpeg_fail(c);
}

bool jpeg_run(jpeg_job* job) {
  job->cinfo.err = jpeg_std_error(&job->mgr);
  job->mgr.error_exit = jpeg_on_error;
  job->mgr.emit_message = jpeg_on_message;
  job->cinfo.client_data = job;
  if (setjmp(job->jump) != 0) {
    jpeg_destroy_decompress(&job->cinfo);
    return false;
  }
  jpeg_create_decompress(&job->cinfo);
  jpeg_mem_src(&job->cinfo, job->data, static_cast<unsigned long>(job->size));
  jpeg_read_header(&job->cinfo, TRUE);
  int channels = 3;
  switch (job->cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: job->cinfo.out_color_space = JCS_GRAYSCALE; channels = 1; break;
    case JCS_CMYK:
    case JCS_YCCK: job->cinfo.out_color_space = JCS_CMYK; break;
    default: job->cinfo.out_color_space = JCS_RGB; break;
  }
  // The size is checked before jpeg_start_decompress, which may allocate for the whole image (progressive JPEG).
  const JDIMENSION w = job->cinfo.image_width, h = job->cinfo.image_height;
  const bool cmyk = job->cinfo.out_color_space == JCS_CMYK;
  if (!job->out->allocate(w, h, channels, job->why) || (cmyk && !resize_bytes(job->row, std::size_t{w} * 4))) {
    if (job->why.empty()) job->why = "out of memory";
    jpeg_destroy_decompress(&job->cinfo);
    return false;
  }
  jpeg_start_decompress(&job->cinfo);
  if (job->cinfo.output_width != w || job->cinfo.output_height != h || job->cinfo.output_components != (cmyk ? 4 : channels)) {
    std::snprintf(job->message, sizeof job->message, "unexpected output layout (%ux%u, %d components)",
                  static_cast<unsigned>(job->cinfo.output_width), static_cast<unsigned>(job->cinfo.output_height),
                  job->cinfo.output_components);
    jpeg_destroy_decompress(&job->cinfo);
    return false;
  }
  const bool inverted = cmyk && job->cinfo.saw_Adobe_marker;  // Adobe writes CMYK inverted
  while (job->cinfo.output_scanline < h) {
    const JDIMENSION y = job->cinfo.output_scanline;
    std::uint8_t* dst = job->out->pixels.data() + std::size_t{y} * w * static_cast<std::size_t>(channels);
    JSAMPROW r = cmyk ? job->row.data() : dst;
    if (jpeg_read_scanlines(&job->cinfo, &r, 1) != 1) {
      std::snprintf(job->message, sizeof job->message, "the decoder stopped at row %u", static_cast<unsigned>(y));
      jpeg_destroy_decompress(&job->cinfo);
      return false;
    }
    if (cmyk)
      for (JDIMENSION x = 0; x < w; ++x) {
        std::uint8_t* p = job->row.data() + std::size_t{x} * 4;
        if (inverted)
          for (int k = 0; k < 4; ++k) p[k] = static_cast<std::uint8_t>(255 - p[k]);
        cmyk_to_rgb(p, dst + std::size_t{x} * 3);
      }
  }
  // Not jpeg_finish_decompress: what follows the last scan (an EOI marker) is not needed.
  jpeg_destroy_decompress(&job->cinfo);
  return true;
}

Status decode_jpeg(std::span<const std::uint8_t> s, decoded& out, std::string& why) {
  auto job = std::make_unique<jpeg_job>();
  job->data = s.data();
  job->size = s.size();
  job->out = &out;
  if (jpeg_run(job.get())) return {};
  why = !job->why.empty() ? job->why : std::string(job->message);
  return invalid(why);
}

// ---------------------------------------------------------------------------------------------------------------
// PNG (libpng). As for JPEG, errors longjmp back to png_run.

struct png_job {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0, pos = 0;
  png_structp png = nullptr;
  png_infop info = nullptr;
  decoded* out = nullptr;
  std::vector<std::uint8_t> buffer;  // the rows as libpng delivers them (alpha still present)
  std::vector<png_bytep> rows;
  char message[256] = {};
  std::string why;
};

void png_on_error(png_structp p, png_const_charp msg) {
  auto* job = static_cast<png_job*>(png_get_error_ptr(p));
  std::snprintf(job->message, sizeof job->message, "%s", msg != nullptr ? msg : "libpng error");
  png_longjmp(p, 1);
}
void png_on_warning(png_structp, png_const_charp) {}
void png_read_memory(png_structp p, png_bytep dst, png_size_t n) {
  auto* job = static_cast<png_job*>(png_get_io_ptr(p));
  if (n > job->size - job->pos) png_error(p, "the data ends early (truncated PNG)");
  std::memcpy(dst, job->data + job->pos, n);
  job->pos += n;
}

bool png_run(png_job* job) {
  job->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, png_on_error, png_on_warning);
  if (job->png == nullptr) {
    job->why = "cannot create the libpng decoder";
    return false;
  }
  job->info = png_create_info_struct(job->png);
  if (job->info == nullptr) {
    png_destroy_read_struct(&job->png, nullptr, nullptr);
    job->why = "cannot create the libpng decoder";
    return false;
  }
  if (setjmp(png_jmpbuf(job->png)) != 0) {
    png_destroy_read_struct(&job->png, &job->info, nullptr);
    return false;
  }
  png_set_read_fn(job->png, job, png_read_memory);
  png_set_user_limits(job->png, static_cast<png_uint_32>(max_image_side), static_cast<png_uint_32>(max_image_side));
  png_read_info(job->png, job->info);
  const png_uint_32 w = png_get_image_width(job->png, job->info), h = png_get_image_height(job->png, job->info);
  const int type = png_get_color_type(job->png, job->info);
  const int depth = png_get_bit_depth(job->png, job->info);
  if (depth == 16) png_set_strip_16(job->png);  // the high byte
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(job->png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(job->png);
  png_set_interlace_handling(job->png);
  png_read_update_info(job->png, job->info);
  const int got = png_get_channels(job->png, job->info);  // 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA
  const int channels = got <= 2 ? 1 : 3;
  const std::size_t row_bytes = png_get_rowbytes(job->png, job->info);
  if (got < 1 || got > 4 || row_bytes != std::size_t{w} * static_cast<std::size_t>(got)) {
    std::snprintf(job->message, sizeof job->message, "unsupported PNG layout (%d channels, %zu bytes a row)", got, row_bytes);
    png_destroy_read_struct(&job->png, &job->info, nullptr);
    return false;
  }
  if (!job->out->allocate(w, h, channels, job->why) || !resize_bytes(job->buffer, row_bytes * h)) {
    if (job->why.empty()) job->why = "out of memory";
    png_destroy_read_struct(&job->png, &job->info, nullptr);
    return false;
  }
  try {
    job->rows.resize(h);
  } catch (const std::bad_alloc&) {
    job->why = "out of memory";
    png_destroy_read_struct(&job->png, &job->info, nullptr);
    return false;
  }
  for (png_uint_32 y = 0; y < h; ++y) job->rows[y] = job->buffer.data() + std::size_t{y} * row_bytes;
  png_read_image(job->png, job->rows.data());
  png_destroy_read_struct(&job->png, &job->info, nullptr);
  // Drop alpha.
  const std::size_t n = std::size_t{w} * h;
  std::uint8_t* dst = job->out->pixels.data();
  const std::uint8_t* src = job->buffer.data();
  for (std::size_t i = 0; i < n; ++i)
    for (int k = 0; k < channels; ++k) dst[i * static_cast<std::size_t>(channels) + static_cast<std::size_t>(k)] = src[i * static_cast<std::size_t>(got) + static_cast<std::size_t>(k)];
  return true;
}

Status decode_png(std::span<const std::uint8_t> s, decoded& out, std::string& why) {
  auto job = std::make_unique<png_job>();
  job->data = s.data();
  job->size = s.size();
  job->out = &out;
  if (png_run(job.get())) return {};
  why = !job->why.empty() ? job->why : std::string(job->message);
  return invalid(why);
}

// ---------------------------------------------------------------------------------------------------------------
// TIFF (libtiff), read from memory through client procedures, messages to the job (never to stderr).

struct tiff_job {
  const std::uint8_t* data = nullptr;
  std::uint64_t size = 0, pos = 0;
  std::string message;
};

tmsize_t tiff_read(thandle_t h, void* buf, tmsize_t n) {
  auto* job = static_cast<tiff_job*>(h);
  if (n <= 0 || job->pos >= job->size) return 0;
  const std::uint64_t k = std::min<std::uint64_t>(static_cast<std::uint64_t>(n), job->size - job->pos);
  std::memcpy(buf, job->data + job->pos, static_cast<std::size_t>(k));
  job->pos += k;
  return static_cast<tmsize_t>(k);
}
tmsize_t tiff_write(thandle_t, void*, tmsize_t) { return -1; }
toff_t tiff_seek(thandle_t h, toff_t off, int whence) {
  auto* job = static_cast<tiff_job*>(h);
  std::uint64_t base = 0;
  if (whence == SEEK_CUR) base = job->pos;
  else if (whence == SEEK_END) base = job->size;
  else if (whence != SEEK_SET) return static_cast<toff_t>(-1);
  if (off > std::numeric_limits<std::uint64_t>::max() - base) return static_cast<toff_t>(-1);
  job->pos = base + off;
  return job->pos;
}
int tiff_close(thandle_t) { return 0; }
toff_t tiff_size(thandle_t h) { return static_cast<tiff_job*>(h)->size; }
int tiff_map(thandle_t, void**, toff_t*) { return 0; }
void tiff_unmap(thandle_t, void*, toff_t) {}
int tiff_on_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* job = static_cast<tiff_job*>(user);
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  if (job->message.empty()) job->message = module != nullptr && *module != '\0' ? cat(module, ": ", buf) : std::string(buf);
  return 1;  // handled: nothing printed
}
int tiff_on_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

Status decode_tiff(std::span<const std::uint8_t> s, decoded& out, std::string& why) {
  tiff_job job;
  job.data = s.data();
  job.size = s.size();
  TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
  if (opts == nullptr) return invalid(why = "out of memory");
  TIFFOpenOptionsSetErrorHandlerExtR(opts, tiff_on_error, &job);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, tiff_on_warning, &job);
  TIFFOpenOptionsSetMaxSingleMemAlloc(opts, static_cast<tmsize_t>(max_image_pixels * 4 + (1 << 20)));
  TIFF* tif = TIFFClientOpenExt("encoded_stream", "rm", &job, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size,
                                tiff_map, tiff_unmap, opts);
  TIFFOpenOptionsFree(opts);
  if (tif == nullptr) return invalid(why = job.message.empty() ? "not a readable TIFF" : job.message);
  const auto fail = [&](std::string w) {
    TIFFClose(tif);
    why = std::move(w);
    return invalid(why);
  };
  std::uint32_t w = 0, h = 0;
  if (TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w) != 1 || TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h) != 1)
    return fail(job.message.empty() ? "the image size is missing" : job.message);
  char emsg[1024] = {};
  if (TIFFRGBAImageOK(tif, emsg) != 1) return fail(cat("unsupported TIFF: ", emsg));
  std::uint16_t photometric = PHOTOMETRIC_RGB;
  TIFFGetFieldDefaulted(tif, TIFFTAG_PHOTOMETRIC, &photometric);
  const int channels = photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE ? 1 : 3;
  std::string too_big;
  if (!out.allocate(w, h, channels, too_big)) return fail(too_big);
  std::vector<std::uint32_t> raster;
  try {
    raster.resize(std::size_t{w} * h);
  } catch (const std::bad_alloc&) {
    return fail("out of memory");
  }
  if (TIFFReadRGBAImageOriented(tif, w, h, raster.data(), ORIENTATION_TOPLEFT, 1) != 1)
    return fail(job.message.empty() ? "the image data cannot be read" : job.message);
  TIFFClose(tif);
  std::uint8_t* dst = out.pixels.data();
  for (std::size_t i = 0; i < raster.size(); ++i) {
    const std::uint32_t p = raster[i];
    if (channels == 1) {
      dst[i] = static_cast<std::uint8_t>(TIFFGetR(p));
    } else {
      dst[i * 3] = static_cast<std::uint8_t>(TIFFGetR(p));
      dst[i * 3 + 1] = static_cast<std::uint8_t>(TIFFGetG(p));
      dst[i * 3 + 2] = static_cast<std::uint8_t>(TIFFGetB(p));
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// WebP (libwebp)

Status decode_webp(std::span<const std::uint8_t> s, decoded& out, std::string& why) {
  WebPBitstreamFeatures f;
  const VP8StatusCode st = WebPGetFeatures(s.data(), s.size(), &f);
  if (st != VP8_STATUS_OK)
    return invalid(why = st == VP8_STATUS_NOT_ENOUGH_DATA ? "the data ends early (truncated WebP)" : "not a valid WebP bitstream");
  if (f.has_animation) return invalid(why = "animated WebP is not supported");
  if (f.width <= 0 || f.height <= 0) return invalid(why = "the image is empty");
  if (!out.allocate(static_cast<std::uint64_t>(f.width), static_cast<std::uint64_t>(f.height), 3, why)) return invalid(why);
  const int stride = f.width * 3;
  if (WebPDecodeRGBInto(s.data(), s.size(), out.pixels.data(), out.pixels.size(), stride) == nullptr)
    return invalid(why = "the WebP image data is corrupt or truncated");
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// JPEG 2000 (OpenJPEG): a JP2 file or a raw J2K codestream, read from memory, in strict mode (a truncated codestream
// is an error rather than a partial image).

struct opj_job {
  const std::uint8_t* data = nullptr;
  std::uint64_t size = 0, pos = 0;
  std::string message;
};
OPJ_SIZE_T opj_read(void* buf, OPJ_SIZE_T n, void* user) {
  auto* job = static_cast<opj_job*>(user);
  if (job->pos >= job->size) return static_cast<OPJ_SIZE_T>(-1);
  const std::uint64_t k = std::min<std::uint64_t>(n, job->size - job->pos);
  std::memcpy(buf, job->data + job->pos, static_cast<std::size_t>(k));
  job->pos += k;
  return static_cast<OPJ_SIZE_T>(k);
}
OPJ_OFF_T opj_skip(OPJ_OFF_T n, void* user) {
  auto* job = static_cast<opj_job*>(user);
  if (n < 0) {
    const std::uint64_t back = std::min<std::uint64_t>(static_cast<std::uint64_t>(-n), job->pos);
    job->pos -= back;
    return -static_cast<OPJ_OFF_T>(back);
  }
  const std::uint64_t k = std::min<std::uint64_t>(static_cast<std::uint64_t>(n), job->size - std::min(job->pos, job->size));
  job->pos += k;
  return static_cast<OPJ_OFF_T>(k);
}
OPJ_BOOL opj_seek(OPJ_OFF_T n, void* user) {
  auto* job = static_cast<opj_job*>(user);
  if (n < 0 || static_cast<std::uint64_t>(n) > job->size) return OPJ_FALSE;
  job->pos = static_cast<std::uint64_t>(n);
  return OPJ_TRUE;
}
void opj_on_error(const char* msg, void* user) {
  auto* job = static_cast<opj_job*>(user);
  if (!job->message.empty() || msg == nullptr) return;
  job->message = msg;
  while (!job->message.empty() && (job->message.back() == '\n' || job->message.back() == ' ')) job->message.pop_back();
}
void opj_quiet(const char*, void*) {}

/// The samples of one component as 8 bits (signed ones offset, deeper ones keep their high bits).
std::uint8_t opj_sample(const opj_image_comp_t& c, std::int64_t v) {
  const unsigned prec = std::clamp<unsigned>(c.prec, 1, 31);
  if (c.sgnd != 0) v += std::int64_t{1} << (prec - 1);
  if (prec > 8) v >>= (prec - 8);
  else if (prec < 8) v = v * 255 / ((std::int64_t{1} << prec) - 1);
  return static_cast<std::uint8_t>(std::clamp<std::int64_t>(v, 0, 255));
}

Status decode_jpeg2000(std::span<const std::uint8_t> s, decoded& out, std::string& why, bool jp2) {
  opj_job job;
  job.data = s.data();
  job.size = s.size();
  opj_stream_t* stream = opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, OPJ_TRUE);
  opj_codec_t* codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  opj_image_t* img = nullptr;
  const auto cleanup = [&] {
    if (img != nullptr) opj_image_destroy(img);
    if (codec != nullptr) opj_destroy_codec(codec);
    if (stream != nullptr) opj_stream_destroy(stream);
  };
  const auto fail = [&](std::string w) {
    cleanup();
    why = std::move(w);
    return invalid(why);
  };
  if (stream == nullptr || codec == nullptr) return fail("cannot create the OpenJPEG decoder");
  opj_stream_set_user_data(stream, &job, nullptr);
  opj_stream_set_user_data_length(stream, job.size);
  opj_stream_set_read_function(stream, opj_read);
  opj_stream_set_skip_function(stream, opj_skip);
  opj_stream_set_seek_function(stream, opj_seek);
  opj_set_error_handler(codec, opj_on_error, &job);
  opj_set_warning_handler(codec, opj_quiet, &job);
  opj_set_info_handler(codec, opj_quiet, &job);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  if (!opj_setup_decoder(codec, &params)) return fail("cannot set up the OpenJPEG decoder");
  opj_decoder_set_strict_mode(codec, OPJ_TRUE);
  const auto msg = [&](const char* what) { return job.message.empty() ? std::string(what) : job.message; };
  if (!opj_read_header(stream, codec, &img) || img == nullptr) return fail(msg("the header cannot be read"));
  if (img->numcomps == 0 || img->comps == nullptr) return fail("the image has no components");
  if (img->x1 <= img->x0 || img->y1 <= img->y0) return fail("the image is empty");
  const std::uint64_t w = img->x1 - img->x0, h = img->y1 - img->y0;
  const int channels = img->numcomps >= 3 ? 3 : 1;
  if (!out.allocate(w, h, channels, why)) return fail(why);
  if (!opj_decode(codec, stream, img) || !opj_end_decompress(codec, stream)) return fail(msg("the image data cannot be decoded"));
  for (int c = 0; c < channels; ++c) {
    const opj_image_comp_t& comp = img->comps[c];
    if (comp.data == nullptr || comp.w == 0 || comp.h == 0 || comp.dx == 0 || comp.dy == 0) return fail("a component has no data");
  }
  const bool sycc = channels == 3 && img->color_space == OPJ_CLRSPC_SYCC;
  std::uint8_t* dst = out.pixels.data();
  for (std::uint64_t y = 0; y < h; ++y)
    for (std::uint64_t x = 0; x < w; ++x) {
      std::uint8_t v[3] = {};
      for (int c = 0; c < channels; ++c) {
        const opj_image_comp_t& comp = img->comps[c];
        // The component sample covering this pixel of the reference grid (components may be subsampled).
        const std::int64_t cx = std::clamp<std::int64_t>(static_cast<std::int64_t>((img->x0 + x) / comp.dx) - comp.x0, 0, comp.w - 1);
        const std::int64_t cy = std::clamp<std::int64_t>(static_cast<std::int64_t>((img->y0 + y) / comp.dy) - comp.y0, 0, comp.h - 1);
        v[c] = opj_sample(comp, comp.data[cy * comp.w + cx]);
      }
      std::uint8_t* p = dst + (y * w + x) * static_cast<std::uint64_t>(channels);
      if (sycc) {
        const double Y = v[0], cb = v[1] - 128.0, cr = v[2] - 128.0;
        p[0] = static_cast<std::uint8_t>(std::clamp(std::lround(Y + 1.402 * cr), 0L, 255L));
        p[1] = static_cast<std::uint8_t>(std::clamp(std::lround(Y - 0.344136 * cb - 0.714136 * cr), 0L, 255L));
        p[2] = static_cast<std::uint8_t>(std::clamp(std::lround(Y + 1.772 * cb), 0L, 255L));
      } else {
        for (int c = 0; c < channels; ++c) p[c] = v[c];
      }
    }
  cleanup();
  return {};
}

// ---------------------------------------------------------------------------------------------------------------

enum class image_format { bmp, jpeg, jpeg2000, j2k, png, pnm, tiff, webp, unknown };

image_format sniff(std::span<const std::uint8_t> s) {
  const auto starts = [&](std::initializer_list<std::uint8_t> m) {
    return s.size() >= m.size() && std::equal(m.begin(), m.end(), s.begin());
  };
  if (starts({0xff, 0xd8, 0xff})) return image_format::jpeg;
  if (starts({0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a})) return image_format::png;
  if (starts({'I', 'I', 42, 0}) || starts({'M', 'M', 0, 42}) || starts({'I', 'I', 43, 0}) || starts({'M', 'M', 0, 43}))
    return image_format::tiff;
  if (s.size() >= 12 && starts({'R', 'I', 'F', 'F'}) && std::equal(s.begin() + 8, s.begin() + 12, "WEBP")) return image_format::webp;
  if (starts({0, 0, 0, 0x0c, 'j', 'P', ' ', ' ', 0x0d, 0x0a, 0x87, 0x0a})) return image_format::jpeg2000;
  if (starts({0xff, 0x4f, 0xff, 0x51})) return image_format::j2k;
  if (starts({'B', 'M'})) return image_format::bmp;
  if (s.size() >= 3 && s[0] == 'P' && s[1] >= '1' && s[1] <= '7' && pnm_parser::space(s[2])) return image_format::pnm;
  return image_format::unknown;
}

Status decode_image(std::span<const std::uint8_t> s, decoded& out) {
  std::string why;
  const auto named = [&](std::string_view format, const Status& st) -> Status {
    if (st.is_ok()) return st;
    return invalid(cat("input encoded_stream: cannot decode the ", format, " image: ", why.empty() ? st.message() : why));
  };
  switch (sniff(s)) {
    case image_format::jpeg: return named("JPEG", decode_jpeg(s, out, why));
    case image_format::png: return named("PNG", decode_png(s, out, why));
    case image_format::tiff: return named("TIFF", decode_tiff(s, out, why));
    case image_format::webp: return named("WebP", decode_webp(s, out, why));
    case image_format::jpeg2000: return named("JPEG 2000", decode_jpeg2000(s, out, why, true));
    case image_format::j2k: return named("JPEG 2000", decode_jpeg2000(s, out, why, false));
    case image_format::bmp: return named("BMP", decode_bmp(s, out, why));
    case image_format::pnm: return named("PNM", decode_pnm(s, out, why));
    case image_format::unknown: break;
  }
  if (s.empty()) return invalid("input encoded_stream is empty");
  return invalid("input encoded_stream is not an image in a supported format (BMP, JPEG, JPEG 2000, PNG, PNM, TIFF, WebP)");
}

enum class pixel_format { rgb, bgr, gray };

/// Writes `img` as [H, W, C] in `fmt`.
void convert(const decoded& img, pixel_format fmt, std::uint8_t* dst) {
  const std::size_t n = static_cast<std::size_t>(img.width * img.height);
  const std::uint8_t* src = img.pixels.data();
  if (fmt == pixel_format::gray) {
    if (img.channels == 1) std::copy_n(src, n, dst);
    else
      for (std::size_t i = 0; i < n; ++i) dst[i] = luma(src[i * 3], src[i * 3 + 1], src[i * 3 + 2]);
    return;
  }
  const bool swap = fmt == pixel_format::bgr;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t* o = dst + i * 3;
    if (img.channels == 1) {
      o[0] = o[1] = o[2] = src[i];
    } else {
      o[0] = src[i * 3 + (swap ? 2 : 0)];
      o[1] = src[i * 3 + 1];
      o[2] = src[i * 3 + (swap ? 0 : 2)];
    }
  }
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

bool image_decoder::supports(const graph& g, node_id n) { return in_type(g, n, 0) == element_type::uint8; }
Result<compute_function> image_decoder::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (const auto* a = attr(nd, "pixel_format"); a != nullptr && !std::holds_alternative<std::string>(a->value))
    return invalid("ImageDecoder: attribute 'pixel_format' must be a string");
  const std::string name = attr_s(nd, "pixel_format", "RGB");
  pixel_format fmt = pixel_format::rgb;
  if (name == "RGB") fmt = pixel_format::rgb;
  else if (name == "BGR") fmt = pixel_format::bgr;
  else if (name == "Grayscale") fmt = pixel_format::gray;
  else return invalid(cat("ImageDecoder: attribute 'pixel_format' must be RGB, BGR or Grayscale, got '", name, "'"));
  return make_fn("ImageDecoder", [fmt](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.type() != element_type::uint8)
      return op_error("ImageDecoder", cat("input encoded_stream must be a uint8 tensor, got ", std::string(to_string(x.type()))));
    decoded img;
    const Status st = decode_image(std::span<const std::uint8_t>(x.typed<std::uint8_t>(), x.element_count()), img);
    if (!st.is_ok()) return op_error("ImageDecoder", st.message());
    const std::int64_t c = fmt == pixel_format::gray ? 1 : 3;
    tensor& y = ctx.allocate_output(0, element_type::uint8, {img.height, img.width, c});
    convert(img, fmt, y.typed<std::uint8_t>());
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
