// Tensor shapes: a list of dimension sizes, row-major, with helpers for element counts and messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sru {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "(2, 3)"
// Resolves a possibly negative dimension index against a rank; throws naming the op when out of range.
int normalize_dim(int dim, int rank, const char* op);
// Product of the dimensions [begin, end).
int64_t shape_prod(const Shape& shape, int begin, int end);
// True when `suffix` equals the last suffix.size() dimensions of `shape` (leading 1s of suffix ignored).
bool is_shape_suffix(const Shape& suffix, const Shape& shape);

}  // namespace sru
