// shaderstats: compiles SPIR-V compute shaders on the first Vulkan device and reports the driver's
// pipeline-executable statistics and disassembly (VK_KHR_pipeline_executable_properties). Nothing is
// submitted, so it works on compile-only devices such as RADV's null device (RADV_FORCE_FAMILY=navi31,
// no GPU needed; see radv-null.sh beside this file).
//
//   shaderstats FILE.spv [ENTRY] [OPTION...]       one shader: the statistics as text
//   shaderstats -b [JOBS|-]                        many: one job a line, one JSON object a line out
//
// A job line is `NAME FILE.spv ENTRY [OPTION...]`; its JSON object is
//   {"name": NAME, "ok": true, "executable": "...", "subgroup": 64, "stats": {"VGPRs": 24, ...}}
// or {"name": NAME, "ok": false, "error": "..."} (a crash inside the driver ends the process: the
// caller reruns what it did not get, one job a process).
//
// Options:
//   ID=VALUE      specialisation constant ID (decimal) set to the 32-bit VALUE (decimal or 0x hex)
//   sg=N          a required subgroup size (VK_EXT_subgroup_size_control), with full subgroups
//   robust=0      pipeline robustness off for storage and uniform buffers (VK_EXT_pipeline_robustness),
//                 as llama.cpp asks for its quantised matrix-vector shaders
//   asm=PATH      write the driver's disassembly ("Assembly" internal representation) to PATH
//
// The device has robustBufferAccess and robustBufferAccess2 on where the driver offers them (as wgpu and
// llama.cpp create theirs). The pipeline layout is generic: 4 sets of 16 storage-buffer bindings and
// 128 bytes of push constants (UNIFORM_BINDING=N in the environment makes binding N of every set a
// uniform buffer; a shader's set 1 binding 0, wgpu's params, is one whatever UNIFORM_BINDING says).
#include <vulkan/vulkan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SPEC 32

static VkInstance inst;
static VkPhysicalDevice pd;
static VkDevice dev;
static VkPipelineLayout layout;
static int has_robustness2, has_pipeline_robustness, has_sgsc;
static PFN_vkGetPipelineExecutablePropertiesKHR get_props;
static PFN_vkGetPipelineExecutableStatisticsKHR get_stats;
static PFN_vkGetPipelineExecutableInternalRepresentationsKHR get_irs;

static int has_ext(const char *name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, 0, &n, 0);
  VkExtensionProperties *e = calloc(n, sizeof *e);
  vkEnumerateDeviceExtensionProperties(pd, 0, &n, e);
  int found = 0;
  for (uint32_t i = 0; i < n; i++) found |= !strcmp(e[i].extensionName, name);
  free(e);
  return found;
}

static void die(const char *what, VkResult r) {
  fprintf(stderr, "shaderstats: %s failed: %d\n", what, r);
  exit(1);
}

static void init(void) {
  VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, 0, "shaderstats", 1, 0, 0, VK_API_VERSION_1_3};
  VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, 0, 0, &app};
  VkResult r;
  if ((r = vkCreateInstance(&ici, 0, &inst))) die("vkCreateInstance", r);
  uint32_t pc = 8;
  VkPhysicalDevice pds[8];
  if ((r = vkEnumeratePhysicalDevices(inst, &pc, pds)) < 0) die("vkEnumeratePhysicalDevices", r);
  if (!pc) { fprintf(stderr, "shaderstats: no Vulkan device\n"); exit(1); }
  pd = pds[0];
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(pd, &props);
  fprintf(stderr, "device: %s\n", props.deviceName);
  has_robustness2 = has_ext("VK_EXT_robustness2");
  has_pipeline_robustness = has_ext("VK_EXT_pipeline_robustness");
  has_sgsc = 1; // core in 1.3

  // Ask for what the device has among the features the shaders may use.
  VkPhysicalDeviceRobustness2FeaturesEXT rb2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ROBUSTNESS_2_FEATURES_EXT};
  VkPhysicalDevicePipelineRobustnessFeaturesEXT plr = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_ROBUSTNESS_FEATURES_EXT};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pef = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceVulkan13Features f13 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, &pef};
  VkPhysicalDeviceVulkan12Features f12 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &f13};
  VkPhysicalDeviceVulkan11Features f11 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  void **tail = &pef.pNext;
  if (has_robustness2) { *tail = &rb2; tail = &rb2.pNext; }
  if (has_pipeline_robustness) { *tail = &plr; tail = &plr.pNext; }
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  if (!pef.pipelineExecutableInfo) { fprintf(stderr, "shaderstats: no pipelineExecutableInfo\n"); exit(1); }
  // Keep the queried features as they are (everything the device offers), but these, which change
  // code generation and are not what the engines ask for, off.
  rb2.robustImageAccess2 = VK_FALSE;
  rb2.nullDescriptor = VK_FALSE;
  has_pipeline_robustness = has_pipeline_robustness && plr.pipelineRobustness;
  has_robustness2 = has_robustness2 && rb2.robustBufferAccess2;

  const char *ext[4];
  uint32_t ne = 0;
  ext[ne++] = "VK_KHR_pipeline_executable_properties";
  if (has_robustness2) ext[ne++] = "VK_EXT_robustness2";
  if (has_pipeline_robustness) ext[ne++] = "VK_EXT_pipeline_robustness";
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, 0, 0, 0, 1, &prio};
  VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &f2, 0, 1, &qci, 0, 0, ne, ext, 0};
  if ((r = vkCreateDevice(pd, &dci, 0, &dev))) die("vkCreateDevice", r);

  int uni = getenv("UNIFORM_BINDING") ? atoi(getenv("UNIFORM_BINDING")) : -1;
  VkDescriptorSetLayout sl[4];
  for (int s = 0; s < 4; s++) {
    VkDescriptorSetLayoutBinding b[16];
    for (int i = 0; i < 16; i++) {
      int u = i == uni || (s == 1 && i == 0);
      b[i] = (VkDescriptorSetLayoutBinding){i, u ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                            VK_SHADER_STAGE_COMPUTE_BIT, 0};
    }
    VkDescriptorSetLayoutCreateInfo dl = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, 0, 0, 16, b};
    if ((r = vkCreateDescriptorSetLayout(dev, &dl, 0, &sl[s]))) die("vkCreateDescriptorSetLayout", r);
  }
  VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
  VkPipelineLayoutCreateInfo plci = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, 0, 0, 4, sl, 1, &pcr};
  if ((r = vkCreatePipelineLayout(dev, &plci, 0, &layout))) die("vkCreatePipelineLayout", r);
  get_props = (void *)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutablePropertiesKHR");
  get_stats = (void *)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutableStatisticsKHR");
  get_irs = (void *)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutableInternalRepresentationsKHR");
}

