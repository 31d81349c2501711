/* threadpool: a small fixed pool of worker threads for data-parallel loops.
 *
 * tp_run(pool, n_tasks, fn, arg) calls fn(arg, task, thread) once for every task in
 * [0, n_tasks) and returns when all have finished. The calling thread works too (it is
 * thread 0; workers are 1 .. n_threads-1), so a pool of one thread runs everything inline.
 * Which thread runs which task is not fixed: a task's result must depend only on the task
 * index (the CPU backend relies on this for batch invariance); `thread` exists only to
 * pick per-thread scratch memory. One tp_run at a time per pool (not reentrant).
 *
 * Tasks are handed out in increasing index order: when any thread starts task t, every
 * task below t has been started. The CPU backend's matmul dispatch relies on this (its
 * first tasks are a prologue that the later tasks wait for, polling): a pool that handed
 * tasks out otherwise would need a real dependency between them instead.
 */
#ifndef BG_THREADPOOL_H
#define BG_THREADPOOL_H

#include <stdint.h>

#include "status.h"

struct tp_pool;

typedef void (*tp_task_fn)(void *arg, int32_t task, int32_t thread);

/* n_threads <= 0 means every online core. On failure *out is NULL. */
enum bg_status tp_create(int n_threads, struct tp_pool **out, struct bg_err *err);

/* The number of threads, the caller included (>= 1). */
int tp_n_threads(const struct tp_pool *p);

/* Runs every task; returns after the last one has finished. */
void tp_run(struct tp_pool *p, int32_t n_tasks, tp_task_fn fn, void *arg);

void tp_destroy(struct tp_pool *p); /* NULL-safe; joins the workers */

#endif
