// The op table: one entry per differentiable op of ops/*.h, saying which dtypes and devices its kernels
// take, which kernels (SRU_KERNEL base names, each a cpu:: function with a cuda:: twin) it reaches, and
// the cases every check runs it on. One harness reads it (tests/unit/test_op_table.cpp: forward
// against float64, float64 gradient checks, the coverage checks; tests/parity/test_cuda_op_table.cpp:
// CPU/CUDA parity; `srubench ops`: forward + backward time of each entry's bench case), so adding an
// op is one entry here, and an op without one fails the coverage test (ggml's test-backend-ops and its
// op count are the model). docs/architecture.md, "Adding an op", is the recipe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace sru {

// A floating operand the checks draw (uniform in [low, high)) and differentiate.
struct OpInput {
  Shape shape;
  double low = -1.0, high = 1.0;
  // Under a 16-bit storage dtype of the entry (OpEntry::dtypes holding BF16), whether this operand is
  // stored in it (the SRU recurrence's U and x) or stays in the float32 compute dtype (its weights).
  bool storage16 = true;
};

struct OpCase {
  std::string label;
  std::vector<OpInput> inputs;
  // The fixed operands (indices, masks, targets) for a set of inputs, made on inputs[0]'s device and in
  // their compute dtype (op_fixed / op_index below), once per input set: the gradient check perturbs
  // the inputs around them, the bench leaves them out of the time. Empty when the op has none.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)> fixed;
  // Runs the op, returning the outputs whose values and gradients the checks compare.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const std::vector<Tensor>& fixed)> run;
};

// The case's fixed operands for `inputs` (none when it has no `fixed`).
std::vector<Tensor> make_op_fixed(const OpCase& c, const std::vector<Tensor>& inputs);

struct OpEntry {
  std::string name;                  // the function in ops/*.h ("sum(dim)" where overloads differ)
  std::vector<std::string> kernels;  // SRU_KERNEL base names it reaches (cpu::NAME and cuda::NAME)
  // The dtypes it computes in: F32 and F64 for every op; BF16 where the kernels also take 16-bit
  // storage (then OpInput::storage16 says which operands are stored in it).
  std::vector<DType> dtypes;
  bool differentiable = true;  // gradients checked (false: index_copy_ writes into its destination)
  double parity_tol = 1e-4;    // CPU vs CUDA at float32, absolute and relative
  std::vector<OpCase> cases;   // small shapes: forward, gradient check, parity
  OpCase bench;                // one case at a training-sized shape: srubench ops
};

const std::vector<OpEntry>& op_table();
// Entry i's name as an identifier (letters, digits, _): the parameterised tests' names.
std::string op_table_identifier(size_t i);

// Kernels that SRU_KERNEL reaches but no differentiable op owns, with the tests that cover them
// instead (the optimiser's update and clipping kernels): the coverage test accepts these names.
struct KernelOutsideTable {
  std::string kernel, covered_by;
};
const std::vector<KernelOutsideTable>& kernels_outside_op_table();

// The case's inputs as leaves requiring grad, drawn from `seed`, in `dtype` (a 16-bit dtype applies to
// the storage16 operands; the others are float32) on `device`.
std::vector<Tensor> make_op_inputs(const OpCase& c, DType dtype, Device device, uint64_t seed);
// A fixed floating operand with these values, in `like`'s dtype (float32 when `like` is 16-bit) on
// its device; an int64 index operand on `like`'s device.
Tensor op_fixed(const std::vector<double>& values, const Shape& shape, const Tensor& like);
Tensor op_index(const std::vector<int64_t>& values, const Shape& shape, const Tensor& like);

}  // namespace sru
