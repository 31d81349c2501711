// emu.cpp: the emulator's runtime (gpu/emu/inc/emu.h says what it does and why).
#include "emu.h"

#include <csignal>
#include <cxxabi.h>
#include <deque>
#include <dlfcn.h>
#include <map>
#include <random>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

uint3e threadIdx, blockIdx;
dim3 blockDim, gridDim;

// ---- errors ---------------------------------------------------------------------------
static cudaError_t last_error = cudaSuccess;
static cudaError_t fail(cudaError_t e)
{
	last_error = e;
	return e;
}
cudaError_t cudaGetLastError()
{
	cudaError_t e = last_error;
	last_error = cudaSuccess;
	return e;
}
cudaError_t cudaPeekAtLastError() { return last_error; }
const char *cudaGetErrorName(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "cudaSuccess";
	case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
	case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
	case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
	case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
	case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
	case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
	case cudaErrorNotReady: return "cudaErrorNotReady";
	case cudaErrorCooperativeLaunchTooLarge: return "cudaErrorCooperativeLaunchTooLarge";
	default: return "cudaErrorUnknown";
	}
}
const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	case cudaErrorInsufficientDriver:
		return "CUDA driver version is insufficient for CUDA runtime version";
	case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
	case cudaErrorStreamCaptureInvalidated:
		return "operation failed due to a previous error during capture";
	case cudaErrorNotReady: return "device not ready";
	case cudaErrorCooperativeLaunchTooLarge: return "too many blocks in cooperative launch";
	default: return "unknown error";
	}
}

// ---- the device -------------------------------------------------------------------------
static const size_t TOTAL_MEM = (size_t)81559 << 20; // what an H100 80GB SXM reports
static const size_t POISON_MAX = (size_t)64 << 20;  // allocations filled with 0xff up to this
static std::map<void *, size_t> device_allocs;
static size_t device_used;

