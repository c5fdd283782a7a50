// Shape helpers shared by every op.
#include "core/shape.h"

#include "core/error.h"

namespace sru {

int64_t shape_numel(const Shape& shape) { return shape_prod(shape, 0, static_cast<int>(shape.size())); }

int64_t shape_prod(const Shape& shape, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= shape[i];
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

int normalize_dim(int dim, int rank, const char* op) {
  const int d = dim < 0 ? dim + rank : dim;
  SRU_CHECK(d >= 0 && d < rank, op, ": dim ", dim, " out of range for a tensor of rank ", rank);
  return d;
}

bool is_shape_suffix(const Shape& suffix, const Shape& shape) {
  size_t first = 0;
  while (first < suffix.size() && suffix[first] == 1) ++first;
  const size_t n = suffix.size() - first;
  if (n > shape.size()) return false;
  for (size_t i = 0; i < n; ++i)
    if (suffix[first + i] != shape[shape.size() - n + i]) return false;
  return true;
}

}  // namespace sru
