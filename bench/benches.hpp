// SPDX-License-Identifier: BSD-3-Clause
// The benchmarks of the hugepool-bench binary, one function each.
#pragma once

#include "bench_util.hpp"

namespace hb {

int bench_touch(const Args &a);
int bench_pin(const Args &a);
int bench_translate(const Args &a);
int bench_cma(const Args &a);
int bench_tlb(const Args &a);

}  // namespace hb
