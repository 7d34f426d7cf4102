/*
 * An NVTX client built against the toolkit's nvtx3 headers (header-only:
 * it links nothing from CUDA), for t_cuda_nvtx.sh. With the agent
 * preloaded, NVTX finds it through NVTX_INJECTION64_PATH. It emits, on the
 * main thread:
 *
 *   push "train_step"
 *     push "block.0"  push "forward"  mark "mid-forward"  pop  pop
 *     domain "kernels": push (registered string "gemm tile") pop
 *     start/end range "prefetch" (ended after the pushes)
 *     push "aten::addmm, seq = 7"  pop
 *   pop
 *
 * and prints nothing on stdout. Exit 77 without the nvtx3 headers.
 */
#include <stdio.h>
#include <string.h>

#if __has_include(<nvtx3/nvToolsExt.h>)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wshadow"
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic pop

int main(void)
{
    nvtxRangePushA("train_step");
    nvtxRangeId_t pre = nvtxRangeStartA("prefetch");
    nvtxRangePushA("block.0");
    nvtxRangePushA("forward");
    nvtxMarkA("mid-forward");
    nvtxRangePop();
    nvtxRangePop();
    nvtxDomainHandle_t d = nvtxDomainCreateA("kernels");
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof(a));
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = nvtxDomainRegisterStringA(d, "gemm tile");
    nvtxDomainRangePushEx(d, &a);
    nvtxDomainRangePop(d);
    nvtxRangeEnd(pre);
    nvtxRangePushA("aten::addmm, seq = 7");
    nvtxRangePop();
    nvtxRangePop();
    return 0;
}
#else
int main(void)
{
    fprintf(stderr, "built without the nvtx3 headers\n");
    return 77;
}
#endif
