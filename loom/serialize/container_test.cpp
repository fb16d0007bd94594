#include "loom/serialize/container.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "loom/core/crc32c.h"
#include "loom/core/error.h"
#include "loom/serialize/dictionary_codec.h"

namespace loom {
namespace {

std::vector<uint8_t> payload(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::vector<uint8_t> sample_file() {
  ContainerWriter w(ContentKind::Model);
  w.add_section(SectionKind::Metadata, payload("meta"), 0);
  w.add_section(SectionKind::Graph, payload("the graph's bytes"));
  w.add_section(SectionKind(99), {}, 0);  // empty, unknown, optional
  return w.bytes();
}

std::string error_of(std::span<const uint8_t> bytes) {
  try {
    ContainerReader r(bytes, "m.loom");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(Container, RoundTrip) {
  auto bytes = sample_file();
  ASSERT_EQ(bytes.size(), kContainerHeaderSize + 3 * kSectionHeaderSize + 4 + 17);
  ContainerReader r(bytes, "m.loom");
  EXPECT_EQ(r.version(), kContainerVersion);
  EXPECT_EQ(r.content_kind(), uint32_t(ContentKind::Model));
  ASSERT_EQ(r.sections().size(), 3u);
  const Section& g = r.require(SectionKind::Graph);
  EXPECT_EQ(std::string(g.payload.begin(), g.payload.end()), "the graph's bytes");
  EXPECT_EQ(g.flags, kSectionRequired);
  EXPECT_EQ(g.offset, kContainerHeaderSize + 2 * kSectionHeaderSize + 4);
  EXPECT_EQ(r.sections()[2].payload.size(), 0u);
  EXPECT_NO_THROW(r.expect_content(ContentKind::Model));
  EXPECT_THROW(r.expect_content(ContentKind::Checkpoint), DataError);
  const SectionKind known[] = {SectionKind::Metadata, SectionKind::Graph};
  EXPECT_NO_THROW(r.reject_unknown_required(known));  // kind 99 is optional
  EXPECT_EQ(r.where(g), "'m.loom' section graph");
  // The byte layout of docs/file-format.md.
  EXPECT_EQ(std::memcmp(bytes.data(), "\x89LOOM\r\n\x1a", 8), 0);
  EXPECT_EQ(bytes[8], 1);  // version
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + 12, bytes.begin() + 16),
            (std::vector<uint8_t>{4, 3, 2, 1}));  // endianness marker
  EXPECT_EQ(bytes[20], 3);                        // section count
  EXPECT_EQ(bytes[24], bytes.size());             // file size
  uint32_t crc;
  std::memcpy(&crc, bytes.data() + 36, 4);
  EXPECT_EQ(crc, crc32c(bytes.data(), 36));
}

TEST(Container, EveryTruncationIsNamed) {
  auto bytes = sample_file();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string e = error_of(std::span(bytes.data(), n));
    ASSERT_NE(e.find("'m.loom': truncated"), std::string::npos) << n << " bytes: " << e;
  }
}

TEST(Container, EveryFlippedBitIsDetected) {
  auto good = sample_file();
  for (size_t i = 0; i < good.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      auto bytes = good;
      bytes[i] ^= uint8_t(1 << bit);
      std::string e = error_of(bytes);
      ASSERT_FALSE(e.empty()) << "flip of bit " << bit << " of byte " << i << " went unnoticed";
      ASSERT_EQ(e.rfind("'m.loom': ", 0), 0u) << e;
    }
  auto bytes = good;
  bytes[kContainerHeaderSize + 2 * kSectionHeaderSize + 4 + 3] ^= 0x20;  // in the graph payload
  EXPECT_NE(error_of(bytes).find("section 2 (graph) is damaged: the CRC32C of its 17 bytes is"),
            std::string::npos)
      << error_of(bytes);
  bytes = good;
  bytes[9] ^= 1;  // the version field: the header CRC catches it
  EXPECT_NE(error_of(bytes).find("the file header is damaged"), std::string::npos);
  bytes = good;
  bytes[kContainerHeaderSize + 8] ^= 1;  // a section length
  EXPECT_NE(error_of(bytes).find("the header of section 1 of 3 is damaged"), std::string::npos);
}

TEST(Container, ForeignFilesAreNamed) {
  auto as_bytes = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  auto png = as_bytes(std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
  EXPECT_NE(error_of(png).find("not a Loom file: it starts with 89 50 4E 47 0D 0A 1A 0A (a PNG "
                               "image), a Loom model or checkpoint starts with 89 4C 4F 4F 4D 0D "
                               "0A 1A"),
            std::string::npos)
      << error_of(png);
  auto text = as_bytes("|features 1 2 |labels 0 1\n");
  EXPECT_NE(error_of(text).find("(text)"), std::string::npos) << error_of(text);
  EXPECT_NE(error_of(as_bytes("PK\3\4zip")).find("zip archive"), std::string::npos);
  EXPECT_NE(error_of({}).find("truncated: the file has 0 bytes"), std::string::npos);
}

// Rewrites a header field and its CRC, as a writer of that value would have.
std::vector<uint8_t> with_header_field(std::vector<uint8_t> bytes, size_t at, uint32_t value) {
  std::memcpy(bytes.data() + at, &value, 4);
  uint32_t crc = crc32c(bytes.data(), 36);
  std::memcpy(bytes.data() + 36, &crc, 4);
  return bytes;
}

TEST(Container, FutureVersionAndOtherByteOrderAreNamed) {
  auto future = with_header_field(sample_file(), 8, 2);
  EXPECT_NE(error_of(future).find(
                "format version 2 is newer than this Loom reads (up to 1): open it with a newer "
                "Loom (at byte 8)"),
            std::string::npos)
      << error_of(future);
  auto big_endian = with_header_field(sample_file(), 12, 0x04030201);
  EXPECT_NE(error_of(big_endian).find("written with the other byte order"), std::string::npos)
      << error_of(big_endian);
  auto zero = with_header_field(sample_file(), 8, 0);
  EXPECT_NE(error_of(zero).find("format version 0"), std::string::npos);
  auto many = with_header_field(sample_file(), 20, 0xffffffff);
  EXPECT_NE(error_of(many).find("section count 4294967295 cannot fit"), std::string::npos)
      << error_of(many);
  auto bytes = sample_file();
  bytes.push_back(0);
  EXPECT_NE(error_of(bytes).find("1 bytes of unexpected data"), std::string::npos);
}

TEST(Container, UnknownRequiredSectionIsRefused) {
  ContainerWriter w(ContentKind::Checkpoint);
  w.add_section(SectionKind::Graph, payload("g"));
  w.add_section(SectionKind(1234), payload("new"));
  auto bytes = w.bytes();
  ContainerReader r(bytes, "c.ckp");
  const SectionKind known[] = {SectionKind::Graph};
  try {
    r.reject_unknown_required(known);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'c.ckp': section 2 has kind 1234"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(r.require(SectionKind::Metadata), DataError);
  try {
    r.expect_content(ContentKind::Model);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("holds a checkpoint (content kind 2), not a model"),
              std::string::npos)
        << e.what();
  }
}

TEST(Container, WriteFileWritesTheSameBytes) {
  ContainerWriter w(ContentKind::Model);
  w.add_section(SectionKind::Graph, payload("graph"));
  w.add_section(SectionKind::Metadata, {}, 0);
  const std::string path = testing::TempDir() + "loom_container_" + std::to_string(::getpid());
  w.write_file(path);
  EXPECT_EQ(read_file_bytes(path), w.bytes());
  std::remove(path.c_str());
}

TEST(Container, DictionarySectionsStreamTheSameBytes) {
  Dictionary meta, graph;
  meta["content"] = "model";
  std::vector<float> values(50000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i);
  graph["value"] = NDArrayView::from_vector<float>({values.size()}, values);
  graph["name"] = "w";
  ContainerWriter encoded(ContentKind::Checkpoint), streamed(ContentKind::Checkpoint);
  encoded.add_section(SectionKind::Metadata, encode_dictionary(meta), 0);
  encoded.add_section(SectionKind::Graph, encode_dictionary(graph));
  encoded.add_section(SectionKind(99), payload("raw"), 0);
  streamed.add_dictionary_section(SectionKind::Metadata, meta, 0);
  streamed.add_dictionary_section(SectionKind::Graph, graph);
  streamed.add_section(SectionKind(99), payload("raw"), 0);
  const std::vector<uint8_t> expected = encoded.bytes();
  EXPECT_EQ(streamed.bytes(), expected);
  const std::string path = testing::TempDir() + "loom_container_s" + std::to_string(::getpid());
  streamed.write_file(path);
  EXPECT_EQ(read_file_bytes(path), expected);
  const MappedFile mapped(path);
  EXPECT_TRUE(
      std::equal(mapped.bytes().begin(), mapped.bytes().end(), expected.begin(), expected.end()));
  std::remove(path.c_str());
}

TEST(Container, MappedFileNamesMissingFileAndMapsEmptyOnes) {
  EXPECT_THROW(MappedFile("/nonexistent/m.loom"), IOError);
  const std::string path = testing::TempDir() + "loom_container_e" + std::to_string(::getpid());
  std::fclose(std::fopen(path.c_str(), "w"));
  const MappedFile empty(path);
  EXPECT_TRUE(empty.bytes().empty());
  EXPECT_NE(error_of(empty.bytes()).find("truncated"), std::string::npos);
  std::remove(path.c_str());
}

TEST(Container, ReadFileNamesMissingFile) {
  try {
    read_file_bytes("/nonexistent/m.loom");
    FAIL();
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read '/nonexistent/m.loom': No such file"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace loom
