/* cmd_run: `batchgen run`, the main job. JSONL requests in, one JSONL result per input
 * line out (DESIGN.md §5, §6, §8).
 *
 * Input is read by a reader thread, so that a slow producer on the other end of a pipe
 * never stalls the requests already running (and a producer that waits for our results,
 * a coprocess, cannot deadlock us): the thread splits the input into lines (any length)
 * and keeps this shard's lines in a small bounded queue; the engine's source takes from
 * it without blocking while the engine has work (ENGINE_SOURCE_PENDING when empty), and
 * blocks only when the engine is idle (or when the input is a regular file, which cannot
 * be slow: its runs batch exactly as with a blocking read). Parsing, --resume and
 * duplicate ids stay on the main thread, which is also the only thread that takes
 * SIGINT/SIGTERM.
 *
 * Memory is bounded whatever the input's length: at most IN_QUEUE_CAP lines are read
 * ahead of the engine's own look-ahead (--max-queued), and each result is written and
 * freed as soon as the engine hands it over. What grows with the input is the id set (48
 * to 96 bytes per distinct id, for duplicate detection and --resume).
 *
 * Output: each result line goes out in one write(2) of the whole line, so a crash leaves
 * only whole lines, or one torn last line that --resume cuts off. stdout carries results
 * only; logs, progress and the summary go to stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "text/chat.h"
#include "engine/engine.h"
#include "io/jsonl_read.h"
#include "io/jsonl_write.h"
#include "cli/chat_select.h"
#include "cli/commands.h"
#include "cli/idset.h"
#include "cli/lines.h"
#include "cli/options.h"
#include "cli/outputs.h"
#include "cli/progress.h"
#include "cli/resume.h"

#define MAX_LOGGED_ERRORS 5 /* error results also named on stderr; the rest are counted */

/* The stop flag is the one piece of global state: a signal handler can reach nothing
 * else. It is set by the first SIGINT/SIGTERM and read by the engine between iterations
 * (and by the source between lines). */
static volatile sig_atomic_t run_stop;

static void on_signal(int sig)
{
	(void)sig;
	if (run_stop) {
		/* second signal: every line written so far is whole, so leave at once */
		_exit(CLI_EXIT_INTERRUPTED);
	}
	run_stop = 1;
	static const char msg[] = "\nbatchgen: stopping after the current iteration "
				  "(interrupt again to quit at once)\n";
	ssize_t w = write(2, msg, sizeof msg - 1);
	(void)w;
}

/* ------------------------------------------------------------------------------------ */
/* The reader thread                                                                    */
/* ------------------------------------------------------------------------------------ */

#define IN_QUEUE_CAP  64	 /* lines read ahead of the engine's look-ahead */
#define IN_READ_CHUNK 65536	 /* bytes per read(2) */
#define IN_WAIT_NS    100000000L /* an idle source rechecks the stop flag this often */

struct in_line {
	char *text; /* [len + 1], NUL-terminated, the newline (and a CR before it) removed */
	size_t len;
	int64_t line_no; /* 1-based physical line number in the input */
};

/* The thread reads with poll + read(2) on the descriptor, never stdio, so that it can be
 * told to leave (a byte on the wake pipe) even while the producer writes nothing, and then
 * be joined: an interrupt never waits for the input, and nothing outlives cmd_run. */
struct reader {
	int fd;
	int wake[2]; /* a byte on wake[1]: leave now */
	int64_t shard_n, shard_k;
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t not_empty, not_full; /* for the main thread, for the reader */
	bool sync_made;
	/* under mu */
	struct in_line q[IN_QUEUE_CAP]; /* ring: count lines from head */
	int head, count;
	bool done; /* the reader has stopped: end of input, read error, or quit */
	/* The input's form (jsonl_sniff_form of its first non-blank line, over all shards);
	 * -1 until known. Leading blank lines are held (counted) until it is known, so that
	 * every line handed over can be answered in the file's form. Written by the reader
	 * before it queues a line, read by the main thread after it takes one. */
	int file_form;
	int64_t held_blank; /* leading blank lines not yet handed over: lines 1..held_blank */
	int read_errno;	    /* the read error, 0 at the end of input */
	bool quit;	    /* the main thread wants the reader gone */
};

