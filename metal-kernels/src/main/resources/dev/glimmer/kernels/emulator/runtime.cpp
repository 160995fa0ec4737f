// The emulator's scheduler: runs one compute dispatch on the calling CPU thread. Threadgroups run
// one after another; inside a threadgroup every GPU thread is a fiber (its own stack) that runs until it
// reaches a SIMD-group collective or a threadgroup barrier, where it waits until all participants
// have arrived. A collective or barrier that cannot complete (some participants finished or wait
// elsewhere) fails the dispatch with a message saying where every thread waits; it never hangs.
#include "prelude.h"
// The kernels' keywords are ordinary names here.
#undef kernel
#undef device
#undef constant
#undef thread
#undef threadgroup
#undef threadgroup_barrier

#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

// ---- switching between fibers ----
// On x86-64 a few instructions that keep only the callee-saved state (swapcontext also saves the
// signal mask: two system calls per switch, which dominated the emulator's time); elsewhere ucontext.
#if defined(__x86_64__)
extern "C" void glimmer_switch(void** save, void* load);
asm(R"(
.text
.globl glimmer_switch
.type glimmer_switch,@function
glimmer_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size glimmer_switch, .-glimmer_switch
)");

struct Context {
    void* sp;
};

// A fresh context that starts `entry` on the stack [base, base + bytes): the frame glimmer_switch
// pops (default MXCSR and x87 control word, six zero registers) under `entry` as return address.
void makeContext(Context& c, char* base, size_t bytes, void (*entry)()) {
    uintptr_t top = ((uintptr_t) (base + bytes)) & ~(uintptr_t) 15;
    uint64_t* a = (uint64_t*) (top - 16);  // entry's "return address" slot; entry starts with rsp = 8 mod 16
    a[1] = 0;
    a[0] = (uint64_t) (uintptr_t) entry;
    for (int i = 1; i <= 6; i++) a[-i] = 0;
    uint32_t* control = (uint32_t*) (a - 7);
    control[0] = 0x1F80;  // MXCSR: all exceptions masked, round to nearest
    control[1] = 0x037F;  // x87 control word
    c.sp = a - 7;
}

void switchContext(Context& save, Context& load) {
    glimmer_switch(&save.sp, load.sp);
}
#else
struct Context {
    ucontext_t context;
};

void makeContext(Context& c, char* base, size_t bytes, void (*entry)()) {
    getcontext(&c.context);
    c.context.uc_stack.ss_sp = base;
    c.context.uc_stack.ss_size = bytes;
    c.context.uc_link = nullptr;
    makecontext(&c.context, entry, 0);
}

void switchContext(Context& save, Context& load) {
    swapcontext(&save.context, &load.context);
}
#endif

constexpr size_t STACK_BYTES = 256 * 1024;
constexpr size_t GUARD_BYTES = 4096;
constexpr int MAX_THREADS = 1024;

enum State { RUNNABLE, WAITING, FINISHED };

struct Fiber {
    Context context;
    State state;
    GlimmerThreadIds ids;
    const char* waitWhat;
    const char* waitFile;
    int waitLine;
};

struct SimdGroup {
    int lanes;
    int arrived;
    int op;
    int size;
    const char* what;
    const char* file;
    int line;
    unsigned char values[emu::SIMD_WIDTH * emu::MAX_VALUE_BYTES];
    int params[emu::SIMD_WIDTH];
    unsigned char results[emu::SIMD_WIDTH * emu::MAX_VALUE_BYTES];
};

typedef void (*Thunk)(void* const* buffers, void* const* threadgroupMemory, const GlimmerThreadIds* ids);

struct Dispatch {
    Thunk thunk;
    const char* kernel;
    void* const* buffers;
    void* const* threadgroupMemory;
    uint3 threadgroup;
    int threads;
    Fiber* fibers;
    SimdGroup* simdGroups;
    int barrierArrived;
    const char* barrierFile;
    int barrierLine;
    Context scheduler;
    bool failed;
    std::string error;
};

thread_local Dispatch* currentDispatch = nullptr;
thread_local Fiber* currentFiber = nullptr;
thread_local std::vector<char*> stacks;

