/* test_threadpool: every task runs exactly once per tp_run, thread indices stay in range,
 * runs do not overlap, and pools of one thread or of every core work. */
#include "threadpool.h"

#include <stdatomic.h>

#include "check.h"

struct counts {
	atomic_int hits[1000];
	atomic_int bad_thread;
	int n_threads;
};

static void task(void *arg, int32_t t, int32_t thread)
{
	struct counts *c = arg;
	atomic_fetch_add(&c->hits[t], 1);
	if (thread < 0 || thread >= c->n_threads)
		atomic_fetch_add(&c->bad_thread, 1);
}

static void run_pool(int n_threads)
{
	struct tp_pool *p = NULL;
	struct bg_err err = {0};
	CHECK(tp_create(n_threads, &p, &err) == BG_OK, "tp_create(%d): %s", n_threads, err.msg);
	if (!p)
		return;
	int nt = tp_n_threads(p);
	CHECK(n_threads <= 0 ? nt >= 1 : nt == n_threads, "n_threads %d -> %d", n_threads, nt);
	static struct counts c;
	c.n_threads = nt;
	int ok = 1;
	for (int run = 0; run < 300; run++) {
		int n_tasks = (run * 37) % 1000; /* includes 0 and 1 */
		for (int i = 0; i < 1000; i++)
			atomic_store(&c.hits[i], 0);
		tp_run(p, n_tasks, task, &c);
		/* when tp_run returns, every task has finished: counts are final */
		for (int i = 0; i < 1000; i++)
			ok &= atomic_load(&c.hits[i]) == (i < n_tasks ? 1 : 0);
	}
	CHECK(ok, "%d threads: every task ran exactly once in every run", nt);
	CHECK(atomic_load(&c.bad_thread) == 0, "thread index out of range");
	tp_destroy(p);
}

int main(void)
{
	run_pool(1);
	run_pool(2);
	run_pool(5); /* more threads than cores */
	run_pool(0);
	tp_destroy(NULL);
	return check_summary();
}
