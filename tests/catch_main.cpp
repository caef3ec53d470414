// SPDX-License-Identifier: BSD-3-Clause
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
