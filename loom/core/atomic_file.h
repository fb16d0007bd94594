// Atomic file replacement: the bytes go to a temporary file in the target's folder, which is
// fsynced, renamed over the target, and the folder fsynced. A crash at any moment leaves the
// old file or the new one, never a mix (a crash may leave a stray temporary file named
// "<target>.tmp-<pid>-<n>" beside it, which nothing reads and the next successful write of the
// same target removes once its process is gone).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace loom {

class AtomicFileWriter {
 public:
  // Creates the temporary file; an IOError naming the path and the system's reason when it
  // cannot.
  explicit AtomicFileWriter(std::string path);
  // Without commit() the temporary file is removed and the target left as it was.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t n);
  void write(std::span<const uint8_t> bytes) { write(bytes.data(), bytes.size()); }
  // Overwrites n bytes at offset, within what was written (a header filled in once the data
  // after it is known).
  void write_at(uint64_t offset, const void* data, size_t n);
  // Bytes written so far.
  uint64_t size() const { return size_; }
  // fsync, rename over the target, fsync of the folder. After a failure (an IOError) the
  // temporary file is gone and the target is untouched.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  // Writes all n bytes at offset (pwrite) or at the end, retrying short writes.
  void write_all(const void* data, size_t n, std::optional<uint64_t> offset);
  [[noreturn]] void fail(const std::string& what, int err);
  void discard() noexcept;

  std::string path_, temp_path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool committed_ = false;
};

// Writes bytes to path atomically, as AtomicFileWriter does.
void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);

// The folder part of a path ("." when it has none), and fsync of a folder (IOError on failure).
std::string parent_folder(const std::string& path);
void fsync_folder(const std::string& folder);

}  // namespace loom
