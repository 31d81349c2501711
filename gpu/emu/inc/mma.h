// mma.h (emulated): nvcuda::wmma for the 16x16x16 shapes gpu/ uses, over __half or
// __nv_bfloat16 inputs with fp32 accumulators (gpu/emu/inc/emu.h says what the emulator is).
//
// A fragment is per-warp data: each of the 32 lanes holds num_elements = 8 of the 256
// elements of a 16x16 tile. Which ones is the emulator's business, as on a GPU (where the
// lane mapping differs between architectures and is documented only for mma.sync): the
// emulated layout puts element e of lane l at position emu_wmma_pos(use, l * 8 + e), row
// pos / 16 and column pos % 16 of the tile (matrix_a: M x K, matrix_b: K x N, accumulator:
// M x N). Without $BG_EMU_SEED that is the plain order (lane l holds row l / 2, columns
// (l % 2) * 8 ... + 8); with it, a permutation of the 256 positions drawn from the seed
// for each use, so a kernel that reads or writes x[e] assuming some layout gets a wrong
// result for some seed, while what the API allows (load_matrix_sync, store_matrix_sync,
// mma_sync, fill_fragment, and element-wise maps applied to every element alike) works
// whatever the layout.
//
// Checked as the hardware requires (undefined behaviour there; an abort with the reason
// here): every lane of the warp calls each operation (the lanes meet at a warp barrier),
// pointers are 32-byte aligned, ldm is a multiple of 16 bytes.
//
// mma_sync computes d = a * b + c in fp32: each product of two 16-bit inputs is exact in
// fp32, and the 16 products of an output are added to c in k order with fmaf (a tensor
// core adds them in an order of its own, with fp32 or wider partial sums: tolerances
// against a reference must allow fp32 reassociation, as for cuBLAS).
#pragma once
#include "emu.h"
#include <type_traits>

// position (row * 16 + column) of slot i = lane * 8 + e of a fragment of kind use
// (0 matrix_a, 1 matrix_b, 2 accumulator); emu.cpp draws the permutations when it is loaded
// (a table read inline: mma_sync looks up 16,384 positions a warp)
extern const int *const emu_wmma_pos_tab;
inline int emu_wmma_pos(int use, int i)
{
	return emu_wmma_pos_tab[use * 256 + i];
}
// every lane of the calling thread's warp deposits n floats; all receives the 32 * n, lane
// by lane (a warp barrier before and after)
void emu_warp_gather(const float *mine, int n, float *all);

namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use> constexpr int emu_use();
template <> constexpr int emu_use<matrix_a>() { return 0; }
template <> constexpr int emu_use<matrix_b>() { return 1; }
template <> constexpr int emu_use<accumulator>() { return 2; }

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
	static_assert(M == 16 && N == 16 && K == 16, "emulated wmma: m16n16k16 only");
	static constexpr int num_elements = 8;
	T x[8];
};

inline int emu_lane()
{
	return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31;
}
inline void emu_wmma_check(const void *p, unsigned ldm, size_t es, const char *what)
{
	if ((uintptr_t)p % 32 != 0 || (ldm * es) % 16 != 0) {
		fprintf(stderr, "emu: %s: pointer %p not 32-byte aligned or ldm %u not a multiple of 16 bytes\n",
			what, p, ldm);
		abort();
	}
}
inline float emu_f(float v) { return v; }
inline float emu_f(__half v) { return __half2float(v); }
inline float emu_f(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename Use, typename T, typename Layout>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p, unsigned ldm)
{
	static_assert(emu_use<Use>() != 2, "an accumulator load takes a layout_t");
	emu_wmma_check(p, ldm, sizeof(T), "load_matrix_sync");
	emu_wait_warp();
	const int lane = emu_lane();
	for (int e = 0; e < 8; e++) {
		int pos = emu_wmma_pos(emu_use<Use>(), lane * 8 + e), r = pos / 16, c = pos % 16;
		f.x[e] = std::is_same<Layout, row_major>::value ? p[(size_t)r * ldm + c]
								: p[(size_t)c * ldm + r];
	}
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
			     unsigned ldm, layout_t l)
{
	emu_wmma_check(p, ldm, 4, "load_matrix_sync");
	emu_wait_warp();
	const int lane = emu_lane();
	for (int e = 0; e < 8; e++) {
		int pos = emu_wmma_pos(2, lane * 8 + e), r = pos / 16, c = pos % 16;
		f.x[e] = l == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
	}
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
			      unsigned ldm, layout_t l)
{
	emu_wmma_check(p, ldm, 4, "store_matrix_sync");
	emu_wait_warp();
	const int lane = emu_lane();
	for (int e = 0; e < 8; e++) {
		int pos = emu_wmma_pos(2, lane * 8 + e), r = pos / 16, c = pos % 16;
		(l == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]) = f.x[e];
	}
}
template <typename Use, typename T, typename Layout>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, T v)
{
	for (int e = 0; e < 8; e++)
		f.x[e] = v;
}
template <typename T, typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
		     const fragment<matrix_a, 16, 16, 16, T, LA> &a,
		     const fragment<matrix_b, 16, 16, 16, T, LB> &b,
		     const fragment<accumulator, 16, 16, 16, float> &c)
{
	float mine[16], all[32 * 16], A[256], B[256];
	for (int e = 0; e < 8; e++) {
		mine[e] = emu_f(a.x[e]);
		mine[8 + e] = emu_f(b.x[e]);
	}
	emu_warp_gather(mine, 16, all);
	for (int i = 0; i < 256; i++) {
		int l = i / 8, e = i % 8;
		A[emu_wmma_pos(0, i)] = all[l * 16 + e];
		B[emu_wmma_pos(1, i)] = all[l * 16 + 8 + e];
	}
	const int lane = emu_lane();
	float out[8];
	for (int e = 0; e < 8; e++) {
		int pos = emu_wmma_pos(2, lane * 8 + e), r = pos / 16, col = pos % 16;
		float acc = c.x[e];
		for (int k = 0; k < 16; k++)
			acc = fmaf(A[r * 16 + k], B[k * 16 + col], acc);
		out[e] = acc;
	}
	for (int e = 0; e < 8; e++)
		d.x[e] = out[e]; // d may be c
}
} // namespace wmma
} // namespace nvcuda
