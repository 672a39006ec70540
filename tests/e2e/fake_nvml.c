/* A scripted stand-in for libnvidia-ml.so.1, built by the e2e tests with gcc.
 *
 * Without a script it reports two RTX 4090s. With $LABPOOL_FAKE_NVML naming a file, every call
 * re-reads that file, so a test changes what the "GPUs" report by rewriting it (atomically).
 * With $LABPOOL_FAKE_NVML_STATIC set, the script is read once (for benchmarks).
 * Without $LABPOOL_FAKE_NVML, the script is nvml-script.txt beside the library itself, so each
 * test's daemons read their own test's script. One fact per line, "KEY GPU VALUES...":
 *   count N                       how many GPUs (default 2)
 *   name G TEXT...                product name (rest of the line)
 *   util G GPU MEM                utilisation, percent
 *   fb G TOTAL_MIB USED_MIB       framebuffer
 *   temp G C
 *   power G MILLIWATTS
 *   energy G MILLIJOULES
 *   clock G SM_MHZ
 *   throttle G MASK
 *   ecc G SBE_VOL DBE_VOL SBE_AGG DBE_AGG   (without it: NOT_SUPPORTED, as consumer cards)
 *   retired G SBE DBE
 *   proc G PID USED_MIB SM_UTIL   a compute process; per-process SM utilisation
 *   xid G COUNT CODE              COUNT XID errors have happened, the last with CODE; each is
 *                                 delivered once through nvmlEventSetWait_v2
 *   nvlink G OTHER                GPUs G and OTHER are linked by NVLink (both ways)
 *   driver VERSION                the driver's version (default 570.86.15); no GPU index
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int ret_t;
#define OK 0
#define INVALID 2
#define NOT_SUPPORTED 3
#define INSUFFICIENT 7
#define TIMEOUT 10
#define MAXG 16
#define MAXP 64

typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem_v2_t;
typedef struct { unsigned int gpu, memory; } util_t;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc_t;
typedef struct { unsigned int pid; unsigned long long ts; unsigned int sm, mem, enc, dec; } psample_t;

struct gpu {
    char name[96];
    unsigned int util, memutil, temp, power, clock;
    unsigned long long fb_total, fb_used, energy, throttle;
    int has_ecc;
    unsigned long long ecc[4];
    unsigned int retired[2];
    unsigned int xid_count;
    unsigned long long xid_code;
    unsigned long long nvlinks; /* bit i: linked to GPU i */
};
struct process { unsigned int gpu, pid, sm; unsigned long long mib; };
static struct gpu G[MAXG];
static struct process P[MAXP];
static unsigned int ngpu, nproc;
static char driver[32];

static int loaded;

static void load(void) {
    /* Benchmarks read a fixed script once, so they time labpool rather than this parser. */
    if (loaded && getenv("LABPOOL_FAKE_NVML_STATIC")) return;
    loaded = 1;
    ngpu = 2;
    nproc = 0;
    snprintf(driver, sizeof driver, "570.86.15");
    for (int i = 0; i < MAXG; i++) {
        memset(&G[i], 0, sizeof G[i]);
        snprintf(G[i].name, sizeof G[i].name, "NVIDIA GeForce RTX 4090");
        G[i].fb_total = 24564;
        G[i].temp = 40;
        G[i].power = 30000;
        G[i].clock = 210;
    }
    const char *path = getenv("LABPOOL_FAKE_NVML");
    char beside[4096];
    Dl_info info;
    if (!path && dladdr((void *)load, &info) && info.dli_fname) {
        char lib[4096];
        snprintf(lib, sizeof lib, "%s", info.dli_fname);
        snprintf(beside, sizeof beside, "%s/nvml-script.txt", dirname(lib));
        path = beside;
    }
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return;
    char line[512], key[32];
    unsigned int g;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (sscanf(line, "count %u", &ngpu) == 1) { if (ngpu > MAXG) ngpu = MAXG; continue; }
        if (sscanf(line, "driver %31s", driver) == 1) continue;
        int at = 0;
        if (sscanf(line, "%31s %u %n", key, &g, &at) < 2 || g >= MAXG) continue;
        struct gpu *d = &G[g];
        const char *rest = line + at;
        if (!strcmp(key, "name")) snprintf(d->name, sizeof d->name, "%s", rest);
        else if (!strcmp(key, "util")) sscanf(rest, "%u %u", &d->util, &d->memutil);
        else if (!strcmp(key, "fb")) sscanf(rest, "%llu %llu", &d->fb_total, &d->fb_used);
        else if (!strcmp(key, "temp")) sscanf(rest, "%u", &d->temp);
        else if (!strcmp(key, "power")) sscanf(rest, "%u", &d->power);
        else if (!strcmp(key, "energy")) sscanf(rest, "%llu", &d->energy);
        else if (!strcmp(key, "clock")) sscanf(rest, "%u", &d->clock);
        else if (!strcmp(key, "throttle")) sscanf(rest, "%llu", &d->throttle);
        else if (!strcmp(key, "ecc"))
            d->has_ecc = sscanf(rest, "%llu %llu %llu %llu", &d->ecc[0], &d->ecc[1], &d->ecc[2], &d->ecc[3]) == 4;
        else if (!strcmp(key, "retired")) sscanf(rest, "%u %u", &d->retired[0], &d->retired[1]);
        else if (!strcmp(key, "xid")) sscanf(rest, "%u %llu", &d->xid_count, &d->xid_code);
        else if (!strcmp(key, "nvlink")) {
            unsigned int o;
            if (sscanf(rest, "%u", &o) == 1 && o < MAXG) {
                d->nvlinks |= 1ULL << o;
                G[o].nvlinks |= 1ULL << g;
            }
        }
        else if (!strcmp(key, "proc") && nproc < MAXP) {
            struct process *p = &P[nproc];
            if (sscanf(rest, "%u %llu %u", &p->pid, &p->mib, &p->sm) == 3) { p->gpu = g; nproc++; }
        }
    }
    fclose(f);
}

