#include "emu.h"
uint3e threadIdx, blockIdx;
dim3 blockDim, gridDim;
namespace {
struct Fiber { ucontext_t ctx; uint3e tid; bool done; std::vector<char> stack; };
std::vector<Fiber> fibers;
ucontext_t sched;
int cur = -1;
std::function<void()> body;
struct Group { int count = 0, gen = 0, size = 0; };
Group blockg;
std::vector<Group> warpg;
std::vector<uint64_t> xchg;
void yield_() { swapcontext(&fibers[cur].ctx, &sched); }
void entry() { body(); fibers[cur].done = true; swapcontext(&fibers[cur].ctx, &sched); }
void wait(Group &g) {
	int gen = g.gen;
	if (++g.count == g.size) { g.count = 0; g.gen++; return; }
	while (g.gen == gen) yield_();
}
int flat() { return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)); }
}
void emu_wait_block() { wait(blockg); }
void emu_wait_warp() { wait(warpg[flat() / 32]); }
void emu_xchg_put(uint64_t v) { xchg[flat()] = v; }
uint64_t emu_xchg_get(int lane) { return xchg[(flat() / 32) * 32 + lane]; }
static void emu_launch_now(dim3 grid, dim3 block, std::function<void()> fn) {
	int nt = block.x * block.y * block.z;
	if (nt % 32) { fprintf(stderr, "emu: block of %d threads\n", nt); abort(); }
	body = fn; blockDim = block; gridDim = grid;
	fibers.resize(nt);
	xchg.assign(nt, 0);
	for (auto &f : fibers) if (f.stack.empty()) f.stack.resize(1 << 16);
	for (unsigned bz = 0; bz < grid.z; bz++)
	for (unsigned by = 0; by < grid.y; by++)
	for (unsigned bx = 0; bx < grid.x; bx++) {
		blockIdx = {bx, by, bz};
		blockg = Group(); blockg.size = nt;
		warpg.assign(nt / 32, Group());
		for (auto &w : warpg) w.size = 32;
		for (int t = 0; t < nt; t++) {
			Fiber &f = fibers[t];
			f.tid = {(unsigned)(t % block.x), (unsigned)((t / block.x) % block.y), (unsigned)(t / (block.x * block.y))};
			f.done = false;
			getcontext(&f.ctx);
			f.ctx.uc_stack.ss_sp = f.stack.data();
			f.ctx.uc_stack.ss_size = f.stack.size();
			f.ctx.uc_link = nullptr;
			makecontext(&f.ctx, entry, 0);
		}
		int left = nt;
		while (left) {
			for (int t = 0; t < nt; t++) {
				if (fibers[t].done) continue;
				cur = t; threadIdx = fibers[t].tid;
				swapcontext(&sched, &fibers[t].ctx);
				if (fibers[t].done) left--;
			}
		}
	}
}

struct emu_graph { std::vector<std::function<void()>> ops; };
static emu_graph *capturing = nullptr;
void emu_record_or_run(std::function<void()> fn) { if (capturing) capturing->ops.push_back(fn); else fn(); }
void emu_launch(dim3 grid, dim3 block, std::function<void()> fn) {
	emu_record_or_run([=]() { emu_launch_now(grid, block, fn); });
}
cudaError_t cudaStreamBeginCapture(cudaStream_t, int) { capturing = new emu_graph(); return 0; }
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g) { *g = capturing; capturing = nullptr; return 0; }
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long) { *e = new emu_graph(*g); return 0; }
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return 0; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t g) { delete g; return 0; }
cudaError_t cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t) { for (auto &f : g->ops) f(); return 0; }
