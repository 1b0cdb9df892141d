#pragma once
/// @file errors.hpp
/// @brief The one error enum (mirroring ONNX Runtime's status codes), `Status` and `Result<T>`.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace epstack {

/// Error codes. The names and meanings follow ONNX Runtime's `OrtErrorCode`, so users porting from it recognise them.
enum class errc : std::uint8_t {
  ok = 0,                      ///< Success.
  fail,                        ///< A failure that fits no other code.
  invalid_argument,            ///< The caller passed a bad argument (name, type, shape, option).
  no_such_file,                ///< A file (model, external data, context binary) does not exist.
  no_model,                    ///< There is no model where one was expected.
  engine_error,                ///< An execution provider's engine reported an error.
  runtime_exception,           ///< An exception escaped while running.
  invalid_protobuf,            ///< The bytes are not a parsable ONNX protobuf message.
  model_loaded,                ///< The model was already loaded.
  not_implemented,             ///< The feature exists in the spec but not here.
  invalid_graph,               ///< The model is well-formed protobuf but not a valid graph.
  ep_fail,                     ///< An execution provider failed.
  model_requires_compilation,  ///< Compilation is disabled but the model still needs it.
  not_found,                   ///< A named thing (node, value, attribute, key) was not found.
};

/// @brief The enumerator's name, e.g. "invalid_graph".
[[nodiscard]] constexpr std::string_view to_string(errc e) noexcept {
  switch (e) {
    case errc::ok: return "ok";
    case errc::fail: return "fail";
    case errc::invalid_argument: return "invalid_argument";
    case errc::no_such_file: return "no_such_file";
    case errc::no_model: return "no_model";
    case errc::engine_error: return "engine_error";
    case errc::runtime_exception: return "runtime_exception";
    case errc::invalid_protobuf: return "invalid_protobuf";
    case errc::model_loaded: return "model_loaded";
    case errc::not_implemented: return "not_implemented";
    case errc::invalid_graph: return "invalid_graph";
    case errc::ep_fail: return "ep_fail";
    case errc::model_requires_compilation: return "model_requires_compilation";
    case errc::not_found: return "not_found";
  }
  return "unknown";
}

/// @brief The outcome of a fallible operation: a code and, on failure, a message naming what failed and where.
class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  [[nodiscard]] static Status ok() noexcept { return {}; }
  [[nodiscard]] bool is_ok() const noexcept { return code_ == errc::ok; }
  explicit operator bool() const noexcept { return is_ok(); }
  [[nodiscard]] errc code() const noexcept { return code_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  /// "invalid_graph: node 'n1': ..." (just "ok" on success).
  [[nodiscard]] std::string to_string() const {
    std::string s(epstack::to_string(code_));
    if (!message_.empty()) s.append(": ").append(message_);
    return s;
  }
  /// @brief Prefixes the message with context, e.g. the file being loaded.
  Status& with_context(std::string_view context) & {
    if (!is_ok()) message_ = std::string(context).append(": ").append(message_);
    return *this;
  }
  /// On a temporary, returns the result by value (so `f().with_context(x)` never dangles).
  [[nodiscard]] Status with_context(std::string_view context) && {
    with_context(context);
    return std::move(*this);
  }

 private:
  errc code_ = errc::ok;
  std::string message_;
};

/// @brief A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  using value_type = T;
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::in_place_index<1>, std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<1>(v_).is_ok()) v_.template emplace<1>(errc::fail, "Result constructed from an ok Status");
  }
  Result(errc code, std::string message) : Result(Status(code, std::move(message))) {}

  [[nodiscard]] bool has_value() const noexcept { return v_.index() == 0; }
  [[nodiscard]] bool is_ok() const noexcept { return has_value(); }
  explicit operator bool() const noexcept { return has_value(); }

  /// The status: ok when there is a value.
  [[nodiscard]] Status status() const { return has_value() ? Status{} : std::get<1>(v_); }
  [[nodiscard]] errc code() const noexcept { return has_value() ? errc::ok : std::get<1>(v_).code(); }

  // Accessing the value of a failed Result is a programming error: std::get throws std::bad_variant_access.
  [[nodiscard]] T& value() & { return std::get<0>(v_); }
  [[nodiscard]] const T& value() const& { return std::get<0>(v_); }
  [[nodiscard]] T&& value() && { return std::get<0>(std::move(v_)); }
  [[nodiscard]] T& operator*() & { return value(); }
  [[nodiscard]] const T& operator*() const& { return value(); }
  [[nodiscard]] T&& operator*() && { return std::move(*this).value(); }
  [[nodiscard]] T* operator->() { return &value(); }
  [[nodiscard]] const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
inline Status status_of(Status s) { return s; }
template <class T>
Status status_of(const Result<T>& r) { return r.status(); }
}  // namespace detail

}  // namespace epstack

#define EPSTACK_CONCAT_IMPL(a, b) a##b
#define EPSTACK_CONCAT(a, b) EPSTACK_CONCAT_IMPL(a, b)

/// Returns the Status from the enclosing function when `expr` (a Status or Result) failed.
#define EPSTACK_RETURN_IF_ERROR(expr)                                         \
  do {                                                                        \
    auto&& epstack_status_tmp_ = (expr);                                      \
    if (!epstack_status_tmp_.is_ok()) return ::epstack::detail::status_of(epstack_status_tmp_); \
  } while (false)

#define EPSTACK_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.has_value()) return tmp.status();          \
  lhs = std::move(tmp).value()

/// `EPSTACK_ASSIGN_OR_RETURN(auto m, load_model(p));`: binds the value or returns the failure.
#define EPSTACK_ASSIGN_OR_RETURN(lhs, expr) EPSTACK_ASSIGN_OR_RETURN_N(__COUNTER__, lhs, expr)
#define EPSTACK_ASSIGN_OR_RETURN_N(n, lhs, expr) EPSTACK_ASSIGN_OR_RETURN_IMPL(EPSTACK_CONCAT(epstack_result_, n), lhs, expr)
