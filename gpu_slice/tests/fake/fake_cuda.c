/* A stand-in for the CUDA driver (libcuda.so.1), built by the tests with gcc: one card of
 * $FAKE_CUDA_TOTAL_MIB (default 24576) MiB, whose memory each process counts on its own. It
 * implements the calls a framework makes to allocate and to ask what is free, and hands them
 * out through cuGetProcAddress as the real driver does. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
#define OK 0
#define OOM 2
#define INVALID 1
#define NOT_FOUND 500

static uint64_t used, next_ptr = 0x700000000000ULL, next_handle = 1;

/* With $FAKE_CUDA_SYSCALL set, every allocation and free enters the kernel once (getppid), as
 * the real driver does through its ioctls: the benchmark's model of a driver call's floor. */
static void driver_entry(void) {
    static int mode = -1;
    if (mode < 0) mode = getenv("FAKE_CUDA_SYSCALL") != NULL;
    if (mode) (void)syscall(SYS_getppid);
}

static uint64_t total(void) {
    const char *t = getenv("FAKE_CUDA_TOTAL_MIB");
    return (t ? strtoull(t, NULL, 10) : 24576ULL) << 20;
}

static CUresult take(CUdeviceptr *p, size_t n) {
    driver_entry();
    if (!p) return INVALID;
    if (n > total() - used) return OOM;
    used += n;
    *p = next_ptr;
    next_ptr += (n + 4095) & ~4095ULL;
    return OK;
}

CUresult cuInit(unsigned int flags) { (void)flags; return OK; }
CUresult cuDriverGetVersion(int *v) { *v = 12040; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return i == 0 ? OK : INVALID; }
CUresult cuDeviceTotalMem_v2(size_t *b, int d) { (void)d; *b = total(); return OK; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) { *ctx = (void *)(uintptr_t)(d + 1); return OK; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return OK; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { return take(p, n); }
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int f) { (void)f; return take(p, n); }
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, void *s) { (void)s; return take(p, n); }
CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned int e) {
    (void)e;
    *pitch = (w + 511) & ~511ULL;
    return take(p, *pitch * h);
}
/* The fake frees nothing by size: what a process freed shows in what it may take again only
 * through the slice library's account. */
CUresult cuMemFree_v2(CUdeviceptr p) { driver_entry(); return p ? OK : INVALID; }
CUresult cuMemFreeAsync(CUdeviceptr p, void *s) { (void)s; return p ? OK : INVALID; }
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const void *prop,
                     unsigned long long flags) {
    (void)prop; (void)flags;
    if (n > total() - used) return OOM;
    used += n;
    *h = next_handle++;
    return OK;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return h ? OK : INVALID; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) {
    *t = total();
    *f = total() - used;
    return OK;
}

struct entry { const char *name; void *fn; };
static const struct entry table[] = {
    {"cuInit", (void *)cuInit},
    {"cuDriverGetVersion", (void *)cuDriverGetVersion},
    {"cuDeviceGetCount", (void *)cuDeviceGetCount},
    {"cuDeviceGet", (void *)cuDeviceGet},
    {"cuDeviceTotalMem", (void *)cuDeviceTotalMem_v2},
    {"cuMemAlloc", (void *)cuMemAlloc_v2},
    {"cuMemAllocManaged", (void *)cuMemAllocManaged},
    {"cuMemAllocAsync", (void *)cuMemAllocAsync},
    {"cuMemAllocPitch", (void *)cuMemAllocPitch_v2},
    {"cuMemFree", (void *)cuMemFree_v2},
    {"cuMemFreeAsync", (void *)cuMemFreeAsync},
    {"cuMemCreate", (void *)cuMemCreate},
    {"cuMemRelease", (void *)cuMemRelease},
    {"cuMemGetInfo", (void *)cuMemGetInfo_v2},
};

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    (void)version; (void)flags;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(table[i].name, symbol)) {
            *pfn = table[i].fn;
            return OK;
        }
    *pfn = NULL;
    return NOT_FOUND;
}