static int driver_version()
{
	const char *v = getenv("BG_EMU_DRIVER_VERSION");
	return v && *v ? atoi(v) : CUDART_VERSION;
}
cudaError_t cudaDriverGetVersion(int *v)
{
	*v = driver_version();
	return cudaSuccess;
}
// $BG_EMU_DRIVER_VERSION (e.g. 12020 for 12.2) plays an older driver, which makes
// cudaGetDeviceCount fail as real CUDA does; "0" plays no driver.
cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 0;
	if (driver_version() < CUDART_VERSION)
		return fail(cudaErrorInsufficientDriver);
	*n = 1;
	return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : fail(cudaErrorInvalidValue); }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int)
{
	memset(p, 0, sizeof *p);
	strcpy(p->name, "emu H100");
	p->multiProcessorCount = 132;
	p->major = 9;
	p->minor = 0;
	p->totalGlobalMem = TOTAL_MEM;
	p->sharedMemPerBlock = 48 << 10;
	p->sharedMemPerBlockOptin = 227 << 10;
	p->maxThreadsPerBlock = 1024;
	p->warpSize = 32;
	p->regsPerBlock = 65536;
	p->regsPerMultiprocessor = 65536;
	p->maxThreadsPerMultiProcessor = 2048;
	p->maxBlocksPerMultiProcessor = 32;
	p->sharedMemPerMultiprocessor = 228 << 10;
	p->reservedSharedMemPerBlock = 1 << 10;
	p->cooperativeLaunch = 1;
	return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = nullptr;
	if (n > TOTAL_MEM - device_used)
		return fail(cudaErrorMemoryAllocation);
	size_t len = n ? n : 1;
	void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (m == MAP_FAILED)
		return fail(cudaErrorMemoryAllocation);
	if (len <= POISON_MAX) { /* written whole: huge pages, made in one call (a page fault
				   * each, 4 KiB at a time, cost more than the fill in a VM) */
		madvise(m, len, MADV_HUGEPAGE);
		madvise(m, len, MADV_POPULATE_WRITE);
		memset(m, 0xff, len);
	}
	device_allocs[m] = len;
	device_used += len;
	*p = m;
	return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
	*free_b = TOTAL_MEM - device_used;
	*total_b = TOTAL_MEM;
	return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n)
{
	*p = malloc(n ? n : 1);
	return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

// ---- streams, events, graphs --------------------------------------------------------------
// A stream is a queue of work. When queued work runs is the policy $BG_EMU_STREAMS:
//   late (default): when the host waits for it, the latest a GPU may run it: a host that
//     reads results before the wait, or overwrites what queued work still reads, is caught;
//   early: at once, when it is queued, the earliest: a host that writes, after queueing,
//     what the work was meant to see (a GPU may have run it already) is caught;
//   random: each piece of work, when queued, runs at once (with the work queued before it)
//     or stays queued, by the seed $BG_EMU_SEED: both kinds, at random places.
// In every policy work runs in stream order, and work behind a cudaStreamWaitEvent runs at
// once only if the event's work has run. Each piece of work gets a ticket; an event
// remembers the ticket of the last work queued before it.
struct emu_graph_node {
	cudaGraphNodeType type;
};
struct emu_graph {
	std::vector<std::function<void()>> ops;
	std::vector<emu_graph_node> nodes; // one per op, in capture order
};
struct emu_work {
	std::function<void()> fn; // empty for a wait
	emu_stream *src;	  // a wait: for src's work up to ticket (else null)
	uint64_t ticket;
};
struct emu_stream {
	std::deque<emu_work> q;
	uint64_t queued = 0, done = 0;
	emu_graph *capture = nullptr;
	bool capture_invalid = false;
};
struct emu_event {
	emu_stream *s = nullptr;
	uint64_t ticket = 0;
};
static std::vector<emu_stream *> streams;

enum { STREAMS_LATE, STREAMS_EARLY, STREAMS_RANDOM };
// $BG_EMU_STREAMS, printed when set (as $BG_EMU_SEED is)
static int streams_policy()
{
	static const int p = [] {
		const char *v = getenv("BG_EMU_STREAMS"), *seed = getenv("BG_EMU_SEED");
		if (!v || !*v)
			return (int)STREAMS_LATE;
		int q = !strcmp(v, "late")	  ? STREAMS_LATE
			: !strcmp(v, "early")  ? STREAMS_EARLY
			: !strcmp(v, "random") ? STREAMS_RANDOM
					       : -1;
		if (q < 0) {
			fprintf(stderr, "emu: BG_EMU_STREAMS=%s: not late, early or random\n", v);
			abort();
		}
		fprintf(stderr, "emu: BG_EMU_STREAMS=%s (when queued work runs)", v);
		if (q == STREAMS_RANDOM)
			fprintf(stderr, ", seed %s", seed && *seed ? seed : "1");
		fputc('\n', stderr);
		return q;
	}();
	return p;
}
// whether the work just queued runs now; the draws have their own generator, so that the
// thread and block orders of a seed are those of the other policies
static bool runs_now()
{
	static std::mt19937_64 r = [] {
		const char *v = getenv("BG_EMU_SEED");
		return std::mt19937_64((v && *v ? strtoull(v, nullptr, 10) : 1) ^ 0x5eedu);
	}();
	int p = streams_policy();
	return p == STREAMS_EARLY || (p == STREAMS_RANDOM && (r() >> 63));
}

// Runs s's work up to ticket. A wait whose event's work has not run makes that work run
// (force: the host waits for all of it) or stops there (the policies' early runs).
static void run_until(emu_stream *s, uint64_t ticket, bool force = true)
{
	while (s->done < ticket && !s->q.empty()) {
		emu_work &w = s->q.front();
		if (w.src && w.src->done < w.ticket) {
			if (!force)
				return;
			run_until(w.src, w.ticket);
		}
		std::function<void()> fn = std::move(w.fn);
		s->q.pop_front();
		if (fn)
			fn();
		s->done++;
	}
}
static void run_all()
{
	for (emu_stream *s : streams)
		run_until(s, s->queued);
}
// Work for stream s: recorded while s captures, run now on the legacy stream, else queued
// (and maybe run at once: the policy).
static void enqueue(emu_stream *s, std::function<void()> op, emu_stream *src = nullptr,
		    uint64_t ticket = 0, cudaGraphNodeType type = cudaGraphNodeTypeKernel)
{
	if (!s) {
		if (src)
			run_until(src, ticket);
		else
			op();
		return;
	}
	if (s->capture) {
		if (src) { // captured waits are not used by gpu/; replayed, one runs the work it waits for
			op = [src, ticket]() { run_until(src, ticket); };
			type = cudaGraphNodeTypeWaitEvent;
		}
		s->capture->ops.push_back(std::move(op));
		s->capture->nodes.push_back({type});
		return;
	}
	s->q.push_back({std::move(op), src, ticket});
	s->queued++;
	if (runs_now())
		run_until(s, s->queued, false);
}
static emu_stream *capturing_stream()
{
	for (emu_stream *s : streams)
		if (s->capture)
			return s;
	return nullptr;
}
// A call that would wait for a capturing stream: refused, and the capture is invalid.
static bool capture_violation(emu_stream *waits_for)
{
	emu_stream *c = capturing_stream();
	if (!c || (waits_for && waits_for != c))
		return false;
	c->capture_invalid = true;
	fail(cudaErrorStreamCaptureUnsupported);
	return true;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, int)
{
	*s = new emu_stream();
	streams.push_back(*s);
	return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	if (!s)
		return fail(cudaErrorInvalidValue);
	run_until(s, s->queued);
	streams.erase(std::find(streams.begin(), streams.end(), s));
	delete s->capture;
	delete s;
	return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	if (capture_violation(s))
		return cudaErrorStreamCaptureUnsupported;
	if (s)
		run_until(s, s->queued);
	return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize()
{
	if (capture_violation(nullptr))
		return cudaErrorStreamCaptureUnsupported;
	run_all();
	return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, int)
{
	*e = new emu_event();
	return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	delete e;
	return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	if (s && s->capture)
		return fail(cudaErrorInvalidValue); // events inside graphs: not used by gpu/
	e->s = s;
	e->ticket = s ? s->queued : 0;
	return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	if (e->s && capture_violation(e->s))
		return cudaErrorStreamCaptureUnsupported;
	if (e->s)
		run_until(e->s, e->ticket);
	return cudaSuccess;
}
// Not ready: the work then runs (a host polling the event gets there), the latest it can.
cudaError_t cudaEventQuery(cudaEvent_t e)
{
	if (!e->s || e->s->done >= e->ticket)
		return cudaSuccess;
	run_until(e->s, e->ticket);
	return cudaErrorNotReady; // not an error: cudaGetLastError does not keep it
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned)
{
	if (e->s)
		enqueue(s, nullptr, e->s, e->ticket);
	return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, int)
{
	if (!s || s->capture)
		return fail(cudaErrorInvalidValue);
	s->capture = new emu_graph();
	s->capture_invalid = false;
	return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
	*g = nullptr;
	if (!s || !s->capture)
		return fail(cudaErrorInvalidValue);
	emu_graph *graph = s->capture;
	s->capture = nullptr;
	if (s->capture_invalid) {
		delete graph;
		return fail(cudaErrorStreamCaptureInvalidated);
	}
	*g = graph;
	return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long)
{
	*e = new emu_graph(*g);
	return cudaSuccess;
}
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n)
{
	if (!g || !n)
		return fail(cudaErrorInvalidValue);
	size_t have = g->nodes.size();
	for (size_t i = 0; nodes && i < *n; i++) // CUDA: entries past the count become NULL
		nodes[i] = i < have ? &g->nodes[i] : nullptr;
	*n = have;
	return cudaSuccess;
}
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type)
{
	if (!node || !type)
		return fail(cudaErrorInvalidValue);
	*type = node->type;
	return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	delete g;
	return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t g)
{
	delete g;
	return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t s)
{
	for (auto &op : g->ops)
		enqueue(s, op);
	return cudaSuccess;
}

// ---- memory operations ----------------------------------------------------------------------
cudaError_t cudaFree(void *p)
{
	if (!p)
		return cudaSuccess;
	if (capture_violation(nullptr)) // cudaFree waits for the device
		return cudaErrorStreamCaptureUnsupported;
	run_all();
	auto it = device_allocs.find(p);
	if (it == device_allocs.end()) {
		fprintf(stderr, "emu: cudaFree of %p, which cudaMalloc did not return\n", p);
		abort();
	}
	munmap(p, it->second);
	device_used -= it->second;
	device_allocs.erase(it);
	return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p)
{
	if (capture_violation(nullptr))
		return cudaErrorStreamCaptureUnsupported;
	run_all();
	free(p);
	return cudaSuccess;
}
// The legacy stream: runs now, without waiting for the (non-blocking) streams.
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind)
{
	memcpy(d, s, n);
	return cudaSuccess;
}
cudaError_t cudaMemset(void *d, int v, size_t n)
{
	memset(d, v, n);
	return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t st)
{
	enqueue(st, [=]() { memcpy(d, s, n); }, nullptr, 0, cudaGraphNodeTypeMemcpy);
	return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st)
{
	enqueue(st, [=]() { memset(d, v, n); }, nullptr, 0, cudaGraphNodeTypeMemset);
	return cudaSuccess;
}

