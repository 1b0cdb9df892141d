#pragma once
/// @file mapped_file.hpp
/// @brief A read-only view of a whole file, memory-mapped (POSIX), so weights are paged in on use and never copied.

#include <epstack/core/errors.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace epstack {

/// @brief A memory-mapped file. Mapped private: writes through a tensor that borrows it never reach the file. Shared with `std::shared_ptr` by every tensor that borrows from it.
class mapped_file {
 public:
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() {
    if (data_ != nullptr && size_ != 0) ::munmap(data_, size_);
    if (fd_ >= 0) ::close(fd_);
  }

  /// @brief Maps `path`. no_such_file when it does not exist; invalid_argument when it is not a regular file.
  /// `populate`: map every page now, read-only (for a file about to be read whole: one bulk operation instead of a
  /// fault per page); otherwise the mapping is copy-on-write and pages are mapped on first use (weights).
  /// `keep_descriptor`: the file stays open while mapped (`descriptor`), for reads besides the mapping
  /// (weight_memory.hpp's read_mapped).
  [[nodiscard]] static Result<std::shared_ptr<mapped_file>> open(const std::filesystem::path& path, bool populate = false,
                                                                 bool keep_descriptor = false) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      return Status(err == ENOENT ? errc::no_such_file : errc::fail,
                    "cannot open '" + path.string() + "': " + std::strerror(err));
    }
    struct ::stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status(errc::invalid_argument, "'" + path.string() + "' is not a regular file");
    }
    auto f = std::shared_ptr<mapped_file>(new mapped_file());
    f->path_ = path;
    f->size_ = static_cast<std::size_t>(st.st_size);
    if (f->size_ != 0) {
      void* p = populate ? ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0)
                         : ::mmap(nullptr, f->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        return Status(errc::fail, "cannot map '" + path.string() + "': " + std::strerror(err));
      }
      f->data_ = static_cast<std::byte*>(p);
    }
    if (keep_descriptor) f->fd_ = fd;
    else ::close(fd);
    return f;
  }

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /// The open file (`open` with keep_descriptor), or -1.
  [[nodiscard]] int descriptor() const noexcept { return fd_; }
  /// Closes the file kept open by `open` with keep_descriptor (the mapping stays). Before the mapping is shared.
  void close_descriptor() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  mapped_file() = default;
  int fd_ = -1;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::filesystem::path path_;
};

/// @brief Drops the pages wholly inside [p, p + n) from this process's memory (madvise MADV_DONTNEED). Only for
/// memory of a private, unmodified file mapping (`tensor::is_file_backed`): reading it again maps the file's pages
/// back. Used after a kernel has copied a weight into its own layout, so the original stops counting in RSS.
inline void release_file_pages(const void* p, std::size_t n) noexcept {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (a + page - 1) / page * page, end = (a + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace epstack
