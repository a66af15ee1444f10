/*
 * inject.c: libvgpu_nvtx.so, the vgpu's NVTX injection library. NVTX 3 is header-only: a
 * program's NVTX calls are no-ops until the first one finds a tool, by loading the library
 * that NVTX_INJECTION64_PATH names and calling its InitializeInjectionNvtx2 with the
 * program's export table (nvtx3/nvtxDetail/nvtxInit.h, the load sequence; nvtxImpl.h,
 * nvtxGetExportTable and the module function tables). This is what Nsight Systems' own
 * injection does; this one fills the table slots of the calls below with functions that
 * hand them to the vgpu core (vg_trace_*), so that the vgpu's Perfetto trace shows the
 * stream names, ranges and marks a real GPU's timeline would. scripts/vgpu-run sets
 * NVTX_INJECTION64_PATH to it when VGPU_TRACE is set.
 *
 * Taken: the default domain's ASCII marks and push/pop ranges (MarkA, MarkEx,
 * RangePushA, RangePushEx, RangePop), thread names (NameOsThreadA), domains (DomainCreateA,
 * DomainDestroy, DomainRegisterStringA, DomainMarkEx, DomainRangePushEx, DomainRangePop)
 * and stream names (cudart's nvtxNameCudaStreamA, the driver's nvtxNameCuStreamA; the
 * vgpu's CUstream is its cudaStream_t). Start/end ranges, categories, wide strings and the
 * rest stay no-ops: NVTX leaves a slot that a tool does not fill doing nothing.
 */
#define NVTX_NO_IMPL
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "vg.h"

/* A domain handle is its name (owned, never freed while the program may use it). */
static const char *domain_name(nvtxDomainHandle_t d) { return d ? (const char *)d : ""; }

static const char *message(const nvtxEventAttributes_t *a)
{
    if (!a) {
        return NULL;
    }
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) {
        return a->message.ascii;
    }
    if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
        return (const char *)a->message.registered; /* register_string's copy */
    }
    return NULL;
}

static void NVTX_API mark_a(const char *m) { vg_trace_nvtx(VG_NVTX_MARK, "", m); }
static void NVTX_API mark_ex(const nvtxEventAttributes_t *a) { vg_trace_nvtx(VG_NVTX_MARK, "", message(a)); }
static int NVTX_API push_a(const char *m) { return vg_trace_nvtx(VG_NVTX_PUSH, "", m); }
static int NVTX_API push_ex(const nvtxEventAttributes_t *a) { return vg_trace_nvtx(VG_NVTX_PUSH, "", message(a)); }
static int NVTX_API pop(void) { return vg_trace_nvtx(VG_NVTX_POP, "", NULL); }
static void NVTX_API name_os_thread(uint32_t tid, const char *name)
{
    (void)tid; /* NVTX names the calling thread's id in practice; the vgpu keys by caller */
    vg_trace_name_thread(name);
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name)
{
    return (nvtxDomainHandle_t)strdup(name ? name : "");
}
static void NVTX_API domain_destroy(nvtxDomainHandle_t d) { (void)d; /* names stay valid */ }
static nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t d, const char *s)
{
    (void)d;
    return (nvtxStringHandle_t)strdup(s ? s : "");
}
static void NVTX_API domain_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    vg_trace_nvtx(VG_NVTX_MARK, domain_name(d), message(a));
}
static int NVTX_API domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    return vg_trace_nvtx(VG_NVTX_PUSH, domain_name(d), message(a));
}
static int NVTX_API domain_pop(nvtxDomainHandle_t d) { return vg_trace_nvtx(VG_NVTX_POP, domain_name(d), NULL); }

static void NVTX_API name_stream(cudaStream_t s, const char *name) { vg_trace_name_stream(s, name); }

/* Fills slot id of a module's table (ids 1..n are valid). */
static void fill(NvtxFunctionTable t, unsigned n, unsigned id, NvtxFunctionPointer fn)
{
    if (t && id >= 1 && id <= n && t[id]) {
        *t[id] = fn;
    }
}

#define FN(f) ((NvtxFunctionPointer)(void (*)(void))(f))

VG_API int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);
VG_API int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    const NvtxExportTableCallbacks *cb = get ? get(NVTX_ETID_CALLBACKS) : NULL;
    if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable) {
        return 0; /* an NVTX too old to attach to: it stays no-ops */
    }
    NvtxFunctionTable t = NULL;
    unsigned n = 0;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n)) {
        fill(t, n, NVTX_CBID_CORE_MarkA, FN(mark_a));
        fill(t, n, NVTX_CBID_CORE_MarkEx, FN(mark_ex));
        fill(t, n, NVTX_CBID_CORE_RangePushA, FN(push_a));
        fill(t, n, NVTX_CBID_CORE_RangePushEx, FN(push_ex));
        fill(t, n, NVTX_CBID_CORE_RangePop, FN(pop));
        fill(t, n, NVTX_CBID_CORE_NameOsThreadA, FN(name_os_thread));
    }
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n)) {
        fill(t, n, NVTX_CBID_CORE2_DomainCreateA, FN(domain_create));
        fill(t, n, NVTX_CBID_CORE2_DomainDestroy, FN(domain_destroy));
        fill(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, FN(register_string));
        fill(t, n, NVTX_CBID_CORE2_DomainMarkEx, FN(domain_mark));
        fill(t, n, NVTX_CBID_CORE2_DomainRangePushEx, FN(domain_push));
        fill(t, n, NVTX_CBID_CORE2_DomainRangePop, FN(domain_pop));
    }
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CUDART, &t, &n)) {
        fill(t, n, NVTX_CBID_CUDART_NameCudaStreamA, FN(name_stream));
    }
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CUDA, &t, &n)) {
        fill(t, n, NVTX_CBID_CUDA_NameCuStreamA, FN(name_stream));
    }
    return 1;
}