// ---- kernels: fibers, barriers, random orders ---------------------------------------------
// A fiber is one thread of the block being run. Each fiber loops for good: run the kernel
// body for its thread, mark itself done, switch back to the scheduler; the next block
// switches to it again. Nothing is set up per block or per launch (fibers and stacks are
// kept), and a switch is a few register moves: glibc's swapcontext makes a sigprocmask
// system call at every switch, which was 80% of the emulator's time (perf).
namespace {
#if defined(__x86_64__)
// switches stacks: pushes the callee-saved registers, saves the stack pointer in *from,
// loads *to and pops the registers saved there (the System V ABI's callee-saved set; the
// kernels change neither MXCSR nor the x87 control word).
extern "C" void emu_ctx_switch(void **from, void *to);
asm(".text\n.globl emu_ctx_switch\n.hidden emu_ctx_switch\n.type emu_ctx_switch,@function\n"
    "emu_ctx_switch:\n"
    "pushq %rbp\npushq %rbx\npushq %r12\npushq %r13\npushq %r14\npushq %r15\n"
    "movq %rsp, (%rdi)\nmovq %rsi, %rsp\n"
    "popq %r15\npopq %r14\npopq %r13\npopq %r12\npopq %rbx\npopq %rbp\nret\n"
    ".size emu_ctx_switch,.-emu_ctx_switch\n");
struct Ctx {
	void *sp;
};
void ctx_switch(Ctx *from, Ctx *to) { emu_ctx_switch(&from->sp, to->sp); }
// a context that starts fn on stack[n]: six zero registers, then fn as the return address
// (with a null one above it, so that fn starts with the stack aligned as after a call)
void ctx_make(Ctx *c, char *stack, size_t n, void (*fn)())
{
	uintptr_t top = ((uintptr_t)stack + n) & ~(uintptr_t)15;
	void **sp = (void **)top;
	*--sp = nullptr;
	*--sp = (void *)fn;
	for (int i = 0; i < 6; i++)
		*--sp = nullptr;
	c->sp = sp;
}
#else
struct Ctx {
	ucontext_t uc;
};
void ctx_switch(Ctx *from, Ctx *to) { swapcontext(&from->uc, &to->uc); }
void ctx_make(Ctx *c, char *stack, size_t n, void (*fn)())
{
	getcontext(&c->uc);
	c->uc.uc_stack.ss_sp = stack;
	c->uc.uc_stack.ss_size = n;
	c->uc.uc_link = nullptr;
	makecontext(&c->uc, fn, 0);
}
#endif
struct Group {
	int count = 0, gen = 0, size = 0;
};
struct Fiber {
	Ctx ctx;
	uint3e tid;
	bool done;
	bool waited, parked; // a programmatic dependent launch: cudaGridDependencySynchronize
	const Group *blocked; // the barrier it waits at (until its gen moves past wait_gen)
	int wait_gen;
	char *stack = nullptr; // until the fiber is made (make_fibers)
};
std::vector<Fiber> fibers;
Ctx sched;
int cur = -1;
std::function<void()> body;
Group blockg;
std::vector<Group> warpg;
// the named barriers 1..15 (bar.sync id, n; gpu_part_sync), [0] unused: a group's size is
// the n of the generation's first arrival, and a later arrival with another n aborts
std::vector<Group> namedg;
// A shuffle's values: two slots a thread, [2][threads of the block], used in turn by its
// shuffles (xpar: the thread's next one), so a shuffle needs one warp barrier, not two: a
// lane writes slot p of shuffle k + 2 only after the barrier of shuffle k + 1, which every
// lane reaches after reading slot p of shuffle k (the lanes of a warp run the same
// shuffles: __shfl_*_sync with the full mask).
std::vector<uint64_t> xchg;
std::vector<uint8_t> xpar;
uint64_t block_gen;    // the running block's number: shared memory is refilled once a block
uint64_t block_starts; // blocks started so far (each block's block_gen, unique)
std::map<void *, uint64_t> shared_gen;
std::map<void *, size_t> shared_size; // every static __shared__ variable met: its bytes
std::mt19937_64 &rng()
{
	static std::mt19937_64 r = [] {
		const char *v = getenv("BG_EMU_SEED");
		uint64_t seed = v && *v ? strtoull(v, nullptr, 10) : 1;
		if (v && *v)
			fprintf(stderr, "emu: BG_EMU_SEED=%llu (thread and block order)\n",
				(unsigned long long)seed);
		return std::mt19937_64(seed);
	}();
	return r;
}
// A round of run_block: the threads in a random order, each that can go on runs to its next
// barrier. A thread that stops (at a barrier, or done) switches straight to the next one of
// the round that can go on, and to the scheduler only when the round is over: one switch a
// thread instead of two (the switch back is most of a barrier's cost).
struct {
	std::vector<int> order;
	size_t pos;
	int ran, left;
	int slept;		  // threads of the round that called __nanosleep (emu_nanosleep)
	int rounds;		  // rounds of the running block's turn (block_rounds)
	uint64_t state = rng()(); // splitmix64
	// uniform in [0, n) (Lemire's multiply; its bias, < n / 2^32, does not matter here)
	int draw(int n)
	{
		uint64_t z = (state += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		return (int)(((z >> 32) * (uint64_t)n) >> 32);
	}
} this_round;
int round_next(); // the next thread of the round that can go on (made current), or -1
void hop()	  // from the current thread to the next one of the round, or the scheduler
{
	Fiber &me = fibers[cur];
	const int t = round_next();
	ctx_switch(&me.ctx, t < 0 ? &sched : &fibers[t].ctx);
}
void fiber_main()
{
	for (;;) {
		body();
		fibers[cur].done = true;
		this_round.left--;
		hop();
	}
}
void wait(Group &g)
{
	int gen = g.gen;
	if (++g.count == g.size) {
		g.count = 0;
		g.gen++;
		return;
	}
	fibers[cur].blocked = &g;
	fibers[cur].wait_gen = gen;
	while (g.gen == gen)
		hop();
	fibers[cur].blocked = nullptr;
}
// the running thread's flat index in its block: run_block numbers fibers in that order
int flat()
{
	return cur;
}
} // namespace

void emu_wait_block() { wait(blockg); }
void emu_bar_sync(int id, int n)
{
	if (id < 1 || id > 15 || n < 32 || n % 32 != 0 || n > (int)fibers.size()) {
		fprintf(stderr,
			"emu: bar.sync %d, %d: the id must be 1..15 and the count a multiple "
			"of 32 of at most the block's %zu threads\n",
			id, n, fibers.size());
		abort();
	}
	Group &g = namedg[(size_t)id];
	if (g.count == 0)
		g.size = n;
	else if (g.size != n) {
		fprintf(stderr, "emu: bar.sync %d: counts %d and %d in one generation\n", id,
			g.size, n);
		abort();
	}
	wait(g);
}
void emu_wait_warp() { wait(warpg[flat() / 32]); }
void emu_xchg_put(uint64_t v)
{
	const int t = flat();
	xchg[(size_t)xpar[t] * fibers.size() + t] = v;
}
uint64_t emu_xchg_get(int lane)
{
	const int t = flat();
	const uint64_t v = xchg[(size_t)xpar[t] * fibers.size() + (t / 32) * 32 + lane];
	xpar[t] ^= 1;
	return v;
}
// nvcuda::wmma (inc/mma.h): the fragment layouts, and the warp exchange mma_sync uses
static std::vector<float> warp_buf; // [threads of the block * 16]
static const int *wmma_pos_init()
{
	static int p[3 * 256];
	for (int u = 0; u < 3; u++) {
		for (int k = 0; k < 256; k++)
			p[u * 256 + k] = k;
		if (getenv("BG_EMU_SEED") && *getenv("BG_EMU_SEED"))
			std::shuffle(p + u * 256, p + (u + 1) * 256, rng());
	}
	return p;
}
extern const int *const emu_wmma_pos_tab; // mma.h
const int *const emu_wmma_pos_tab = wmma_pos_init();
void emu_warp_gather(const float *mine, int n, float *all)
{
	int t = flat(), w0 = (t / 32) * 32;
	emu_wait_warp(); // every lane is here (and done with the previous exchange)
	memcpy(&warp_buf[(size_t)t * 16], mine, (size_t)n * sizeof(float));
	emu_wait_warp();
	for (int l = 0; l < 32; l++)
		memcpy(all + l * n, &warp_buf[(size_t)(w0 + l) * 16], (size_t)n * sizeof(float));
}
// ---- occupancy ------------------------------------------------------------------------------
bool emu_probe_on;
static struct {
	int max_threads, min_blocks;
	size_t smem;
} probe;
void emu_probe_begin()
{
	probe = {};
	emu_probe_on = true;
}
void emu_probe_bounds(int max_threads, int min_blocks)
{
	if (emu_probe_on)
		probe = {max_threads, min_blocks, 0};
}

// Blocks of the kernel just probed that an SM holds, as cuda_occupancy.h computes it for
// compute capability 9.0 with the default shared-memory carveout: the least of
//  - 32 blocks;
//  - 64 warps (2048 threads) / the block's warps;
//  - registers: 4 sub-partitions of 16384 each; a warp takes regs x 32 rounded up to 256;
//    an SM holds 4 x floor(16384 / that) warps, / the block's warps (0 if the block's
//    warps, rounded up to 4, need more than 65536);
//  - shared memory: 228 KiB / (static + dynamic + 1 KiB reserved a block, rounded up to
//    128 bytes); 0 if the dynamic part is over the kernel's
//    cudaFuncAttributeMaxDynamicSharedMemorySize (its launch would fail).
// A block over the kernel's __launch_bounds__ threads holds 0 (its launch would fail).
// Registers: ptxas's count is unknown here; the figure is what __launch_bounds__(T, B)
// lets ptxas use, the most r (in steps of 8, the allocation unit) with B blocks of T
// threads in the register file (65536 / (B x T rounded up to warps)), and at most 128,
// the budget tests/gpu_gates.sh holds every kernel to (ptxas may use fewer: an H100's
// answer is then at least this one).
// ---- per-kernel attributes and dynamic shared memory ------------------------------------------
static const size_t SMEM_DEFAULT = 48 << 10, SMEM_OPTIN = 227 << 10;
struct kernel_info {
	bool probed = false; /* static_smem known */
	size_t static_smem = 0;
	long max_dyn = -1; /* cudaFuncAttributeMaxDynamicSharedMemorySize; -1: never set */
};
static std::map<const void *, kernel_info> kernels;
// the kernel's dynamic shared memory limit: the attribute, or 48 KiB less its static part
static size_t max_dyn_smem(const kernel_info &k)
{
	if (k.max_dyn >= 0)
		return (size_t)k.max_dyn;
	return k.static_smem < SMEM_DEFAULT ? SMEM_DEFAULT - k.static_smem : 0;
}
cudaError_t emu_func_set_attr(const void *key, int attr, int value)
{
	emu_probe_on = false;
	kernel_info &k = kernels[key];
	k.probed = true;
	k.static_smem = probe.smem;
	if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
	    (size_t)value + k.static_smem > SMEM_OPTIN)
		return fail(cudaErrorInvalidValue);
	k.max_dyn = value;
	return cudaSuccess;
}
// the running launch's dynamic shared memory, dyn_bytes, then DYN_GUARD bytes that a block
// must leave as they were (0xff): a block that writes past its dynamic shared memory aborts
// (a GPU faults, or corrupts another block's), one that reads past it reads NaN
static const size_t DYN_GUARD = 16 << 10;
static std::vector<uint4> dyn_buf;
static size_t dyn_bytes;
static void dyn_check()
{
	const unsigned char *g = (const unsigned char *)dyn_buf.data() + dyn_bytes;
	for (size_t i = 0; i < DYN_GUARD; i++)
		if (g[i] != 0xff) {
			fprintf(stderr,
				"emu: block (%u, %u, %u) wrote past its %zu bytes of dynamic "
				"shared memory (at byte %zu)\n",
				blockIdx.x, blockIdx.y, blockIdx.z, dyn_bytes, dyn_bytes + i);
			abort();
		}
}
// NULL when the launch asked for none: a kernel that uses it then crashes (a GPU faults)
void *emu_dyn_shared()
{
	return dyn_bytes ? (void *)dyn_buf.data() : nullptr;
}

