// emu_test_pdl: programmatic dependent launch in the CUDA emulator (gpu/emu), through the
// helpers the kernels use (gpu/pdl.cuh), with expectations from the contract CUDA documents
// (programming guide, "Programmatic Dependent Launch and Synchronization"):
//  - a correct pair: a plain producer, then consumers launched with the attribute that
//    trigger, prefetch their input, wait, then read the producer's output: the values are
//    the producer's, on the legacy stream, on a stream, and captured into a graph and
//    replayed (twice) after the producer wrote new values; a kernel whose threads meet at a
//    barrier before their waits, and one where half the block waits late, run too;
//  - the same kernels launched without the attribute: the waits do nothing;
//  - an attribute the emulator does not know: cudaErrorInvalidValue, nothing runs;
//  - planted, each in a child process that must abort (SIGABRT) with the emulator's
//    message naming the kernel: a read of the producer's output before the wait, a write
//    before the wait (WAR), a read before a thread's own wait after other threads of its
//    block waited, the same read captured and caught at the graph's replay, a
//    block that exits without a wait, a prefetch of an address in no allocation; and the
//    read-before-wait kernel launched without the attribute runs (the check is the
//    attribute's).
// Written as CUDA source: tests/e2e_gpu_emu.sh runs it through gpu/emu/transform.py and
// builds it with the plugin's emu.o (and -rdynamic, so that the emulator can name kernels).
#include "emu.h"

#include <sys/wait.h>

#include "gpu/pdl.cuh"
#include "tests/check.h"

#define N 256

__global__ void produce(float *buf, float base)
{
	const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
	buf[i] = base + (float)i;
}

// out[i] = buf[i] + 1, as a dependent launch should: trigger, prefetch, wait, then read
__global__ void consume(const float *buf, float *out)
{
	gpu_pdl_trigger();
	const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
	gpu_prefetch_l2(buf + i);
	gpu_pdl_wait();
	out[i] = buf[i] + 1.0f;
}

// the threads meet at a barrier before their waits (shared memory is no device memory)
__global__ void consume_barrier(const float *buf, float *out)
{
	__shared__ float s[N];
	s[threadIdx.x] = (float)threadIdx.x;
	__syncthreads();
	gpu_pdl_wait();
	out[threadIdx.x] = buf[threadIdx.x] + s[(threadIdx.x + 1) % blockDim.x] - s[threadIdx.x];
}

// the odd threads wait first and write their part; the even ones wait after a barrier
__global__ void consume_late(const float *buf, float *out)
{
	const int i = (int)threadIdx.x;
	if (i & 1) {
		gpu_pdl_wait();
		out[i] = 2.0f * buf[i];
	}
	__syncthreads();
	if (!(i & 1)) {
		gpu_pdl_wait();
		out[i] = 2.0f * buf[i];
	}
}

// planted: reads its input before the wait
__global__ void read_before_wait(const float *buf, float *out)
{
	const float v = buf[threadIdx.x];
	gpu_pdl_wait();
	out[threadIdx.x] = v;
}

// planted: the odd threads wait; after a barrier the even ones read before their own wait
// (the memory is still untouchable for them, though the odd threads' waits returned)
__global__ void read_after_others_wait(const float *buf, float *out)
{
	const int i = (int)threadIdx.x;
	if (i & 1)
		gpu_pdl_wait();
	__syncthreads();
	const float v = buf[i];
	gpu_pdl_wait();
	out[i] = v;
}

// planted: writes its output (which the kernel before it may still read) before the wait
__global__ void write_before_wait(const float *buf, float *out)
{
	out[threadIdx.x] = 0.0f;
	gpu_pdl_wait();
	out[threadIdx.x] = buf[threadIdx.x];
}

// planted: block 1 returns without waiting
__global__ void exit_without_wait(const float *buf, float *out)
{
	if (blockIdx.x == 1)
		return;
	gpu_pdl_wait();
	out[threadIdx.x] = buf[threadIdx.x];
}

// planted: prefetches 1 GiB past its input (the child has two one-page allocations)
__global__ void prefetch_outside(const float *buf, float *out)
{
	gpu_prefetch_l2(buf + ((size_t)1 << 28));
	gpu_pdl_wait();
	out[threadIdx.x] = buf[threadIdx.x];
}