/* Queues one line; false when told to quit (the line is then freed). */
static bool reader_push(struct reader *rd, struct in_line *ln)
{
	pthread_mutex_lock(&rd->mu);
	while (rd->count == IN_QUEUE_CAP && !rd->quit)
		pthread_cond_wait(&rd->not_full, &rd->mu);
	bool ok = !rd->quit;
	if (ok) {
		rd->q[(rd->head + rd->count) % IN_QUEUE_CAP] = *ln;
		rd->count++;
		pthread_cond_signal(&rd->not_empty);
	}
	pthread_mutex_unlock(&rd->mu);
	if (!ok)
		free(ln->text);
	return ok;
}

/* Hands over bytes [p, p + n) as line number line_no if it belongs to this shard. */
static bool reader_emit(struct reader *rd, const char *p, size_t n, int64_t line_no, int *err)
{
	if ((line_no - 1) % rd->shard_n != rd->shard_k)
		return true;
	if (n && p[n - 1] == '\r')
		n--;
	struct in_line ln = {.text = malloc(n + 1), .len = n, .line_no = line_no};
	if (!ln.text) {
		*err = ENOMEM;
		return false;
	}
	memcpy(ln.text, p, n);
	ln.text[n] = 0;
	return reader_push(rd, &ln);
}

/* Sets the file's form (once) and hands over the leading blank lines held until then. */
static bool reader_set_form(struct reader *rd, int form, int *err)
{
	rd->file_form = form;
	for (int64_t i = 1; i <= rd->held_blank; i++)
		if (!reader_emit(rd, "", 0, i, err))
			return false;
	rd->held_blank = 0;
	return true;
}

/* One physical line: its form decides the file's when it is the first non-blank one. */
static bool reader_line(struct reader *rd, const char *p, size_t n, int64_t line_no, int *err)
{
	if (rd->file_form < 0) {
		if (jsonl_blank(p, n)) {
			rd->held_blank = line_no;
			return true;
		}
		if (!reader_set_form(rd, (int)jsonl_sniff_form(p, n), err))
			return false;
	}
	return reader_emit(rd, p, n, line_no, err);
}

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	/* SIGINT/SIGTERM are for the main thread (they are blocked when this thread is
	 * made; say it again here so that it holds whoever creates the thread) */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	char *buf = NULL;
	size_t cap = 0, start = 0, end = 0, scanned = 0; /* [start, end) not yet a line */
	int64_t line_no = 0;
	int err = 0;
	for (;;) {
		char *nl = end > scanned ? memchr(buf + scanned, '\n', end - scanned) : NULL;
		if (nl) {
			size_t n = (size_t)(nl - (buf + start));
			if (!reader_line(rd, buf + start, n, ++line_no, &err))
				break;
			start = scanned = (size_t)(nl - buf) + 1;
			continue;
		}
		scanned = end;
		/* make room: keep the partial line at the front, grow for a long one */
		if (start > 0) {
			memmove(buf, buf + start, end - start);
			end -= start;
			scanned -= start;
			start = 0;
		}
		if (cap - end < IN_READ_CHUNK / 2) {
			size_t ncap = cap ? cap * 2 : IN_READ_CHUNK;
			char *nb = realloc(buf, ncap);
			if (!nb) {
				err = ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		struct pollfd pf[2] = {{.fd = rd->fd, .events = POLLIN},
				       {.fd = rd->wake[0], .events = POLLIN}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			err = errno;
			break;
		}
		if (pf[1].revents)
			break; /* told to quit */
		if (!pf[0].revents)
			continue;
		ssize_t got = read(rd->fd, buf + end, cap - end);
		if (got < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			err = errno;
			break;
		}
		if (got == 0) {
			/* the end: a last line without its newline still counts */
			if (end > start)
				reader_line(rd, buf + start, end - start, ++line_no, &err);
			if (rd->file_form < 0) /* blank lines only */
				reader_set_form(rd, JSONL_FORM_NATIVE, &err);
			break;
		}
		end += (size_t)got;
	}
	free(buf);
	pthread_mutex_lock(&rd->mu);
	rd->done = true;
	rd->read_errno = err;
	pthread_cond_broadcast(&rd->not_empty);
	pthread_mutex_unlock(&rd->mu);
	return NULL;
}

/* Starts the reader on fd; false with errno set on failure. Call with SIGINT/SIGTERM
 * blocked, so the thread never takes them. */
static bool reader_start(struct reader *rd, int fd, int64_t shard_n, int64_t shard_k)
{
	rd->fd = fd;
	rd->shard_n = shard_n;
	rd->shard_k = shard_k;
	rd->wake[0] = rd->wake[1] = -1;
	rd->file_form = -1;
	rd->held_blank = 0;
	if (pipe2(rd->wake, O_CLOEXEC) != 0)
		return false;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&rd->mu, NULL);
	pthread_cond_init(&rd->not_empty, &ca);
	pthread_cond_init(&rd->not_full, NULL);
	pthread_condattr_destroy(&ca);
	rd->sync_made = true;
	int e = pthread_create(&rd->thread, NULL, reader_main, rd);
	if (e != 0) {
		errno = e;
		return false;
	}
	rd->started = true;
	return true;
}

