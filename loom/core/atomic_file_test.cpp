#include "loom/core/atomic_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "loom/core/error.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("loom_atomic_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  size_t entries() {
    return size_t(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }

  fs::path dir_;
};

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST_F(AtomicFileTest, WritesAndReplaces) {
  const auto path = (dir_ / "model.loom").string();
  write_file_atomically(path, bytes_of("first"));
  EXPECT_EQ(read(path), "first");
  write_file_atomically(path, bytes_of("second, longer"));
  EXPECT_EQ(read(path), "second, longer");
  write_file_atomically(path, bytes_of(""));
  EXPECT_EQ(read(path), "");
  EXPECT_EQ(entries(), 1u);  // no temporary file left behind
}

TEST_F(AtomicFileTest, NewFileGetsOrdinaryPermissions) {
  const auto path = (dir_ / "m").string();
  write_file_atomically(path, bytes_of("x"));
  mode_t mask = ::umask(022);
  ::umask(mask);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

TEST_F(AtomicFileTest, UncommittedWriteLeavesTargetAlone) {
  const auto path = (dir_ / "m").string();
  write_file_atomically(path, bytes_of("old"));
  {
    AtomicFileWriter w(path);
    w.write(bytes_of("new but abandoned"));
    EXPECT_TRUE(fs::exists(w.temp_path()));
    EXPECT_EQ(fs::path(w.temp_path()).parent_path(), dir_);  // same folder: rename is atomic
  }
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, FailuresNameThePathAndReasonAndLeaveNoTemporaryFile) {
  const auto missing = (dir_ / "no_such_folder" / "m").string();
  try {
    write_file_atomically(missing, bytes_of("x"));
    FAIL() << "expected an IOError";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos)
        << e.what();
  }
  // The target is a folder: the rename fails after everything was written.
  const auto folder = dir_ / "a_folder";
  fs::create_directories(folder / "inside");
  try {
    write_file_atomically(folder.string(), bytes_of("x"));
    FAIL() << "expected an IOError";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("rename"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(folder.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(entries(), 1u);  // only a_folder: the temporary file is gone
  EXPECT_TRUE(fs::is_directory(folder / "inside"));
}

TEST_F(AtomicFileTest, WriteAfterCommitIsAStateError) {
  AtomicFileWriter w((dir_ / "m").string());
  w.write(bytes_of("abc"));
  EXPECT_EQ(w.size(), 3u);
  w.commit();
  EXPECT_THROW(w.write(bytes_of("x")), StateError);
  EXPECT_THROW(w.commit(), StateError);
}

TEST(AtomicFile, ParentFolder) {
  EXPECT_EQ(parent_folder("model.loom"), ".");
  EXPECT_EQ(parent_folder("/model.loom"), "/");
  EXPECT_EQ(parent_folder("a/b/model.loom"), "a/b");
}

// A writer killed at random moments leaves the old or the new file, never a mix.
TEST_F(AtomicFileTest, KilledWriterLeavesOldOrNewFile) {
  const auto path = (dir_ / "m").string();
  const size_t size = 1 << 20;
  auto version = [&](int v) { return std::string(size, char('A' + v % 26)); };
  write_file_atomically(path, bytes_of(version(0)));
  std::mt19937 gen(3);
  for (int round = 0; round < 12; ++round) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int v = 1;; ++v) {
        std::string data = version(v);
        AtomicFileWriter w(path);
        // Several writes, so a kill can land between them.
        for (size_t off = 0; off < size; off += size / 8) w.write(data.data() + off, size / 8);
        w.commit();
      }
    }
    ::usleep(useconds_t(std::uniform_int_distribution<int>(1000, 30000)(gen)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    std::string got = read(path);
    ASSERT_EQ(got.size(), size) << "round " << round;
    ASSERT_EQ(got, std::string(size, got[0])) << "round " << round << ": a mix of versions";
  }
}

TEST_F(AtomicFileTest, StrayTemporariesOfDeadWritersAreRemoved) {
  const auto path = (dir_ / "c").string();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // a process that no longer runs
  const auto dead = path + ".tmp-" + std::to_string(child) + "-1";
  const auto alive = path + ".tmp-" + std::to_string(::getpid()) + "-99";
  const auto other = (dir_ / "d.tmp-1-1").string();
  for (const auto& p : {dead, alive, other}) write_file_atomically(p, bytes_of("x"));
  write_file_atomically(path, bytes_of("new"));
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(alive));  // its writer may still be writing
  EXPECT_TRUE(std::filesystem::exists(other));  // another target's
  EXPECT_EQ(read(path), "new");
}

}  // namespace
}  // namespace loom