char* stack(int i) {
    while ((int) stacks.size() <= i) {
        void* p = mmap(nullptr, STACK_BYTES + GUARD_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return nullptr;
        mprotect(p, GUARD_BYTES, PROT_NONE);  // stacks grow down: an overflow faults instead of corrupting
        stacks.push_back(static_cast<char*>(p));
    }
    return stacks[i] + GUARD_BYTES;
}

std::string where(const char* file, int line) {
    const char* slash = std::strrchr(file, '/');
    return std::string(slash ? slash + 1 : file) + ":" + std::to_string(line);
}

std::string threadgroupName(const Dispatch* d) {
    return "kernel " + std::string(d->kernel) + ", threadgroup (" + std::to_string(d->threadgroup.x) + "," +
           std::to_string(d->threadgroup.y) + "," + std::to_string(d->threadgroup.z) + ")";
}

std::string describe(const Fiber& f) {
    if (f.state == FINISHED) return "finished";
    if (f.state == RUNNABLE) return "runnable";
    return "wait at " + std::string(f.waitWhat) + " (" + where(f.waitFile, f.waitLine) + ")";
}

// "threads 0-31 wait at simd_sum (matvec.metal:120); threads 32-63 finished"
std::string whereEachThreadIs(const Dispatch* d) {
    std::string out;
    int start = 0;
    for (int i = 1; i <= d->threads; i++) {
        if (i < d->threads && describe(d->fibers[i]) == describe(d->fibers[start])) continue;
        if (!out.empty()) out += "; ";
        out += i - 1 == start ? "thread " + std::to_string(start)
                              : "threads " + std::to_string(start) + "-" + std::to_string(i - 1);
        out += " " + describe(d->fibers[start]);
        start = i;
    }
    return out;
}

[[noreturn]] void fail(const std::string& message) {
    Dispatch* d = currentDispatch;
    d->failed = true;
    d->error = threadgroupName(d) + ": " + message;
    switchContext(currentFiber->context, d->scheduler);
    std::abort();  // a failed dispatch never resumes its fibers
}

void suspend() {
    switchContext(currentFiber->context, currentDispatch->scheduler);
}

void fiberMain() {
    Dispatch* d = currentDispatch;
    d->thunk(d->buffers, d->threadgroupMemory, &currentFiber->ids);
    currentFiber->state = FINISHED;
    switchContext(currentFiber->context, d->scheduler);
    std::abort();  // a finished fiber is never resumed
}

std::vector<int> order(int n, int mode, std::mt19937_64& random) {
    std::vector<int> o(n);
    for (int i = 0; i < n; i++) o[i] = i;
    if (mode == 1) std::reverse(o.begin(), o.end());
    if (mode == 2) std::shuffle(o.begin(), o.end(), random);
    return o;
}

// Runs the fibers of one threadgroup to completion; false (with d->error) on a deadlock or failure.
bool runThreadgroup(Dispatch* d, const std::vector<int>& fiberOrder) {
    for (;;) {
        bool ran = false;
        for (int i : fiberOrder) {
            Fiber& f = d->fibers[i];
            if (f.state != RUNNABLE) continue;
            ran = true;
            currentFiber = &f;
            switchContext(d->scheduler, f.context);
            if (d->failed) return false;
        }
        if (!ran) break;
    }
    for (int i = 0; i < d->threads; i++) {
        if (d->fibers[i].state != FINISHED) {
            d->error = threadgroupName(d) + ": deadlock, a barrier or SIMD-group collective was not reached by all "
                       "participants: " + whereEachThreadIs(d);
            return false;
        }
    }
    return true;
}

}  // namespace

namespace emu {

void collective(int op, const char* what, const char* file, int line, const void* value, int size, int param,
                void* result, Combine combine) {
    Dispatch* d = currentDispatch;
    Fiber* f = currentFiber;
    SimdGroup& g = d->simdGroups[f->ids.simdgroup_index_in_threadgroup];
    int lane = (int) f->ids.thread_index_in_simdgroup;
    if (g.arrived == 0) {
        g.op = op;
        g.size = size;
        g.what = what;
        g.file = file;
        g.line = line;
    } else if (g.op != op || g.size != size || g.line != line || std::strcmp(g.file, file) != 0) {
        fail("SIMD-group " + std::to_string(f->ids.simdgroup_index_in_threadgroup) + " diverged: lane " +
             std::to_string(lane) + " reached " + what + " (" + where(file, line) + ") while other lanes wait at " +
             g.what + " (" + where(g.file, g.line) + "); " + whereEachThreadIs(d));
    }
    std::memcpy(g.values + lane * size, value, size);
    g.params[lane] = param;
    f->state = WAITING;
    f->waitWhat = what;
    f->waitFile = file;
    f->waitLine = line;
    if (++g.arrived == g.lanes) {
        combine(op, g.lanes, g.values, g.params, g.results);
        g.arrived = 0;
        int first = (int) f->ids.simdgroup_index_in_threadgroup * SIMD_WIDTH;
        for (int i = first; i < first + g.lanes; i++) d->fibers[i].state = RUNNABLE;
    } else {
        suspend();
    }
    std::memcpy(result, g.results + lane * size, size);
}

void barrier(const char* file, int line) {
    Dispatch* d = currentDispatch;
    Fiber* f = currentFiber;
    if (d->barrierArrived == 0) {
        d->barrierFile = file;
        d->barrierLine = line;
    } else if (d->barrierLine != line || std::strcmp(d->barrierFile, file) != 0) {
        fail("thread " + std::to_string(f->ids.thread_index_in_threadgroup) + " reached threadgroup_barrier (" +
             where(file, line) + ") while other threads wait at threadgroup_barrier (" +
             where(d->barrierFile, d->barrierLine) + "); " + whereEachThreadIs(d));
    }
    f->state = WAITING;
    f->waitWhat = "threadgroup_barrier";
    f->waitFile = file;
    f->waitLine = line;
    if (++d->barrierArrived == d->threads) {
        d->barrierArrived = 0;
        for (int i = 0; i < d->threads; i++) d->fibers[i].state = RUNNABLE;
    } else {
        suspend();
    }
}

}  // namespace emu

