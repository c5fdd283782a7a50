// The operand device check behind SRU_KERNEL (ops/dispatch.h).
#include "ops/dispatch.h"

namespace sru::detail {

void check_operand_device(Device expected, Device actual, const char* kernel, int argument) {
  SRU_CHECK(actual == expected, kernel, ": argument ", argument, " is on ", actual.str(), " but the op runs on ",
            expected.str(), "; move every operand to one device first (Tensor::to, Module::to)");
}

}  // namespace sru::detail
