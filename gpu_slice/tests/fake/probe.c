/* A test program that allocates GPU memory through the CUDA driver, the way frameworks reach
 * it, and prints what each step got. Usage: probe WAY STEP...
 *   WAY: linked   calls the driver's symbols directly (built with -lcuda; absent when built
 *                 with -DPROBE_NO_LINK, for a machine whose driver is only found at run time)
 *        dlsym    dlopen("libcuda.so.1") and dlsym, as PyTorch's and JAX's loaders do
 *        procaddr cuGetProcAddress for every entry point, as the CUDA runtime does
 *   STEP: alloc MIB | free | info | vmm MIB | unvmm | async MIB | managed MIB | pitch W H
 *         | hold SECONDS | child WAY STEP...   (runs the rest in a child process, and waits)
 *         | nvml INDEX   (NVML's memory view of GPU INDEX, as nvidia-smi reads it)
 *         | ctx          (cuInit and device 0's primary context, which a real driver needs first)
 * Each step prints one line: "alloc 512 ok", "alloc 512 err 2", "info free=... total=...". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

CUresult cuInit(unsigned int);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const void *, unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, void *);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
CUresult cuGetProcAddress(const char *, void **, int, unsigned long long);

static struct {
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*info)(size_t *, size_t *);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const void *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*async)(CUdeviceptr *, size_t, void *);
    CUresult (*managed)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
} cu;

static void load(const char *way) {
#ifndef PROBE_NO_LINK
    if (!strcmp(way, "linked")) {
        cu.alloc = cuMemAlloc_v2; cu.free = cuMemFree_v2; cu.info = cuMemGetInfo_v2;
        cu.create = cuMemCreate; cu.release = cuMemRelease; cu.async = cuMemAllocAsync;
        cu.managed = cuMemAllocManaged; cu.pitch = cuMemAllocPitch_v2;
        return;
    }
#endif
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen failed: %s\n", dlerror()); exit(3); }
    if (!strcmp(way, "dlsym")) {
        cu.alloc = dlsym(h, "cuMemAlloc_v2"); cu.free = dlsym(h, "cuMemFree_v2");
        cu.info = dlsym(h, "cuMemGetInfo_v2"); cu.create = dlsym(h, "cuMemCreate");
        cu.release = dlsym(h, "cuMemRelease"); cu.async = dlsym(h, "cuMemAllocAsync");
        cu.managed = dlsym(h, "cuMemAllocManaged"); cu.pitch = dlsym(h, "cuMemAllocPitch_v2");
        return;
    }
    CUresult (*gpa)(const char *, void **, int, unsigned long long) = dlsym(h, "cuGetProcAddress");
    if (!gpa) { printf("no cuGetProcAddress\n"); exit(3); }
    gpa("cuMemAlloc", (void **)&cu.alloc, 12000, 0);
    gpa("cuMemFree", (void **)&cu.free, 12000, 0);
    gpa("cuMemGetInfo", (void **)&cu.info, 12000, 0);
    gpa("cuMemCreate", (void **)&cu.create, 12000, 0);
    gpa("cuMemRelease", (void **)&cu.release, 12000, 0);
    gpa("cuMemAllocAsync", (void **)&cu.async, 12000, 0);
    gpa("cuMemAllocManaged", (void **)&cu.managed, 12000, 0);
    gpa("cuMemAllocPitch", (void **)&cu.pitch, 12000, 0);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    load(argv[1]);
    CUdeviceptr ptrs[4096];
    CUmemGenericAllocationHandle handles[256];
    int np = 0, nh = 0;
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "alloc") || !strcmp(s, "async") || !strcmp(s, "managed")) {
            size_t mib = strtoull(argv[++i], NULL, 10);
            CUresult r = !strcmp(s, "alloc")   ? cu.alloc(&ptrs[np], mib << 20)
                         : !strcmp(s, "async") ? cu.async(&ptrs[np], mib << 20, NULL)
                                               : cu.managed(&ptrs[np], mib << 20, 1);
            if (r == 0) { np++; printf("%s %zu ok\n", s, mib); }
            else printf("%s %zu err %d\n", s, mib, r);
        } else if (!strcmp(s, "pitch")) {
            size_t w = strtoull(argv[++i], NULL, 10), h = strtoull(argv[++i], NULL, 10), pitch = 0;
            CUresult r = cu.pitch(&ptrs[np], &pitch, w, h, 4);
            if (r == 0) { np++; printf("pitch ok %zu\n", pitch); }
            else printf("pitch err %d\n", r);
        } else if (!strcmp(s, "free")) {
            CUresult r = np ? cu.free(ptrs[--np]) : 1;
            printf("free %s\n", r == 0 ? "ok" : "err");
        } else if (!strcmp(s, "vmm")) {
            size_t mib = strtoull(argv[++i], NULL, 10);
            CUresult r = cu.create(&handles[nh], mib << 20, NULL, 0);
            if (r == 0) { nh++; printf("vmm %zu ok\n", mib); }
            else printf("vmm %zu err %d\n", mib, r);
        } else if (!strcmp(s, "unvmm")) {
            CUresult r = nh ? cu.release(handles[--nh]) : 1;
            printf("unvmm %s\n", r == 0 ? "ok" : "err");
        } else if (!strcmp(s, "info")) {
            size_t f = 0, t = 0;
            cu.info(&f, &t);
            printf("info free=%zu total=%zu\n", f >> 20, t >> 20);
        } else if (!strcmp(s, "nvml")) {
            unsigned int idx = (unsigned int)atoi(argv[++i]);
            void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
            int (*init)(void) = h ? dlsym(h, "nvmlInit_v2") : NULL;
            int (*by_index)(unsigned int, void **) = h ? dlsym(h, "nvmlDeviceGetHandleByIndex_v2") : NULL;
            struct { unsigned int version; unsigned long long total, reserved, free, used; } m = {0};
            int (*info)(void *, void *) = h ? dlsym(h, "nvmlDeviceGetMemoryInfo_v2") : NULL;
            void *dev = NULL;
            if (!init || !by_index || !info || init() || by_index(idx, &dev) || info(dev, &m)) {
                printf("nvml err\n");
                continue;
            }
            printf("nvml %u total=%llu used=%llu free=%llu\n", idx, m.total >> 20, m.used >> 20, m.free >> 20);
        } else if (!strcmp(s, "ctx")) {
            void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
            int (*init)(unsigned int) = h ? dlsym(h, "cuInit") : NULL;
            int (*get)(int *, int) = h ? dlsym(h, "cuDeviceGet") : NULL;
            int (*retain)(void **, int) = h ? dlsym(h, "cuDevicePrimaryCtxRetain") : NULL;
            int (*set)(void *) = h ? dlsym(h, "cuCtxSetCurrent") : NULL;
            int dev = 0;
            void *ctx = NULL;
            int r = !init || !get || !retain || !set ? -1 : init(0);
            if (!r) r = get(&dev, 0);
            if (!r) r = retain(&ctx, dev);
            if (!r) r = set(ctx);
            printf("ctx %s\n", r ? "err" : "ok");
        } else if (!strcmp(s, "hold")) {
            sleep((unsigned)atoi(argv[++i]));
        } else if (!strcmp(s, "loop")) {
            /* N small allocations, each freed at once: the library's cost per call. */
            long n = atol(argv[++i]);
            for (long k = 0; k < n; k++) {
                CUdeviceptr p;
                if (cu.alloc(&p, 256) != 0 || cu.free(p) != 0) { printf("loop err at %ld\n", k); return 1; }
            }
            printf("loop %ld ok\n", n);
        } else if (!strcmp(s, "child")) {
            pid_t pid = fork();
            if (pid == 0) {
                char *self = "/proc/self/exe";
                argv[i] = self;
                execv(self, &argv[i]);
                _exit(127);
            }
            int st;
            waitpid(pid, &st, 0);
            break;
        } else {
            printf("unknown step %s\n", s);
            return 2;
        }
    }
    return 0;
}
