// emu_test_streams: when the CUDA emulator (gpu/emu) runs queued stream work, under the
// policy $BG_EMU_STREAMS (late, early or random; tests/e2e_gpu_emu.sh runs all three).
// Every expectation follows from the policy's definition in gpu/emu/inc/emu.h:
//  - a copy queued, then its source overwritten by the host: the copy sees the old value
//    (early), the new one (late), each in some of 200 tries (random);
//  - a result read before the wait: not there (late), there (early);
//  - work runs in stream order, and work behind cudaStreamWaitEvent after the event's work,
//    in every policy (2000 launches, 200 waits between two streams);
//  - cudaEventQuery: not ready (late) then ready, ready at once (early); not ready is not
//    a sticky error;
//  - work on a capturing stream is recorded, not run, even under early.
// Built and run by tests/e2e_gpu_emu.sh: g++ against gpu/emu/inc with the plugin's emu.o.
#include "emu.h"

#include "tests/check.h"

static int policy()
{
	const char *v = getenv("BG_EMU_STREAMS");
	return !v || !*v || !strcmp(v, "late") ? 'l' : v[0];
}

// 1x1 launch of fn on s
static void launch(cudaStream_t s, std::function<void()> fn)
{
	emu_launch(dim3(1), dim3(1), 0, s, std::move(fn));
}

int main()
{
	int p = policy();
	cudaStream_t s, s2;
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
	CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess, "stream 2");
	int *d = nullptr, *h = nullptr;
	CHECK(cudaMalloc(&d, 64 * sizeof(int)) == cudaSuccess, "cudaMalloc");
	CHECK(cudaMallocHost((void **)&h, 64 * sizeof(int)) == cudaSuccess, "cudaMallocHost");

	// the host overwrites the source of a queued copy
	int saw_old = 0, saw_new = 0;
	for (int i = 0; i < 200; i++) {
		h[0] = 1;
		cudaMemcpyAsync(d, h, sizeof(int), cudaMemcpyHostToDevice, s);
		h[0] = 2;
		cudaStreamSynchronize(s);
		saw_old += d[0] == 1;
		saw_new += d[0] == 2;
	}
	CHECK(saw_old + saw_new == 200, "every copy saw 1 or 2");
	if (p == 'l')
		CHECK(saw_new == 200, "late: the copies saw the host's later write (%d of 200)", saw_new);
	if (p == 'e')
		CHECK(saw_old == 200, "early: the copies ran before the host's write (%d of 200)", saw_old);
	if (p == 'r')
		CHECK(saw_old > 0 && saw_new > 0, "random: both (%d early, %d late)", saw_old, saw_new);

	// a result read before the wait
	d[1] = 0;
	cudaMemsetAsync(d + 1, 7, sizeof(int), s);
	int before = d[1];
	cudaStreamSynchronize(s);
	CHECK(d[1] == 0x07070707, "the memset ran by the synchronize");
	if (p == 'l')
		CHECK(before == 0, "late: nothing ran before the wait (%#x)", before);
	if (p == 'e')
		CHECK(before == 0x07070707, "early: it ran when queued (%#x)", before);

	// stream order: 2000 launches append their index
	std::vector<int> log;
	for (int i = 0; i < 2000; i++)
		launch(s, [&log, i]() { log.push_back(i); });
	cudaStreamSynchronize(s);
	bool in_order = log.size() == 2000;
	for (size_t i = 0; in_order && i < log.size(); i++)
		in_order = log[i] == (int)i;
	CHECK(in_order, "2000 launches ran in stream order (%zu ran)", log.size());

	// event waits: s2's work reads what s's work before the event wrote
	cudaEvent_t ev;
	cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	int wrong = 0, early_b = 0, late_b = 0;
	for (int i = 0; i < 200; i++) {
		int x = 0, y = 0;
		launch(s, [&x]() { x = 1; });
		cudaEventRecord(ev, s);
		cudaStreamWaitEvent(s2, ev, 0);
		launch(s2, [&x, &y]() { y = x + 1; });
		early_b += y != 0;
		late_b += y == 0;
		cudaStreamSynchronize(s2); // runs s's work up to the event too
		wrong += y != 2;
		cudaStreamSynchronize(s);
	}
	CHECK(wrong == 0, "work behind a wait ran after the event's work (%d of 200 did not)", wrong);
	if (p == 'r')
		CHECK(early_b > 0 && late_b > 0, "random: waits passed early and late (%d, %d)", early_b,
		      late_b);

	// cudaEventQuery
	cudaMemsetAsync(d + 2, 1, sizeof(int), s);
	cudaEventRecord(ev, s);
	cudaError_t q1 = cudaEventQuery(ev), q2 = cudaEventQuery(ev);
	if (p == 'l')
		CHECK(q1 == cudaErrorNotReady, "late: the first query finds the work queued (%d)", q1);
	if (p == 'e')
		CHECK(q1 == cudaSuccess, "early: the work ran when queued (%d)", q1);
	CHECK(q2 == cudaSuccess && d[2] == 0x01010101, "the second query finds the work done (%d)", q2);
	CHECK(cudaGetLastError() == cudaSuccess, "not ready is not kept as the last error");

	// capture: recorded, not run; the graph runs when launched
	d[3] = 0;
	cudaGraph_t g = nullptr;
	cudaGraphExec_t ge = nullptr;
	cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
	cudaMemsetAsync(d + 3, 2, sizeof(int), s);
	CHECK(d[3] == 0, "work on a capturing stream is not run (%#x)", d[3]);
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess && g, "capture ends");
	CHECK(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess, "instantiate");
	CHECK(d[3] == 0, "nor when the capture ends (%#x)", d[3]);
	cudaGraphLaunch(ge, s);
	cudaStreamSynchronize(s);
	CHECK(d[3] == 0x02020202, "the graph ran (%#x)", d[3]);

	cudaGraphExecDestroy(ge);
	cudaGraphDestroy(g);
	cudaEventDestroy(ev);
	cudaFreeHost(h);
	cudaFree(d);
	cudaStreamDestroy(s2);
	cudaStreamDestroy(s);
	return check_summary();
}