cudaError_t emu_occupancy(const void *key, int *n, int block, size_t dyn_smem)
{
	emu_probe_on = false;
	kernel_info &ki = kernels[key];
	ki.probed = true;
	ki.static_smem = probe.smem;
	cudaDeviceProp p;
	cudaGetDeviceProperties(&p, 0);
	*n = 0;
	if (block <= 0)
		return fail(cudaErrorInvalidValue);
	if (block > p.maxThreadsPerBlock || (probe.max_threads && block > probe.max_threads))
		return cudaSuccess;
	const int warps = (block + p.warpSize - 1) / p.warpSize;
	int regs = 128;
	if (probe.min_blocks > 0) {
		int bt = (probe.max_threads + p.warpSize - 1) / p.warpSize * p.warpSize;
		regs = std::min(regs, p.regsPerMultiprocessor / (probe.min_blocks * bt) / 8 * 8);
	}
	const int warp_regs = (regs * p.warpSize + 255) / 256 * 256;
	if (warp_regs * ((warps + 3) / 4 * 4) > p.regsPerBlock)
		return cudaSuccess; /* over a block's registers (counted as whole sub-partitions) */
	const int by_regs = 4 * ((p.regsPerMultiprocessor / 4) / warp_regs) / warps;
	const size_t smem = (probe.smem + dyn_smem + p.reservedSharedMemPerBlock + 127) / 128 * 128;
	const int by_smem =
	    dyn_smem > max_dyn_smem(ki) ? 0 : (int)(p.sharedMemPerMultiprocessor / smem);
	*n = std::min({p.maxBlocksPerMultiProcessor, p.maxThreadsPerMultiProcessor / p.warpSize / warps,
		       by_regs, by_smem});
	return cudaSuccess;
}

