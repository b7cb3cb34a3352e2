/*
 * What the unit tests share: a fresh directory under /tmp and its removal.
 * Included after cmocka.h (it asserts).
 */
#ifndef WALC_TEST_UNIT_UNIT_H
#define WALC_TEST_UNIT_UNIT_H

#include <stdlib.h>

#include "internal/core/core.h"

/* A new empty directory; the path is the caller's to free. */
static inline char *unit_tmpdir(void) {
  char *dir = xstrdup("/tmp/walc-unit-XXXXXX");
  assert_non_null(mkdtemp(dir));
  return dir;
}

/* Removes dir and everything below it: 0 on success, for a cmocka teardown's
 * result. */
static inline int unit_rmtree(const char *dir) {
  char *cmd = xasprintf("rm -rf '%s'", dir);
  int rc = system(cmd);
  free(cmd);
  return rc;
}

#endif