/* Stops and joins the reader (prompt even if the input is silent), frees what it holds.
 * Safe on a reader never started, and twice. */
static void reader_stop(struct reader *rd)
{
	if (rd->started) {
		pthread_mutex_lock(&rd->mu);
		rd->quit = true;
		pthread_cond_broadcast(&rd->not_full);
		pthread_mutex_unlock(&rd->mu);
		char b = 1;
		ssize_t w = write(rd->wake[1], &b, 1);
		(void)w; /* a pipe with room: cannot fail short of a bug */
		pthread_join(rd->thread, NULL);
		rd->started = false;
	}
	if (rd->sync_made) {
		for (; rd->count > 0; rd->count--) {
			free(rd->q[rd->head].text);
			rd->head = (rd->head + 1) % IN_QUEUE_CAP;
		}
		pthread_cond_destroy(&rd->not_empty);
		pthread_cond_destroy(&rd->not_full);
		pthread_mutex_destroy(&rd->mu);
		rd->sync_made = false;
	}
	for (int i = 0; i < 2; i++)
		if (rd->wake[i] >= 0) {
			close(rd->wake[i]);
			rd->wake[i] = -1;
		}
}

/* The next line: 1 (*out filled, the caller frees text), 0 at the end of the input, -1 on
 * a read error (*read_errno), or ENGINE_SOURCE_PENDING: nothing yet and may_block is
 * false, or *stop was set while waiting. Waiting rechecks *stop every IN_WAIT_NS: a
 * signal handler cannot signal a condition variable. */
static int reader_take(struct reader *rd, bool may_block, volatile sig_atomic_t *stop,
		       struct in_line *out, int *read_errno)
{
	int rc;
	pthread_mutex_lock(&rd->mu);
	while (rd->count == 0 && !rd->done) {
		if (!may_block || *stop) {
			pthread_mutex_unlock(&rd->mu);
			return ENGINE_SOURCE_PENDING;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += IN_WAIT_NS;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&rd->not_empty, &rd->mu, &ts);
	}
	if (rd->count > 0) {
		*out = rd->q[rd->head];
		rd->head = (rd->head + 1) % IN_QUEUE_CAP;
		rd->count--;
		pthread_cond_signal(&rd->not_full);
		rc = 1;
	} else {
		*read_errno = rd->read_errno;
		rc = rd->read_errno ? -1 : 0;
	}
	pthread_mutex_unlock(&rd->mu);
	return rc;
}

struct run {
	struct opt_config cfg;
	struct chat_jinja *jinja; /* the Jinja chat template, or NULL (cli/chat_select.h) */
	struct opt_runtime rt;
	struct jsonl_defaults defaults;
	struct jsonl_out_opts wopts;
	struct jsonl_warn warn;
	char run_id[32];

