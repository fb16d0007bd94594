// The container of every file Loom writes (models, checkpoints): a fixed 40-byte header
// (magic, format version, endianness marker, content kind, section count, file size, header
// CRC), then sections, each a 24-byte header (kind, flags, payload length, payload CRC32C,
// header CRC32C) and its payload. docs/file-format.md has the byte layout.
//
// The reader trusts nothing: every count, length and offset is checked against the bytes
// there are before anything is read or allocated, every CRC is checked, and each problem is a
// DataError naming the file, what is wrong and where (byte offset).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/core/dictionary.h"

namespace loom {

inline constexpr uint8_t kContainerMagic[8] = {0x89, 'L', 'O', 'O', 'M', '\r', '\n', 0x1a};
// The version this Loom writes and the newest it reads.
inline constexpr uint32_t kContainerVersion = 1;
inline constexpr uint32_t kEndianMarker = 0x01020304;
inline constexpr size_t kContainerHeaderSize = 40;
inline constexpr size_t kSectionHeaderSize = 24;

class ByteSink;  // dictionary_codec.h

// What a file holds.
enum class ContentKind : uint32_t { Model = 1, Checkpoint = 2 };
const char* content_kind_name(uint32_t kind);

// Section kinds. Stable numbers: files keep them.
enum class SectionKind : uint32_t {
  Metadata = 1,       // a Dictionary: producer, what the file holds
  Graph = 2,          // a Dictionary: the graph of a Function and its tensors (model_file.h)
  TrainingState = 3,  // a Dictionary: learners, trainer counters, progress writers, external
                      // state (loom/train/trainer_checkpoint.cpp)
};
const char* section_kind_name(uint32_t kind);

// Section flag: a reader that does not know the section's kind must refuse the file (without
// it, an unknown section is skipped).
inline constexpr uint32_t kSectionRequired = 1;

struct Section {
  uint32_t kind = 0;
  uint32_t flags = 0;
  std::span<const uint8_t> payload;
  uint64_t offset = 0;  // of the payload in the file
};

class ContainerWriter {
 public:
  explicit ContainerWriter(ContentKind kind) : kind_(kind) {}
  void add_section(SectionKind kind, std::vector<uint8_t> payload,
                   uint32_t flags = kSectionRequired);
  // A section holding dictionary's encoding (dictionary_codec.h), encoded as the file is
  // written: its tensors go from their own memory to the output, uncopied, so they must not
  // change until bytes() or write_file() returns.
  void add_dictionary_section(SectionKind kind, Dictionary dictionary,
                              uint32_t flags = kSectionRequired);
  // A section whose payload write(out) streams into out as the file is written (once per
  // bytes() or write_file()), from whatever it captured: what it reads must not change until
  // then.
  void add_streamed_section(SectionKind kind, std::function<void(ByteSink&)> write,
                            uint32_t flags = kSectionRequired);
  // The whole file.
  std::vector<uint8_t> bytes() const;
  // Writes the file atomically (atomic_file.h), streaming the payloads.
  void write_file(const std::string& path) const;

 private:
  class Output;
  void write_to(Output& out) const;

  struct Pending {
    uint32_t kind, flags;
    std::vector<uint8_t> bytes;
    std::function<void(ByteSink&)> write;  // streams the payload, when set
  };
  ContentKind kind_;
  std::vector<Pending> sections_;
};

// A parsed container over bytes the caller keeps alive.
class ContainerReader {
 public:
  // Validates the header and every section (lengths, CRCs); name is the file name for messages.
  ContainerReader(std::span<const uint8_t> bytes, std::string name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint32_t content_kind() const { return content_kind_; }
  const std::vector<Section>& sections() const { return sections_; }
  // The first section of that kind, or nullptr.
  const Section* find(SectionKind kind) const;
  // The first section of that kind; a DataError when the file has none.
  const Section& require(SectionKind kind) const;
  // A DataError unless the file holds this kind of content.
  void expect_content(ContentKind kind) const;
  // A DataError naming the first required section whose kind is not in known.
  void reject_unknown_required(std::span<const SectionKind> known) const;
  // "'model.loom' section graph", for messages about a section's payload.
  std::string where(const Section& s) const;

 private:
  std::string name_;
  uint32_t version_ = 0, content_kind_ = 0;
  std::vector<Section> sections_;
};

// The whole file; an IOError naming it and the system's reason when it cannot be read.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// A file mapped read-only into memory: its bytes without a copy, paged in from the page cache
// (prefetched at once) instead of read into fresh memory. Files Loom writes are replaced by
// rename, never changed in place, so a mapping keeps seeing the file it opened.
class MappedFile {
 public:
  // An IOError naming the path and the system's reason when it cannot be mapped.
  explicit MappedFile(const std::string& path);
  std::span<const uint8_t> bytes() const { return bytes_; }
  // Keeps the mapping alive while it lives (for views of the bytes).
  std::shared_ptr<const void> owner() const { return mapping_; }

 private:
  std::shared_ptr<const void> mapping_;
  std::span<const uint8_t> bytes_;
};

}  // namespace loom
