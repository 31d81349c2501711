/* gpu_decode: the B1 decode micro-benchmark of the CUDA backend.
 *
 *   gpu_decode [-m SPEC] [--steps N] [--batches 1,8,64,256] [--contexts 512,2048]
 *              [--block-size N] [--device N]
 *
 * For each (batch B, context L): B sequences whose KV cache already holds L tokens take
 * `steps` decode steps (forward of B tokens + greedy sampling on the device, the only
 * host round trip being the B sampled tokens). Prints one JSON line per configuration
 * on stdout: tok/s, ms per step, and the fraction of the memory-bandwidth roofline,
 * where one step must read every weight once plus the K/V of every sequence:
 *   bytes/step = weight bytes + sum over sequences of (L + step) * KV bytes per token.
 * Peak bandwidth = 2 * memory clock * bus width (double data rate), or a table entry for
 * known parts when the attributes are unavailable.
 *
 * The KV contents are not computed by a prefill (that would time attention over 500k
 * prompt tokens before measuring anything): the blocks are filled with zeros through
 * kv_swap_in. Decode reads them exactly as it would read real K/V, so the timing is the
 * same; the generated tokens are meaningless (the weights are random anyway).
 * Configurations whose KV does not fit are reported as skipped. Each decode graph's node
 * census (BG_CUDA_GRAPH_LOG, on unless set) goes to stderr. The timed steps run between
 * cudaProfilerStart and cudaProfilerStop, so that `ncu --profile-from-start off` profiles
 * them and nothing of the set-up (bench/gpu_session.sh profile).
 */
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "model/model.h"
#include "gpu/backend_cuda.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_list(const char *s, int *out, int max)
{
	int n = 0;
	while (*s && n < max) {
		char *end;
		long v = strtol(s, &end, 10);
		if (end == s || v <= 0)
			return -1;
		out[n++] = (int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return n;
}

/* Peak DRAM bandwidth in bytes/s. */
static double peak_bandwidth(int dev, const char *name)
{
	int clock_khz = 0, bus_bits = 0;
	if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev) == cudaSuccess &&
	    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev) ==
		cudaSuccess &&
	    clock_khz > 0 && bus_bits > 0)
		return 2.0 * (double)clock_khz * 1e3 * (double)bus_bits / 8.0;
	cudaGetLastError();
	static const struct {
		const char *part;
		double bw;
	} table[] = {
	    {"H200", 4.8e12},
	    {"H100 NVL", 3.9e12},
	    {"H100 PCIe", 2.0e12},
	    {"H100", 3.35e12},
	    {"A100-SXM4-80GB", 2.039e12},
	    {"A100 80GB PCIe", 1.935e12},
	    {"A100", 1.555e12},
	    {"L40S", 0.864e12},
	    {"L4", 0.3e12},
	    {"RTX 4090", 1.008e12},
	    {"A10", 0.6e12},
	};
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (strstr(name, table[i].part))
			return table[i].bw;
	return 0.0;
}

