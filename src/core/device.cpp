// Parses device names given on the command line or in configs.
#include "core/device.h"

#include "core/error.h"

namespace sru {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    const std::string digits = text.substr(5);
    if (digits.find_first_not_of("0123456789") == std::string::npos && digits.size() < 4)
      return cuda(std::stoi(digits));
  }
  SRU_FAIL("unknown device '", text, "': expected cpu, cuda or cuda:N");
}

}  // namespace sru
