/* cuda_absent: the CUDA backend entry points in a build without CUDA. */
#include "backend_cuda.h"

bool backend_cuda_compiled(void)
{
	return false;
}

int backend_cuda_device_count(void)
{
	return 0;
}

enum bg_status backend_cuda_create(const struct model *m, const struct backend_config *cfg,
				   struct backend **out, struct bg_err *err)
{
	(void)m;
	(void)cfg;
	*out = NULL;
	return bg_fail(err, BG_ERR_DEVICE,
		       "the CUDA backend is not available: this batchgen was built without CUDA "
		       "(rebuild with nvcc on PATH or CUDA=1)");
}