static struct gpu *dev(void *d) {
    unsigned long i = (unsigned long)d;
    if (i < 1 || i > ngpu) return NULL;
    return &G[i - 1];
}
#define DEV(d) load(); struct gpu *g = dev(d); if (!g) return INVALID

ret_t nvmlInit_v2(void) { return OK; }
ret_t nvmlShutdown(void) { return OK; }
ret_t nvmlSystemGetDriverVersion(char *out, unsigned int len) {
    load();
    if (!out || len <= strlen(driver)) return INSUFFICIENT;
    snprintf(out, len, "%s", driver);
    return OK;
}
const char *nvmlErrorString(ret_t r) { (void)r; return "fake NVML"; }
ret_t nvmlDeviceGetCount_v2(unsigned int *n) { load(); *n = ngpu; return OK; }
ret_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **d) {
    load();
    if (i >= ngpu) return INVALID;
    *d = (void *)(unsigned long)(i + 1);
    return OK;
}
ret_t nvmlDeviceGetName(void *d, char *name, unsigned int len) { DEV(d); snprintf(name, len, "%s", g->name); return OK; }
ret_t nvmlDeviceGetUUID(void *d, char *uuid, unsigned int len) { DEV(d); snprintf(uuid, len, "GPU-stub-%lu", (unsigned long)d); return OK; }
ret_t nvmlDeviceGetIndex(void *d, unsigned int *i) { DEV(d); (void)g; *i = (unsigned int)((unsigned long)d - 1); return OK; }
ret_t nvmlDeviceGetMinorNumber(void *d, unsigned int *m) { DEV(d); *m = (unsigned int)((unsigned long)d - 1); return OK; }
ret_t nvmlDeviceGetMemoryInfo_v2(void *d, mem_v2_t *m) {
    DEV(d);
    m->total = g->fb_total << 20;
    m->used = g->fb_used << 20;
    m->reserved = 0;
    m->free = m->total - m->used;
    return OK;
}
/* NVML_P2P_STATUS_OK (0) between linked GPUs for the NVLink index (2), else NOT_SUPPORTED (5). */
ret_t nvmlDeviceGetP2PStatus(void *d, void *other, int index, int *status) {
    DEV(d);
    struct gpu *o = dev(other);
    if (!o) return INVALID;
    unsigned int oi = (unsigned int)((unsigned long)other - 1);
    *status = (index == 2 && (g->nvlinks >> oi) & 1) ? 0 : 5;
    return OK;
}
ret_t nvmlDeviceGetUtilizationRates(void *d, util_t *u) { DEV(d); u->gpu = g->util; u->memory = g->memutil; return OK; }
ret_t nvmlDeviceGetTemperature(void *d, int sensor, unsigned int *t) { (void)sensor; DEV(d); *t = g->temp; return OK; }
ret_t nvmlDeviceGetPowerUsage(void *d, unsigned int *mw) { DEV(d); *mw = g->power; return OK; }
ret_t nvmlDeviceGetTotalEnergyConsumption(void *d, unsigned long long *mj) { DEV(d); *mj = g->energy; return OK; }
ret_t nvmlDeviceGetClockInfo(void *d, int type, unsigned int *mhz) { (void)type; DEV(d); *mhz = g->clock; return OK; }
ret_t nvmlDeviceGetCurrentClocksThrottleReasons(void *d, unsigned long long *r) { DEV(d); *r = g->throttle; return OK; }
ret_t nvmlDeviceGetTotalEccErrors(void *d, int type, int counter, unsigned long long *n) {
    DEV(d);
    if (!g->has_ecc) return NOT_SUPPORTED;
    /* type: 0 corrected (single-bit), 1 uncorrected (double-bit); counter: 0 volatile, 1 aggregate */
    *n = g->ecc[(counter ? 2 : 0) + (type ? 1 : 0)];
    return OK;
}
static ret_t retired(void *d, int cause, unsigned int *count, unsigned long long *addr, unsigned long long *ts) {
    DEV(d);
    /* cause: 0 multiple single-bit, 1 double-bit */
    unsigned int have = g->retired[cause ? 1 : 0];
    if (*count < have) { *count = have; return have ? INSUFFICIENT : OK; }
    for (unsigned int i = 0; i < have; i++) { addr[i] = 0x1000ULL * (i + 1); if (ts) ts[i] = 0; }
    *count = have;
    return OK;
}
ret_t nvmlDeviceGetRetiredPages(void *d, int cause, unsigned int *count, unsigned long long *addr) {
    return retired(d, cause, count, addr, NULL);
}
ret_t nvmlDeviceGetRetiredPages_v2(void *d, int cause, unsigned int *count, unsigned long long *addr, unsigned long long *ts) {
    return retired(d, cause, count, addr, ts);
}
/* The scripted processes on device d: their indexes in P, and how many. */
static unsigned int procs_on(void *d, unsigned int *which) {
    unsigned int idx = (unsigned int)((unsigned long)d - 1), n = 0;
    for (unsigned int i = 0; i < nproc; i++) if (P[i].gpu == idx) which[n++] = i;
    return n;
}
ret_t nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned int *count, proc_t *out) {
    DEV(d);
    (void)g;
    unsigned int which[MAXP], have = procs_on(d, which);
    if (!out || *count < have) { *count = have; return have ? INSUFFICIENT : OK; }
    for (unsigned int k = 0; k < have; k++) {
        struct process *p = &P[which[k]];
        out[k].pid = p->pid; out[k].used = p->mib << 20; out[k].gi = out[k].ci = 0xFFFFFFFF;
    }
    *count = have;
    return OK;
}
ret_t nvmlDeviceGetProcessUtilization(void *d, psample_t *out, unsigned int *count, unsigned long long since) {
    (void)since;
    DEV(d);
    (void)g;
    unsigned int which[MAXP], have = procs_on(d, which);
    if (!out || *count < have) { *count = have; return have ? INSUFFICIENT : OK; }
    for (unsigned int k = 0; k < have; k++) {
        memset(&out[k], 0, sizeof out[k]);
        out[k].pid = P[which[k]].pid; out[k].ts = 1; out[k].sm = P[which[k]].sm;
    }
    *count = have;
    return OK;
}