void emu_shared_init(void *p, size_t n)
{
	if (emu_probe_on) {
		probe.smem += n;
		return;
	}
	shared_size[p] = n;
	uint64_t &g = shared_gen[p];
	if (g != block_gen) {
		memset(p, 0xff, n);
		g = block_gen;
	}
}

// ---- programmatic dependent launch ---------------------------------------------------------
// The kernel's contract (gpu/pdl.cuh), checked while its blocks run: in a checked block
// every cudaMalloc mapping is PROT_NONE while a thread runs before its
// cudaGridDependencySynchronize (the scheduler switches it per fiber, lazily: run_block),
// and the SIGSEGV handler names what touched it. A thread's wait parks it until no thread
// of the block can run before its own wait (the gate), so that memory changes protection
// twice a block, not at every switch: one legal schedule of the GPU's, where the waits
// return once the kernel before has completed.
// Cost (bench/results/p17-2026-11-30.md): two mprotect walks a checked block, over the
// pages the allocations have touched; so by default one block a launch is checked, the
// first of the seed's order ($BG_EMU_SEED), every block with $BG_EMU_PDL=all.
static struct {
	bool on;	// the running launch is a programmatic dependent launch
	bool strict;	// the running block is checked
	bool open;	// strict: the gate is open (the parked threads went on)
	bool none;	// device memory is PROT_NONE now
	bool waited;	// a thread of the running block waited
	const char *name; // the running kernel's name (the handler prints it)
} pdl;
static const void *cur_key; // the running kernel (every launch): messages
static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
static std::map<const void *, std::string> kernel_names;
// the kernel's name from the dynamic symbol table (the plugin's kernels; a test program's
// with -rdynamic), demangled, else its address
static const char *kernel_name(const void *key)
{
	auto it = kernel_names.find(key);
	if (it != kernel_names.end())
		return it->second.c_str();
	Dl_info di;
	std::string n;
	if (key && dladdr(key, &di) && di.dli_sname && di.dli_saddr == key) {
		int st = 1;
		char *d = abi::__cxa_demangle(di.dli_sname, nullptr, nullptr, &st);
		n = st == 0 && d ? d : di.dli_sname;
		free(d);
	} else {
		char b[64];
		snprintf(b, sizeof b, "kernel at %p", key);
		n = b;
	}
	return kernel_names.emplace(key, n).first->second.c_str();
}
static bool pdl_check_all()
{
	static const bool all = [] {
		const char *v = getenv("BG_EMU_PDL");
		if (!v || !*v || !strcmp(v, "first"))
			return false;
		if (strcmp(v, "all")) {
			fprintf(stderr, "emu: BG_EMU_PDL=%s: not first or all\n", v);
			abort();
		}
		fprintf(stderr, "emu: BG_EMU_PDL=all (every block of a dependent launch checked)\n");
		return true;
	}();
	return all;
}
// the allocation holding p (pages: or the rest of its last page, which mprotect covers
// too), or device_allocs.end()
static std::map<void *, size_t>::const_iterator device_alloc_of(const void *p, bool pages = false)
{
	auto it = device_allocs.upper_bound(const_cast<void *>(p));
	if (it == device_allocs.begin())
		return device_allocs.end();
	--it;
	const size_t n = pages ? (it->second + page - 1) / page * page : it->second;
	return (const char *)p < (const char *)it->first + n ? it : device_allocs.end();
}
static struct sigaction segv_old;
static void segv_handler(int sig, siginfo_t *si, void *)
{
	auto it = pdl.none ? device_alloc_of(si->si_addr, true) : device_allocs.end();
	if (it == device_allocs.end()) { /* not ours: the access faults again, as it would have */
		sigaction(sig, &segv_old, nullptr);
		return;
	}
	fprintf(stderr,
		"emu: %s (a programmatic dependent launch), block (%u, %u, %u), thread (%u, %u, "
		"%u): touched device memory at %p (byte %zu of a %zu-byte cudaMalloc allocation) "
		"before cudaGridDependencySynchronize: the kernel before it may still be running\n",
		pdl.name, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z,
		si->si_addr, (size_t)((const char *)si->si_addr - (const char *)it->first), it->second);
	abort();
}
// every cudaMalloc mapping PROT_NONE (none) or back to read-write; adjacent mappings in one
// call
static void pdl_protect(bool none)
{
	if (none == pdl.none)
		return;
	static bool handler = [] {
		static std::vector<char> alt(1 << 16);
		stack_t ss = {};
		ss.ss_sp = alt.data();
		ss.ss_size = alt.size();
		sigaltstack(&ss, nullptr);
		struct sigaction sa = {};
		sa.sa_sigaction = segv_handler;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		return sigaction(SIGSEGV, &sa, &segv_old) == 0;
	}();
	(void)handler;
	const int prot = none ? PROT_NONE : PROT_READ | PROT_WRITE;
	char *run = nullptr;
	size_t len = 0;
	auto flush = [&]() {
		if (run && mprotect(run, len, prot) != 0) {
			perror("emu: mprotect");
			abort();
		}
	};
	for (const auto &a : device_allocs) {
		char *p = (char *)a.first;
		size_t n = (a.second + page - 1) / page * page;
		if (run && run + len == p) {
			len += n;
			continue;
		}
		flush();
		run = p;
		len = n;
	}
	flush();
	pdl.none = none;
}
void emu_pdl_wait()
{
	if (!pdl.on) /* a plain launch: returns at once, as on a GPU */
		return;
	pdl.waited = true;
	Fiber &f = fibers[cur];
	if (f.waited)
		return;
	f.waited = true;
	if (!pdl.strict)
		return;
	if (!pdl.open) {
		f.parked = true;
		while (!pdl.open)
			hop();
		f.parked = false;
	}
	pdl_protect(false);
}
void emu_prefetch_l2(const void *p)
{
	if (device_alloc_of(p) == device_allocs.end()) {
		fprintf(stderr, "emu: %s, block (%u, %u, %u), thread (%u, %u, %u): prefetch of %p, "
			"which is in no cudaMalloc allocation\n", kernel_name(cur_key), blockIdx.x,
			blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z, p);
		abort();
	}
}
bool emu_launch_attrs(const cudaLaunchConfig_t *cfg, bool *pdl, bool *coop)
{
	*pdl = *coop = false;
	bool ok = cfg && (cfg->numAttrs == 0 || cfg->attrs);
	for (unsigned i = 0; ok && i < cfg->numAttrs; i++) {
		const cudaLaunchAttribute &a = cfg->attrs[i];
		if (a.id == cudaLaunchAttributeProgrammaticStreamSerialization)
			*pdl = a.val.programmaticStreamSerializationAllowed != 0;
		else if (a.id == cudaLaunchAttributeCooperative)
			*coop = a.val.cooperative != 0;
		else if (a.id != cudaLaunchAttributeIgnore)
			ok = false;
	}
	/* both: not emulated (a dependent launch's early start and the residency guarantee) */
	if (!ok || (*pdl && *coop))
		return fail(cudaErrorInvalidValue), false;
	return true;
}

