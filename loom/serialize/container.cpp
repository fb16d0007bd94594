#include "loom/serialize/container.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "loom/core/atomic_file.h"
#include "loom/core/crc32c.h"
#include "loom/core/error.h"
#include "loom/serialize/dictionary_codec.h"

namespace loom {

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

// What a foreign file probably is, from its first bytes, so the message can say so.
std::string describe_foreign(std::span<const uint8_t> b) {
  auto starts = [&](std::initializer_list<uint8_t> sig) {
    return b.size() >= sig.size() && std::equal(sig.begin(), sig.end(), b.begin());
  };
  if (starts({0x89, 'P', 'N', 'G'})) return " (a PNG image)";
  if (starts({0xff, 0xd8, 0xff})) return " (a JPEG image)";
  if (starts({0x1f, 0x8b})) return " (a gzip file)";
  if (starts({'P', 'K', 3, 4})) return " (a zip archive: numpy .npz or a PyTorch file?)";
  if (starts({0x7f, 'E', 'L', 'F'})) return " (an ELF executable)";
  if (starts({0x93, 'N', 'U', 'M', 'P', 'Y'})) return " (a numpy .npy file)";
  bool text = !b.empty();
  for (size_t i = 0; i < std::min<size_t>(b.size(), 64); ++i)
    text = text && (b[i] == '\n' || b[i] == '\r' || b[i] == '\t' || (b[i] >= 32 && b[i] < 127));
  if (text) return " (text)";
  return "";
}

std::string first_bytes(std::span<const uint8_t> b) {
  std::string s;
  char buf[4];
  for (size_t i = 0; i < std::min<size_t>(b.size(), 8); ++i) {
    std::snprintf(buf, sizeof buf, "%s%02X", i ? " " : "", b[i]);
    s += buf;
  }
  return s.empty() ? "nothing" : s;
}

}  // namespace

const char* content_kind_name(uint32_t kind) {
  switch (ContentKind(kind)) {
    case ContentKind::Model:
      return "a model";
    case ContentKind::Checkpoint:
      return "a checkpoint";
  }
  return "an unknown kind of content";
}

const char* section_kind_name(uint32_t kind) {
  switch (SectionKind(kind)) {
    case SectionKind::Metadata:
      return "metadata";
    case SectionKind::Graph:
      return "graph";
    case SectionKind::TrainingState:
      return "training state";
  }
  return "unknown";
}

// ---- writing ----

void ContainerWriter::add_section(SectionKind kind, std::vector<uint8_t> payload, uint32_t flags) {
  sections_.push_back({uint32_t(kind), flags, std::move(payload), nullptr});
}

void ContainerWriter::add_dictionary_section(SectionKind kind, Dictionary dictionary,
                                             uint32_t flags) {
  add_streamed_section(
      kind,
      [d = std::make_shared<const Dictionary>(std::move(dictionary))](ByteSink& out) {
        encode_dictionary(*d, out);
      },
      flags);
}

void ContainerWriter::add_streamed_section(SectionKind kind, std::function<void(ByteSink&)> write,
                                           uint32_t flags) {
  sections_.push_back({uint32_t(kind), flags, {}, std::move(write)});
}

// The file's bytes in order, and headers filled in once what follows them is known: a
// section's length and CRC when its payload has streamed past, the file size at the end.
class ContainerWriter::Output : public ByteSink {
 public:
  virtual void write_at(uint64_t offset, const void* data, size_t n) = 0;
  virtual uint64_t size() const = 0;
};

namespace {

struct Writer {
  uint8_t* p;
  template <typename T>
  void put(T v) {
    std::memcpy(p, &v, sizeof v);
    p += sizeof v;
  }
};

// Passes a payload on while it takes its length and CRC32C, in pieces that stay in the cache
// between the CRC and the write.
class PayloadSink final : public ByteSink {
 public:
  explicit PayloadSink(ByteSink& out) : out_(out) {}
  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t done = 0; done < n;) {
      const size_t k = std::min<size_t>(n - done, size_t(1) << 20);
      crc_ = crc32c(p + done, k, crc_);
      out_.write(p + done, k);
      done += k;
    }
    length_ += n;
  }
  uint32_t crc() const { return crc_; }
  uint64_t length() const { return length_; }

 private:
  ByteSink& out_;
  uint32_t crc_ = 0;
  uint64_t length_ = 0;
};

}  // namespace

