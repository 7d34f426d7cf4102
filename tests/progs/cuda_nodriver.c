/*
 * A CUDA runtime client for the no-driver e2e test (t_cuda_nodriver.sh):
 * linked against libcudart, it asks for devices, tries an allocation and a
 * synchronisation, and reports on stderr (never stdout, so the test can
 * check that the agent prints nothing there):
 *
 *   devices=<n> count_err=<e> malloc_err=<e> injection=<CUDA_INJECTION64_PATH>
 *
 * Exit 0 after the calls (whatever CUDA answered), 77 when built without
 * the CUDA runtime.
 */
#include <stdio.h>
#include <stdlib.h>

#if defined(GT__HAVE_CUDART) && __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>

int main(void)
{
    int n = 0;
    cudaError_t ce = cudaGetDeviceCount(&n);
    void *p = NULL;
    cudaError_t me = cudaMalloc(&p, 1 << 20);
    if (me == cudaSuccess)
        cudaFree(p);
    (void)cudaDeviceSynchronize();
    const char *inj = getenv("CUDA_INJECTION64_PATH");
    fprintf(stderr, "devices=%d count_err=%d malloc_err=%d injection=%s\n",
            ce == cudaSuccess ? n : 0, (int)ce, (int)me, inj ? inj : "-");
    return 0;
}
#else
int main(void)
{
    fprintf(stderr, "built without the CUDA runtime\n");
    return 77;
}
#endif
