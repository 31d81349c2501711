/* version: what this binary is, for --version and benchmark reports. cli/version.c is
 * recompiled on every build, so the commit is never stale. */
#ifndef BG_CLI_VERSION_H
#define BG_CLI_VERSION_H

const char *cli_version(void); /* "0.1.0" */
const char *cli_commit(void);  /* short hash, "-dirty" when the tree had changes; "unknown" */

#endif
