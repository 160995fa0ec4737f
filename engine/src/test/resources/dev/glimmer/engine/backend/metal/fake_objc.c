/*
 * A stand-in for libobjc + Metal, for tests on Linux: objc_msgSend decodes each message by its
 * selector, logs it as one text line, and keeps the object bookkeeping (owned objects, retain
 * counts, autorelease pools) so that a test can check that every owned object is released.
 * It computes nothing. The Java side calls it exactly as it calls the real runtime: one non-variadic
 * downcall per method signature (on x86-64 a variadic callee reads those arguments the same way).
 * A test can make one message fail (answer nil, as Metal does when it cannot make an object) and
 * give one kernel's pipeline smaller limits, to drive the backend's error paths, and read the contents of
 * the buffer any logged binding bound (what the GPU would read there, e.g. a step's StepArgs).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint64_t width, height, depth; } MTLSize;
typedef struct { uint64_t location, length; } NSRange;

typedef struct Obj {
    const char *cls;
    long retain;
    int owned;          /* made by new/alloc/Create: the caller must release it */
    char *str;          /* NSString; the kernel name of an MTLFunction and an MTLComputePipelineState */
    struct Obj *function; /* MTLComputePipelineDescriptor */
    void *mem;          /* MTLBuffer contents */
    uint64_t len;
} Obj;

static char *log_buf;
static size_t log_len, log_cap;
static long live_owned;
static long pool_depth;
static Obj *pool[1 << 16];
static long pool_size;
static long pool_marks[256];
static const char *device_name = "Fake Apple M1";
static long apple_family = 7;       /* the newest MTLGPUFamilyApple<n> the device supports */
static const char *compile_error; /* NULL: the source compiles */
static int residency_sets;          /* whether the device has residency sets (macOS 15) */
static const char *fail_selector;   /* the message that answers nil on its fail_nth call (or MTLCreateSystemDefaultDevice) */
static long fail_nth, fail_seen;
static Obj **bound;                 /* the buffer of each setKernelBuffer:/setBuffer: message, in order */
static long bound_count, bound_cap;
static const char *limited_kernel;  /* the kernel whose pipeline gets the limits below (others: 1024 threads, 0 static) */
static uint64_t limited_threads, limited_static;

static void logline(const char *fmt, ...) {
    if (log_len + 512 > log_cap) {
        log_cap = log_cap ? log_cap * 2 : 1 << 20;
        log_buf = realloc(log_buf, log_cap);
    }
    va_list ap;
    va_start(ap, fmt);
    log_len += vsnprintf(log_buf + log_len, log_cap - log_len, fmt, ap);
    va_end(ap);
    log_buf[log_len++] = '\n';
    log_buf[log_len] = 0;
}

const char *fake_log(void) { return log_buf ? log_buf : ""; }
long fake_live_owned(void) { return live_owned; }
long fake_pool_depth(void) { return pool_depth; }
/* The contents of the buffer that the nth (from 0) setKernelBuffer:/setBuffer: message bound; NULL past the last. */
void *fake_bound_contents(long nth) { return nth >= 0 && nth < bound_count ? bound[nth]->mem : NULL; }
void fake_set_residency_sets(int available) { residency_sets = available; }

void fake_fail(const char *selector, long nth) {
    fail_selector = strdup(selector);
    fail_nth = nth;
    fail_seen = 0;
}

void fake_limit(const char *kernel, uint64_t threads, uint64_t static_memory) {
    limited_kernel = strdup(kernel);
    limited_threads = threads;
    limited_static = static_memory;
}

/* Whether this call of sel is the one that fails. */
static int failing(const char *sel) {
    if (!fail_selector || strcmp(sel, fail_selector) || ++fail_seen != fail_nth) return 0;
    logline("FAILED %s (call %ld)", sel, fail_nth);
    return 1;
}

void fake_configure(const char *name, long family, const char *error) {
    residency_sets = 0;
    fail_selector = NULL;
    limited_kernel = NULL;
    device_name = strdup(name);
    apple_family = family;
    compile_error = error ? strdup(error) : NULL;
    log_len = 0;
    if (log_buf) log_buf[0] = 0;
    bound_count = 0;
}

