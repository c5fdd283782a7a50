// Which GPUs a build's CUDA code runs on (see cuda_arch.h).
#include "core/cuda_arch.h"

#include <cctype>
#include <sstream>

namespace sru::cuda {

namespace {

std::optional<CudaArch> parse_capability(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits < 2 || digits > 3) return std::nullopt;
  const std::string rest = text.substr(digits);
  if (!rest.empty() && rest != "a" && rest != "f") return std::nullopt;
  return CudaArch{std::stoi(text.substr(0, digits)), rest.empty() ? '\0' : rest[0]};
}

std::string name(const char* prefix, const CudaArch& a) {
  return prefix + std::to_string(a.capability) + (a.suffix ? std::string(1, a.suffix) : "");
}

}  // namespace

CudaArchs parse_cuda_architectures(const std::string& list) {
  CudaArchs out;
  std::string entry;
  std::istringstream in(list);
  while (std::getline(in, entry, ';')) {
    std::istringstream words(entry);
    std::string word;
    while (words >> word) {
      std::string kind;
      const size_t dash = word.find('-');
      if (dash != std::string::npos) kind = word.substr(dash + 1);
      const auto cap = parse_capability(word.substr(0, dash));
      if (!cap || (kind != "" && kind != "real" && kind != "virtual")) {
        out.unparsed += (out.unparsed.empty() ? "" : " ") + word;
        continue;
      }
      if (kind != "virtual") out.sass.push_back(*cap);
      if (kind != "real") out.ptx.push_back(*cap);
    }
  }
  return out;
}

std::string describe_cuda_architectures(const CudaArchs& archs) {
  std::ostringstream os;
  for (size_t i = 0; i < archs.sass.size(); ++i) os << (i ? " " : "") << name("sm_", archs.sass[i]);
  if (!archs.ptx.empty()) {
    os << (archs.sass.empty() ? "" : ", ") << "PTX";
    for (const CudaArch& a : archs.ptx) os << " " << name("compute_", a);
  }
  if (!archs.unparsed.empty()) os << (archs.sass.empty() && archs.ptx.empty() ? "" : ", ") << archs.unparsed;
  return os.str();
}

std::optional<std::string> cuda_image_for(const CudaArchs& archs, int major, int minor) {
  const int cc = 10 * major + minor;
  // The newest machine code that fits, else the newest PTX, as the driver picks.
  const CudaArch* best = nullptr;
  for (const CudaArch& a : archs.sass) {
    const bool fits = a.suffix == 'a' ? a.capability == cc : a.capability / 10 == major && a.capability % 10 <= minor;
    if (fits && (!best || a.capability > best->capability)) best = &a;
  }
  if (best) return name("sm_", *best) + " machine code";
  for (const CudaArch& a : archs.ptx) {
    const bool fits = a.suffix == 'a'   ? a.capability == cc
                      : a.suffix == 'f' ? a.capability / 10 == major && a.capability <= cc
                                        : a.capability <= cc;
    if (fits && (!best || a.capability > best->capability)) best = &a;
  }
  if (best) return "PTX " + name("compute_", *best) + ", compiled by the driver";
  if (!archs.unparsed.empty()) return archs.unparsed + " (resolved by CMake at build time)";
  return std::nullopt;
}

}  // namespace sru::cuda
