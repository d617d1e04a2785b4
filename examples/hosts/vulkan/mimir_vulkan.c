/* Run a Mimir kernel's SPIR-V on Vulkan, in plain C, from its manifest alone.
 *
 *   mimir-vulkan out/spirv/linear_relu.manifest.json x=@x.npy w=@w.npy b=@b.npy -o results/
 *
 * What a host does, in order (each step is one function below):
 *  1. pick a physical device with a compute queue (discrete GPU first; any Vulkan
 *     driver works, Mesa's lavapipe included) and create a device, enabling 16-bit
 *     storage and float16 arithmetic when the driver has them (float16 kernels need both);
 *     The manifest was checked against the contract (docs/hosts.md) by host_setup, and
 *     its sizes and launches are checked against this device's limits
 *     (maxComputeWorkGroupCount, maxStorageBufferRange...) before anything is allocated;
 *  2. one storage buffer per manifest buffer, sized from the dims: inputs and
 *     inout buffers uploaded (a `range` input checked first, in host_read_inputs),
 *     outputs and scratch zeroed; one uniform buffer with the packed uniform
 *     block (manifest_pack_uniform);
 *  3. per kernel: a shader module from its .spv file, descriptor set layouts
 *     exactly as its bindings say (set = `group`, binding = `binding`; storage
 *     buffers, plus the uniform at `uniform_binding`), a compute pipeline for
 *     its `entry_point`, and the descriptor sets;
 *  4. one command buffer: every kernel in manifest order, dispatched with the
 *     evaluated `workgroups` counts (a count of 0 skips the launch), with a
 *     compute-to-compute memory barrier between launches, since a later kernel
 *     reads what an earlier one wrote (scratch buffers);
 *  5. submit, wait on a fence, read the outputs and the updated inout buffers back.
 *
 * Memory is host-visible and coherent throughout, which keeps the sample
 * short; a production host would upload through a staging buffer into
 * device-local memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vulkan/vulkan.h>

#include "../common/host_cli.h"

#define CHECK(call)                                                                      \
    do {                                                                                 \
        VkResult result_ = (call);                                                       \
        if (result_ != VK_SUCCESS) {                                                     \
            fprintf(stderr, "mimir-vulkan: error: %s failed (VkResult %d)\n", #call,     \
                    (int)result_);                                                       \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

#define MAX_SETS 4

typedef struct {
    VkInstance instance;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    VkPhysicalDeviceMemoryProperties memory;
    VkPhysicalDeviceLimits limits;
} gpu;

typedef struct {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;
    void *mapped;
} gpu_buffer;

typedef struct {
    VkShaderModule module;
    VkDescriptorSetLayout layouts[MAX_SETS];
    uint32_t set_count;
    VkPipelineLayout pipeline_layout;
    VkPipeline pipeline;
    VkDescriptorSet sets[MAX_SETS];
} gpu_kernel;

/* 1. ---------------------------------------------------------------- device */

static void open_gpu(gpu *g) {
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "mimir-vulkan",
                             .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo instance_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                          .pApplicationInfo = &app};
    CHECK(vkCreateInstance(&instance_info, NULL, &g->instance));

    uint32_t count = 0;
    CHECK(vkEnumeratePhysicalDevices(g->instance, &count, NULL));
    if (count == 0) {
        fprintf(stderr, "mimir-vulkan: error: no Vulkan device (install a driver, e.g. "
                        "mesa-vulkan-drivers for lavapipe)\n");
        exit(1);
    }
    VkPhysicalDevice *devices = calloc(count, sizeof *devices);
    CHECK(vkEnumeratePhysicalDevices(g->instance, &count, devices));
    const char *wanted = getenv("MIMIR_VULKAN_DEVICE"); /* a substring of the device name */
    int best_rank = 99;
    for (uint32_t i = 0; i < count; i++) {
        VkPhysicalDeviceProperties props;
        vkGetPhysicalDeviceProperties(devices[i], &props);
        if (wanted && !strstr(props.deviceName, wanted)) continue;
        int rank = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU     ? 0
                   : props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? 1
                   : props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU            ? 3
                                                                                : 2;
        uint32_t families = 0;
        vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &families, NULL);
        VkQueueFamilyProperties *family = calloc(families, sizeof *family);
        vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &families, family);
        for (uint32_t f = 0; f < families; f++) {
            if ((family[f].queueFlags & VK_QUEUE_COMPUTE_BIT) && rank < best_rank) {
                best_rank = rank;
                g->physical = devices[i];
                g->queue_family = f;
                break;
            }
        }
        free(family);
    }
    free(devices);
    if (best_rank == 99) {
        fprintf(stderr, "mimir-vulkan: error: no Vulkan device with a compute queue%s\n",
                wanted ? " matching MIMIR_VULKAN_DEVICE" : "");
        exit(1);
    }
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(g->physical, &props);
    fprintf(stderr, "mimir-vulkan: device %s\n", props.deviceName);
    g->limits = props.limits;

    /* float16 kernels declare the Float16 and StorageBuffer16BitAccess capabilities. */
    VkPhysicalDeviceVulkan12Features have12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features have11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                               .pNext = &have12};
    VkPhysicalDeviceFeatures2 have = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &have11};
    vkGetPhysicalDeviceFeatures2(g->physical, &have);
    VkPhysicalDeviceVulkan12Features use12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                              .shaderFloat16 = have12.shaderFloat16};
    VkPhysicalDeviceVulkan11Features use11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                              .pNext = &use12,
                                              .storageBuffer16BitAccess = have11.storageBuffer16BitAccess};

    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                          .queueFamilyIndex = g->queue_family,
                                          .queueCount = 1,
                                          .pQueuePriorities = &priority};
    VkDeviceCreateInfo device_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                      .pNext = &use11,
                                      .queueCreateInfoCount = 1,
                                      .pQueueCreateInfos = &queue_info};
    CHECK(vkCreateDevice(g->physical, &device_info, NULL, &g->device));
    vkGetDeviceQueue(g->device, g->queue_family, 0, &g->queue);
    vkGetPhysicalDeviceMemoryProperties(g->physical, &g->memory);
}

