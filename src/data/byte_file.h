// Reads a data file as bytes: a plain file, or a .zip archive as distributed (enwik8.zip), whose
// single member (or the member named like the archive without .zip) is inflated.
#pragma once

#include <string>

namespace sru::data {

// Throws sru::Error naming the path (and `key`, the config key or option that named it) when the file
// cannot be read or the archive is malformed.
std::string read_byte_file(const std::string& path, const std::string& key = "data.path");

}  // namespace sru::data
