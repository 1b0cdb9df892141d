#pragma once
// A file written under a temporary name in its destination folder and renamed over the destination on commit(), so a
// crash never leaves a partial file behind; removed if never committed. Shared by the writers of epstack::onnx (models) and epstack::provider (context binaries).
#include <epstack/core/errors.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

namespace epstack::detail {

namespace fs = std::filesystem;

inline std::atomic<unsigned> temp_counter{0};

class atomic_file {
 public:
  explicit atomic_file(fs::path dest) : dest_(std::move(dest)) {
    tmp_ = dest_;
    tmp_ += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(temp_counter++);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) error_ = std::strerror(errno);
  }
  atomic_file(const atomic_file&) = delete;
  atomic_file& operator=(const atomic_file&) = delete;
  ~atomic_file() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  [[nodiscard]] bool ok() const noexcept { return error_.empty(); }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  bool write(const void* p, std::size_t n) {
    const auto* c = static_cast<const char*>(p);
    while (n > 0 && ok()) {
      const ssize_t w = ::write(fd_, c, std::min<std::size_t>(n, std::size_t{1} << 30));
      if (w < 0) {
        if (errno == EINTR) continue;
        error_ = std::strerror(errno);
        break;
      }
      c += w;
      n -= static_cast<std::size_t>(w);
      size_ += static_cast<std::uint64_t>(w);
    }
    return ok();
  }
  bool pad_to(std::uint64_t alignment) {
    static const char zeros[4096] = {};
    while (alignment > 1 && size_ % alignment != 0 && ok())
      write(zeros, std::min<std::uint64_t>(sizeof zeros, alignment - size_ % alignment));
    return ok();
  }
  Status commit() {
    if (ok() && ::fsync(fd_) != 0) error_ = std::strerror(errno);
    if (fd_ >= 0 && ::close(fd_) != 0 && ok()) error_ = std::strerror(errno);
    fd_ = -1;
    if (ok() && ::rename(tmp_.c_str(), dest_.c_str()) != 0) error_ = std::strerror(errno);
    if (!ok()) return Status(errc::fail, "cannot write '" + dest_.string() + "': " + error_);
    committed_ = true;
    return {};
  }
  [[nodiscard]] Status status() const {
    return ok() ? Status{} : Status(errc::fail, "cannot write '" + dest_.string() + "': " + error_);
  }

 private:
  fs::path dest_, tmp_;
  int fd_ = -1;
  std::string error_;
  std::uint64_t size_ = 0;
  bool committed_ = false;
};

}  // namespace epstack::detail