struct job {
  const char *name, *file, *entry, *asm_path;
  uint32_t subgroup;
  int robust;
  uint32_t nspec, spec_id[MAX_SPEC], spec_val[MAX_SPEC];
};

static void json_str(FILE *o, const char *s) {
  fputc('"', o);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(o, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(o, "\\u%04x", *s);
    else fputc(*s, o);
  }
  fputc('"', o);
}

// Compiles one job; JSON (batch) or text to stdout. 0 on success.
static int run(const struct job *j, int json) {
  char err[512] = "";
  VkResult r = VK_SUCCESS;
  FILE *f = fopen(j->file, "rb");
  if (!f) { snprintf(err, sizeof err, "cannot open %s", j->file); goto fail; }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint32_t *code = malloc(n);
  if (fread(code, 1, n, f) != (size_t)n) { fclose(f); free(code); snprintf(err, sizeof err, "cannot read %s", j->file); goto fail; }
  fclose(f);
  VkShaderModuleCreateInfo smci = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, 0, 0, (size_t)n, code};
  VkShaderModule sm;
  if ((r = vkCreateShaderModule(dev, &smci, 0, &sm))) { free(code); snprintf(err, sizeof err, "vkCreateShaderModule: %d", r); goto fail; }
  free(code);

  VkSpecializationMapEntry me[MAX_SPEC];
  for (uint32_t i = 0; i < j->nspec; i++) me[i] = (VkSpecializationMapEntry){j->spec_id[i], 4 * i, 4};
  VkSpecializationInfo si = {j->nspec, me, 4 * j->nspec, j->spec_val};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rss = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO, 0, j->subgroup};
  VkPipelineShaderStageCreateInfo stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, 0, 0, VK_SHADER_STAGE_COMPUTE_BIT, sm, j->entry,
                                           j->nspec ? &si : 0};
  if (j->subgroup && has_sgsc) {
    stage.pNext = &rss;
    stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  VkPipelineRobustnessCreateInfoEXT rci = {VK_STRUCTURE_TYPE_PIPELINE_ROBUSTNESS_CREATE_INFO_EXT, 0,
    VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT, VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT,
    VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT, VK_PIPELINE_ROBUSTNESS_IMAGE_BEHAVIOR_DEVICE_DEFAULT_EXT};
  VkComputePipelineCreateInfo cpci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, 0,
    VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR | (j->asm_path ? VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR : 0),
    stage, layout, 0, 0};
  if (!j->robust && has_pipeline_robustness) cpci.pNext = &rci;
  VkPipeline p;
  r = vkCreateComputePipelines(dev, 0, 1, &cpci, 0, &p);
  vkDestroyShaderModule(dev, sm, 0);
  if (r) { snprintf(err, sizeof err, "vkCreateComputePipelines: %d", r); goto fail; }

  VkPipelineInfoKHR pi = {VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, 0, p};
  uint32_t ne = 0;
  get_props(dev, &pi, &ne, 0);
  VkPipelineExecutablePropertiesKHR ep[4];
  for (int i = 0; i < 4; i++) ep[i] = (VkPipelineExecutablePropertiesKHR){VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
  if (ne > 4) ne = 4;
  get_props(dev, &pi, &ne, ep);
  if (!ne) { vkDestroyPipeline(dev, p, 0); snprintf(err, sizeof err, "no executable"); goto fail; }
  // A compute pipeline has one executable.
  VkPipelineExecutableInfoKHR ei = {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, 0, p, 0};
  uint32_t ns = 0;
  get_stats(dev, &ei, &ns, 0);
  VkPipelineExecutableStatisticKHR *st = calloc(ns, sizeof *st);
  for (uint32_t i = 0; i < ns; i++) st[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
  get_stats(dev, &ei, &ns, st);
  if (json) {
    printf("{\"name\": ");
    json_str(stdout, j->name);
    printf(", \"ok\": true, \"executable\": ");
    json_str(stdout, ep[0].name);
    printf(", \"subgroup\": %u, \"stats\": {", ep[0].subgroupSize);
  } else {
    printf("executable: %s (subgroup %u)\n", ep[0].name, ep[0].subgroupSize);
  }
  for (uint32_t i = 0; i < ns; i++) {
    if (json) { printf(i ? ", " : ""); json_str(stdout, st[i].name); printf(": "); }
    else printf("  %-28s ", st[i].name);
    switch (st[i].format) {
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: printf("%u", st[i].value.b32); break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: printf("%lld", (long long)st[i].value.i64); break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: printf("%llu", (unsigned long long)st[i].value.u64); break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: printf("%g", st[i].value.f64); break;
      default: printf(json ? "null" : "?");
    }
    if (!json) printf("\n");
  }
  free(st);
  if (json) printf("}}\n");
  if (j->asm_path) {
    uint32_t nr = 0;
    get_irs(dev, &ei, &nr, 0);
    VkPipelineExecutableInternalRepresentationKHR *ir = calloc(nr, sizeof *ir);
    for (uint32_t i = 0; i < nr; i++) ir[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
    get_irs(dev, &ei, &nr, ir);
    for (uint32_t i = 0; i < nr; i++) ir[i].pData = calloc(1, ir[i].dataSize + 1);
    get_irs(dev, &ei, &nr, ir);
    FILE *o = fopen(j->asm_path, "w");
    for (uint32_t i = 0; o && i < nr; i++)
      if (!strcmp(ir[i].name, "Assembly")) fputs(ir[i].pData, o);
    if (o) fclose(o);
    else fprintf(stderr, "shaderstats: cannot write %s\n", j->asm_path);
    for (uint32_t i = 0; i < nr; i++) free(ir[i].pData);
    free(ir);
  }
  fflush(stdout);
  vkDestroyPipeline(dev, p, 0);
  return 0;
fail:
  if (json) {
    printf("{\"name\": ");
    json_str(stdout, j->name);
    printf(", \"ok\": false, \"error\": ");
    json_str(stdout, err);
    printf("}\n");
    fflush(stdout);
  } else {
    fprintf(stderr, "shaderstats: %s: %s\n", j->file, err);
  }
  return 1;
}

// Reads the options of argv[0..argc) into j (the entry point is the first word without '=').
static int parse(struct job *j, int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    char *a = argv[i], *eq = strchr(a, '=');
    if (!eq) { j->entry = a; continue; }
    *eq = 0;
    const char *v = eq + 1;
    if (!strcmp(a, "sg")) j->subgroup = strtoul(v, 0, 0);
    else if (!strcmp(a, "robust")) j->robust = atoi(v);
    else if (!strcmp(a, "asm")) j->asm_path = v;
    else if (*a >= '0' && *a <= '9' && j->nspec < MAX_SPEC) {
      j->spec_id[j->nspec] = strtoul(a, 0, 10);
      j->spec_val[j->nspec++] = strtoul(v, 0, 0);
    } else { fprintf(stderr, "shaderstats: unknown option %s=%s\n", a, v); return 1; }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    fprintf(stderr, "usage: shaderstats FILE.spv [ENTRY] [ID=VALUE...] [sg=N] [robust=0] [asm=PATH]\n"
                    "       shaderstats -b [JOBS|-]   (lines: NAME FILE.spv ENTRY [options])\n");
    return 2;
  }
  if (strcmp(argv[1], "-b")) {
    struct job j = {.name = argv[1], .file = argv[1], .entry = "main", .robust = 1};
    if (parse(&j, argc - 2, argv + 2)) return 2;
    init();
    return run(&j, 0);
  }
  FILE *in = argc > 2 && strcmp(argv[2], "-") ? fopen(argv[2], "r") : stdin;
  if (!in) { perror(argv[2]); return 1; }
  init();
  char line[8192];
  int failed = 0;
  while (fgets(line, sizeof line, in)) {
    char *w[4 + MAX_SPEC + 8];
    int nw = 0;
    for (char *t = strtok(line, " \t\r\n"); t && nw < (int)(sizeof w / sizeof *w); t = strtok(0, " \t\r\n")) w[nw++] = t;
    if (nw < 3 || w[0][0] == '#') continue;
    struct job j = {.name = w[0], .file = w[1], .entry = w[2], .robust = 1};
    if (parse(&j, nw - 3, w + 3)) { failed++; continue; }
    failed += run(&j, 1) != 0;
  }
  return failed ? 1 : 0;
}
