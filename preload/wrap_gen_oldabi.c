/*
 * wrap_gen_oldabi.c: the wrappers of the driver's old ABI: the names libcuda still
 * exports for programs built against an older toolkit (cuMemcpyHtoD with 32-bit sizes,
 * cuStreamWaitValue32 before CUDA 11.7, cuStreamBeginCapture without a mode, ...), which
 * cuGetProcAddress and cudaGetDriverEntryPoint(ByVersion) hand out when the version asked
 * for is older than the current form's (cudaTypedefs.h names each form PFN_<name>_v<ver>).
 * cuda.h declares them only under __CUDA_API_VERSION_INTERNAL, which also drops the macros
 * that map the plain names onto the _v2 forms, so they are compiled here, under that
 * macro and the header's own prototypes, and nowhere else. wrap_cuda.c substitutes these
 * wrappers for the real functions by address, as for every other entry point.
 *
 * The generated ones (DH_HOOKS_GEN_CUDA_OLDABI) drain and forward; the four of
 * DH_HOOKS_CUDA_OLDABI do what their current forms' wrappers do.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
/* The GL, EGL and VDPAU types: the system's headers, else those gen-entries wrote
 * (-idirafter); cudaGL.h and cudaVDPAU.h expect them included first. */
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GL/gl.h>
#include <vdpau/vdpau.h>
#include <cudaEGL.h>
#include <cudaGL.h>
#include <cudaVDPAU.h>

#include "breaks.h"
#include "wrap.h"
#include "wrap_gen.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define DH_OLDABI_DRAIN(lib, ret, name, params, args)                                      \
    DH_WRAP_DRAIN(lib, ret, name, params, args, DH_DRAIN_UNCAPTURABLE,                    \
                  dh_break(DH_BREAK_DRAIN_GENERATED), 1)

DH_HOOKS_GEN_CUDA_OLDABI(DH_OLDABI_DRAIN)

/* Graph capture begins (the global capture mode, the only one before CUDA 10.1): drain,
 * then pass everything through until it ends, as cuStreamBeginCapture_v2 (wrap_cuda.c). */
DH_WRAP_CAPTURE_BEGIN(CUDA, CUresult, cuStreamBeginCapture, (CUstream hStream), (hStream))
DH_WRAP_CAPTURE_BEGIN(CUDA, CUresult, cuStreamBeginCapture_ptsz, (CUstream hStream), (hStream))

/* As cuStreamDestroy_v2 and cuEventDestroy_v2 (wrap_cuda.c). */
DH_HOOK_EXPORT CUresult cuStreamDestroy(CUstream hStream)
{
    DH_WRAP_ENTER(CUDA, CUresult, cuStreamDestroy);
    if (dh__may_defer())
        dh_sched_drain(DH_DRAIN_STREAM_DESTROY);
    if (dh_sched_mirroring())
        dh_sched_stream_forget((cudaStream_t)hStream);
    CUresult rc = real_(hStream);
    dh__hook_leave();
    return rc;
}

DH_HOOK_EXPORT CUresult cuEventDestroy(CUevent hEvent)
{
    DH_WRAP_ENTER(CUDA, CUresult, cuEventDestroy);
    if (dh__may_defer() && hEvent != NULL && dh_sched_event_destroy_later((cudaEvent_t)hEvent, 1)) {
        dh__hook_leave();
        return CUDA_SUCCESS;
    }
    if (dh_sched_mirroring())
        dh_sched_event_forget((cudaEvent_t)hEvent);
    CUresult rc = real_(hEvent);
    dh__hook_leave();
    return rc;
}

void *const dh__oldabi_wrappers[] = {
#define DH__OLDABI_ADDR(lib, ret, name, params, args) (void *)&name,
    DH_HOOKS_OLDABI(DH__OLDABI_ADDR)
#undef DH__OLDABI_ADDR
    NULL,
};
