/* labpool's GPU slice library, preloaded (LD_PRELOAD) into every process of a job that holds a
 * slice of a card. It wraps the CUDA driver's allocation calls and NVML's memory queries so
 * that the job's processes together never hold more GPU memory than the slice, and see the
 * slice as the card's size.
 *
 * The job's account is a small file the agent makes in the job's directory
 * ($LABPOOL_SLICE_ACCOUNT), mapped shared by every process of the job: the slice's limit, the
 * bytes the job holds, its peak, and one slot per process so that what a dead process held is
 * taken back. The layout is `labpool_gpu_slice::account` on the Rust side; keep them equal.
 *
 * Calls are caught three ways: as exported symbols (a program linked with -lcuda), through
 * dlsym (frameworks that dlopen libcuda.so.1), and through cuGetProcAddress (the CUDA runtime
 * since 11.3 and 12.x), whose answers are swapped for the wrappers here.
 *
 * Without $LABPOOL_SLICE_ACCOUNT, or when it cannot be mapped, each process is held to
 * $LABPOOL_SLICE_LIMIT_MIB on its own; without either, the library passes every call through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef void *CUstream;
typedef void *CUmemoryPool;
typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_FOUND 500

#define MAGIC 0x3145434c53504c4cULL /* "LLPSLCE1", little endian */
#define SLOTS 128

struct slot { int32_t pid; uint32_t pad; uint64_t used; };
struct account {
    uint64_t magic, limit, used, peak;
    uint32_t nslots, pad;
    struct slot slots[SLOTS];
};

static struct account local;       /* when there is no shared account */
static struct account *acc;       /* NULL: pass through */
static int my_slot = -1;
static int nvml_index = -1;        /* the sliced card's NVML index; -1: every card */

/* ---- the real functions ---------------------------------------------------------------- */

static void *(*real_dlsym)(void *, const char *);

static void find_real_dlsym(void) {
    static const char *versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
    for (size_t i = 0; i < sizeof versions / sizeof *versions && !real_dlsym; i++)
        real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", versions[i]);
}

static void *library(const char *name, void **cache) {
    if (!*cache) {
        void *h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
        *cache = h ? h : dlopen(name, RTLD_LAZY);
    }
    return *cache;
}

static void *real_cuda(const char *name) {
    static void *h;
    if (!real_dlsym) find_real_dlsym();
    void *lib = library("libcuda.so.1", &h);
    return lib && real_dlsym ? real_dlsym(lib, name) : NULL;
}

static void *real_nvml(const char *name) {
    static void *h;
    if (!real_dlsym) find_real_dlsym();
    void *lib = library("libnvidia-ml.so.1", &h);
    return lib && real_dlsym ? real_dlsym(lib, name) : NULL;
}

#define REAL(kind, type, name) \
    static __typeof__((type)0) fn; \
    if (!fn) fn = (type)real_##kind(name); \
    if (!fn) return CUDA_ERROR_NOT_FOUND

/* ---- the account ----------------------------------------------------------------------- */

static int books_lock; /* guards the pointer and handle tables and this process's slot */

static void after_fork(void) {
    my_slot = -1;
    books_lock = 0; /* a thread of the parent may have held it; the child has only this one */
}

/* A spin lock rather than a mutex: taking it is one atomic exchange and giving it back a
 * plain store, where a mutex costs an atomic operation each way (this is on every allocation
 * and free). It is held for a table update only; a waiter yields. */
static void lock_books(void) {
    while (__atomic_exchange_n(&books_lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&books_lock, __ATOMIC_RELAXED)) sched_yield();
}

static void unlock_books(void) { __atomic_store_n(&books_lock, 0, __ATOMIC_RELEASE); }