// how many out[i] == f(i) for i < n
static int count_eq(const float *out, int n, float mul, float add)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		k += out[i] == mul * (float)i + add;
	return k;
}

typedef void (*kernel_t)(const float *, float *);

// Runs k (with the attribute) after a producer in a child process; the child's exit: 0 if
// it finished, else the signal; *msg: its stderr (malloc'd). graph: captured, then replayed.
static int child_run(kernel_t k, unsigned blocks, bool graph, char **msg)
{
	char path[] = "/tmp/emu_test_pdl.XXXXXX";
	int fd = mkstemp(path);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd, 2);
		float *buf, *out;
		cudaMalloc(&buf, N * sizeof(float));
		cudaMalloc(&out, N * sizeof(float));
		cudaStream_t s;
		cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
		if (graph) {
			cudaGraph_t g;
			cudaGraphExec_t ge;
			cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
			produce<<<1, N, 0, s>>>(buf, 1.0f);
			gpu_launch(k, blocks, N, 0, s, true, (const float *)buf, out);
			cudaStreamEndCapture(s, &g);
			cudaGraphInstantiate(&ge, g, 0);
			fprintf(stderr, "captured\n");
			cudaGraphLaunch(ge, s);
		} else {
			produce<<<1, N, 0, s>>>(buf, 1.0f);
			gpu_launch(k, blocks, N, 0, s, true, (const float *)buf, out);
		}
		cudaStreamSynchronize(s);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	size_t len;
	*msg = (char *)check_read_file(path, &len);
	close(fd);
	unlink(path);
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static void check_abort(kernel_t k, unsigned blocks, bool graph, const char *name, const char *what)
{
	char *msg = nullptr;
	int sig = child_run(k, blocks, graph, &msg);
	CHECK(sig == SIGABRT, "%s%s: the emulator aborts (signal %d; stderr: %s)", name,
	      graph ? " (graph replay)" : "", sig, msg ? msg : "");
	CHECK_HAS(msg, name, "%s: the message names the kernel", name);
	CHECK_HAS(msg, what, "%s: the message says what", name);
	if (graph)
		CHECK_HAS(msg, "captured", "%s: caught at the replay, not during capture", name);
	printf("planted %s%s, the emulator said: %s", name, graph ? " (graph)" : "", msg ? msg : "\n");
	free(msg);
}

