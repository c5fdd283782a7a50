// Fuzz target: the YAML experiment config and --set overrides (config::parse_config), as a user's
// file (Origin::User) and as the config stored in a checkpoint (Origin::Stored). Input: the YAML
// text, then NUL-separated override strings.
#include "config/config.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = sru::fuzz::split_parts(data, size, 4);
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  for (const auto origin : {sru::config::Origin::User, sru::config::Origin::Stored})
    sru::fuzz::expect_only_sru_errors([&] {
      sru::config::Config c = sru::config::parse_config(parts[0], "fuzz.yaml", overrides, origin);
      (void)c.to_yaml();
    });
  return 0;
}