/* Events: XID errors only. Each scripted XID is delivered once; with none pending, a wait sleeps
 * its timeout and says so, as the driver does. */
typedef struct { void *device; unsigned long long type, data; unsigned int gi, ci; } event_t;
static unsigned int delivered[MAXG];
ret_t nvmlEventSetCreate(void **set) { *set = (void *)1; return OK; }
ret_t nvmlEventSetFree(void *set) { (void)set; return OK; }
ret_t nvmlDeviceRegisterEvents(void *d, unsigned long long types, void *set) { (void)types; (void)set; DEV(d); (void)g; return OK; }
ret_t nvmlDeviceGetSupportedEventTypes(void *d, unsigned long long *types) { DEV(d); (void)g; *types = 8; return OK; }
ret_t nvmlEventSetWait_v2(void *set, event_t *data, unsigned int timeout_ms) {
    (void)set;
    load();
    for (unsigned int i = 0; i < ngpu; i++) {
        if (delivered[i] < G[i].xid_count) {
            delivered[i]++;
            memset(data, 0, sizeof *data);
            data->device = (void *)(unsigned long)(i + 1);
            data->type = 8;
            data->data = G[i].xid_code;
            return OK;
        }
    }
    usleep(timeout_ms * 1000);
    return TIMEOUT;
}