	FILE *in; /* read through its descriptor by the reader thread */
	struct reader rd;
	struct engine *engine; /* for engine_idle: the source blocks only when it is idle */
	bool in_is_file;       /* a regular file is never slow: the source may always wait */
	int64_t n_resumed;     /* input lines skipped because their result is already there */
	int64_t n_handed;      /* requests handed to the engine (the next one's seq) */
	struct idset *ids;

	int out_fd;
	const char *out_name;
	bool write_failed;
	int64_t next_seq;  /* --order input: the seq the next result should carry */
	int64_t n_dropped; /* complete results not written after an interrupt (order) */

	struct progress *prog;
	int64_t n_logged;
};

/* ------------------------------------------------------------------------------------ */
/* Input                                                                                */
/* ------------------------------------------------------------------------------------ */

static void log_warn(void *user, const char *msg)
{
	struct run *r = user;
	/* shown under -q too: a warning says the run is not doing what was asked (a
	 * misspelled field runs with its default), and each kind is said once */
	progress_clear(r->prog);
	fprintf(stderr, "batchgen: warning: %s\n", msg);
}

/* The engine's source: the next request of this shard, skipping lines already answered
 * (--resume). Every line of the shard yields a request, a malformed one a request that
 * carries its error, so that every input line gets exactly one result. Never waits for
 * input while the engine has work (ENGINE_SOURCE_PENDING); idle, waits for the next line,
 * the end of the input, or the stop flag. */
static int run_source(void *user, struct request **out, struct bg_err *err)
{
	struct run *r = user;
	for (;;) {
		if (run_stop)
			return ENGINE_SOURCE_EOF;
		struct in_line ln = {0};
		int read_errno = 0;
		/* A regular file keeps the batches of a blocking read (the engine's look-ahead
		 * full from the first iteration; what static batching and benchmarks rely on);
		 * a pipe, FIFO or terminal never makes running requests wait. */
		bool may_block = r->in_is_file || engine_idle(r->engine);
		int rc = reader_take(&r->rd, may_block, &run_stop, &ln, &read_errno);
		if (rc == ENGINE_SOURCE_PENDING)
			return run_stop ? ENGINE_SOURCE_EOF : ENGINE_SOURCE_PENDING;
		if (rc == 0)
			return ENGINE_SOURCE_EOF;
		if (rc < 0) {
			if (read_errno == ENOMEM)
				bg_fail(err, BG_ERR_NOMEM, "out of memory reading the input");
			else
				bg_fail(err, BG_ERR_IO, "cannot read %s: %s",
					strcmp(r->cfg.input, "-") == 0 ? "standard input"
								       : r->cfg.input,
					strerror(read_errno));
			return ENGINE_SOURCE_ERROR;
		}
		struct request *q = NULL;
		/* set by the reader before it queued the first line */
		r->defaults.file_form =
		    (enum jsonl_form)(r->rd.file_form < 0 ? 0 : r->rd.file_form);
		enum bg_status st =
		    jsonl_parse_request(ln.text, ln.len, ln.line_no, &r->defaults, &r->warn, &q);
		free(ln.text);
		if (st != BG_OK || !q) {
			bg_fail(err, BG_ERR_NOMEM, "out of memory reading line %lld",
				(long long)ln.line_no);
			return ENGINE_SOURCE_ERROR;
		}
		if (q->id) {
			size_t id_len = strlen(q->id);
			uint32_t seen = idset_add_seen_line(r->ids, q->id, id_len, q->line);
			if (!seen) {
				req_free(q);
				bg_fail(err, BG_ERR_NOMEM, "out of memory reading line %lld",
					(long long)ln.line_no);
				return ENGINE_SOURCE_ERROR;
			}
			if (r->cfg.resume && seen <= idset_done(r->ids, q->id, id_len)) {
				req_free(q); /* its result is already in the output file */
				r->n_resumed++;
				progress_add_skipped(r->prog, 1);
				continue;
			}
			if (seen > 1 && !q->error.code[0]) {
				snprintf(q->error.code, sizeof q->error.code, "duplicate_id");
				snprintf(q->error.message, sizeof q->error.message,
					 "the id \"%.200s\" was already used by an earlier line",
					 q->id);
			}
		}
		q->seq = r->n_handed++;
		*out = q;
		return ENGINE_SOURCE_OK;
	}
}