/* 2. ---------------------------------------------------------------- buffers */

static gpu_buffer make_buffer(const gpu *g, VkDeviceSize size, VkBufferUsageFlags usage) {
    gpu_buffer b = {.size = size < 4 ? 4 : (size + 3) / 4 * 4}; /* never empty, whole words */
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                               .size = b.size,
                               .usage = usage,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    CHECK(vkCreateBuffer(g->device, &info, NULL, &b.buffer));
    VkMemoryRequirements needs;
    vkGetBufferMemoryRequirements(g->device, b.buffer, &needs);
    VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < g->memory.memoryTypeCount && type == UINT32_MAX; i++)
        if ((needs.memoryTypeBits & (1u << i)) && (g->memory.memoryTypes[i].propertyFlags & want) == want)
            type = i;
    if (type == UINT32_MAX) {
        fprintf(stderr, "mimir-vulkan: error: no host-visible coherent memory type\n");
        exit(1);
    }
    VkMemoryAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                  .allocationSize = needs.size,
                                  .memoryTypeIndex = type};
    CHECK(vkAllocateMemory(g->device, &alloc, NULL, &b.memory));
    CHECK(vkBindBufferMemory(g->device, b.buffer, b.memory, 0));
    CHECK(vkMapMemory(g->device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    memset(b.mapped, 0, (size_t)b.size);
    return b;
}

static void free_buffer(const gpu *g, gpu_buffer *b) {
    vkUnmapMemory(g->device, b->memory);
    vkDestroyBuffer(g->device, b->buffer, NULL);
    vkFreeMemory(g->device, b->memory, NULL);
}

/* 3. ---------------------------------------------------------------- pipelines */

static void make_kernel(const gpu *g, const manifest *m, const manifest_kernel *k, gpu_kernel *out,
                        VkDescriptorPool pool, const gpu_buffer *buffers, const gpu_buffer *uniform) {
    char error[512];
    size_t size;
    uint32_t *code = manifest_read_kernel(m, (int)(k - m->kernels), &size, error, sizeof error);
    if (!code) {
        fprintf(stderr, "mimir-vulkan: error: %s\n", error);
        exit(2);
    }
    if (size % 4 || size == 0) {
        fprintf(stderr, "mimir-vulkan: error: `%s` is not SPIR-V (%zu bytes)\n", k->file, size);
        exit(2);
    }
    VkShaderModuleCreateInfo module_info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                            .codeSize = size,
                                            .pCode = code};
    CHECK(vkCreateShaderModule(g->device, &module_info, NULL, &out->module));
    free(code);

    /* One descriptor set layout per group, with the bindings the manifest lists. */
    VkDescriptorSetLayoutBinding entries[MAX_SETS][MANIFEST_MAX_BINDINGS + 1];
    uint32_t entry_count[MAX_SETS] = {0};
    out->set_count = k->has_uniform ? (uint32_t)k->uniform_group + 1 : 0;
    for (int i = 0; i < k->binding_count; i++)
        if ((uint32_t)k->bindings[i].group + 1 > out->set_count) out->set_count = (uint32_t)k->bindings[i].group + 1;
    if (out->set_count > MAX_SETS) {
        fprintf(stderr, "mimir-vulkan: error: kernel `%s` uses more than %d sets\n", k->entry_point, MAX_SETS);
        exit(1);
    }
    for (int i = 0; i <= k->binding_count; i++) {
        int is_uniform = i == k->binding_count;
        if (is_uniform && !k->has_uniform) break;
        int set = is_uniform ? k->uniform_group : k->bindings[i].group;
        entries[set][entry_count[set]++] = (VkDescriptorSetLayoutBinding){
            .binding = (uint32_t)(is_uniform ? k->uniform_binding : k->bindings[i].binding),
            .descriptorType = is_uniform ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    }
    for (uint32_t s = 0; s < out->set_count; s++) {
        VkDescriptorSetLayoutCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                                .bindingCount = entry_count[s],
                                                .pBindings = entries[s]};
        CHECK(vkCreateDescriptorSetLayout(g->device, &info, NULL, &out->layouts[s]));
    }
    VkPipelineLayoutCreateInfo layout_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                              .setLayoutCount = out->set_count,
                                              .pSetLayouts = out->layouts};
    CHECK(vkCreatePipelineLayout(g->device, &layout_info, NULL, &out->pipeline_layout));
    VkComputePipelineCreateInfo pipeline_info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = out->module,
                  .pName = k->entry_point},
        .layout = out->pipeline_layout};
    CHECK(vkCreateComputePipelines(g->device, VK_NULL_HANDLE, 1, &pipeline_info, NULL, &out->pipeline));

    if (out->set_count == 0) return;
    VkDescriptorSetAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                         .descriptorPool = pool,
                                         .descriptorSetCount = out->set_count,
                                         .pSetLayouts = out->layouts};
    CHECK(vkAllocateDescriptorSets(g->device, &alloc, out->sets));
    for (int i = 0; i <= k->binding_count; i++) {
        int is_uniform = i == k->binding_count;
        if (is_uniform && !k->has_uniform) break;
        const gpu_buffer *b = is_uniform ? uniform : &buffers[k->bindings[i].buffer];
        VkDescriptorBufferInfo target = {.buffer = b->buffer, .offset = 0, .range = VK_WHOLE_SIZE};
        VkWriteDescriptorSet write = {
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = out->sets[is_uniform ? k->uniform_group : k->bindings[i].group],
            .dstBinding = (uint32_t)(is_uniform ? k->uniform_binding : k->bindings[i].binding),
            .descriptorCount = 1,
            .descriptorType = is_uniform ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &target};
        vkUpdateDescriptorSets(g->device, 1, &write, 0, NULL);
    }
}