static Obj *make(const char *cls, int owned) {
    Obj *o = calloc(1, sizeof(Obj));
    o->cls = cls;
    o->retain = 1;
    o->owned = owned;
    if (owned) live_owned++;
    return o;
}

static Obj *autoreleased(Obj *o) {
    if (pool_depth == 0) {
        logline("LEAK %s autoreleased with no pool", o->cls);
    } else {
        pool[pool_size++] = o;
    }
    return o;
}

static Obj *nsstring(const char *s) {
    Obj *o = make("NSString", 0);
    o->str = strdup(s);
    return autoreleased(o);
}

void *objc_getClass(const char *name) { return make(strdup(name), 0); }
void *sel_registerName(const char *name) { return strdup(name); }

void *objc_autoreleasePoolPush(void) {
    pool_marks[pool_depth++] = pool_size;
    return (void *) pool_depth;
}

void objc_autoreleasePoolPop(void *token) {
    if ((long) token != pool_depth) logline("BAD pool pop %ld at depth %ld", (long) token, pool_depth);
    pool_size = pool_marks[--pool_depth];
}

void *MTLCreateSystemDefaultDevice(void) {
    logline("MTLCreateSystemDefaultDevice");
    if (failing("MTLCreateSystemDefaultDevice")) return NULL;
    return make("MTLDevice", 1);
}

static void *owned_result(const char *cls, const char *sel) {
    logline("%s -> owned %s", sel, cls);
    return make(cls, 1);
}

