/* Run a Mimir kernel's PTX through the CUDA driver API, in plain C, from its manifest alone.
 *
 *   mimir-cuda out/ptx/linear_relu.manifest.json x=@x.npy w=@w.npy b=@b.npy -o results/
 *
 * What a host does, in order:
 *  1. initialise the driver, refuse device 0 when its compute capability is not one a
 *     kernel's `requires` names (`sm_90a`: 9.0), and make its primary context current;
 *     (before any of it, host_setup checks the manifest against the contract of
 *     docs/hosts.md, and the launches against CUDA's grid and block limits);
 *  2. cuMemAlloc one buffer per manifest buffer, sized from the dims: inputs
 *     and inout buffers copied in (a `range` input checked first, in
 *     host_read_inputs), outputs and scratch zeroed;
 *  3. cuModuleLoadData on each .ptx file (the driver compiles the PTX for the
 *     GPU it runs on; its log is printed on failure), cuModuleGetFunction for
 *     each kernel's `entry_point`;
 *  4. every kernel in manifest order with cuLaunchKernel: gridDim = the
 *     evaluated `workgroups`, blockDim = `workgroup_size`, and the parameters in
 *     the order of their `binding` numbers: a buffer as its CUdeviceptr, the
 *     uniform (at `uniform_binding`) by value as the packed uniform block
 *     (`.param .align 16 .b8 mimir_uniforms[...]` in the PTX); launches on one
 *     stream run in order, so no barrier is needed between them;
 *  5. cuCtxSynchronize, copy the outputs and the updated inout buffers back.
 *
 * The CUDA headers give every type and prototype; the driver library itself is
 * opened with dlopen, so the program builds without a GPU, a driver or a
 * link-time stub, and says so at run time when there is none.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/host_cli.h"

/* cuda.h maps some names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2);
 * expanding the name before stringifying looks up the symbol the header means. */
#define NAME_OF(fn) NAME_OF_(fn)
#define NAME_OF_(fn) #fn
#define DRIVER_CALLS(X)                                                                           \
    X(cuInit) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)                         \
    X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuGetErrorName)         \
    X(cuModuleLoadDataEx) X(cuModuleGetFunction)                                                 \
    X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8) X(cuLaunchKernel)

static struct {
#define DECLARE(fn) __typeof__(&fn) fn;
    DRIVER_CALLS(DECLARE)
} cu;

static void check(CUresult result, const char *call) {
    if (result == CUDA_SUCCESS) return;
    const char *name = "unknown error";
    if (cu.cuGetErrorName) cu.cuGetErrorName(result, &name);
    fprintf(stderr, "mimir-cuda: error: %s failed: %s\n", call, name);
    exit(1);
}
#define CHECK(call) check((call), #call)

static void open_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "mimir-cuda: error: no CUDA driver (libcuda.so.1) on this machine\n");
        exit(3);
    }
#define LOAD(fn)                                                                           \
    if (!(cu.fn = (__typeof__(&fn))dlsym(lib, NAME_OF(fn)))) {                             \
        fprintf(stderr, "mimir-cuda: error: the driver lacks %s\n", NAME_OF(fn));          \
        exit(3);                                                                           \
    }
    DRIVER_CALLS(LOAD)
}

static CUmodule load_ptx(const manifest *m, int k) {
    char error[512];
    const char *path = m->kernels[k].file;
    size_t size;
    char *ptx = manifest_read_kernel(m, k, &size, error, sizeof error); /* NUL-terminated */
    if (!ptx) {
        fprintf(stderr, "mimir-cuda: error: %s\n", error);
        exit(2);
    }
    char log[8192] = "";
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, (void *)(size_t)sizeof log};
    CUmodule module;
    CUresult result = cu.cuModuleLoadDataEx(&module, ptx, 2, options, values);
    free(ptx);
    if (result != CUDA_SUCCESS) {
        fprintf(stderr, "mimir-cuda: error: loading `%s`:\n%s\n", path, log);
        check(result, "cuModuleLoadDataEx");
    }
    return module;
}

