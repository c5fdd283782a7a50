// Crash-safe writes (core/file_io.h): failures name the file and the system's reason and leave the
// previous contents; an append that does not fit is cut back; temporaries of dead writers are removed.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_io.h"

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "." + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs fn in a child process under a file-size limit of `bytes` (SIGXFSZ ignored, so writes past it
// fail with EFBIG); returns the child's exit status.
template <typename Fn>
int under_file_size_limit(rlim_t bytes, Fn fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{bytes, bytes};
    setrlimit(RLIMIT_FSIZE, &limit);
    _exit(fn());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

}  // namespace

TEST(FileIo, AtomicWriteReplacesWholeFiles) {
  const fs::path dir = fresh_dir("sru_file_io_atomic");
  const std::string path = (dir / "a.txt").string();
  sru::write_file_atomically(path, {"hello ", "world"});
  EXPECT_EQ(read_all(path), "hello world");
  sru::write_file_atomically(path, {"second"});
  EXPECT_EQ(read_all(path), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  fs::remove_all(dir);
}

TEST(FileIo, FailedAtomicWriteNamesTheFileAndKeepsTheOldOne) {
  const fs::path dir = fresh_dir("sru_file_io_fail");
  const std::string path = (dir / "ckpt.bin").string();
  sru::write_file_atomically(path, {std::string(100, 'a')});
  // 4 KiB limit, an 8 KiB file: EFBIG on the temporary.
  const int status = under_file_size_limit(4096, [&] {
    try {
      sru::write_file_atomically(path, {std::string(8192, 'b')});
      return 1;
    } catch (const sru::Error& e) {
      const std::string what = e.what();
      return what.find("cannot write '" + path + "'") != std::string::npos &&
                     what.find("File too large") != std::string::npos
                 ? 0
                 : 2;
    }
  });
  EXPECT_EQ(status, 0);
  EXPECT_EQ(read_all(path), std::string(100, 'a'));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1) << "a temporary was left";
  EXPECT_THROW(sru::write_file_atomically((dir / "missing" / "x").string(), {"x"}), sru::Error);
  fs::remove_all(dir);
}

TEST(FileIo, AppendThatDoesNotFitIsCutBack) {
  const fs::path dir = fresh_dir("sru_file_io_append");
  const std::string path = (dir / "metrics.jsonl").string();
  sru::append_to_file(path, "{\"step\":1}\n");
  const std::string before = read_all(path);
  const int status = under_file_size_limit(4096, [&] {
    try {
      sru::append_to_file(path, std::string(8192, 'x') + "\n");
      return 1;
    } catch (const sru::Error& e) {
      return std::string(e.what()).find("cannot append to '" + path + "': File too large") != std::string::npos ? 0 : 2;
    }
  });
  EXPECT_EQ(status, 0);
  EXPECT_EQ(read_all(path), before) << "a partial record was left";
  sru::append_to_file(path, "{\"step\":2}\n");
  EXPECT_EQ(read_all(path), before + "{\"step\":2}\n");
  fs::remove_all(dir);
}

TEST(FileIo, RemovesTemporariesOfDeadWritersOnly) {
  const fs::path dir = fresh_dir("sru_file_io_stale");
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string own = "last.safetensors.tmp." + std::to_string(::getpid());
  const std::string stale = "last.safetensors.tmp." + std::to_string(dead);
  for (const std::string& name : {own, stale, std::string("notes.tmp.txt"), std::string("last.safetensors")})
    std::ofstream(dir / name) << "x";
  const std::vector<std::string> removed = sru::remove_stale_temporaries(dir.string());
  EXPECT_EQ(removed, std::vector<std::string>{stale});
  EXPECT_TRUE(fs::exists(dir / own));
  EXPECT_TRUE(fs::exists(dir / "notes.tmp.txt"));
  EXPECT_TRUE(fs::exists(dir / "last.safetensors"));
  fs::remove_all(dir);
}