void *objc_msgSend(void *self, const char *sel, ...) {
    Obj *o = self;
    va_list ap;
    va_start(ap, sel);
    void *result = NULL;
    if (failing(sel)) {
        /* nil, as Metal answers when it cannot make the object */
    } else if (!strcmp(sel, "new")) {
        result = owned_result(o->cls, "new");
    } else if (!strcmp(sel, "release")) {
        if (!o->owned) logline("BAD release of unowned %s", o->cls);
        else if (--o->retain == 0) live_owned--;
        logline("release %s", o->cls);
    } else if (!strcmp(sel, "stringWithUTF8String:")) {
        result = nsstring(va_arg(ap, const char *));
        logline("stringWithUTF8String: (%zu bytes)", strlen(((Obj *) result)->str));
    } else if (!strcmp(sel, "UTF8String")) {
        result = o->str;
    } else if (!strcmp(sel, "localizedDescription")) {
        result = nsstring(o->str);
    } else if (!strcmp(sel, "respondsToSelector:")) {
        const char *asked = va_arg(ap, const char *);
        logline("respondsToSelector: %s", asked);
        result = (void *) (intptr_t) (residency_sets && !strcmp(asked, "newResidencySetWithDescriptor:error:"));
    } else if (!strcmp(sel, "newResidencySetWithDescriptor:error:")) {
        Obj *d = va_arg(ap, Obj *);
        void **error = va_arg(ap, void **);
        logline("%s %s %s", sel, d->cls, error ? "error-out" : "none");
        result = make("MTLResidencySet", 1);
    } else if (!strcmp(sel, "setInitialCapacity:")) {
        logline("%s %llu", sel, (unsigned long long) va_arg(ap, uint64_t));
    } else if (!strcmp(sel, "addAllocation:") || !strcmp(sel, "addResidencySet:") || !strcmp(sel, "removeResidencySet:")) {
        logline("%s %s on %s", sel, va_arg(ap, Obj *)->cls, o->cls);
    } else if (!strcmp(sel, "requestResidency") || !strcmp(sel, "endResidency")) {
        logline("%s on %s", sel, o->cls);
    } else if (!strcmp(sel, "name")) {
        result = nsstring(device_name);
    } else if (!strcmp(sel, "supportsFamily:")) {
        long family = va_arg(ap, long);
        logline("supportsFamily: %ld", family);
        result = (void *) (intptr_t) (family > 1000 && family <= 1000 + apple_family);
    } else if (!strcmp(sel, "maxBufferLength")) {
        result = (void *) (intptr_t) (1L << 34);
    } else if (!strcmp(sel, "maxThreadgroupMemoryLength")) {
        result = (void *) (intptr_t) 32768;
    } else if (!strcmp(sel, "recommendedMaxWorkingSetSize")) {
        result = (void *) (intptr_t) 11453251584L;  /* what a 16 GB M1 reports: about two thirds of its RAM */
    } else if (!strcmp(sel, "maxTotalThreadsPerThreadgroup")) {
        result = (void *) (intptr_t) (limited_kernel && !strcmp(o->str, limited_kernel) ? limited_threads : 1024);
    } else if (!strcmp(sel, "staticThreadgroupMemoryLength")) {
        result = (void *) (intptr_t) (limited_kernel && !strcmp(o->str, limited_kernel) ? limited_static : 0);
    } else if (!strcmp(sel, "setFastMathEnabled:")) {
        logline("%s %d on %s", sel, va_arg(ap, int) & 1, o->cls);
    } else if (!strcmp(sel, "newCommandQueue")) {
        result = owned_result("MTLCommandQueue", sel);
    } else if (!strcmp(sel, "newBufferWithLength:options:")) {
        uint64_t len = va_arg(ap, uint64_t);
        uint64_t options = va_arg(ap, uint64_t);
        Obj *b = make("MTLBuffer", 1);
        b->mem = calloc(1, len);
        b->len = len;
        logline("newBufferWithLength:options: %llu %llu", (unsigned long long) len, (unsigned long long) options);
        result = b;
    } else if (!strcmp(sel, "newBufferWithBytesNoCopy:length:options:deallocator:")) {
        void *p = va_arg(ap, void *);
        uint64_t len = va_arg(ap, uint64_t);
        uint64_t options = va_arg(ap, uint64_t);
        void *dealloc = va_arg(ap, void *);
        Obj *b = make("MTLBuffer", 1);
        b->mem = p;
        b->len = len;
        logline("newBufferWithBytesNoCopy:length:options:deallocator: %p %llu %llu %p", p, (unsigned long long) len,
                (unsigned long long) options, dealloc);
        result = b;
    } else if (!strcmp(sel, "contents")) {
        result = o->mem;
    } else if (!strcmp(sel, "newLibraryWithSource:options:error:")) {
        Obj *source = va_arg(ap, Obj *);
        void *options = va_arg(ap, void *);
        void **error = va_arg(ap, void **);
        logline("newLibraryWithSource:options:error: source %zu bytes, options %s, error out %s", strlen(source->str),
                options ? ((Obj *) options)->cls : "(nil)", error ? "given" : "missing");
        if (compile_error) {
            Obj *e = nsstring(compile_error);
            e->cls = "NSError";
            *error = e;
            result = NULL;
        } else {
            result = make("MTLLibrary", 1);
        }
    } else if (!strcmp(sel, "newFunctionWithName:")) {
        Obj *name = va_arg(ap, Obj *);
        logline("newFunctionWithName: %s", name->str);
        Obj *f = make("MTLFunction", 1);
        f->str = strdup(name->str);
        result = f;
    } else if (!strcmp(sel, "setComputeFunction:")) {
        o->function = va_arg(ap, Obj *);
        logline("setComputeFunction: %s", o->function->cls);
    } else if (!strcmp(sel, "setSupportIndirectCommandBuffers:") || !strcmp(sel, "setInheritPipelineState:")
               || !strcmp(sel, "setInheritBuffers:")) {
        logline("%s %d", sel, va_arg(ap, int) & 1);
    } else if (!strcmp(sel, "newComputePipelineStateWithDescriptor:options:reflection:error:")) {
        Obj *d = va_arg(ap, Obj *);
        uint64_t options = va_arg(ap, uint64_t);
        void *reflection = va_arg(ap, void *);
        void **error = va_arg(ap, void **);
        logline("%s %s %llu %p %s", sel, d->cls, (unsigned long long) options, reflection, error ? "error-out" : "none");
        Obj *p = make("MTLComputePipelineState", 1);
        p->str = d->function->str;
        result = p;
    } else if (!strcmp(sel, "setCommandTypes:") || !strcmp(sel, "setMaxKernelBufferBindCount:")) {
        logline("%s %llu", sel, (unsigned long long) va_arg(ap, uint64_t));
    } else if (!strcmp(sel, "newIndirectCommandBufferWithDescriptor:maxCommandCount:options:")) {
        Obj *d = va_arg(ap, Obj *);
        uint64_t count = va_arg(ap, uint64_t);
        uint64_t options = va_arg(ap, uint64_t);
        logline("%s %s %llu %llu", sel, d->cls, (unsigned long long) count, (unsigned long long) options);
        result = make("MTLIndirectCommandBuffer", 1);
    } else if (!strcmp(sel, "indirectComputeCommandAtIndex:")) {
        logline("%s %llu", sel, (unsigned long long) va_arg(ap, uint64_t));
        result = make("MTLIndirectComputeCommand", 0);
    } else if (!strcmp(sel, "setComputePipelineState:")) {
        logline("%s %s on %s", sel, va_arg(ap, Obj *)->cls, o->cls);
    } else if (!strcmp(sel, "setKernelBuffer:offset:atIndex:") || !strcmp(sel, "setBuffer:offset:atIndex:")) {
        Obj *b = va_arg(ap, Obj *);
        uint64_t offset = va_arg(ap, uint64_t);
        uint64_t index = va_arg(ap, uint64_t);
        logline("%s %s %llu %llu", sel, b->cls, (unsigned long long) offset, (unsigned long long) index);
        if (bound_count == bound_cap) {
            bound_cap = bound_cap ? bound_cap * 2 : 1024;
            bound = realloc(bound, bound_cap * sizeof(Obj *));
        }
        bound[bound_count++] = b;
    } else if (!strcmp(sel, "setThreadgroupMemoryLength:atIndex:")) {
        uint64_t len = va_arg(ap, uint64_t);
        uint64_t index = va_arg(ap, uint64_t);
        logline("%s %llu %llu on %s", sel, (unsigned long long) len, (unsigned long long) index, o->cls);
    } else if (!strcmp(sel, "concurrentDispatchThreadgroups:threadsPerThreadgroup:")
               || !strcmp(sel, "dispatchThreadgroups:threadsPerThreadgroup:")) {
        MTLSize grid = va_arg(ap, MTLSize);
        MTLSize threads = va_arg(ap, MTLSize);
        logline("%s %llux%llux%llu %llux%llux%llu", sel, (unsigned long long) grid.width,
                (unsigned long long) grid.height, (unsigned long long) grid.depth, (unsigned long long) threads.width,
                (unsigned long long) threads.height, (unsigned long long) threads.depth);
    } else if (!strcmp(sel, "setBarrier") || !strcmp(sel, "endEncoding") || !strcmp(sel, "waitUntilCompleted")) {
        logline("%s", sel);
    } else if (!strcmp(sel, "commit")) {
        logline("commit on %s", o->cls);
    } else if (!strcmp(sel, "commandBuffer")) {
        logline("%s", sel);
        result = autoreleased(make("MTLCommandBuffer", 0));
    } else if (!strcmp(sel, "computeCommandEncoder")) {
        logline("%s", sel);
        result = autoreleased(make("MTLComputeCommandEncoder", 0));
    } else if (!strcmp(sel, "useResources:count:usage:")) {
        Obj **resources = va_arg(ap, Obj **);
        uint64_t count = va_arg(ap, uint64_t);
        uint64_t usage = va_arg(ap, uint64_t);
        int buffers = 0;
        for (uint64_t i = 0; i < count; i++) buffers += !strcmp(resources[i]->cls, "MTLBuffer");
        logline("%s %llu (%d buffers) %llu", sel, (unsigned long long) count, buffers, (unsigned long long) usage);
    } else if (!strcmp(sel, "executeCommandsInBuffer:withRange:")) {
        Obj *icb = va_arg(ap, Obj *);
        NSRange range = va_arg(ap, NSRange);
        logline("%s %s %llu %llu", sel, icb->cls, (unsigned long long) range.location, (unsigned long long) range.length);
    } else if (!strcmp(sel, "status")) {
        result = (void *) 4; /* MTLCommandBufferStatusCompleted */
    } else if (!strcmp(sel, "error")) {
        result = NULL;
    } else {
        logline("UNKNOWN %s", sel);
    }
    va_end(ap);
    return result;
}