/* 4. ---------------------------------------------------------------- commands */

static void record(VkCommandBuffer cmd, const manifest *m, const gpu_kernel *kernels) {
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    CHECK(vkBeginCommandBuffer(cmd, &begin));
    VkMemoryBarrier between = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                               .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    for (int i = 0; i < m->kernel_count; i++) {
        const manifest_kernel *k = &m->kernels[i];
        if (k->groups[0] == 0 || k->groups[1] == 0 || k->groups[2] == 0) continue; /* empty tensor */
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, kernels[i].pipeline);
        if (kernels[i].set_count)
            vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, kernels[i].pipeline_layout, 0,
                                    kernels[i].set_count, kernels[i].sets, 0, NULL);
        vkCmdDispatch(cmd, (uint32_t)k->groups[0], (uint32_t)k->groups[1], (uint32_t)k->groups[2]);
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             0, 1, &between, 0, NULL, 0, NULL);
    }
    VkMemoryBarrier to_host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                               .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                         &to_host, 0, NULL, 0, NULL);
    CHECK(vkEndCommandBuffer(cmd));
}

static void submit_and_wait(const gpu *g, VkCommandBuffer cmd, VkFence fence) {
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    CHECK(vkResetFences(g->device, 1, &fence));
    CHECK(vkQueueSubmit(g->queue, 1, &submit, fence));
    CHECK(vkWaitForFences(g->device, 1, &fence, VK_TRUE, UINT64_MAX));
}

