/* progress: what a run shows on stderr while it works, and what it sums up at the end.
 *
 * On a terminal (stderr is a tty) one line is redrawn in place with '\r' at most five
 * times a second; otherwise a plain line is written every interval seconds, so that logs
 * of batch jobs stay readable. quiet silences both (and the summary).
 *
 * The module also collects what the result sink sees (ok/failed, tokens, TTFT and
 * end-to-end latency of every successful request) in log-scale histograms: memory stays
 * fixed whatever the number of requests, and a percentile is exact to within the bucket
 * width (1% relative). The summary and the --report JSON come from these.
 */
#ifndef BG_CLI_PROGRESS_H
#define BG_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"
#include "engine/request.h"
#include "status.h"

struct progress;

/* f is where lines go (stderr); tty selects the in-place line; total is the number of
 * requests this run will do when known, else -1. NULL on allocation failure. */
struct progress *progress_create(FILE *f, bool tty, bool quiet, double interval_s, int64_t total);
void progress_destroy(struct progress *p); /* NULL-safe */

/* Marks the start of the work proper (after the model is loaded): rates, ETA and the
 * report's wall time count from here. progress_create marks it too. */
void progress_start(struct progress *p);

/* Counts requests done before this run (resume) toward done/total. */
void progress_add_skipped(struct progress *p, int64_t n);

/* Records one finished request as the sink writes it. */
void progress_result(struct progress *p, const struct request *r);

/* Called after every engine iteration; draws when it is time. */
void progress_update(struct progress *p, const struct engine_progress *ep);

/* Erases the in-place line (before another message is written to the same stream). */
void progress_clear(struct progress *p);

/* Results seen so far. */
int64_t progress_n_ok(const struct progress *p);
int64_t progress_n_failed(const struct progress *p);

/* Percentile q in [0, 1] of TTFT or end-to-end latency in ms (NAN when none). */
double progress_ttft_ms(const struct progress *p, double q);
double progress_e2e_ms(const struct progress *p, double q);

/* Prints the end-of-run summary (unless quiet); totals come from engine_totals (may be
 * NULL when the engine never ran). */
void progress_summary(struct progress *p, const struct engine_progress *totals);

/* Writes the summary as one JSON object to path. On failure err says why. */
enum bg_status progress_write_report(struct progress *p, const struct engine_progress *totals,
				     const char *path, const char *model, const char *device,
				     struct bg_err *err);

#endif