void ContainerWriter::write_to(Output& out) const {
  const uint8_t zeros[kContainerHeaderSize] = {};
  out.write(zeros, kContainerHeaderSize);  // filled in at the end
  for (const Pending& s : sections_) {
    const uint64_t at = out.size();
    out.write(zeros, kSectionHeaderSize);
    PayloadSink payload(out);
    if (s.write)
      s.write(payload);
    else
      payload.write(s.bytes.data(), s.bytes.size());
    uint8_t header[kSectionHeaderSize];
    Writer w{header};
    w.put(s.kind);
    w.put(s.flags);
    w.put(payload.length());
    w.put(payload.crc());
    w.put(crc32c(header, 20));
    out.write_at(at, header, sizeof header);
  }
  uint8_t header[kContainerHeaderSize];
  Writer w{header};
  std::memcpy(w.p, kContainerMagic, sizeof kContainerMagic);
  w.p += sizeof kContainerMagic;
  w.put(kContainerVersion);
  w.put(kEndianMarker);
  w.put(uint32_t(kind_));
  w.put(uint32_t(sections_.size()));
  w.put(out.size());
  w.put(uint32_t{0});  // reserved
  w.put(crc32c(header, 36));
  out.write_at(0, header, sizeof header);
}

std::vector<uint8_t> ContainerWriter::bytes() const {
  class VectorOutput final : public Output {
   public:
    void write(const void* data, size_t n) override {
      // resize and memcpy: GCC 12 warns falsely about insert() here (stringop-overflow)
      const size_t at = bytes.size();
      bytes.resize(at + n);
      if (n) std::memcpy(bytes.data() + at, data, n);
    }
    void write_at(uint64_t offset, const void* data, size_t n) override {
      std::memcpy(bytes.data() + offset, data, n);
    }
    uint64_t size() const override { return bytes.size(); }
    std::vector<uint8_t> bytes;
  } out;
  write_to(out);
  return std::move(out.bytes);
}

void ContainerWriter::write_file(const std::string& path) const {
  // Straight from the payloads and tensors: no copy of the file in memory.
  class FileOutput final : public Output {
   public:
    explicit FileOutput(const std::string& path) : file(path) {}
    void write(const void* data, size_t n) override { file.write(data, n); }
    void write_at(uint64_t offset, const void* data, size_t n) override {
      file.write_at(offset, data, n);
    }
    uint64_t size() const override { return file.size(); }
    AtomicFileWriter file;
  } out(path);
  write_to(out);
  out.file.commit();
}

// ---- reading ----

ContainerReader::ContainerReader(std::span<const uint8_t> b, std::string name)
    : name_(std::move(name)) {
  const std::string file = "'" + name_ + "'";
  auto fail = [&](uint64_t at, const auto&... parts) {
    throw DataError(detail::concat(file, ": ", parts..., " (at byte ", at, ")"));
  };
  const size_t size = b.size();
  const size_t magic_len = sizeof kContainerMagic;
  if (size < magic_len || std::memcmp(b.data(), kContainerMagic, magic_len) != 0) {
    if (size < magic_len && (size == 0 || std::memcmp(b.data(), kContainerMagic, size) == 0))
      fail(0, "truncated: the file has ", size, " bytes, a Loom file's header alone has ",
           kContainerHeaderSize);
    fail(0, "not a Loom file: it starts with ", first_bytes(b), describe_foreign(b),
         ", a Loom model or checkpoint starts with ", first_bytes(kContainerMagic));
  }
  if (size < kContainerHeaderSize)
    fail(size, "truncated: the file has ", size, " bytes, a Loom file's header alone has ",
         kContainerHeaderSize);
  const uint8_t* h = b.data();
  // The first 40 bytes keep this layout in every format version, so the header CRC is
  // checked first: a damaged version field reads as damage, not as a future version.
  uint32_t stored_crc = load<uint32_t>(h + 36), header_crc = crc32c(h, 36);
  if (stored_crc != header_crc)
    fail(36, "the file header is damaged: its CRC32C is ", hex(header_crc), ", the header says ",
         hex(stored_crc));
  uint32_t marker = load<uint32_t>(h + 12);
  if (marker != kEndianMarker)
    fail(12, "endianness marker ", hex(marker), " is not ", hex(kEndianMarker),
         marker == __builtin_bswap32(kEndianMarker)
             ? ": the file was written with the other byte order, which this Loom does not read"
             : "");
  version_ = load<uint32_t>(h + 8);
  if (version_ > kContainerVersion)
    fail(8, "format version ", version_, " is newer than this Loom reads (up to ",
         kContainerVersion, "): open it with a newer Loom");
  if (version_ == 0) fail(8, "format version 0 does not exist (damaged file?)");
  content_kind_ = load<uint32_t>(h + 16);
  uint32_t count = load<uint32_t>(h + 20);
  uint64_t declared = load<uint64_t>(h + 24);
  if (declared > size)
    fail(size, "truncated: the header says the file has ", declared, " bytes, it has ", size);
  if (declared < size)
    fail(declared, size - declared, " bytes of unexpected data after the ", declared,
         " bytes the header declares");
  if (count > (size - kContainerHeaderSize) / kSectionHeaderSize)
    fail(20, "section count ", count, " cannot fit in the ", size - kContainerHeaderSize,
         " bytes after the header");
  sections_.reserve(count);
  uint64_t pos = kContainerHeaderSize;
  for (uint32_t i = 0; i < count; ++i) {
    if (size - pos < kSectionHeaderSize)
      fail(pos, "truncated: section ", i + 1, " of ", count, " needs a ", kSectionHeaderSize,
           "-byte header, only ", size - pos, " bytes are left");
    const uint8_t* s = b.data() + pos;
    uint32_t stored = load<uint32_t>(s + 20), computed = crc32c(s, 20);
    if (stored != computed)
      fail(pos, "the header of section ", i + 1, " of ", count, " is damaged: its CRC32C is ",
           hex(computed), ", the header says ", hex(stored));
    Section sec;
    sec.kind = load<uint32_t>(s);
    sec.flags = load<uint32_t>(s + 4);
    uint64_t length = load<uint64_t>(s + 8);
    uint32_t payload_crc = load<uint32_t>(s + 16);
    pos += kSectionHeaderSize;
    if (length > size - pos)
      fail(pos, "truncated: section ", i + 1, " (", section_kind_name(sec.kind), ") has ", length,
           " bytes, only ", size - pos, " are left");
    sec.payload = b.subspan(pos, length);
    sec.offset = pos;
    uint32_t actual = crc32c(sec.payload);
    if (actual != payload_crc)
      fail(pos, "section ", i + 1, " (", section_kind_name(sec.kind),
           ") is damaged: the CRC32C of its ", length, " bytes is ", hex(actual),
           ", the file says ", hex(payload_crc));
    pos += length;
    sections_.push_back(sec);
  }
  if (pos != size)
    fail(pos, size - pos, " bytes after the last of the ", count, " sections are not part of any");
}

