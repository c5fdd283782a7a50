// The process-wide default random generator.
#include "core/rng.h"

namespace sru {

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace sru
