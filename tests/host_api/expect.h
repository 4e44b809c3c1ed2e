// The checks of the host API tests: one line per check (ok or FAIL, what, and the library's message), then the
// count of failures, which the pytest side reads.
#pragma once

#include <cstdio>

inline int failures = 0;

inline void expect(bool ok, char const* what, char const* detail = "") {
  std::printf("%s: %s %s\n", ok ? "ok" : "FAIL", what, detail);
  failures += ok ? 0 : 1;
}

inline int report() {
  std::printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
