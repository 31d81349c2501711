/* resume: what --resume keeps of an earlier, interrupted run's output file.
 *
 * Results are written one whole line per write(2), so a crash leaves only whole lines,
 * possibly followed by one torn last line. resume_scan keeps every complete line (ending
 * in '\n' and parsing as JSON), cuts the torn tail off the file (ftruncate), and records
 * the id of every kept result as "done" in the id set, so that the run skips exactly the
 * input lines already answered (an id's k-th occurrence in the input is skipped when the
 * file holds at least k results for it: duplicates stay duplicates).
 */
#ifndef BG_CLI_RESUME_H
#define BG_CLI_RESUME_H

#include <stdint.h>

#include "status.h"
#include "cli/idset.h"

struct resume_stats {
	int64_t n_kept;	  /* results kept */
	int64_t n_failed; /* of which error results (they still count toward exit status 1) */
	int64_t n_cut;	  /* bytes cut off the end */
};

/* Scans path (a missing file is an empty one). A complete line in the middle of the file
 * that is not a result is an error (BG_ERR_FORMAT naming the line): the file is left
 * untouched. */
enum bg_status resume_scan(const char *path, struct idset *ids, struct resume_stats *out,
			   struct bg_err *err);

#endif
