// Signal processing of opsets 17 and 20: DFT, STFT and MelWeightMatrix. Transforms run in double precision (as numpy's
// fft, which the reference uses): radix-2 FFT for power-of-two lengths, a direct DFT over a twiddle table otherwise;
// every transform runs in double (the 1.22 suite's inverse DFT references come from numpy 2's float32 transform and
// differ from the exact result by float rounding; see the expected-failures file).
#include "kernel_util.hpp"

#include <complex>
#include <numbers>

namespace epstack::cpu {
namespace impl {
namespace {

using cplx = std::complex<double>;
using dims = std::vector<std::int64_t>;

/// Reads element i of a floating-point tensor (float, double, float16, bfloat16) as double.
double real_at(const tensor& t, std::size_t i) {
  switch (t.type()) {
    case element_type::float64: return t.typed<double>()[i];
    case element_type::float16: return static_cast<float>(t.typed<float16>()[i]);
    case element_type::bfloat16: return static_cast<float>(t.typed<bfloat16>()[i]);
    default: return static_cast<double>(t.typed<float>()[i]);
  }
}
/// Writes v to element i of a floating-point tensor.
void put_real(tensor& y, std::size_t i, double v) {
  switch (y.type()) {
    case element_type::float64: y.typed<double>()[i] = v; break;
    case element_type::float16: y.typed<float16>()[i] = float16(static_cast<float>(v)); break;
    case element_type::bfloat16: y.typed<bfloat16>()[i] = bfloat16(static_cast<float>(v)); break;
    default: y.typed<float>()[i] = static_cast<float>(v); break;
  }
}
/// Transforms of one length n: forward e^{-2 pi i jk/n}, or inverse e^{+2 pi i jk/n} / n.
class transform {
 public:
  explicit transform(std::int64_t n) : n_(static_cast<std::size_t>(n)), tw_(n_) {
    // The angle of t/n of a turn, reduced exactly (integer t), so every twiddle is accurate to an ulp.
    for (std::size_t t = 0; t < n_; ++t) {
      const double a = -2 * std::numbers::pi * static_cast<double>(t) / static_cast<double>(n_);
      tw_[t] = cplx(std::cos(a), std::sin(a));
    }
    pow2_ = n_ > 1 && (n_ & (n_ - 1)) == 0;
  }
  /// y[k] for k in [0, m) of the transform of x (n values); `work` holds n values.
  void run(const cplx* x, cplx* y, std::size_t m, bool inverse, std::vector<cplx>& work) const {
    if (pow2_) {
      work.assign(x, x + n_);
      fft(work, inverse);
      for (std::size_t k = 0; k < m; ++k) y[k] = work[k];
    } else {
      for (std::size_t k = 0; k < m; ++k) {
        cplx acc = 0;
        for (std::size_t j = 0; j < n_; ++j) {
          const cplx w = tw_[(j * k) % n_];
          acc += x[j] * (inverse ? std::conj(w) : w);
        }
        y[k] = acc;
      }
    }
    if (inverse)
      for (std::size_t k = 0; k < m; ++k) y[k] /= static_cast<double>(n_);
  }