__attribute__((constructor)) static void start(void) {
    find_real_dlsym();
    pthread_atfork(NULL, NULL, after_fork);
    const char *idx = getenv("LABPOOL_SLICE_GPU");
    if (idx && *idx) nvml_index = atoi(idx);
    const char *path = getenv("LABPOOL_SLICE_ACCOUNT");
    if (path && *path) {
        int fd = open(path, O_RDWR | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(struct account)) {
            void *m = mmap(NULL, sizeof(struct account), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (m != MAP_FAILED && ((struct account *)m)->magic == MAGIC) acc = m;
        }
        if (fd >= 0) close(fd);
        if (acc) return;
    }
    const char *mib = getenv("LABPOOL_SLICE_LIMIT_MIB");
    if (mib && *mib) {
        local.magic = MAGIC;
        local.limit = strtoull(mib, NULL, 10) << 20;
        local.nslots = 0;
        acc = &local;
        if (path && *path)
            fprintf(stderr, "labpool: the slice account %s could not be opened; this process alone "
                            "is held to %s MiB\n", path, mib);
    }
}

static struct slot *own_slot(void) {
    if (acc == &local) return NULL;
    if (my_slot >= 0) return &acc->slots[my_slot];
    int32_t me = (int32_t)getpid();
    uint32_t n = acc->nslots < SLOTS ? acc->nslots : SLOTS;
    for (uint32_t i = 0; i < n; i++) {
        int32_t free_pid = 0;
        if (__atomic_compare_exchange_n(&acc->slots[i].pid, &free_pid, me, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            my_slot = (int)i;
            return &acc->slots[i];
        }
    }
    return NULL; /* every slot taken: still counted in the total, just not taken back at death */
}

/* Takes back what dead processes of the job held. True when something came back. */
static int reclaim_dead(void) {
    int any = 0;
    uint32_t n = acc->nslots < SLOTS ? acc->nslots : SLOTS;
    for (uint32_t i = 0; i < n; i++) {
        struct slot *s = &acc->slots[i];
        int32_t pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
        if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) continue;
        if (!__atomic_compare_exchange_n(&s->pid, &pid, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        uint64_t held = __atomic_exchange_n(&s->used, 0, __ATOMIC_ACQ_REL);
        __atomic_fetch_sub(&acc->used, held, __ATOMIC_ACQ_REL);
        __atomic_store_n(&s->pid, 0, __ATOMIC_RELEASE);
        any |= held > 0;
    }
    return any;
}

/* Books `n` bytes, or says no when the slice has no room for them. */
static int reserve(uint64_t n) {
    if (!acc) return 1;
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t cur = __atomic_load_n(&acc->used, __ATOMIC_ACQUIRE);
        while (n <= acc->limit && cur <= acc->limit - n) {
            if (__atomic_compare_exchange_n(&acc->used, &cur, cur + n, 1, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                uint64_t peak = __atomic_load_n(&acc->peak, __ATOMIC_RELAXED);
                while (cur + n > peak &&
                       !__atomic_compare_exchange_n(&acc->peak, &peak, cur + n, 1,
                                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                }
                return 1;
            }
        }
        if (acc == &local || !reclaim_dead()) break;
    }
    return 0;
}

/* Gives `n` bytes back to the job's account (the process's slot is kept by the books). */
static void release(uint64_t n) {
    if (!acc || n == 0) return;
    __atomic_fetch_sub(&acc->used, n, __ATOMIC_ACQ_REL);
}

/* ---- what each allocation holds, by pointer or handle ------------------------------------ */

struct entry { uint64_t key, size; };
struct table { struct entry *e; size_t cap, n; };
static struct table pointers;
static struct table handles;

/* What this process holds, in its slot of the account, so that it is taken back when the
 * process dies. Only this process writes it, under the books' lock, so a plain store does. */
static void slot_add(uint64_t n, int sign) {
    struct slot *s = own_slot();
    if (!s) return;
    uint64_t held = __atomic_load_n(&s->used, __ATOMIC_RELAXED);
    __atomic_store_n(&s->used, sign > 0 ? held + n : (held > n ? held - n : 0), __ATOMIC_RELEASE);
}

static size_t slot_of(uint64_t key, size_t cap) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static void put_locked(struct table *t, uint64_t key, uint64_t size) {
    size_t i = slot_of(key, t->cap);
    while (t->e[i].key && t->e[i].key != key) i = (i + 1) & (t->cap - 1);
    if (!t->e[i].key) t->n++;
    t->e[i].key = key;
    t->e[i].size = size;
}

/* Books an allocation the driver made: its size by key, and in the process's slot. A process
 * that dies between the booking in the account and here leaves its bytes booked to the job. */
static void remember(struct table *t, uint64_t key, uint64_t size) {
    if (!acc || !key) return;
    lock_books();
    slot_add(size, 1);
    if ((t->n + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        struct entry *old = t->e, *e = calloc(cap, sizeof *e);
        size_t old_cap = t->cap;
        if (e) {
            t->e = e;
            t->cap = cap;
            t->n = 0;
            for (size_t i = 0; i < old_cap; i++)
                if (old[i].key) put_locked(t, old[i].key, old[i].size);
            free(old);
        }
    }
    if (t->cap) put_locked(t, key, size);
    unlock_books();
}

/* Removes `key` and returns what it held: 0 when it was not booked here. */
static uint64_t forget(struct table *t, uint64_t key) {
    uint64_t size = 0;
    if (!acc) return 0;
    lock_books();
    if (t->cap && key) {
        size_t i = slot_of(key, t->cap);
        while (t->e[i].key && t->e[i].key != key) i = (i + 1) & (t->cap - 1);
        if (t->e[i].key == key) {
            size = t->e[i].size;
            t->e[i].key = 0;
            t->n--;
            /* Backward-shift the run after it, so that lookups need no tombstones. */
            size_t j = i;
            for (;;) {
                j = (j + 1) & (t->cap - 1);
                if (!t->e[j].key) break;
                size_t home = slot_of(t->e[j].key, t->cap);
                if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
                    t->e[i] = t->e[j];
                    t->e[j].key = 0;
                    i = j;
                }
            }
            slot_add(size, -1);
        }
    }
    unlock_books();
    return size;
}

/* ---- CUDA driver ------------------------------------------------------------------------ */

#define ALLOC_BODY(call)                                      \
    if (!reserve(size)) return CUDA_ERROR_OUT_OF_MEMORY;      \
    CUresult r = call;                                        \
    if (r != CUDA_SUCCESS) release(size);                     \
    else remember(&pointers, (uint64_t)*dptr, size);          \
    return r

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
    REAL(cuda, CUresult (*)(CUdeviceptr *, size_t), "cuMemAlloc_v2");
    ALLOC_BODY(fn(dptr, size));
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags) {
    REAL(cuda, CUresult (*)(CUdeviceptr *, size_t, unsigned int), "cuMemAllocManaged");
    ALLOC_BODY(fn(dptr, size, flags));
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s) {
    REAL(cuda, CUresult (*)(CUdeviceptr *, size_t, CUstream), "cuMemAllocAsync");
    ALLOC_BODY(fn(dptr, size, s));
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s) {
    REAL(cuda, CUresult (*)(CUdeviceptr *, size_t, CUstream), "cuMemAllocAsync_ptsz");
    ALLOC_BODY(fn(dptr, size, s));
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool p, CUstream s) {
    REAL(cuda, CUresult (*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream), "cuMemAllocFromPoolAsync");
    ALLOC_BODY(fn(dptr, size, p, s));
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool p, CUstream s) {
    REAL(cuda, CUresult (*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream),
         "cuMemAllocFromPoolAsync_ptsz");
    ALLOC_BODY(fn(dptr, size, p, s));
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned int elem) {
    REAL(cuda, CUresult (*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int),
         "cuMemAllocPitch_v2");
    uint64_t size = (uint64_t)width * height;
    if (!reserve(size)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = fn(dptr, pitch, width, height, elem);
    if (r != CUDA_SUCCESS) {
        release(size);
        return r;
    }
    /* The pitch pads each row: book the padding too, or give the memory back. */
    uint64_t real = (uint64_t)*pitch * height;
    if (real > size && !reserve(real - size)) {
        static CUresult (*free_fn)(CUdeviceptr);
        if (!free_fn) free_fn = (CUresult (*)(CUdeviceptr))real_cuda("cuMemFree_v2");
        if (free_fn) free_fn(*dptr);
        release(size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    remember(&pointers, (uint64_t)*dptr, real > size ? real : size);
    return r;
}

#define FREE_BODY(call)                                        \
    CUresult r = call;                                         \
    if (r == CUDA_SUCCESS) release(forget(&pointers, (uint64_t)dptr)); \
    return r

CUresult cuMemFree_v2(CUdeviceptr dptr) {
    REAL(cuda, CUresult (*)(CUdeviceptr), "cuMemFree_v2");
    FREE_BODY(fn(dptr));
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
    REAL(cuda, CUresult (*)(CUdeviceptr, CUstream), "cuMemFreeAsync");
    FREE_BODY(fn(dptr, s));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
    REAL(cuda, CUresult (*)(CUdeviceptr, CUstream), "cuMemFreeAsync_ptsz");
    FREE_BODY(fn(dptr, s));
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const void *prop,
                     unsigned long long flags) {
    REAL(cuda, CUresult (*)(CUmemGenericAllocationHandle *, size_t, const void *, unsigned long long),
         "cuMemCreate");
    if (!reserve(size)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = fn(handle, size, prop, flags);
    if (r != CUDA_SUCCESS) release(size);
    else remember(&handles, (uint64_t)*handle, size);
    return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    REAL(cuda, CUresult (*)(CUmemGenericAllocationHandle), "cuMemRelease");
    CUresult r = fn(handle);
    if (r == CUDA_SUCCESS) release(forget(&handles, (uint64_t)handle));
    return r;
}

CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
    REAL(cuda, CUresult (*)(size_t *, size_t *), "cuMemGetInfo_v2");
    CUresult r = fn(free_b, total_b);
    if (r != CUDA_SUCCESS || !acc) return r;
    if (acc != &local) reclaim_dead(); /* what dead processes held is free on the card */
    uint64_t used = __atomic_load_n(&acc->used, __ATOMIC_ACQUIRE);
    uint64_t room = used < acc->limit ? acc->limit - used : 0;
    if (total_b && *total_b > acc->limit) *total_b = acc->limit;
    if (free_b && *free_b > room) *free_b = room;
    return r;
}

/* ---- cuGetProcAddress and dlsym: hand out the wrappers ----------------------------------- */

struct hook { const char *base, *name; void *fn; };
static const struct hook hooks[] = {
    {"cuMemAlloc", "cuMemAlloc_v2", (void *)cuMemAlloc_v2},
    {"cuMemAllocManaged", "cuMemAllocManaged", (void *)cuMemAllocManaged},
    {"cuMemAllocAsync", "cuMemAllocAsync", (void *)cuMemAllocAsync},
    {"cuMemAllocAsync", "cuMemAllocAsync_ptsz", (void *)cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemAllocPitch", "cuMemAllocPitch_v2", (void *)cuMemAllocPitch_v2},
    {"cuMemFree", "cuMemFree_v2", (void *)cuMemFree_v2},
    {"cuMemFreeAsync", "cuMemFreeAsync", (void *)cuMemFreeAsync},
    {"cuMemFreeAsync", "cuMemFreeAsync_ptsz", (void *)cuMemFreeAsync_ptsz},
    {"cuMemCreate", "cuMemCreate", (void *)cuMemCreate},
    {"cuMemRelease", "cuMemRelease", (void *)cuMemRelease},
    {"cuMemGetInfo", "cuMemGetInfo_v2", NULL /* set below: cuMemGetInfo_v2 */},
    {"cuGetProcAddress", "cuGetProcAddress", NULL},
    {"cuGetProcAddress", "cuGetProcAddress_v2", NULL},
    {"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo", NULL},
    {"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo_v2", NULL},
};

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                             int *status);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m);

static void *hook_fn(const struct hook *h) {
    if (h->fn) return h->fn;
    if (!strcmp(h->name, "cuMemGetInfo_v2")) return (void *)cuMemGetInfo_v2;
    if (!strcmp(h->name, "cuGetProcAddress")) return (void *)cuGetProcAddress;
    if (!strcmp(h->name, "cuGetProcAddress_v2")) return (void *)cuGetProcAddress_v2;
    if (!strcmp(h->name, "nvmlDeviceGetMemoryInfo")) return (void *)nvmlDeviceGetMemoryInfo;
    return (void *)nvmlDeviceGetMemoryInfo_v2;
}

/* The driver answered `symbol` with `*pfn`: where that is one of the calls wrapped here, the
 * wrapper goes out instead. The answer is compared with the real entry point, so a version
 * other than the one wrapped (cuMemAlloc's 32-bit original) passes through as it is. */
static void swap(const char *symbol, void **pfn) {
    if (!acc || !pfn || !*pfn) return;
    for (size_t i = 0; i < sizeof hooks / sizeof *hooks; i++) {
        if (strcmp(hooks[i].base, symbol)) continue;
        if (real_cuda(hooks[i].name) == *pfn) {
            *pfn = hook_fn(&hooks[i]);
            return;
        }
    }
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    REAL(cuda, CUresult (*)(const char *, void **, int, unsigned long long), "cuGetProcAddress");
    CUresult r = fn(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && symbol) swap(symbol, pfn);
    return r;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                             int *status) {
    REAL(cuda, CUresult (*)(const char *, void **, int, unsigned long long, int *),
         "cuGetProcAddress_v2");
    CUresult r = fn(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && symbol) swap(symbol, pfn);
    return r;
}

void *dlsym(void *handle, const char *symbol) {
    if (!real_dlsym) find_real_dlsym();
    if (acc && handle != RTLD_NEXT)
        for (size_t i = 0; i < sizeof hooks / sizeof *hooks; i++)
            if (!strcmp(hooks[i].name, symbol)) return hook_fn(&hooks[i]);
    return real_dlsym ? real_dlsym(handle, symbol) : NULL;
}

/* ---- NVML: nvidia-smi and the frameworks' memory queries see the slice --------------------- */

static int is_sliced_card(nvmlDevice_t d) {
    if (nvml_index < 0) return 1;
    static nvmlReturn_t (*index_fn)(nvmlDevice_t, unsigned int *);
    if (!index_fn) index_fn = (nvmlReturn_t (*)(nvmlDevice_t, unsigned int *))real_nvml("nvmlDeviceGetIndex");
    unsigned int i;
    return !index_fn || index_fn(d, &i) != 0 || (int)i == nvml_index;
}

static void cap_view(unsigned long long *total, unsigned long long *free_b, unsigned long long *used) {
    if (acc != &local) reclaim_dead();
    uint64_t held = __atomic_load_n(&acc->used, __ATOMIC_ACQUIRE);
    if (*total > acc->limit) *total = acc->limit;
    *used = held < *total ? held : *total;
    *free_b = *total - *used;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    REAL(nvml, nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t *), "nvmlDeviceGetMemoryInfo");
    nvmlReturn_t r = fn(d, m);
    if (r == 0 && acc && m && is_sliced_card(d)) cap_view(&m->total, &m->free, &m->used);
    return r;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    REAL(nvml, nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t *), "nvmlDeviceGetMemoryInfo_v2");
    nvmlReturn_t r = fn(d, m);
    if (r == 0 && acc && m && is_sliced_card(d)) {
        cap_view(&m->total, &m->free, &m->used);
        m->reserved = 0;
    }
    return r;
}
