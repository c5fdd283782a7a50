// Crash-safe file writes shared by checkpoints and the run directory's text files: a whole file is
// written to a temporary beside it, flushed to disk and renamed over the target, so a reader (or a
// resumed run) sees the old file or the new one, never a torn one; an append of one record either
// lands whole or leaves the file as it was. Every failure throws sru::Error naming the target and the
// system's reason (strerror), and leaves the previous contents in place.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sru {

// Writes the concatenation of `chunks` to `path` atomically (PATH.tmp.PID, fsync, rename, fsync of
// the directory).
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& chunks);

// Appends `text` to `path` (created if missing) and flushes it to disk; on a failed or short write the
// file is cut back to its previous length.
void append_to_file(const std::string& path, std::string_view text);

// Removes the temporaries write_file_atomically leaves in `dir` when a process is killed while
// writing (NAME.tmp.PID whose process no longer runs). Returns the names removed.
std::vector<std::string> remove_stale_temporaries(const std::string& dir);

}  // namespace sru
