// Invariant checks that stay on in release builds (TigerBeetle style): a
// broken invariant is a bug in this program, never a user error.
#pragma once

#include <cstdio>
#include <cstdlib>

#define INFONCE_ASSERT(condition)                                                     \
  do {                                                                                \
    if (!(condition)) [[unlikely]] {                                                  \
      std::fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (false)