int main()
{
	float *buf = nullptr, *out = nullptr;
	CHECK(cudaMalloc(&buf, N * sizeof(float)) == cudaSuccess, "cudaMalloc");
	CHECK(cudaMalloc(&out, N * sizeof(float)) == cudaSuccess, "cudaMalloc");
	const float *cbuf = buf;

	// a correct pair on the legacy stream, 4 blocks of 64 (every block checked with
	// BG_EMU_PDL=all, the first of them otherwise)
	produce<<<4, N / 4>>>(buf, 10.0f);
	CHECK(gpu_launch(consume, 4, N / 4, 0, 0, true, cbuf, out) == cudaSuccess,
	      "consume launches with the attribute");
	CHECK(count_eq(out, N, 1.0f, 11.0f) == N, "consume read the producer's values (%d of %d)",
	      count_eq(out, N, 1.0f, 11.0f), N);
	// a chain: a dependent launch after a dependent launch
	CHECK(gpu_launch(consume, 4, N / 4, 0, 0, true, (const float *)out, buf) == cudaSuccess,
	      "a second dependent launch");
	CHECK(count_eq(buf, N, 1.0f, 12.0f) == N, "the chain's values (%d of %d)",
	      count_eq(buf, N, 1.0f, 12.0f), N);
	// a barrier before the waits; half the block waiting after a barrier
	produce<<<1, N>>>(buf, 0.0f);
	CHECK(gpu_launch(consume_barrier, 1, N, 0, 0, true, cbuf, out) == cudaSuccess &&
		  count_eq(out, N - 1, 1.0f, 1.0f) == N - 1 && out[N - 1] == 0.0f,
	      "consume_barrier: out[i] = i + 1 (i < %d), out[%d] = 0", N - 1, N - 1);
	CHECK(gpu_launch(consume_late, 1, N, 0, 0, true, cbuf, out) == cudaSuccess &&
		  count_eq(out, N, 2.0f, 0.0f) == N,
	      "consume_late: out[i] = 2 i (%d of %d)", count_eq(out, N, 2.0f, 0.0f), N);
	// without the attribute the waits return at once
	CHECK(gpu_launch(consume, 1, N, 0, 0, false, cbuf, out) == cudaSuccess &&
		  count_eq(out, N, 1.0f, 1.0f) == N,
	      "consume without the attribute");

	// on a stream, captured and replayed: the node keeps the attribute
	cudaStream_t s;
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	cudaGraph_t g;
	cudaGraphExec_t ge;
	float base = 100.0f;
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture");
	produce<<<2, N / 2, 0, s>>>(buf, base);
	CHECK(gpu_launch(consume, 2, N / 2, 0, s, true, cbuf, out) == cudaSuccess,
	      "a dependent launch captured");
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	size_t nn = 0;
	cudaGraphGetNodes(g, nullptr, &nn);
	CHECK(nn == 2, "two kernel nodes (%zu)", nn);
	CHECK(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess, "instantiate");
	for (int r = 0; r < 2; r++) {
		memset(out, 0, N * sizeof(float));
		cudaGraphLaunch(ge, s);
		cudaStreamSynchronize(s);
		CHECK(count_eq(out, N, 1.0f, base + 1.0f) == N, "replay %d: the values (%d of %d)",
		      r, count_eq(out, N, 1.0f, base + 1.0f), N);
	}
	cudaGraphExecDestroy(ge);
	cudaGraphDestroy(g);
	cudaStreamDestroy(s);

	// an attribute the emulator does not emulate (cudaLaunchAttributeCooperative, 2)
	cudaLaunchAttribute at[2] = {};
	at[0].id = (cudaLaunchAttributeID)4; /* cudaLaunchAttributeClusterDimension */
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = 1;
	cfg.blockDim = N;
	cfg.attrs = at;
	cfg.numAttrs = 1;
	memset(out, 0, N * sizeof(float));
	cudaError_t e = cudaLaunchKernelEx(&cfg, consume, cbuf, out);
	CHECK(e == cudaErrorInvalidValue && cudaGetLastError() == cudaErrorInvalidValue &&
		  out[5] == 0.0f,
	      "an unknown attribute: cudaErrorInvalidValue (%s), nothing ran", cudaGetErrorName(e));
	/* dependent and cooperative at once: not emulated, refused (gpu/emu/inc/emu.h) */
	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	at[1].id = cudaLaunchAttributeCooperative;
	at[1].val.cooperative = 1;
	cfg.numAttrs = 2;
	e = cudaLaunchKernelEx(&cfg, consume, cbuf, out);
	CHECK(e == cudaErrorInvalidValue && cudaGetLastError() == cudaErrorInvalidValue &&
		  out[5] == 0.0f,
	      "a dependent cooperative launch: cudaErrorInvalidValue (%s), nothing ran",
	      cudaGetErrorName(e));

	// planted failures, each in a child
	const char *touched = "touched device memory", *no_wait = "exited without";
	check_abort(read_before_wait, 1, false, "read_before_wait", touched);
	check_abort(write_before_wait, 1, false, "write_before_wait", touched);
	check_abort(read_after_others_wait, 1, false, "read_after_others_wait", touched);
	check_abort(read_before_wait, 1, true, "read_before_wait", touched);
	check_abort(exit_without_wait, 2, false, "exit_without_wait", no_wait);
	check_abort(prefetch_outside, 1, false, "prefetch_outside", "in no cudaMalloc allocation");
	// the planted read without the attribute: no check, the values
	produce<<<1, N>>>(buf, 3.0f);
	CHECK(gpu_launch(read_before_wait, 1, N, 0, 0, false, cbuf, out) == cudaSuccess &&
		  count_eq(out, N, 1.0f, 3.0f) == N,
	      "read_before_wait without the attribute runs");

	cudaFree(buf);
	cudaFree(out);
	return check_summary();
}
