// Helpers shared by the tests of CNTK's model files: the files in ../shared/cntk-models.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace loom {

inline const std::string kCntkModels = LOOM_SHARED_DIR "/cntk-models/";

// The bytes of a file of that folder (empty, and a test failure, when it cannot be read).
inline std::vector<uint8_t> read_cntk_file(const std::string& name) {
  std::ifstream f(kCntkModels + name, std::ios::binary);
  if (!f) ADD_FAILURE() << "cannot read " << kCntkModels + name;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Its lines (a vocabulary: atis_query.wl, atis_slots.wl), without line ends.
inline std::vector<std::string> read_cntk_lines(const std::string& name) {
  std::ifstream f(kCntkModels + name);
  if (!f) ADD_FAILURE() << "cannot read " << kCntkModels + name;
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

}  // namespace loom