/* ------------------------------------------------------------------------------------ */
/* Output                                                                               */
/* ------------------------------------------------------------------------------------ */

static bool write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static int run_sink(void *user, struct request *q)
{
	struct run *r = user;
	if (r->cfg.order == ENGINE_ORDER_INPUT) {
		/* After an interrupt, write only the in-order prefix: a result that overtook an
		 * unfinished one is dropped (a resumed run does it again), so the file stays in
		 * input order, which is what batchgen merge relies on. */
		if (run_stop && q->seq != r->next_seq) {
			req_free(q);
			r->n_dropped++;
			return 0;
		}
		r->next_seq = q->seq + 1;
	}
	bool failed = q->finish == REQ_FINISH_ERROR || q->error.code[0];
	if (failed && !r->cfg.quiet) {
		if (r->n_logged < MAX_LOGGED_ERRORS) {
			progress_clear(r->prog);
			fprintf(stderr, "batchgen: line %lld: %s: %s\n", (long long)q->line,
				q->error.code[0] ? q->error.code : "error", q->error.message);
		} else if (r->n_logged == MAX_LOGGED_ERRORS) {
			progress_clear(r->prog);
			fprintf(stderr, "batchgen: further error results are not shown here "
					"(they are in the output)\n");
		}
		r->n_logged++;
	}
	char *text = NULL;
	size_t len = 0;
	enum bg_status st = jsonl_write_result(q, r->rt.tok, &r->wopts, &text, &len);
	if (st != BG_OK) {
		req_free(q);
		progress_clear(r->prog);
		fprintf(stderr, "batchgen: cannot format a result: %s\n", bg_status_name(st));
		r->write_failed = true;
		return -1;
	}
	/* the writer ends the line with '\n': the whole line goes out in one write */
	bool ok = write_all(r->out_fd, text, len);
	int werr = errno;
	free(text);
	/* counted once written: the summary after a failed write does not call it done */
	if (ok)
		progress_result(r->prog, q);
	req_free(q);
	if (!ok) {
		progress_clear(r->prog);
		fprintf(stderr, "batchgen: cannot write to %s: %s\n", r->out_name, strerror(werr));
		r->write_failed = true;
		return -1;
	}
	return 0;
}

static void run_progress(void *user, const struct engine_progress *p)
{
	struct run *r = user;
	progress_update(r->prog, p);
}

/* ------------------------------------------------------------------------------------ */
/* The command                                                                          */
/* ------------------------------------------------------------------------------------ */

static void close_all(struct run *r, struct engine *e, FILE *stats)
{
	reader_stop(&r->rd);
	engine_destroy(e);
	if (stats)
		outputs_close(stats);
	if (r->in && r->in != stdin)
		fclose(r->in);
	if (r->out_fd > 2)
		close(r->out_fd);
	opt_close_runtime(&r->rt);
	idset_destroy(r->ids);
	progress_destroy(r->prog);
	chat_jinja_destroy(r->jinja);
	r->jinja = NULL;
}

