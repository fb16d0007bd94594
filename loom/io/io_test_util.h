// Test data files for the io tests. ctest runs every test as its own process, in parallel,
// so each process writes into a folder of its own.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace loom::testing_io {

inline const std::string& test_dir() {
  static const std::string dir = [] {
    auto d = std::filesystem::path(::testing::TempDir()) / ("loom_io_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

inline std::string write_temp(const std::string& name, const std::string& content) {
  std::string path = test_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

}  // namespace loom::testing_io