int main(int argc, char **argv) {
    host_run run;
    int code = host_setup(&run, argc, argv, "mimir-cuda", "ptx");
    if (code >= 0) return code;
    const manifest *m = &run.m;
    /* gridDim and blockDim limits of every GPU since compute capability 3.0 */
    manifest_limits limits = {.workgroups = {2147483647u, 65535, 65535},
                              .workgroup_size = {1024, 1024, 64},
                              .workgroup_threads = 1024};
    if ((code = host_check_limits(&run, &limits, "mimir-cuda")) >= 0) return code;
    if ((code = host_read_inputs(&run, "mimir-cuda")) >= 0) return code;
    if ((code = host_allocate(&run, "mimir-cuda")) >= 0) return code;

    /* 1. */
    open_driver();
    CUresult init = cu.cuInit(0);
    if (init != CUDA_SUCCESS) {
        fprintf(stderr, "mimir-cuda: error: the CUDA driver does not initialise (%d): no GPU?\n", (int)init);
        return 3;
    }
    CUdevice device;
    CUcontext context;
    char name[256];
    CHECK(cu.cuDeviceGet(&device, 0));
    CHECK(cu.cuDeviceGetName(name, sizeof name, device));
    int major, minor;
    CHECK(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CHECK(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    char unmet[512];
    if (!manifest_check_cuda_capability(m, major, minor, name, unmet, sizeof unmet)) {
        fprintf(stderr, "mimir-cuda: error: %s\n", unmet); /* before any context or buffer */
        host_free(&run);
        return 3;
    }
    CHECK(cu.cuDevicePrimaryCtxRetain(&context, device));
    CHECK(cu.cuCtxSetCurrent(context));
    fprintf(stderr, "mimir-cuda: device %s\n", name);

    /* 2. */
    CUdeviceptr *pointers = calloc((size_t)m->buffer_count + 1, sizeof *pointers);
    for (int b = 0; b < m->buffer_count; b++) {
        size_t bytes = (size_t)m->buffers[b].bytes;
        CHECK(cu.cuMemAlloc(&pointers[b], bytes ? bytes : 4));
        if (ROLE_UPLOADED(m->buffers[b].role) && bytes) /* ranges checked in host_read_inputs */
            CHECK(cu.cuMemcpyHtoD(pointers[b], run.host[b], bytes));
        else /* outputs and scratch (a `zero` counter among them) start at zero */
            CHECK(cu.cuMemsetD8(pointers[b], 0, bytes ? bytes : 4));
    }
    uint8_t uniform[4096] __attribute__((aligned(16)));
    manifest_pack_uniform(m, uniform, sizeof uniform);

    /* 3. */
    CUmodule *modules = calloc((size_t)m->kernel_count + 1, sizeof *modules);
    CUfunction *functions = calloc((size_t)m->kernel_count + 1, sizeof *functions);
    for (int k = 0; k < m->kernel_count; k++) {
        modules[k] = load_ptx(m, k);
        CHECK(cu.cuModuleGetFunction(&functions[k], modules[k], m->kernels[k].entry_point));
    }

    /* 4., 5.: once for the results, then --repeat N more times, timed */
    struct timespec t0, t1;
    for (int round = 0; round <= run.repeat; round++) {
        if (round == 1) clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int k = 0; k < m->kernel_count; k++) {
            const manifest_kernel *kernel = &m->kernels[k];
            if (!kernel->groups[0] || !kernel->groups[1] || !kernel->groups[2]) continue; /* empty */
            void *params[MANIFEST_MAX_BINDINGS + 1] = {0};
            for (int i = 0; i < kernel->binding_count; i++)
                params[kernel->bindings[i].binding] = &pointers[kernel->bindings[i].buffer];
            if (kernel->has_uniform) params[kernel->uniform_binding] = uniform;
            CHECK(cu.cuLaunchKernel(functions[k], (unsigned)kernel->groups[0], (unsigned)kernel->groups[1],
                                    (unsigned)kernel->groups[2], (unsigned)kernel->workgroup_size[0],
                                    (unsigned)kernel->workgroup_size[1], (unsigned)kernel->workgroup_size[2],
                                    0, NULL, params, NULL));
        }
        CHECK(cu.cuCtxSynchronize());
        if (round == 0)
            for (int b = 0; b < m->buffer_count; b++)
                if (ROLE_RESULT(m->buffers[b].role) && m->buffers[b].bytes)
                    CHECK(cu.cuMemcpyDtoH(run.host[b], pointers[b], (size_t)m->buffers[b].bytes));
    }
    if (run.repeat > 0) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / run.repeat;
        fprintf(stderr, "mimir-cuda: %.3f ms per run (mean of %d)\n", ms, run.repeat);
    }
    code = host_finish(&run);

    for (int b = 0; b < m->buffer_count; b++) cu.cuMemFree(pointers[b]);
    free(pointers);
    free(modules);
    free(functions);
    host_free(&run);
    return code;
}