// Runs one dispatch: grid[3] threadgroups of threads[3] threads each. order: 0 in order, 1 reversed,
// 2 shuffled with `seed` (both the threadgroups and the fibers inside each). Threadgroup memory
// starts filled with 0xFF bytes (NaN as floats) so that reading what nobody wrote shows.
// Returns 0, or 1 with a one-line message in `error`.
extern "C" int glimmer_emu_dispatch(Thunk thunk, const char* kernel, void* const* buffers,
                                    const uint32_t* threadgroupMemoryBytes, int threadgroupMemoryCount,
                                    const uint32_t* grid, const uint32_t* threads, int mode, uint64_t seed,
                                    char* error, int errorCapacity) {
    auto report = [&](const std::string& message) {
        std::snprintf(error, (size_t) errorCapacity, "%s", message.c_str());
        return 1;
    };
    int n = (int) (threads[0] * threads[1] * threads[2]);
    if (n <= 0 || n > MAX_THREADS) {
        return report("kernel " + std::string(kernel) + ": " + std::to_string(n) + " threads per threadgroup (1.." +
                      std::to_string(MAX_THREADS) + " allowed)");
    }
    std::vector<std::vector<unsigned char>> memory(threadgroupMemoryCount);
    std::vector<void*> memoryPointers(threadgroupMemoryCount);
    for (int i = 0; i < threadgroupMemoryCount; i++) {
        memory[i].resize(threadgroupMemoryBytes[i] + 16);
        memoryPointers[i] = memory[i].data();
    }
    int simdGroupCount = (n + emu::SIMD_WIDTH - 1) / emu::SIMD_WIDTH;
    std::vector<Fiber> fibers(n);
    std::vector<SimdGroup> simdGroups(simdGroupCount);
    Dispatch d{};
    d.thunk = thunk;
    d.kernel = kernel;
    d.buffers = buffers;
    d.threadgroupMemory = memoryPointers.data();
    d.threads = n;
    d.fibers = fibers.data();
    d.simdGroups = simdGroups.data();
    currentDispatch = &d;

    std::mt19937_64 random(seed);
    long groupCount = (long) grid[0] * grid[1] * grid[2];
    std::vector<long> groups(groupCount);
    for (long i = 0; i < groupCount; i++) groups[i] = i;
    if (mode == 1) std::reverse(groups.begin(), groups.end());
    if (mode == 2) std::shuffle(groups.begin(), groups.end(), random);

    for (long g : groups) {
        uint3 tg = {(uint) (g % grid[0]), (uint) (g / grid[0] % grid[1]), (uint) (g / ((long) grid[0] * grid[1]))};
        d.threadgroup = tg;
        d.barrierArrived = 0;
        for (auto& m : memory) std::memset(m.data(), 0xFF, m.size());
        for (int s = 0; s < simdGroupCount; s++) {
            simdGroups[s].lanes = std::min(emu::SIMD_WIDTH, n - s * emu::SIMD_WIDTH);
            simdGroups[s].arrived = 0;
        }
        for (int i = 0; i < n; i++) {
            Fiber& f = fibers[i];
            GlimmerThreadIds& ids = f.ids;
            ids.threadgroup_position_in_grid = tg;
            ids.threadgroups_per_grid = uint3{grid[0], grid[1], grid[2]};
            ids.threads_per_threadgroup = uint3{threads[0], threads[1], threads[2]};
            ids.thread_position_in_threadgroup =
                uint3{(uint) i % threads[0], (uint) i / threads[0] % threads[1], (uint) i / (threads[0] * threads[1])};
            ids.thread_position_in_grid = tg * ids.threads_per_threadgroup + ids.thread_position_in_threadgroup;
            ids.thread_index_in_threadgroup = (uint) i;
            ids.thread_index_in_simdgroup = (uint) (i % emu::SIMD_WIDTH);
            ids.simdgroup_index_in_threadgroup = (uint) (i / emu::SIMD_WIDTH);
            ids.threads_per_simdgroup = emu::SIMD_WIDTH;
            ids.simdgroups_per_threadgroup = (uint) simdGroupCount;
            f.state = RUNNABLE;
            char* s = stack(i);
            if (s == nullptr) return report("kernel " + std::string(kernel) + ": cannot allocate fiber stacks");
            makeContext(f.context, s, STACK_BYTES, fiberMain);
        }
        if (!runThreadgroup(&d, order(n, mode, random))) {
            currentDispatch = nullptr;
            return report(d.error);
        }
    }
    currentDispatch = nullptr;
    return 0;
}
