/* threadpool: workers wait on a condition variable for a new "generation" of work, then
 * take task indices from a shared atomic counter until none are left. The caller takes
 * tasks too and then waits until every worker has left the generation, so that the next
 * tp_run cannot race with a straggler of the previous one.
 *
 * Both waits poll for TP_SPIN_NS before sleeping, because the CPU backend issues 111
 * short runs per decoded token (TinyLlama) with serial work between them (norms, RoPE,
 * residual adds; SiLU and activation quantization were serial too, ~60 us per layer in
 * all, before they became each matmul run's first tasks), and each futex wake-up lands
 * on the critical path (a worker woken late starts its share late; a caller that slept
 * waits for the last worker's wake-up): 4-17 % of each matmul dispatch was one thread
 * waiting with ~7 us of polling, 1.5-6 % with this (bench/results/decode1-2026-11-29.md).
 * Past TP_PAUSE_NS the poll yields the core, so that on a loaded machine the spinning
 * thread does not take it from one with work (without the yield, 2x slower at load 8). */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define TP_SPIN_NS 500000 /* how long a waiting thread polls before it sleeps */
#define TP_PAUSE_NS 20000 /* ... of which the first part without yielding the core */

struct tp_pool {
	int n_threads;
	pthread_t *threads; /* [n_threads - 1] */
	pthread_mutex_t mu;
	pthread_cond_t wake; /* workers: a new generation or shutdown */
	pthread_cond_t done; /* caller: the last worker left the generation */
	atomic_uint_fast64_t generation;
	atomic_int next_task;
	atomic_int busy; /* workers still inside the current generation */
	int32_t n_tasks;
	tp_task_fn fn;
	void *arg;
	int stop;
};

struct tp_worker_arg {
	struct tp_pool *p;
	int32_t id;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool gen_moved(struct tp_pool *p, uint64_t seen)
{
	return atomic_load(&p->generation) != seen;
}

static bool workers_done(struct tp_pool *p, uint64_t unused)
{
	(void)unused;
	return atomic_load(&p->busy) == 0;
}

/* Polls ready(p, arg) for at most TP_SPIN_NS; its last answer. The caller then sleeps on
 * a condition variable while it stays false. */
static bool spin(struct tp_pool *p, bool (*ready)(struct tp_pool *, uint64_t), uint64_t arg)
{
	const uint64_t t0 = mono_ns();
	for (;;) {
		for (int i = 0; i < 64; i++) {
			if (ready(p, arg))
				return true;
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		}
		const uint64_t dt = mono_ns() - t0;
		if (dt > TP_SPIN_NS)
			return false;
		if (dt > TP_PAUSE_NS) /* past the usual gap: let other runnable threads in */
			sched_yield();
	}
}

static void take_tasks(struct tp_pool *p, int32_t thread)
{
	for (;;) {
		int32_t t = atomic_fetch_add(&p->next_task, 1);
		if (t >= p->n_tasks)
			return;
		p->fn(p->arg, t, thread);
	}
}

static void *worker_main(void *varg)
{
	struct tp_worker_arg wa = *(struct tp_worker_arg *)varg;
	free(varg);
	struct tp_pool *p = wa.p;
	uint64_t seen = 0;
	for (;;) {
		spin(p, gen_moved, seen);
		pthread_mutex_lock(&p->mu);
		while (atomic_load(&p->generation) == seen && !p->stop)
			pthread_cond_wait(&p->wake, &p->mu);
		int stop = p->stop;
		pthread_mutex_unlock(&p->mu);
		if (stop)
			return NULL;
		seen = atomic_load(&p->generation);
		take_tasks(p, wa.id);
		if (atomic_fetch_sub(&p->busy, 1) == 1) {
			pthread_mutex_lock(&p->mu);
			pthread_cond_signal(&p->done);
			pthread_mutex_unlock(&p->mu);
		}
	}
}

enum bg_status tp_create(int n_threads, struct tp_pool **out, struct bg_err *err)
{
	*out = NULL;
	if (n_threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		n_threads = n > 0 ? (int)n : 1;
	}
	if (n_threads > 1024)
		n_threads = 1024;
	struct tp_pool *p = calloc(1, sizeof *p);
	if (!p)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory creating a thread pool");
	p->n_threads = n_threads;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done, NULL);
	atomic_init(&p->generation, 0);
	atomic_init(&p->next_task, 0);
	atomic_init(&p->busy, 0);
	if (n_threads > 1) {
		p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
		if (!p->threads) {
			tp_destroy(p);
			return bg_fail(err, BG_ERR_NOMEM, "out of memory creating a thread pool");
		}
	}
	for (int i = 1; i < n_threads; i++) {
		struct tp_worker_arg *wa = malloc(sizeof *wa);
		if (wa) {
			wa->p = p;
			wa->id = i;
		}
		if (!wa || pthread_create(&p->threads[i - 1], NULL, worker_main, wa) != 0) {
			free(wa);
			p->n_threads = i; /* join only those started */
			tp_destroy(p);
			return bg_fail(err, BG_ERR_NOMEM, "cannot start worker thread %d of %d", i,
				       n_threads);
		}
	}
	*out = p;
	return BG_OK;
}

int tp_n_threads(const struct tp_pool *p)
{
	return p->n_threads;
}

void tp_run(struct tp_pool *p, int32_t n_tasks, tp_task_fn fn, void *arg)
{
	if (n_tasks <= 0)
		return;
	if (p->n_threads == 1 || n_tasks == 1) {
		for (int32_t t = 0; t < n_tasks; t++)
			fn(arg, t, 0);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->n_tasks = n_tasks;
	p->fn = fn;
	p->arg = arg;
	atomic_store(&p->next_task, 0);
	atomic_store(&p->busy, p->n_threads - 1);
	atomic_fetch_add(&p->generation, 1);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);

	take_tasks(p, 0);

	if (spin(p, workers_done, 0))
		return;
	pthread_mutex_lock(&p->mu);
	while (atomic_load(&p->busy) > 0)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void tp_destroy(struct tp_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	for (int i = 1; i < p->n_threads; i++)
		pthread_join(p->threads[i - 1], NULL);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->mu);
	free(p->threads);
	free(p);
}
