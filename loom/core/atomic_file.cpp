#include "loom/core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "loom/core/error.h"

namespace loom {

namespace {

// Removes "<path>.tmp-<pid>-<n>" files of processes that no longer run (killed while writing),
// so a training resumed many times does not pile them up. Best effort: errors are ignored.
void remove_stray_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string prefix = fs::path(path).filename().string() + ".tmp-";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent_folder(path), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

std::string errno_text(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

}  // namespace

std::string parent_folder(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void fsync_folder(const std::string& folder) {
  int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    throw IOError("cannot open folder '" + folder + "' to sync it: " + errno_text(err));
  }
  int rc;
  do rc = ::fsync(fd);
  while (rc != 0 && errno == EINTR);
  int err = errno;
  ::close(fd);
  // Some file systems cannot sync folders; they report EINVAL, and there is nothing to do.
  if (rc != 0 && err != EINVAL)
    throw IOError("cannot sync folder '" + folder + "': " + errno_text(err));
}

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  LOOM_CHECK(!path_.empty() && path_.back() != '/', IOError, "cannot write '", path_,
             "': not a file name");
  static std::atomic<uint64_t> counter{0};
  // O_EXCL with a name unique to this process and call: never another writer's file.
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_path_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && !(errno == EEXIST && attempt < 100)) {
      int err = errno;
      throw IOError("cannot write '" + path_ + "': cannot create temporary file '" + temp_path_ +
                    "': " + errno_text(err));
    }
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) discard();
}

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

void AtomicFileWriter::fail(const std::string& what, int err) {
  discard();
  throw IOError("cannot write '" + path_ + "': " + what + ": " + errno_text(err));
}

void AtomicFileWriter::write(const void* data, size_t n) {
  LOOM_CHECK(fd_ >= 0 && !committed_, StateError, "write to '", path_, "' after commit or failure");
  write_all(data, n, std::nullopt);
  size_ += n;
}

void AtomicFileWriter::write_at(uint64_t offset, const void* data, size_t n) {
  LOOM_CHECK(fd_ >= 0 && !committed_, StateError, "write to '", path_, "' after commit or failure");
  LOOM_CHECK(offset <= size_ && n <= size_ - offset, ArgumentError, "write_at: bytes ", offset,
             " to ", offset + n, " of '", path_, "' are beyond the ", size_, " written");
  write_all(data, n, offset);
}

void AtomicFileWriter::write_all(const void* data, size_t n, std::optional<uint64_t> offset) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    // Linux writes at most about 2 GiB per call.
    const size_t chunk = std::min<size_t>(n, size_t(1) << 30);
    ssize_t w = offset ? ::pwrite(fd_, p, chunk, off_t(*offset)) : ::write(fd_, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("write to temporary file '" + temp_path_ + "' failed", errno);
    }
    if (w == 0) fail("write to temporary file '" + temp_path_ + "' made no progress", EIO);
    p += w;
    n -= size_t(w);
    if (offset) *offset += uint64_t(w);
  }
}

void AtomicFileWriter::commit() {
  LOOM_CHECK(fd_ >= 0 && !committed_, StateError, "commit of '", path_,
             "' after commit or failure");
  int rc;
  do rc = ::fsync(fd_);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) fail("fsync of temporary file '" + temp_path_ + "' failed", errno);
  rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0 && errno != EINTR) fail("close of temporary file '" + temp_path_ + "' failed", errno);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
    fail("rename of temporary file '" + temp_path_ + "' over it failed", errno);
  committed_ = true;
  temp_path_.clear();
  fsync_folder(parent_folder(path_));  // makes the rename itself durable
  remove_stray_temporaries(path_);
}

void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  AtomicFileWriter w(path);
  w.write(bytes);
  w.commit();
}

}  // namespace loom
