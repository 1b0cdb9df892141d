#pragma once
/// @file float_mode.hpp
/// @brief The calling thread's handling of subnormal floats for a scope: ONNX Runtime's
/// `session.set_denormal_as_zero` (`config_keys::set_denormal_as_zero`), set by a session on every thread of a run.
///
/// A thread starts with the mode of the thread that created it (Linux copies the control word at clone): a thread a
/// runtime starts while the caller flushes would flush for good; thread_pool::run_scope sets the caller's mode only
/// after its runtime's team exists, and gives threads it did not set the caller's mode from before the run.
///
/// On x86 two bits of MXCSR: flush-to-zero (a result too small for a normal float is 0) and denormals-are-zero (a
/// subnormal operand is read as 0). Intel cores take a microcode assist, about a hundred cycles, for each subnormal
/// operand or result of a vector instruction; a model whose activations or weights fall into that range can run many
/// times slower without them. The answers differ only where a value is subnormal (below 1.18e-38 in magnitude).
/// Elsewhere (another architecture) the scope does nothing.

namespace epstack {

namespace detail {
/// The calling thread's floating-point control word (MXCSR on x86; 0 and ignored elsewhere).
inline unsigned read_float_control() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_stmxcsr();
#else
  return 0;
#endif
}
inline void write_float_control([[maybe_unused]] unsigned word) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_ldmxcsr(word);
#endif
}
}  // namespace detail

/// @brief Sets flush-to-zero and denormals-are-zero on this thread when `on`, and on leaving the scope restores
/// exactly the control word it found (rounding mode and exception masks included). Nests: an inner scope finds the
/// bits already set and restores them so.
class flush_denormals_scope {
 public:
  explicit flush_denormals_scope(bool on) noexcept {
    if (on) {
      saved_ = detail::read_float_control();
      active_ = true;
      detail::write_float_control(saved_ | mode_bits);
    }
  }
  ~flush_denormals_scope() {
    if (active_) detail::write_float_control(saved_);
  }
  flush_denormals_scope(const flush_denormals_scope&) = delete;
  flush_denormals_scope& operator=(const flush_denormals_scope&) = delete;

  /// Whether this thread now flushes subnormal results and reads subnormal operands as zero (false where the
  /// architecture has no such mode).
  [[nodiscard]] static bool active_on_this_thread() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    const unsigned w = __builtin_ia32_stmxcsr();
    return (w & flush_to_zero_bit) != 0 && (w & denormals_are_zero_bit) != 0;
#else
    return false;
#endif
  }

  static constexpr unsigned flush_to_zero_bit = 1u << 15;    ///< MXCSR.FTZ
  static constexpr unsigned denormals_are_zero_bit = 1u << 6;  ///< MXCSR.DAZ
  static constexpr unsigned mode_bits = flush_to_zero_bit | denormals_are_zero_bit;

 private:
  unsigned saved_ = 0;
  bool active_ = false;
};

}  // namespace epstack