namespace
{
int round_next()
{
	while (this_round.pos < this_round.order.size()) {
		const int t = this_round.order[this_round.pos++];
		Fiber &f = fibers[t];
		if (f.done || (f.blocked && f.blocked->gen == f.wait_gen) ||
		    (f.parked && !pdl.open))
			continue;
		if (pdl.strict)
			pdl_protect(!f.waited);
		this_round.ran++;
		cur = t;
		threadIdx = f.tid;
		return t;
	}
	return -1;
}
} // namespace
// A block's start: its barriers, threads and dynamic shared memory afresh (fibers: the
// block's threads, made by the caller).
static void block_begin(int nt, dim3 block)
{
	block_gen = ++block_starts;
	if (dyn_bytes)
		memset(dyn_buf.data(), 0xff, dyn_bytes + DYN_GUARD);
	blockg = Group();
	blockg.size = nt;
	warpg.assign((nt + 31) / 32, Group());
	for (size_t w = 0; w < warpg.size(); w++)
		warpg[w].size = std::min(32, nt - (int)w * 32);
	namedg.assign(16, Group());
	for (int t = 0; t < nt; t++) {
		Fiber &f = fibers[t];
		f.tid = {(unsigned)(t % block.x), (unsigned)((t / block.x) % block.y),
			 (unsigned)(t / (block.x * block.y))};
		f.done = false;
		f.blocked = nullptr;
		f.waited = f.parked = false;
		xpar[t] = 0;
	}
	pdl.waited = false;
	pdl.open = !pdl.strict;
	this_round.order.resize(nt);
	for (int t = 0; t < nt; t++)
		this_round.order[t] = t;
	this_round.left = nt;
}

// Rounds of the running block until its threads are done (true), or until a round in which
// every thread that ran called __nanosleep (false: they wait for another block).
static bool block_rounds(int nt)
{
	this_round.rounds = 0;
	while (this_round.left) {
		this_round.rounds++;
		// a round: every thread that can go on runs to its next barrier, in a random order
		// (Fisher-Yates from a generator seeded by rng(): the per-round draws are many)
		for (int i = nt - 1; i > 0; i--)
			std::swap(this_round.order[i], this_round.order[this_round.draw(i + 1)]);
		this_round.pos = 0;
		this_round.ran = this_round.slept = 0;
		const int t = round_next();
		if (t >= 0)
			ctx_switch(&sched, &fibers[t].ctx); // back here when the round is over
		const int ran = this_round.ran;
		if (!ran && pdl.strict && !pdl.open) { // every thread past its wait or parked there
			pdl.open = true;
			continue;
		}
		if (!ran) { // CUDA hangs (or worse) here: say so rather than spin
			fprintf(
			    stderr,
			    "emu: block (%u, %u, %u): %d threads wait at a barrier that the others "
			    "never reach\n",
			    blockIdx.x, blockIdx.y, blockIdx.z, this_round.left);
			abort();
		}
		if (ran == this_round.slept)
			return false;
	}
	return true;
}

// A block's end: the checks of its exit.
static void block_end()
{
	if (pdl.strict)
		pdl_protect(false);
	if (pdl.on && !pdl.waited) {
		fprintf(stderr,
			"emu: %s (a programmatic dependent launch): block (%u, %u, %u) exited without "
			"cudaGridDependencySynchronize: the kernel after it would not be ordered after "
			"the one before it\n",
			kernel_name(cur_key), blockIdx.x, blockIdx.y, blockIdx.z);
		abort();
	}
	if (dyn_bytes)
		dyn_check();
}

static void run_block(int nt, dim3 block)
{
	block_begin(nt, block);
	if (!block_rounds(nt)) {
		fprintf(
		    stderr,
		    "emu: %s, block (%u, %u, %u): its threads only spin (__nanosleep): they wait "
		    "for another block, which a plain launch does not run beside it (here it "
		    "runs after it; on a GPU it may too): a grid barrier needs a cooperative "
		    "launch (gpu/grid_sync.cuh)\n",
		    kernel_name(cur_key), blockIdx.x, blockIdx.y, blockIdx.z);
		abort();
	}
	block_end();
}

void emu_nanosleep()
{
	if (cur < 0) /* host code */
		return;
	this_round.slept++;
	hop(); /* runnable again next round */
}

// Stacks of n fibers in one mapping (a cooperative launch has up to 132 x 1024 threads: one
// mapping each would pass Linux's default limit of 65530 mappings a process). mmap'd:
// pages are made on first touch; a kernel's thread touches a few KiB of its 64, where a
// zeroed std::vector<char> wrote all 64 MiB of 1024 threads' stacks in every process that
// ran a 1024-thread block (~0.4 s of CPU of a 1.1 s emulated run of the binary on a tiny
// model, mostly page faults). Never freed (fibers live as long as the process).
static const size_t FIBER_STACK = 1 << 16;
static void make_fibers(std::vector<Fiber> &fs, size_t n)
{
	const size_t have = fs.size();
	if (n <= have)
		return;
	fs.resize(n);
	void *p = mmap(nullptr, (n - have) * FIBER_STACK, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "emu: no memory for %zu threads' stacks\n", n - have);
		abort();
	}
	for (size_t i = have; i < n; i++) {
		fs[i].stack = (char *)p + (i - have) * FIBER_STACK;
		ctx_make(&fs[i].ctx, fs[i].stack, FIBER_STACK, fiber_main);
	}
}

