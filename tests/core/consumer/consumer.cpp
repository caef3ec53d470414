// SPDX-License-Identifier: BSD-3-Clause
// Builds against an installed hugepool and prints what it links to.
#include <hugepool/allocator.hpp>
#include <hugepool/hugepool.h>

#include <cstdio>

int main() {
  hugepool::allocator<double> a;
  std::printf("page size %zu, policy %s, allocator equal %d\n", hugepool_get_page_size(),
              hugepool_policy_name(hugepool_get_policy()), a == hugepool::allocator<int>{});
  return hugepool_get_page_size() == 2u << 20 ? 0 : 1;
}
