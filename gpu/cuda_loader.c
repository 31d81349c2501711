/* cuda_loader: backend_cuda_* (gpu/backend_cuda.h) by loading libbatchgen-cuda.so at run
 * time (gpu/plugin.h says why).
 *
 * Where the library is looked for, first found wins: $BATCHGEN_CUDA_LIB; beside the
 * executable; one folder up (test programs live in build/tests/); ../lib/batchgen/ from
 * the executable's folder (make install). A build without CUDA has no library, and every
 * entry point says so.
 */
#include "gpu/backend_cuda.h"
#include "gpu/plugin.h"
#include "abi_layout.h" /* generated: build/gpu/abi_layout.h */

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*plugin_int_fn)(void);
typedef int (*plugin_count_fn)(char *, size_t);
typedef enum bg_status (*plugin_create_fn)(const struct model *, const struct backend_config *,
					   struct backend **, struct bg_err *);

struct cuda_plugin {
	void *handle;
	plugin_count_fn device_count;
	plugin_create_fn create;
	char why[BG_ERR_MSG]; /* why it could not be loaded */
};

/* Loaded once per process; the library stays loaded until exit (backends point into it). */
static struct cuda_plugin plugin;
static pthread_once_t plugin_once = PTHREAD_ONCE_INIT;

static void *plugin_try(const char *path, char *why, size_t cap)
{
	if (access(path, R_OK) != 0)
		return NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		snprintf(why, cap, "cannot load %s: %s", path, dlerror());
	return h;
}

static void plugin_load(void)
{
	char dir[PATH_MAX], path[PATH_MAX + 64];
	void *h = NULL;
	const char *env = getenv("BATCHGEN_CUDA_LIB");
	snprintf(plugin.why, sizeof plugin.why,
		 "the CUDA backend is not available: " GPU_PLUGIN_FILE
		 " was not found beside the batchgen binary (build with nvcc on PATH or "
		 "CUDA=1, or set BATCHGEN_CUDA_LIB)");
	if (env && *env) {
		h = plugin_try(env, plugin.why, sizeof plugin.why);
	} else {
		ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
		if (n > 0) {
			dir[n] = 0;
			char *slash = strrchr(dir, '/');
			if (slash)
				*slash = 0;
			const char *rel[] = {"", "/..", "/../lib/batchgen"};
			for (size_t i = 0; !h && i < sizeof rel / sizeof rel[0]; i++) {
				snprintf(path, sizeof path, "%s%s/" GPU_PLUGIN_FILE, dir, rel[i]);
				h = plugin_try(path, plugin.why, sizeof plugin.why);
			}
		}
	}
	if (!h)
		return;
	plugin_int_fn abi = (plugin_int_fn)dlsym(h, "gpu_plugin_abi");
	plugin.device_count = (plugin_count_fn)dlsym(h, "gpu_plugin_device_count");
	plugin.create = (plugin_create_fn)dlsym(h, "gpu_plugin_create");
	if (!abi || !plugin.device_count || !plugin.create || abi() != (int)(GPU_PLUGIN_ABI ^ GPU_ABI_LAYOUT)) {
		snprintf(plugin.why, sizeof plugin.why,
			 "the CUDA backend library " GPU_PLUGIN_FILE
			 " does not match this batchgen binary (rebuild both)");
		dlclose(h);
		plugin.device_count = NULL;
		plugin.create = NULL;
		return;
	}
	plugin.handle = h;
}

static const struct cuda_plugin *plugin_get(void)
{
	pthread_once(&plugin_once, plugin_load);
	return &plugin;
}

int backend_cuda_device_count(char *why, size_t cap)
{
	if (why && cap)
		why[0] = 0;
	/* Without the NVIDIA driver there is no device: answer without loading cuBLAS. A
	 * library named by $BATCHGEN_CUDA_LIB is asked directly (e.g. gpu/emu's). */
	const char *env = getenv("BATCHGEN_CUDA_LIB");
	if (!env || !*env) {
		void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
		if (!driver)
			return 0;
		dlclose(driver);
	}
	const struct cuda_plugin *p = plugin_get();
	return p->handle ? p->device_count(why, cap) : 0;
}

enum bg_status backend_cuda_create(const struct model *m, const struct backend_config *cfg,
				   struct backend **out, struct bg_err *err)
{
	const struct cuda_plugin *p = plugin_get();
	*out = NULL;
	if (!p->handle)
		return bg_fail(err, BG_ERR_DEVICE, "%s", p->why);
	return p->create(m, cfg, out, err);
}