int main(int argc, char **argv) {
    host_run run;
    int code = host_setup(&run, argc, argv, "mimir-vulkan", "spirv");
    if (code >= 0) return code;
    const manifest *m = &run.m;

    gpu g = {0};
    open_gpu(&g);
    const VkPhysicalDeviceLimits *l = &g.limits;
    manifest_limits limits = {
        .workgroups = {l->maxComputeWorkGroupCount[0], l->maxComputeWorkGroupCount[1],
                       l->maxComputeWorkGroupCount[2]},
        .workgroup_size = {l->maxComputeWorkGroupSize[0], l->maxComputeWorkGroupSize[1],
                           l->maxComputeWorkGroupSize[2]},
        .workgroup_threads = l->maxComputeWorkGroupInvocations,
        .binding_bytes = l->maxStorageBufferRange,
        .bindings = l->maxPerStageDescriptorStorageBuffers,
    };
    if ((code = host_check_limits(&run, &limits, "mimir-vulkan")) >= 0 ||
        (code = host_read_inputs(&run, "mimir-vulkan")) >= 0 ||
        (code = host_allocate(&run, "mimir-vulkan")) >= 0) {
        vkDestroyDevice(g.device, NULL);
        vkDestroyInstance(g.instance, NULL);
        return code;
    }

    VkBufferUsageFlags storage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    gpu_buffer *buffers = calloc((size_t)m->buffer_count + 1, sizeof *buffers);
    for (int b = 0; b < m->buffer_count; b++) {
        buffers[b] = make_buffer(&g, (VkDeviceSize)m->buffers[b].bytes, storage);
        /* zeros but inputs, inouts: outputs and scratch (a `zero` counter among them) */
        memcpy(buffers[b].mapped, run.host[b], (size_t)m->buffers[b].bytes);
    }
    uint8_t block[4096];
    size_t uniform_size = manifest_pack_uniform(m, block, sizeof block);
    gpu_buffer uniform = make_buffer(&g, uniform_size ? uniform_size : 16, VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT);
    memcpy(uniform.mapped, block, uniform_size);

    uint32_t storage_count = 0;
    for (int i = 0; i < m->kernel_count; i++) storage_count += (uint32_t)m->kernels[i].binding_count;
    VkDescriptorPoolSize sizes[2] = {
        {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, storage_count + 1},
        {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, (uint32_t)m->kernel_count + 1}};
    VkDescriptorPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                            .maxSets = (uint32_t)m->kernel_count * MAX_SETS + 1,
                                            .poolSizeCount = 2,
                                            .pPoolSizes = sizes};
    VkDescriptorPool pool;
    CHECK(vkCreateDescriptorPool(g.device, &pool_info, NULL, &pool));
    gpu_kernel *kernels = calloc((size_t)m->kernel_count + 1, sizeof *kernels);
    for (int i = 0; i < m->kernel_count; i++)
        make_kernel(&g, m, &m->kernels[i], &kernels[i], pool, buffers, &uniform);

    VkCommandPoolCreateInfo cmd_pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                             .queueFamilyIndex = g.queue_family};
    VkCommandPool cmd_pool;
    CHECK(vkCreateCommandPool(g.device, &cmd_pool_info, NULL, &cmd_pool));
    VkCommandBufferAllocateInfo cmd_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                            .commandPool = cmd_pool,
                                            .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                            .commandBufferCount = 1};
    VkCommandBuffer cmd;
    CHECK(vkAllocateCommandBuffers(g.device, &cmd_info, &cmd));
    record(cmd, m, kernels);
    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK(vkCreateFence(g.device, &fence_info, NULL, &fence));
    submit_and_wait(&g, cmd, fence);

    for (int b = 0; b < m->buffer_count; b++)
        if (ROLE_RESULT(m->buffers[b].role)) memcpy(run.host[b], buffers[b].mapped, (size_t)m->buffers[b].bytes);
    if (run.repeat > 0) { /* the launches again, timed (the results are already read; inout buffers
                             keep changing, which the timing does not mind) */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int r = 0; r < run.repeat; r++) submit_and_wait(&g, cmd, fence);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / run.repeat;
        fprintf(stderr, "mimir-vulkan: %.3f ms per run (mean of %d)\n", ms, run.repeat);
    }
    code = host_finish(&run);

    vkDestroyFence(g.device, fence, NULL);
    vkDestroyCommandPool(g.device, cmd_pool, NULL);
    for (int i = 0; i < m->kernel_count; i++) {
        vkDestroyPipeline(g.device, kernels[i].pipeline, NULL);
        vkDestroyPipelineLayout(g.device, kernels[i].pipeline_layout, NULL);
        for (uint32_t s = 0; s < kernels[i].set_count; s++)
            vkDestroyDescriptorSetLayout(g.device, kernels[i].layouts[s], NULL);
        vkDestroyShaderModule(g.device, kernels[i].module, NULL);
    }
    vkDestroyDescriptorPool(g.device, pool, NULL);
    for (int b = 0; b < m->buffer_count; b++) free_buffer(&g, &buffers[b]);
    free_buffer(&g, &uniform);
    free(buffers);
    free(kernels);
    vkDestroyDevice(g.device, NULL);
    vkDestroyInstance(g.instance, NULL);
    host_free(&run);
    return code;
}
