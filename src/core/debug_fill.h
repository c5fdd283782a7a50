// The NaN-fill debug mode: with SRU_DEBUG_NAN_FILL=1 in the environment (or set_nan_fill(true)), the
// CPU and CUDA allocators fill every block they hand out, new or reused, with 0xFF bytes — a NaN in
// f32 and f64, -1 in the integer dtypes. An op that leaves part of its output unwritten then yields
// NaNs instead of whatever the block held before, so it cannot pass a parity test by luck.
#pragma once

namespace sru {

bool nan_fill_enabled();
// Overrides the environment (tests); returns the previous setting.
bool set_nan_fill(bool on);

constexpr unsigned char kNanFillByte = 0xFF;

}  // namespace sru