const Section* ContainerReader::find(SectionKind kind) const {
  for (const auto& s : sections_)
    if (s.kind == uint32_t(kind)) return &s;
  return nullptr;
}

const Section& ContainerReader::require(SectionKind kind) const {
  const Section* s = find(kind);
  if (!s)
    throw DataError(detail::concat(
        "'", name_, "': the file has no ", section_kind_name(uint32_t(kind)), " section (",
        content_kind_name(content_kind_), " with ", sections_.size(), " sections)"));
  return *s;
}

void ContainerReader::expect_content(ContentKind kind) const {
  if (content_kind_ != uint32_t(kind))
    throw DataError(detail::concat("'", name_, "': the file holds ",
                                   content_kind_name(content_kind_), " (content kind ",
                                   content_kind_, "), not ", content_kind_name(uint32_t(kind))));
}

void ContainerReader::reject_unknown_required(std::span<const SectionKind> known) const {
  for (size_t i = 0; i < sections_.size(); ++i) {
    const Section& s = sections_[i];
    bool is_known = std::find(known.begin(), known.end(), SectionKind(s.kind)) != known.end();
    if (!is_known && (s.flags & kSectionRequired))
      throw DataError(detail::concat("'", name_, "': section ", i + 1, " has kind ", s.kind,
                                     ", which this Loom does not know and the file marks as "
                                     "required (written by a newer Loom?) (at byte ",
                                     s.offset - kSectionHeaderSize, ")"));
  }
}

std::string ContainerReader::where(const Section& s) const {
  return "'" + name_ + "' section " + section_kind_name(s.kind);
}

namespace {

IOError read_error(const std::string& path, const char* what, int err) {
  return IOError("cannot read '" + path + "': " + what + std::strerror(err) + " (errno " +
                 std::to_string(err) + ")");
}

// The open file (a descriptor the caller closes) and its size; an IOError unless it is a
// regular file that can be opened.
int open_regular_file(const std::string& path, size_t& size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw read_error(path, "", errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw read_error(path, "", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IOError("cannot read '" + path + "': not a regular file");
  }
  size = size_t(st.st_size);
  return fd;
}

}  // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  size_t size = 0;
  int fd = open_regular_file(path, size);
  std::vector<uint8_t> bytes(size);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t r = ::read(fd, bytes.data() + done, std::min<size_t>(bytes.size() - done, 1u << 30));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      ::close(fd);
      throw read_error(path, "", err);
    }
    if (r == 0) break;  // the file shrank while we read: the container check reports it
    done += size_t(r);
  }
  ::close(fd);
  bytes.resize(done);
  return bytes;
}

MappedFile::MappedFile(const std::string& path) {
  size_t size = 0;
  int fd = open_regular_file(path, size);
  if (size == 0) {  // nothing to map; the container check reports the empty file
    ::close(fd);
    return;
  }
  // MAP_POPULATE reads the whole file in at once (with readahead) instead of a page fault at
  // a time; every byte is read anyway, by the CRC checks. Read-only: a private writable
  // mapping would be populated by copying every page.
  ::posix_fadvise(fd, 0, off_t(size), POSIX_FADV_WILLNEED);  // all of it, at once, in big reads
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  int err = errno;
  ::close(fd);  // the mapping keeps the file open
  if (p == MAP_FAILED) throw read_error(path, "cannot map it: ", err);
  mapping_ = std::shared_ptr<const void>(
      p, [size](const void* q) { ::munmap(const_cast<void*>(q), size); });
  bytes_ = std::span<const uint8_t>(static_cast<const uint8_t*>(p), size);
}

}  // namespace loom