// A block of a cooperative launch while another one runs: what run_block keeps in globals
// (swapped in and out, O(1) but for the static shared memory, copied: a few small arrays).
struct coop_block {
	std::vector<Fiber> fibers;
	Group blockg;
	std::vector<Group> warpg, namedg;
	std::vector<uint64_t> xchg;
	std::vector<uint8_t> xpar;
	std::vector<float> warp_buf;
	std::vector<uint4> dyn_buf;
	std::vector<int> order;
	int left = 0;
	uint64_t gen = 0;			    // its block_gen
	std::map<void *, std::vector<char>> shared; // its static __shared__ variables
	uint3e idx;
	bool started = false;
};
static std::vector<std::vector<Fiber>> coop_fibers; // kept for the next launch
static void coop_swap(coop_block &b)
{
	std::swap(fibers, b.fibers);
	std::swap(blockg, b.blockg);
	std::swap(warpg, b.warpg);
	std::swap(namedg, b.namedg);
	std::swap(xchg, b.xchg);
	std::swap(xpar, b.xpar);
	std::swap(warp_buf, b.warp_buf);
	std::swap(dyn_buf, b.dyn_buf);
	std::swap(this_round.order, b.order);
	std::swap(this_round.left, b.left);
	std::swap(block_gen, b.gen);
	std::swap(blockIdx, b.idx);
}
static void coop_in(coop_block &b)
{
	coop_swap(b);
	for (auto &v : b.shared) { /* its static shared memory as it left it */
		memcpy(v.first, v.second.data(), v.second.size());
		shared_gen[v.first] = block_gen;
	}
	b.shared.clear();
}
static void coop_out(coop_block &b)
{
	for (const auto &v : shared_size)
		if (shared_gen[v.first] == block_gen) {
			const char *p = (const char *)v.first;
			b.shared[v.first].assign(p, p + v.second);
			shared_gen[v.first] = 0;
		}
	coop_swap(b);
}

// The blocks of a cooperative launch, all resident: in turns, each until it is done or its
// threads only spin.
static void run_coop(uint64_t nb, dim3 grid, int nt, dim3 block)
{
	std::vector<coop_block> bs(nb);
	coop_fibers.resize(std::max<size_t>(coop_fibers.size(), nb));
	std::vector<Fiber> plain;
	std::swap(plain, fibers); /* the plain launches' threads, back at the end */
	for (uint64_t b = 0; b < nb; b++) {
		coop_block &c = bs[b];
		make_fibers(coop_fibers[b], nt);
		std::swap(c.fibers, coop_fibers[b]);
		c.idx = {(unsigned)(b % grid.x), (unsigned)((b / grid.x) % grid.y),
			 (unsigned)(b / ((uint64_t)grid.x * grid.y))};
		c.xchg.assign(2 * c.fibers.size(), 0); /* indexed as launch_now's */
		c.xpar.assign(c.fibers.size(), 0);
		c.warp_buf.assign(c.fibers.size() * 16, 0.0f);
		c.dyn_buf.resize((dyn_bytes + DYN_GUARD + 15) / 16);
	}
	/* turns: a block drawn from those not done (the one whose threads just began to
	 * spin too: a barrier that lets a thread through after a spin or two shows), until
	 * it is done or its threads only spin; stuck: the blocks whose last turn changed
	 * nothing (its threads only re-read what they wait for), since a turn that did */
	std::vector<uint64_t> live(nb);
	for (uint64_t b = 0; b < nb; b++)
		live[b] = b;
	std::vector<char> stuck(nb, 0);
	uint64_t n_stuck = 0;
	while (!live.empty()) {
		const uint64_t i =
		    std::uniform_int_distribution<uint64_t>(0, live.size() - 1)(rng());
		coop_block &c = bs[live[i]];
		coop_in(c);
		bool moved = !c.started;
		if (!c.started) {
			block_begin(nt, block);
			c.started = true;
		}
		const bool done = block_rounds(nt);
		moved = moved || done || this_round.rounds > 1;
		if (done)
			block_end();
		coop_out(c);
		if (moved) {
			std::fill(stuck.begin(), stuck.end(), 0);
			n_stuck = 0;
		} else if (!stuck[live[i]]) {
			stuck[live[i]] = 1;
			n_stuck++;
		}
		if (done) {
			live[i] = live.back();
			live.pop_back();
		}
		if (!live.empty() && n_stuck == live.size()) {
			fprintf(
			    stderr,
			    "emu: %s (a cooperative launch): every block's threads spin "
			    "(__nanosleep) and none can go on (%llu of %llu blocks exited): a grid "
			    "barrier that not every block reaches? (a GPU hangs)\n",
			    kernel_name(cur_key), (unsigned long long)(nb - live.size()),
			    (unsigned long long)nb);
			abort();
		}
	}
	for (uint64_t b = 0; b < nb; b++)
		std::swap(bs[b].fibers, coop_fibers[b]);
	std::swap(plain, fibers);
}

static void launch_now(const void *key, dim3 grid, dim3 block, size_t smem, bool dep, bool coop,
		       const std::function<void()> &fn)
{
	cur_key = key;
	pdl.on = dep;
	pdl.name = dep ? kernel_name(key) : nullptr;
	int nt = (int)(block.x * block.y * block.z);
	dyn_bytes = smem;
	dyn_buf.resize((smem + DYN_GUARD + 15) / 16);
	body = fn;
	blockDim = block;
	gridDim = grid;
	uint64_t nb = (uint64_t)grid.x * grid.y * grid.z;
	if (coop) { /* each block its own threads and buffers */
		run_coop(nb, grid, nt, block);
		return;
	}
	make_fibers(fibers, nt);
	xchg.assign(2 * (size_t)fibers.size(), 0);
	xpar.assign(fibers.size(), 0);
	warp_buf.assign(fibers.size() * 16, 0.0f);
	std::vector<uint64_t> blocks(nb);
	for (uint64_t b = 0; b < nb; b++)
		blocks[b] = b;
	std::shuffle(blocks.begin(), blocks.end(), rng());
	for (uint64_t i = 0; i < nb; i++) {
		const uint64_t b = blocks[i];
		blockIdx = {(unsigned)(b % grid.x), (unsigned)((b / grid.x) % grid.y),
			    (unsigned)(b / ((uint64_t)grid.x * grid.y))};
		pdl.strict = dep && (i == 0 || pdl_check_all());
		run_block(nt, block);
	}
	pdl.on = pdl.strict = false;
}

