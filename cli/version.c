#include "cli/version.h"

#ifndef BG_VERSION
#define BG_VERSION "0.0.0"
#endif
#ifndef BG_COMMIT
#define BG_COMMIT "unknown"
#endif

const char *cli_version(void)
{
	return BG_VERSION;
}

const char *cli_commit(void)
{
	return BG_COMMIT;
}
