/* Empty on purpose. clang's CUDA wrapper (__clang_cuda_runtime_wrapper.h, clang 19)
 * includes this header, which CUDA 13 no longer ships; gpu/ uses no texture fetches.
 * Only tests/gpu_gates.sh's clang pass puts this folder on the include path. */