 private:
  void fft(std::vector<cplx>& a, bool inverse) const {
    for (std::size_t i = 1, j = 0; i < n_; ++i) {  // bit reversal
      std::size_t bit = n_ >> 1;
      for (; (j & bit) != 0; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (std::size_t len = 2; len <= n_; len <<= 1) {
      const std::size_t step = n_ / len;
      for (std::size_t i = 0; i < n_; i += len)
        for (std::size_t j = 0; j < len / 2; ++j) {
          const cplx w = inverse ? std::conj(tw_[j * step]) : tw_[j * step];
          const cplx u = a[i + j], v = a[i + j + len / 2] * w;
          a[i + j] = u + v;
          a[i + j + len / 2] = u - v;
        }
    }
  }
  std::size_t n_;
  std::vector<cplx> tw_;
  bool pow2_ = false;
};

/// Writes v to element i (of 2: real, imaginary) of a floating-point output.
void put(tensor& y, std::size_t i, cplx v) {
  put_real(y, 2 * i, v.real());
  put_real(y, 2 * i + 1, v.imag());
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

// ---- DFT-17 and DFT-20: signal [n0, n1, ..., nk, 1 or 2]; the transform along an axis (DFT-17: the attribute,
// default 1; DFT-20: the optional input, default -2), of dft_length values (zero-padded or truncated), forward or
// inverse (scaled by 1/n), all bins or onesided: a real signal's n/2 + 1 bins (forward, RFFT), or the real signal of
// n = dft_length (default 2 (bins - 1)) values whose spectrum has the given bins (inverse, IRFFT). In double, but for
// the complex inverse of a float signal, computed in float as the reference does ----
bool dft::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  if (!type_in<float, double, float16, bfloat16>(t)) return false;
  const auto len_t = in_type(g, n, 1);
  if (len_t != element_type::undefined && len_t != element_type::int64 && len_t != element_type::int32) return false;
  const auto axis_t = in_type(g, n, 2);
  return axis_t == element_type::undefined || axis_t == element_type::int64 || axis_t == element_type::int32;
}
Result<compute_function> dft::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const int ver = nd.since_version == 0 ? 1 << 20 : nd.since_version;
  const bool axis_input = ver >= 20;
  const std::int64_t axis_attr = axis_input ? -2 : attr_i(nd, "axis", 1);
  const bool inverse = attr_i(nd, "inverse", 0) != 0, onesided = attr_i(nd, "onesided", 0) != 0;
  return make_fn("DFT", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const std::size_t r = x.rank();
    const std::size_t min_rank = axis_input ? 2 : 3;
    if (r < min_rank || (x.sizes()[r - 1] != 1 && x.sizes()[r - 1] != 2))
      return op_error("DFT", cat("the signal must be [", axis_input ? "" : "batch, ", "n..., 1 or 2], got ", dims_string(x.sizes())));
    const bool complex_in = x.sizes()[r - 1] == 2;
    std::int64_t axis_given = axis_attr;
    if (axis_input && ctx.has_input(2) && !ctx.input(2).empty()) {
      EPSTACK_ASSIGN_OR_RETURN(axis_given, scalar_int(ctx.input(2), "DFT: axis"));
    }
    // The axis: any dim but the last (the real/imaginary one), [-r, -2] or [0, r - 2].
    const std::int64_t axis = axis_given < 0 ? axis_given + static_cast<std::int64_t>(r) : axis_given;
    if (axis < 0 || axis > static_cast<std::int64_t>(r) - 2)
      return op_error("DFT", cat("axis ", std::to_string(axis_given), " is not a signal dim of a rank-", std::to_string(r), " input"));
    const bool irfft = inverse && onesided;
    if (onesided && !inverse && complex_in) return op_error("DFT", "onesided (forward) needs a real signal");
    if (irfft && !complex_in) return op_error("DFT", "onesided with inverse (IRFFT) needs a complex signal");
    const std::int64_t len = x.sizes()[static_cast<std::size_t>(axis)];
    std::int64_t n_fft = irfft ? 2 * (len - 1) : len;
    if (ctx.has_input(1) && !ctx.input(1).empty()) {
      EPSTACK_ASSIGN_OR_RETURN(n_fft, scalar_int(ctx.input(1), "DFT: dft_length"));
    }
    if (n_fft < 1) return op_error("DFT", cat("dft_length must be positive, got ", std::to_string(n_fft)));
    if (n_fft > (std::int64_t{1} << 31)) return op_error("DFT", cat("dft_length ", std::to_string(n_fft), " is too large"));
    const std::int64_t bins = irfft ? n_fft : onesided ? n_fft / 2 + 1 : n_fft;
    dims out(x.sizes().begin(), x.sizes().end());
    out[static_cast<std::size_t>(axis)] = bins;
    out[r - 1] = irfft ? 1 : 2;
    tensor& y = ctx.allocate_output(0, x.type(), out);
    const std::int64_t outer = product(x.sizes(), 0, static_cast<std::size_t>(axis)),
                       inner = product(x.sizes(), static_cast<std::size_t>(axis) + 1, r - 1), comps = x.sizes()[r - 1];
    const auto lines = static_cast<std::size_t>(outer * inner);
    if (lines == 0) return {};
    // Element j of line a of the signal, as complex; 0 past its end (zero padding).
    const auto sample = [&](std::int64_t o, std::int64_t in, std::int64_t j) -> cplx {
      if (j >= len) return 0;
      const auto at = static_cast<std::size_t>(((o * len + j) * inner + in) * comps);
      return cplx(real_at(x, at), complex_in ? real_at(x, at + 1) : 0.0);
    };
    const transform tf(n_fft);
    parallel_items(ctx, lines, static_cast<std::size_t>(n_fft * bins), [&](std::size_t a0, std::size_t a1) {
      std::vector<cplx> sig(static_cast<std::size_t>(n_fft)), res(static_cast<std::size_t>(n_fft)), work;
      for (std::size_t a = a0; a < a1; ++a) {
        const std::int64_t o = static_cast<std::int64_t>(a) / inner, in = static_cast<std::int64_t>(a) % inner;
        if (irfft) {
          // The full spectrum of a real signal from its first n/2 + 1 bins (missing ones are zero): X[n - k] =
          // conj(X[k]). The imaginary parts of bin 0 (and n/2) only reach the imaginary part of the result, dropped.
          for (std::int64_t k = 0; k < n_fft; ++k) {
            const std::int64_t m = k <= n_fft / 2 ? k : n_fft - k;
            const cplx v = sample(o, in, m);
            sig[static_cast<std::size_t>(k)] = k <= n_fft / 2 ? v : std::conj(v);
          }
        } else {
          for (std::int64_t j = 0; j < n_fft; ++j) sig[static_cast<std::size_t>(j)] = sample(o, in, j);
        }
        tf.run(sig.data(), res.data(), static_cast<std::size_t>(irfft ? n_fft : bins), inverse, work);
        for (std::int64_t k = 0; k < bins; ++k) {
          const auto at = static_cast<std::size_t>((o * bins + k) * inner + in);
          if (irfft) put_real(y, at, res[static_cast<std::size_t>(k)].real());
          else put(y, at, res[static_cast<std::size_t>(k)]);
        }
      }
    });
    return {};
  });
}

// ---- STFT-17: signal [batch, length, 1 or 2], frame_step, optional window [frame_length] and frame_length; output
// [batch, frames, bins, 2], frames = 1 + (length - frame_length) / frame_step, bins = frame_length / 2 + 1 when
// onesided (the default, real signals) ----
bool stft::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)); }
Result<compute_function> stft::compile(const graph& g, node_id n) {
  const bool onesided = attr_i(g.node(n), "onesided", 1) != 0;
  return make_fn("STFT", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() != 3 || (x.sizes()[2] != 1 && x.sizes()[2] != 2))
      return op_error("STFT", cat("the signal must be [batch, length, 1 or 2], got ", dims_string(x.sizes())));
    const bool complex_in = x.sizes()[2] == 2;
    if (onesided && complex_in) return op_error("STFT", "onesided needs a real signal");
    EPSTACK_ASSIGN_OR_RETURN(const std::int64_t step, scalar_int(ctx.input(1), "STFT: frame_step"));
    const tensor* window = ctx.has_input(2) && !ctx.input(2).empty() ? &ctx.input(2) : nullptr;
    std::int64_t frame = -1;
    if (ctx.has_input(3) && !ctx.input(3).empty()) {
      EPSTACK_ASSIGN_OR_RETURN(frame, scalar_int(ctx.input(3), "STFT: frame_length"));
    }
    if (window != nullptr) {
      if (window->rank() != 1 || window->type() != x.type()) return op_error("STFT", "the window must be 1-D, of the signal's type");
      if (frame >= 0 && frame != window->sizes()[0])
        return op_error("STFT", cat("frame_length ", std::to_string(frame), " differs from the window's length ", std::to_string(window->sizes()[0])));
      frame = window->sizes()[0];
    }
    if (frame < 1) return op_error("STFT", "needs a frame_length or a window, of positive length");
    const std::int64_t batch = x.sizes()[0], length = x.sizes()[1], comps = x.sizes()[2];
    if (step < 1) return op_error("STFT", cat("frame_step must be positive, got ", std::to_string(step)));
    if (frame > length) return op_error("STFT", cat("frame_length ", std::to_string(frame), " exceeds the signal's length ", std::to_string(length)));
    const std::int64_t frames = 1 + (length - frame) / step, bins = onesided ? frame / 2 + 1 : frame;
    tensor& y = ctx.allocate_output(0, x.type(), {batch, frames, bins, 2});
    const transform tf(frame);
    parallel_items(ctx, static_cast<std::size_t>(batch * frames), static_cast<std::size_t>(frame * bins), [&](std::size_t a0, std::size_t a1) {
      std::vector<cplx> sig(static_cast<std::size_t>(frame)), res(static_cast<std::size_t>(bins)), work;
      for (std::size_t a = a0; a < a1; ++a) {
        const std::int64_t b = static_cast<std::int64_t>(a) / frames, f = static_cast<std::int64_t>(a) % frames;
        for (std::int64_t j = 0; j < frame; ++j) {
          const auto at = static_cast<std::size_t>((b * length + f * step + j) * comps);
          const double w = window != nullptr ? real_at(*window, static_cast<std::size_t>(j)) : 1.0;
          sig[static_cast<std::size_t>(j)] = cplx(real_at(x, at) * w, complex_in ? real_at(x, at + 1) * w : 0.0);
        }
        tf.run(sig.data(), res.data(), static_cast<std::size_t>(bins), false, work);
        for (std::int64_t k = 0; k < bins; ++k) put(y, static_cast<std::size_t>(a) * static_cast<std::size_t>(bins) + static_cast<std::size_t>(k), res[static_cast<std::size_t>(k)]);
      }
    });
    return {};
  });
}