int main(int argc, char **argv)
{
	const char *spec = "synthetic:llama-3-8b:bf16";
	int steps = 128, block_size = 32, device = 0;
	int batches[16] = {1, 8, 64, 256}, n_b = 4;
	int contexts[16] = {512, 2048}, n_c = 2;
	for (int i = 1; i < argc; i += 2) { /* every option takes a value */
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "gpu_decode: %s needs a value\n", a);
			return 2;
		}
		if (strcmp(a, "-m") == 0)
			spec = v;
		else if (strcmp(a, "--steps") == 0)
			steps = atoi(v);
		else if (strcmp(a, "--block-size") == 0)
			block_size = atoi(v);
		else if (strcmp(a, "--device") == 0)
			device = atoi(v);
		else if (strcmp(a, "--batches") == 0)
			n_b = parse_list(v, batches, 16);
		else if (strcmp(a, "--contexts") == 0)
			n_c = parse_list(v, contexts, 16);
		else {
			fprintf(stderr, "gpu_decode: unknown option %s\n", a);
			return 2;
		}
	}
	/* each decode graph's nodes, counted by kind on the device when it is captured (the
	 * kernels cuBLAS records per GEMM included), on stderr: the fixed cost a step pays per
	 * node (bench/perf_model.py's NODE_US) is measured against these counts */
	setenv("BG_CUDA_GRAPH_LOG", "-", 0);
	if (steps <= 0 || block_size <= 0 || n_b <= 0 || n_c <= 0) {
		fprintf(stderr, "gpu_decode: bad arguments\n");
		return 2;
	}
	if (backend_cuda_device_count(NULL, 0) == 0) {
		fprintf(stderr, "gpu_decode: no CUDA device; nothing measured\n");
		return 3;
	}
	struct bg_err err = {0};
	struct model *m = NULL;
	if (model_open(spec, true, &m, &err) != BG_OK) {
		fprintf(stderr, "gpu_decode: %s\n", err.msg);
		return 3;
	}
	struct backend_config cfg = {0};
	cfg.block_size = block_size;
	cfg.mem_fraction = 0.9f;
	cfg.device_index = device;
	for (int i = 0; i < n_b; i++) /* recurrent models: sequence s in slot s */
		cfg.n_state_slots = batches[i] > cfg.n_state_slots ? batches[i] : cfg.n_state_slots;
	struct backend *b = NULL;
	if (backend_cuda_create(m, &cfg, &b, &err) != BG_OK) {
		fprintf(stderr, "gpu_decode: %s\n", err.msg);
		model_free(m);
		return 3;
	}
	struct cudaDeviceProp prop;
	cudaGetDeviceProperties(&prop, device);
	double bw = peak_bandwidth(device, prop.name);
	struct backend_mem mem;
	b->ops->mem_info(b->ctx, &mem);
	double kv_per_token = (double)b->block_bytes / b->block_size;
	fprintf(stderr,
		"gpu_decode: %s on %s; weights %.2f GiB, KV pool %d blocks of %d tokens "
		"(%.2f GiB), peak bandwidth %.0f GB/s\n",
		m->name, b->device, (double)mem.weight_bytes / 1073741824.0, b->n_blocks,
		b->block_size, (double)mem.kv_bytes / 1073741824.0, bw / 1e9);

	void *zero_block = calloc(1, b->block_bytes);
	int rc = 0;
	for (int ci = 0; ci < n_c && rc == 0; ci++)
		for (int bi = 0; bi < n_b; bi++) {
			int B = batches[bi], L = contexts[ci];
			int warm = 3;
			int per_seq = (L + warm + steps + block_size - 1) / block_size;
			int64_t need = (int64_t)B * per_seq;
			if (need > b->n_blocks) {
				printf(
				    "{\"batch\": %d, \"context\": %d, \"skipped\": \"needs %lld KV "
				    "blocks, the pool has %d\"}\n",
				    B, L, (long long)need, b->n_blocks);
				fflush(stdout);
				continue;
			}
			int32_t *tables = malloc((size_t)need * sizeof *tables);
			int32_t *tok = malloc((size_t)B * sizeof *tok);
			uint8_t *want = malloc((size_t)B);
			struct backend_seq *seqs = malloc((size_t)B * sizeof *seqs);
			struct backend_sample_row *rows = malloc((size_t)B * sizeof *rows);
			struct sampler_result *res = malloc((size_t)B * sizeof *res);
			struct sampler_params p;
			sampler_params_default(&p);
			for (int64_t k = 0; k < need; k++) {
				tables[k] = (int32_t)k;
				if (b->ops->kv_swap_in(b->ctx, &tables[k], 1, zero_block, &err) !=
				    BG_OK) {
					fprintf(stderr, "gpu_decode: %s\n", err.msg);
					rc = 3;
					goto done;
				}
			}
			for (int s = 0; s < B; s++) {
				tok[s] = (s * 7919 + 1) % b->n_vocab;
				want[s] = 1;
				rows[s] = (struct backend_sample_row){
				    s, -1, &p, {NULL, 0, NULL, 0}, NULL, NULL};
			}
			double t0 = 0, kv_bytes = 0;
			for (int it = 0; it < warm + steps; it++) {
				if (it == warm) {
					cudaProfilerStart();
					t0 = now_s();
				}
				int pos = L + it;
				for (int s = 0; s < B; s++)
					seqs[s] = (struct backend_seq){
					    &tok[s], 1,	       pos,  tables + (int64_t)s * per_seq,
					    per_seq, &want[s], NULL, s};
				struct backend_batch batch = {seqs, B, B};
				if (b->ops->forward(b->ctx, &batch, &err) != BG_OK ||
				    backend_sample(b, rows, B, res, &err) != BG_OK) {
					fprintf(stderr, "gpu_decode: %s\n", err.msg);
					rc = 3;
					goto done;
				}
				for (int s = 0; s < B; s++)
					tok[s] = res[s].token;
				if (it >= warm)
					kv_bytes += (double)B * (pos + 1) * kv_per_token;
			}
			{
				double dt = now_s() - t0;
				cudaProfilerStop();
				double bytes = (double)mem.weight_bytes * steps + kv_bytes;
				double ideal = bw > 0 ? bytes / bw : 0;
				printf("{\"model\": \"%s\", \"device\": \"%s\", \"batch\": %d, "
				       "\"context\": %d, "
				       "\"steps\": %d, \"tok_per_s\": %.1f, \"ms_per_step\": %.3f, "
				       "\"bytes_per_step\": %.0f, \"peak_bw_gbps\": %.0f, "
				       "\"roofline_fraction\": %.3f}\n",
				       m->name, prop.name, B, L, steps, (double)B * steps / dt,
				       dt * 1e3 / steps, bytes / steps, bw / 1e9,
				       ideal > 0 ? ideal / dt : 0);
				fflush(stdout);
			}
		done:
			free(tables);
			free(tok);
			free(want);
			free(seqs);
			free(rows);
			free(res);
			if (rc)
				break;
		}
	free(zero_block);
	backend_destroy(b);
	model_free(m);
	return rc;
}
