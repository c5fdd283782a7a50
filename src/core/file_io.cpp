// Crash-safe writes (see file_io.h).
#include "core/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace sru {

namespace {

// Writes all of `data` or throws with errno's reason, naming `target` (the file the user knows).
void write_all(int fd, std::string_view data, const std::string& target, const char* what) {
  const char* p = data.data();
  size_t n = data.size();
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    // write() returning 0 for a regular file means no space was written: report it as ENOSPC.
    if (w <= 0) SRU_FAIL("cannot ", what, " '", target, "': ", std::strerror(w < 0 ? errno : ENOSPC));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Flushes a directory entry change (a rename) to disk; best effort (some filesystems refuse).
void sync_directory_of(const std::string& path) {
  const std::filesystem::path target(path);
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& chunks) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SRU_CHECK(fd >= 0, "cannot write '", path, "': cannot create '", tmp, "': ", std::strerror(errno));
  try {
    for (const std::string_view chunk : chunks) write_all(fd, chunk, path, "write");
    SRU_CHECK(::fsync(fd) == 0, "cannot write '", path, "': flushing it to disk failed: ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    SRU_FAIL("cannot write '", path, "': ", std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    SRU_FAIL("cannot write '", path, "': cannot move '", tmp, "' over it: ", std::strerror(err));
  }
  sync_directory_of(path);
}

void append_to_file(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  SRU_CHECK(fd >= 0, "cannot append to '", path, "': ", std::strerror(errno));
  struct stat before {};
  const bool sized = ::fstat(fd, &before) == 0;
  try {
    write_all(fd, text, path, "append to");
    SRU_CHECK(::fdatasync(fd) == 0, "cannot append to '", path, "': flushing it to disk failed: ",
              std::strerror(errno));
  } catch (...) {
    if (sized && ::ftruncate(fd, before.st_size) != 0) {
      // The file keeps a partial record; the reason for the failure is still the one reported.
    }
    ::close(fd);
    throw;
  }
  SRU_CHECK(::close(fd) == 0, "cannot append to '", path, "': ", std::strerror(errno));
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at == 0 || !entry.is_regular_file(ec)) continue;
    const std::string pid_text = name.substr(at + 5);
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid == ::getpid() || (::kill(pid, 0) == 0 || errno == EPERM)) continue;  // its writer still runs
    if (std::filesystem::remove(entry.path(), ec)) removed.push_back(name);
  }
  return removed;
}

}  // namespace sru