cudaError_t emu_launch(const void *key, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
		       std::function<void()> fn, bool dep, bool coop)
{
	uint64_t nt = (uint64_t)block.x * block.y * block.z;
	if (nt == 0 || nt > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
	    grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 ||
	    grid.z > 65535)
		return fail(cudaErrorInvalidConfiguration);
	if (smem > 0) { /* within the kernel's dynamic shared memory limit */
		kernel_info k;
		if (key) {
			kernel_info &kk = kernels[key];
			/* its static shared memory: the probe, with these arguments */
			if (!kk.probed) {
				emu_probe_begin();
				fn();
				emu_probe_on = false;
				kk.probed = true;
				kk.static_smem = probe.smem;
			}
			k = kk;
		}
		if (smem > max_dyn_smem(k))
			return fail(cudaErrorInvalidValue);
	}
	if (coop) { /* every block resident at once: within the occupancy of 132 SMs */
		if (!key)
			return fail(cudaErrorInvalidValue);
		emu_probe_begin(); /* its launch bounds and static shared memory */
		fn();
		int per_sm = 0;
		emu_occupancy(key, &per_sm, (int)nt, smem);
		cudaDeviceProp p;
		cudaGetDeviceProperties(&p, 0);
		if ((uint64_t)grid.x * grid.y * grid.z > (uint64_t)per_sm * p.multiProcessorCount)
			return fail(cudaErrorCooperativeLaunchTooLarge);
	}
	/* captured, the attributes go with the node: its replays run the same checks */
	enqueue(s, [=]() { launch_now(key, grid, block, smem, dep, coop, fn); });
	return cudaSuccess;
}

// ---- cuBLAS -------------------------------------------------------------------------------
struct emu_blas {
	emu_stream *stream = nullptr;
};
const char *cublasGetStatusString(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	default: return "CUBLAS_STATUS_UNKNOWN";
	}
}
cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	*h = new emu_blas();
	return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	delete h;
	return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
	h->stream = s;
	return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }

static float load(const void *p, int t, size_t i)
{
	if (t == CUDA_R_32F)
		return ((const float *)p)[i];
	uint16_t h = ((const uint16_t *)p)[i];
	return t == CUDA_R_16F ? half_f16_to_f32(h) : half_bf16_to_f32(h);
}
static void store(void *p, int t, size_t i, float v)
{
	if (t == CUDA_R_32F)
		((float *)p)[i] = v;
	else
		((uint16_t *)p)[i] = t == CUDA_R_16F ? half_f32_to_f16(v) : half_f32_to_bf16(v);
}

// C = alpha op(A) op(B) + beta C, column-major. Each element's sum runs l = 0, 1, ..., k - 1,
// one fmaf per term, from 0, then fmaf(alpha, sum, beta C) (the order does not depend on the
// blocking): 256 rows of op(A) converted to float at a time, 8 columns of C at a time, the
// inner loop over the 256 rows (vectorised: each lane is one element's own chain).
enum { GEMM_MB = 256, GEMM_NB = 8 };
// acc[jj][i] += a[l][i] * b[jj][l] over l, for nb columns jj (b: columns of length k)
static void gemm_block(const float *__restrict a, const float *__restrict b, int k, int nb,
		       float *__restrict acc)
{
	for (int l = 0; l < k; l++) {
		const float *ar = a + (size_t)l * GEMM_MB;
		for (int jj = 0; jj < nb; jj++) {
			float bv = b[(size_t)jj * k + l], *ac = acc + jj * GEMM_MB;
			for (int i = 0; i < GEMM_MB; i++)
				ac[i] = fmaf(ar[i], bv, ac[i]);
		}
	}
}
static void gemm_run(int ta, int tb, int m, int n, int k, float al, const void *A, int at, int lda,
		     const void *B, int bt, int ldb, float be, void *C, int ct, int ldc)
{
	std::vector<float> a((size_t)k * GEMM_MB), b((size_t)n * k), acc(GEMM_NB * GEMM_MB);
	for (int j = 0; j < n; j++) // column j of op(B), contiguous
		for (int l = 0; l < k; l++)
			b[(size_t)j * k + l] = tb == CUBLAS_OP_N ? load(B, bt, (size_t)j * ldb + l)
							   : load(B, bt, (size_t)l * ldb + j);
	for (int i0 = 0; i0 < m; i0 += GEMM_MB) {
		int mb = std::min((int)GEMM_MB, m - i0);
		for (int l = 0; l < k; l++) // rows i0 .. of op(A), row-major by l; zero past m
			for (int i = 0; i < GEMM_MB; i++)
				a[(size_t)l * GEMM_MB + i] =
				    i >= mb ? 0.0f
				    : ta == CUBLAS_OP_N ? load(A, at, (size_t)l * lda + i0 + i)
							: load(A, at, (size_t)(i0 + i) * lda + l);
		for (int j0 = 0; j0 < n; j0 += GEMM_NB) {
			int nb = std::min((int)GEMM_NB, n - j0);
			std::fill(acc.begin(), acc.end(), 0.0f);
			gemm_block(a.data(), b.data() + (size_t)j0 * k, k, nb, acc.data());
			for (int jj = 0; jj < nb; jj++)
				for (int i = 0; i < mb; i++) {
					size_t ci = (size_t)(j0 + jj) * ldc + i0 + i;
					float c = be != 0 ? be * load(C, ct, ci) : 0; // beta 0: C is not read
					store(C, ct, ci, fmaf(al, acc[jj * GEMM_MB + i], c));
				}
		}
	}
}

// The batched form, which cublasGemmEx is with one batch: the checks cuBLAS makes before it
// runs anything (and a count >= 0), then one stream operation (one graph node, as cuBLAS's
// one kernel) that runs batch after batch (element strides).
static size_t elem_size(int t)
{
	return t == CUDA_R_32F ? 4 : 2;
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, int ta, int tb, int m, int n, int k,
					  const void *alpha, const void *A, int at, int lda,
					  long long sa, const void *B, int bt, int ldb,
					  long long sb, const void *beta, void *C, int ct, int ldc,
					  long long sc, int count, int compute, int)
{
	bool op_ok = (ta == CUBLAS_OP_N || ta == CUBLAS_OP_T) && (tb == CUBLAS_OP_N || tb == CUBLAS_OP_T);
	int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
	if (!h || !op_ok || m < 0 || n < 0 || k < 0 || count < 0 || lda < std::max(1, rows_a) ||
	    ldb < std::max(1, rows_b) || ldc < std::max(1, m) || !alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	bool types_ok = at == bt && (at == CUDA_R_32F || at == CUDA_R_16F || at == CUDA_R_16BF) &&
			(ct == CUDA_R_32F || ct == at);
	if (!types_ok || compute != CUBLAS_COMPUTE_32F)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	float al = *(const float *)alpha, be = *(const float *)beta;
	enqueue(h->stream, [=]() {
		for (int i = 0; i < count; i++)
			gemm_run(ta, tb, m, n, k, al,
				 (const char *)A + (size_t)(i * sa) * elem_size(at), at, lda,
				 (const char *)B + (size_t)(i * sb) * elem_size(bt), bt, ldb, be,
				 (char *)C + (size_t)(i * sc) * elem_size(ct), ct, ldc);
	});
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,
			    const void *A, int at, int lda, const void *B, int bt, int ldb, const void *beta,
			    void *C, int ct, int ldc, int compute, int algo)
{
	return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0,
					  beta, C, ct, ldc, 0, 1, compute, algo);
}