// ---- MelWeightMatrix-17: [dft_length / 2 + 1, num_mel_bins] triangular filters, evenly spaced on the mel scale
// (2595 log10(1 + f / 700)) between lower_edge_hertz and upper_edge_hertz; computed in double as the reference ----
bool mel_weight_matrix::supports(const graph& g, node_id n) {
  const auto dt = attr_i(g.node(n), "output_datatype", 1);
  return dt == static_cast<std::int64_t>(element_type::float32) || dt == static_cast<std::int64_t>(element_type::float64);
}
Result<compute_function> mel_weight_matrix::compile(const graph& g, node_id n) {
  const auto out_type = static_cast<element_type>(attr_i(g.node(n), "output_datatype", 1));
  return make_fn("MelWeightMatrix", [=](compute_context& ctx) -> Status {
    EPSTACK_ASSIGN_OR_RETURN(const std::int64_t mels, scalar_int(ctx.input(0), "MelWeightMatrix: num_mel_bins"));
    EPSTACK_ASSIGN_OR_RETURN(const std::int64_t dft_length, scalar_int(ctx.input(1), "MelWeightMatrix: dft_length"));
    EPSTACK_ASSIGN_OR_RETURN(const std::int64_t rate, scalar_int(ctx.input(2), "MelWeightMatrix: sample_rate"));
    for (std::size_t i : {std::size_t{3}, std::size_t{4}})
      if (!f32_or_f64(ctx.input(i).type()) || ctx.input(i).element_count() != 1)
        return op_error("MelWeightMatrix", "lower_edge_hertz and upper_edge_hertz must be float scalars");
    const double lower = real_at(ctx.input(3), 0), upper = real_at(ctx.input(4), 0);
    if (mels < 1 || dft_length < 1 || rate < 1)
      return op_error("MelWeightMatrix", "num_mel_bins, dft_length and sample_rate must be positive");
    if (!(lower >= 0) || !(upper >= lower)) return op_error("MelWeightMatrix", "needs 0 <= lower_edge_hertz <= upper_edge_hertz");
    const std::int64_t spec_bins = dft_length / 2 + 1;
    // The output's size is spec_bins * mels: bounded before any arithmetic on it can overflow.
    if (mels > (std::int64_t{1} << 20) || spec_bins > (std::int64_t{1} << 30) / mels)
      return op_error("MelWeightMatrix", cat("a [", std::to_string(spec_bins), ", ", std::to_string(mels), "] matrix is too large"));
    const auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
    const double low_mel = mel(lower), high_mel = mel(upper), mel_step = (high_mel - low_mel) / static_cast<double>(mels + 2);
    std::vector<std::int64_t> bin(static_cast<std::size_t>(mels + 2));
    for (std::int64_t i = 0; i < mels + 2; ++i) {
      const double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595) - 1);
      const double b = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate));
      if (!(b >= 0) || b >= static_cast<double>(spec_bins))
        return op_error("MelWeightMatrix", cat("upper_edge_hertz ", std::to_string(upper), " lies beyond the ", std::to_string(spec_bins), " bins of a ",
                                               std::to_string(dft_length), "-point DFT at ", std::to_string(rate), " Hz"));
      bin[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(b);
    }
    std::vector<double> w(static_cast<std::size_t>(spec_bins * mels), 0.0);
    const auto at = [&](std::int64_t j, std::int64_t i) -> double& { return w[static_cast<std::size_t>(j * mels + i)]; };
    for (std::int64_t i = 0; i < mels; ++i) {
      const std::int64_t lo = bin[static_cast<std::size_t>(i)], c = bin[static_cast<std::size_t>(i + 1)], hi = bin[static_cast<std::size_t>(i + 2)];
      if (c == lo) at(c, i) = 1;
      else
        for (std::int64_t j = lo; j <= c; ++j) at(j, i) = static_cast<double>(j - lo) / static_cast<double>(c - lo);
      if (hi > c)
        for (std::int64_t j = c; j < hi; ++j) at(j, i) = static_cast<double>(hi - j) / static_cast<double>(hi - c);
    }
    tensor& y = ctx.allocate_output(0, out_type, {spec_bins, mels});
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (out_type == element_type::float64) y.typed<double>()[i] = w[i];
      else y.typed<float>()[i] = static_cast<float>(w[i]);
    }
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
