#include "cli/model_spec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/hub.h"

struct ms_bar {
	bool tty;
	int last_decile; /* log files: the last 10% step written */
	double last_draw;
	bool drawn;
};

static double ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void ms_on_progress(void *arg, const char *file, uint64_t done, uint64_t total)
{
	struct ms_bar *b = arg;
	bool end = total > 0 && done >= total;
	double mib = (double)done / (1 << 20), tmib = (double)total / (1 << 20);
	if (b->tty) {
		double t = ms_now();
		if (!end && b->drawn && t - b->last_draw < 0.2)
			return;
		b->last_draw = t;
		b->drawn = true;
		if (total > 0) {
			int pct = (int)(100.0 * (double)done / (double)total);
			char bar[31];
			int fill = pct * 30 / 100;
			for (int i = 0; i < 30; i++)
				bar[i] = i < fill ? '#' : ' ';
			bar[30] = '\0';
			fprintf(stderr, "\rbatchgen: %s [%s] %3d%% %.1f/%.1f MiB", file, bar, pct, mib,
				tmib);
		} else {
			fprintf(stderr, "\rbatchgen: %s %.1f MiB", file, mib);
		}
		if (end)
			fputc('\n', stderr);
		fflush(stderr);
		return;
	}
	if (total == 0)
		return;
	int decile = (int)(10 * done / total);
	if (decile <= b->last_decile)
		return;
	b->last_decile = decile;
	fprintf(stderr, "batchgen: downloading %s: %d%% (%.1f of %.1f MiB)\n", file, decile * 10,
		mib, tmib);
}

enum bg_status model_spec_resolve(const char *spec, bool offline, bool quiet, char **out,
				  struct bg_err *err)
{
	*out = NULL;
	if (!spec)
		return BG_OK;
	if (!hub_is_spec(spec)) {
		*out = strdup(spec);
		return *out ? BG_OK : bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	struct hub_ref ref;
	enum bg_status st = hub_parse(spec, &ref, err);
	if (st != BG_OK)
		return st;
	struct hub_opts *o = malloc(sizeof *o);
	char *path = malloc(4096);
	if (!o || !path) {
		free(o);
		free(path);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	hub_opts_from_env(o);
	o->offline = o->offline || offline;
	struct ms_bar b = {.tty = isatty(2) != 0, .last_decile = 0};
	if (!quiet) {
		o->progress = ms_on_progress;
		o->progress_arg = &b;
	}
	st = hub_resolve(&ref, o, path, 4096, err);
	free(o);
	if (st != BG_OK) {
		if (b.tty && b.drawn)
			fputc('\n', stderr); /* the error goes on its own line */
		free(path);
		return st;
	}
	*out = path;
	return BG_OK;
}
