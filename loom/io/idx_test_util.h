// IDX files for the io tests, written plain or gzip-compressed.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "loom/io/io_test_util.h"

namespace loom::testing_io {

// An IDX file's bytes: header (type code, dims) and the values, one byte each for 8-bit
// types; wider types take their big-endian bytes from `data` as given.
inline std::string idx_bytes(uint8_t type, const std::vector<uint32_t>& dims,
                             const std::vector<uint8_t>& data) {
  std::string out{'\0', '\0', char(type), char(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out += char((d >> shift) & 0xff);
  out.append(data.begin(), data.end());
  return out;
}

inline std::string write_gzip(const std::string& name, const std::string& content) {
  std::string path = test_dir() + "/" + name;
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(gzwrite(f, content.data(), unsigned(content.size())), int(content.size()));
  gzclose(f);
  return path;
}

// n items of rows x cols uint8 pixels: element i of the file (item k) holds (7k + i) % 256.
inline std::vector<uint8_t> pixels(size_t n, size_t rows, size_t cols) {
  std::vector<uint8_t> out(n * rows * cols);
  for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t((7 * (i / (rows * cols)) + i) % 256);
  return out;
}

}  // namespace loom::testing_io
