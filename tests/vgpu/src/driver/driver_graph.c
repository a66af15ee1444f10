/*
 * driver_graph.c: the driver's stream capture and graph launch (libcuda.so.1), on the
 * core's graphs (core/graph.c): cuStreamBeginCapture_v2, cuStreamEndCapture,
 * cuGraphInstantiateWithFlags, cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy.
 */
#include <cuda.h>

#include "vg.h"

static CUresult cu(cudaError_t e) { return (CUresult)e; }

VG_API CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m)
{
    if ((unsigned)m > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    return cu(vg_capture_begin((cudaStream_t)s));
}

VG_API CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
    return cu(vg_capture_end((cudaStream_t)s, (void **)g));
}

VG_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long f)
{
    (void)f;
    return cu(vg_graph_instantiate((void **)e, g));
}

VG_API CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
    return cu(vg_graph_launch(e, (cudaStream_t)s));
}

VG_API CUresult cuGraphExecDestroy(CUgraphExec e) { return cu(vg_graph_release(e)); }
VG_API CUresult cuGraphDestroy(CUgraph g) { return cu(vg_graph_release(g)); }