int cmd_run(int argc, char **argv)
{
	struct run R, *r = &R;
	memset(r, 0, sizeof *r);
	r->out_fd = -1;
	r->rd.wake[0] = r->rd.wake[1] = -1;
	int code;
	if (!opt_parse(&r->cfg, OPT_CMD_RUN, argc, argv, &code))
		return code;
	const struct opt_config *c = &r->cfg;
	if (c->shard_n > 1 && c->order == ENGINE_ORDER_COMPLETION) {
		fprintf(stderr, "batchgen: --shard needs --order input (batchgen merge restores "
				"the input order from shard outputs written in input order)\n");
		return CLI_EXIT_USAGE;
	}
	struct engine *e = NULL;
	FILE *stats = NULL;
	struct bg_err err = {0};
	int rc = CLI_EXIT_OK;

	/* ---- input, resume, progress (usage errors: nothing processed) ---- */
	if (strcmp(c->input, "-") == 0) {
		r->in = stdin;
		if (isatty(0) && !c->quiet)
			fprintf(stderr,
				"batchgen: reading JSONL requests from the terminal (end with "
				"Ctrl-D; `batchgen --help` for usage)\n");
	} else if (!(r->in = fopen(c->input, "r"))) {
		fprintf(stderr, "batchgen: cannot open %s: %s\n", c->input, strerror(errno));
		return CLI_EXIT_USAGE;
	} else {
		/* a folder opens but every read fails: said here, before any work */
		struct stat si;
		if (fstat(fileno(r->in), &si) == 0 && S_ISDIR(si.st_mode)) {
			fprintf(stderr, "batchgen: -i %s is a folder, not a file of requests\n",
				c->input);
			close_all(r, e, stats);
			return CLI_EXIT_USAGE;
		}
	}
	/* two outputs on standard output, or naming one file: the report would overwrite the
	 * results at the end, the statistics would be interleaved with them */
	bool stats_stdout = outputs_is_stdout(c->stats);
	const struct output_name outs_named[] = {{"-o", "results", c->output},
						 {"--stats", "statistics", c->stats},
						 {"--report", "report", c->report}};
	if (!outputs_check("batchgen", outs_named, 3)) {
		close_all(r, e, stats);
		return CLI_EXIT_USAGE;
	}
	/* -o (or --stats) naming the input file would truncate it before it is read */
	const char *outs[] = {outputs_is_stdout(c->output) ? NULL : c->output,
			      stats_stdout ? NULL : c->stats};
	for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
		struct stat si, so;
		if (outs[i] && fstat(fileno(r->in), &si) == 0 && stat(outs[i], &so) == 0 &&
		    si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
			fprintf(stderr,
				"batchgen: %s is the input file; write the results elsewhere\n",
				outs[i]);
			close_all(r, e, stats);
			return CLI_EXIT_USAGE;
		}
	}
	r->ids = idset_create();
	if (!r->ids) {
		fprintf(stderr, "batchgen: out of memory\n");
		close_all(r, e, stats);
		return CLI_EXIT_MODEL;
	}
	struct resume_stats kept = {0};
	if (c->resume) {
		if (resume_scan(c->output, r->ids, &kept, &err) != BG_OK) {
			fprintf(stderr, "batchgen: --resume: %s\n", err.msg);
			close_all(r, e, stats);
			return CLI_EXIT_USAGE;
		}
		if (!c->quiet)
			fprintf(stderr,
				"batchgen: resuming %s: %lld results kept (%lld errors)%s\n",
				c->output, (long long)kept.n_kept, (long long)kept.n_failed,
				kept.n_cut ? ", a torn last line cut off" : "");
	}
	int64_t total = -1;
	if (!c->quiet) {
		/* a regular file's lines, counted up front for done/total and the ETA (a pipe
		 * cannot be, and shows a plain count) */
		off_t pos = ftello(r->in);
		int64_t lines = lines_count(fileno(r->in), pos < 0 ? 0 : (int64_t)pos, NULL);
		if (lines >= 0) {
			total = lines > c->shard_k
				    ? (lines - c->shard_k + c->shard_n - 1) / c->shard_n
				    : 0;
		}
	}
	bool tty = isatty(2);
	r->prog = progress_create(stderr, tty, c->quiet, c->progress_interval, total);
	if (!r->prog) {
		fprintf(stderr, "batchgen: out of memory\n");
		close_all(r, e, stats);
		return CLI_EXIT_MODEL;
	}

	/* Worker threads (backend, engine) inherit the signal mask of the thread that makes
	 * them: with SIGINT/SIGTERM blocked until they exist, the signals reach this thread
	 * only, where they interrupt a blocked read of the input. */
	sigset_t sigs, old_mask;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, &old_mask);

	/* ---- model, tokenizer, backend (failures: exit 3) ---- */
	if (opt_open_runtime(c, false, &r->rt, &err) != BG_OK) {
		fprintf(stderr, "batchgen: %s\n", err.msg);
		close_all(r, e, stats);
		return err.status == BG_ERR_INVALID ? CLI_EXIT_USAGE : CLI_EXIT_MODEL;
	}
	if (!r->rt.tok) {
		fprintf(stderr, "batchgen: the model has no tokenizer\n");
		close_all(r, e, stats);
		return CLI_EXIT_MODEL;
	}
	const struct chat_template *ct;
	if (!chat_select(c->chat_template_file, c->chat_template, c->chat_date,
			 r->rt.model ? r->rt.model->gguf : NULL, r->rt.tok, &ct, &r->jinja)) {
		close_all(r, e, stats);
		return CLI_EXIT_USAGE;
	}
	time_t now = time(NULL);
	opt_jsonl_defaults(c, &r->defaults);
	r->defaults.chat = ct;
	r->defaults.jinja = r->jinja;
	r->defaults.tok = r->rt.tok;
	r->defaults.model_name = r->rt.model->name;
	r->defaults.created = (int64_t)now;
	jsonl_warn_init(&r->warn, log_warn, r);
	jsonl_out_opts_init(&r->wopts);
	/* OpenAI ids are "batch_req_<run_id><line>": unique across runs and shards */
	snprintf(r->run_id, sizeof r->run_id, "%08llx%04x_",
		 (unsigned long long)now & 0xffffffffULL, (unsigned)getpid() & 0xffffu);
	r->wopts.run_id = r->run_id;
	r->wopts.created = (int64_t)now;

	/* ---- output and statistics files ---- */
	r->out_name = strcmp(c->output, "-") == 0 ? "standard output" : c->output;
	if (strcmp(c->output, "-") == 0) {
		r->out_fd = 1;
	} else {
		int flags = O_WRONLY | O_CREAT | (c->resume ? O_APPEND : O_TRUNC);
		r->out_fd = open(c->output, flags | O_CLOEXEC, 0644);
		if (r->out_fd < 0) {
			fprintf(stderr, "batchgen: cannot open %s: %s\n", c->output,
				strerror(errno));
			close_all(r, e, stats);
			return CLI_EXIT_USAGE;
		}
	}
	if (c->stats && !(stats = outputs_open(c->stats, c->resume ? "a" : "w"))) {
		fprintf(stderr, "batchgen: cannot open %s: %s\n", c->stats, strerror(errno));
		close_all(r, e, stats);
		return CLI_EXIT_USAGE;
	}

	/* ---- engine ---- */
	struct engine_config ec;
	opt_engine_config(c, &ec);
	ec.stats = stats;
	enum bg_status st =
	    engine_create(&ec, r->rt.backend, r->rt.tok, &r->rt.model->hp, &e, &err);
	if (st != BG_OK) {
		fprintf(stderr, "batchgen: %s\n", err.msg);
		close_all(r, e, stats);
		return st == BG_ERR_INVALID || st == BG_ERR_CAPACITY ? CLI_EXIT_USAGE
								     : CLI_EXIT_MODEL;
	}
	/* chat prompts are refused by size before tokenizing (jsonl_read.h) */
	r->defaults.max_seq_len = engine_max_seq_len(e);
	if (!c->quiet) {
		char dev[32];
		fprintf(stderr,
			"batchgen: model %s (%s, %u layers, %.1fM params), backend %s (%s), KV "
			"%d blocks of %d tokens\n",
			r->rt.model->name, r->rt.model->arch, r->rt.model->hp.n_layer,
			(double)r->rt.model->n_params / 1e6, r->rt.backend->name,
			r->rt.backend->device[0] ? r->rt.backend->device
						 : opt_device_name(c, dev, sizeof dev),
			r->rt.backend->n_blocks, r->rt.backend->block_size);
	}

	/* ---- signals: the first stops admission, the second leaves at once ---- */
	struct sigaction sa, old_int, old_term;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: a blocked read of stdin returns EINTR */
	run_stop = 0;
	/* the reader thread is made while the signals are still blocked: it never takes them */
	r->engine = e;
	struct stat in_st;
	r->in_is_file = fstat(fileno(r->in), &in_st) == 0 && S_ISREG(in_st.st_mode);
	if (!reader_start(&r->rd, fileno(r->in), c->shard_n, c->shard_k)) {
		fprintf(stderr, "batchgen: cannot start the input reader: %s\n", strerror(errno));
		pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
		close_all(r, e, stats);
		return CLI_EXIT_MODEL;
	}
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);

	int64_t n_unfinished = 0;
	progress_start(r->prog);
	st = engine_run(e, run_source, run_sink, run_progress, r, &run_stop, &n_unfinished, &err);
	/* joined at once, before the handlers go: the reader leaves without waiting for the
	 * input (a silent FIFO cannot hold the exit) */
	reader_stop(&r->rd);
	struct engine_progress totals;
	engine_totals(e, &totals);

	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);

	progress_summary(r->prog, &totals);
	bool side_failed = false; /* --report or --stats could not be written */
	if (c->report) {
		char dev[64];
		snprintf(dev, sizeof dev, "%s", r->rt.backend->name);
		struct bg_err rerr = {0};
		if (progress_write_report(r->prog, &totals, c->report, r->rt.model->name, dev,
					  &rerr) != BG_OK) {
			fprintf(stderr, "batchgen: %s\n", rerr.msg);
			side_failed = true;
		}
	}
	/* the statistics: a write that failed during the run, or the last lines at fclose */
	int stats_err = stats ? engine_stats_errno(e) : 0;
	if (stats) {
		errno = 0;
		if (!outputs_close(stats) && !stats_err)
			stats_err = errno ? errno : EIO;
		stats = NULL;
	}
	if (stats_err) {
		fprintf(stderr, "batchgen: cannot write the statistics to %s: %s\n", c->stats,
			strerror(stats_err));
		side_failed = true;
	}
	if (st != BG_OK) {
		if (!r->write_failed)
			fprintf(stderr, "batchgen: %s\n", err.msg);
		fprintf(stderr, "batchgen: the run stopped; the results written are valid, "
				"rerun with --resume -o FILE to finish\n");
		rc = CLI_EXIT_MODEL; /* model, device or I/O failure during the run */
	} else if (run_stop) {
		int64_t left = n_unfinished + r->n_dropped;
		int64_t done = r->n_resumed + progress_n_ok(r->prog) + progress_n_failed(r->prog);
		if (total >= 0 && total - done > left)
			left = total - done;
		fprintf(stderr,
			"batchgen: interrupted: %lld requests left unfinished; rerun with --resume "
			"to finish\n",
			(long long)left);
		rc = CLI_EXIT_INTERRUPTED;
	} else if (progress_n_failed(r->prog) > 0 || kept.n_failed > 0) {
		/* the whole output file counts, results kept by --resume too */
		rc = CLI_EXIT_SOME_FAILED;
	}
	/* the whole input was read: kept results that no input line claimed are another
	 * input's (the file now has more lines than this input) */
	if (st == BG_OK && !run_stop && kept.n_kept > r->n_resumed)
		fprintf(stderr,
			"batchgen: warning: %lld result%s kept in %s %s an id that no line of %s "
			"has (the output of another input?); the file has more results than "
			"input lines\n",
			(long long)(kept.n_kept - r->n_resumed),
			kept.n_kept - r->n_resumed > 1 ? "s" : "", c->output,
			kept.n_kept - r->n_resumed > 1 ? "have" : "has", c->input);
	/* a lost --stats or --report file is an I/O failure, not a success */
	if (side_failed && (rc == 0 || rc == CLI_EXIT_SOME_FAILED))
		rc = CLI_EXIT_MODEL;
	close_all(r, e, stats);
	return rc;
}
