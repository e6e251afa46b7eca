/* A fake NVML: a shared library named libnvidia-ml.so.1 that exports the NVML entry points the
 * NVIDIA plugin uses (src/hardware/plugins/nvidia/nvml_api.h), with NVML's real signatures, and
 * serves a device table instead of real GPUs. Tests load it through the plugin's ordinary dlopen
 * path (DetectionOptions::nvml_library or TESSERA_NVML_LIBRARY).
 *
 * nvmlInit_v2 reads the table from the file named by the environment variable
 * TESSERA_FAKE_NVML_TABLE. It fails like a host with a broken driver:
 *   variable unset, or file unreadable -> NVML_ERROR_DRIVER_NOT_LOADED (9)
 *   a malformed line                   -> NVML_ERROR_LIBRARY_NOT_FOUND (12), reason on stderr
 *
 * Table format: one directive per line; blank lines and lines starting with '#' are ignored.
 *   driver <version>                  driver version string, e.g. 570.133.20
 *   gpu <bus id>                      starts a device (sysfs form 0000:1b:00.0); devices get
 *                                     NVML indices in the order listed
 *   name <rest of line>               e.g. NVIDIA H100 80GB HBM3
 *   uuid <uuid>                       e.g. GPU-1d4f1c7e-...
 *   memory <bytes>                    total framebuffer memory
 *   pci_device <hex id>               PCI device id, e.g. 2330 (pciDeviceId = id << 16 | 0x10de)
 *   nvlink_version <1.0|2.0|2.2|3.0|3.1|4.0|5.0>   version of all this device's links
 *   link gpu <remote bus id>          the next NVLink (numbered from 0) goes to a GPU
 *   link switch <remote bus id>       ... to an NVSwitch
 *   link inactive                     ... is down
 *   fabric <cluster uuid> <clique id> multi-host NVLink domain membership (state completed);
 *                                     cluster uuid in 8-4-4-4-12 hex form
 * A device without "link" lines has no NVLink (NVML_ERROR_NOT_SUPPORTED); without "fabric" its
 * fabric info is NVML_ERROR_NOT_SUPPORTED.
 *
 * Telemetry, what the device's queries answer (in NVML's units):
 *   memory_used <bytes>               nvmlMemory_t.used (free = memory - used); without it 0
 *   utilization <gpu %> <memory %>    nvmlDeviceGetUtilizationRates
 *   power <milliwatts>                nvmlDeviceGetPowerUsage
 *   energy <millijoules>              nvmlDeviceGetTotalEnergyConsumption
 *   temperature <celsius>             nvmlDeviceGetTemperature(V), sensor NVML_TEMPERATURE_GPU
 *   gpm <sm %> <tensor %> <dram bw %> GPM supported (nvmlGpmQueryDeviceSupport), and what
 *                                     nvmlGpmMetricsGet gives for SM_UTIL, ANY_TENSOR_UTIL and
 *                                     DRAM_BW_UTIL between two samples of the device
 * In place of the values, "not_supported" makes the query return NVML_ERROR_NOT_SUPPORTED and
 * "error <code>" that nvmlReturn_t (e.g. "error 15", GPU is lost); a query without its line is
 * NVML_ERROR_NOT_SUPPORTED (for gpm: the device does not support GPM).
 *
 * nvmlInit_v2 and nvmlShutdown are reference-counted like NVML's: the table is read when the count
 * goes from 0 to 1, so a detection's session and a telemetry reader's can overlap.
 *
 * Built twice: fake_nvml (every entry point) and, with FAKE_NVML_OLD_DRIVER, fake_nvml_old, which
 * lacks nvmlDeviceGetNvLinkRemoteDeviceType, nvmlDeviceGetGpuFabricInfo,
 * nvmlDeviceGetTemperatureV and the GPM entry points, like an older driver.
 */

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_UNKNOWN 999

typedef int nvmlEnableState_t;
typedef int nvmlIntNvLinkDeviceType_t;
#define NVML_NVLINK_DEVICE_TYPE_GPU 0x00
#define NVML_NVLINK_DEVICE_TYPE_SWITCH 0x02
#define NVML_NVLINK_MAX_LINKS 18

typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
} nvmlGpuFabricInfo_t;

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef int nvmlTemperatureSensors_t;
#define NVML_TEMPERATURE_GPU 0

typedef struct {
  unsigned int version;
  nvmlTemperatureSensors_t sensorType;
  int temperature;
} nvmlTemperature_t;
#define NVML_TEMPERATURE_V1 ((unsigned int)(sizeof(nvmlTemperature_t) | (1U << 24)))

struct nvmlGpmSample_st;
typedef struct {
  struct nvmlGpmSample_st* handle;
} nvmlGpmSample_t;

typedef struct {
  char* shortName;
  char* longName;
  char* unit;
} nvmlGpmMetricMetricInfo_t;

typedef struct {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  nvmlGpmMetricMetricInfo_t metricInfo;
} nvmlGpmMetric_t;

/* The oldest header's bound (98): callers built against newer headers pass bigger arrays. */
#define FAKE_GPM_METRIC_MAX 98
typedef struct {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[FAKE_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;
#define NVML_GPM_METRICS_GET_VERSION 1

typedef struct {
  unsigned int version;
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;
#define NVML_GPM_SUPPORT_VERSION 1
#define NVML_GPM_METRIC_SM_UTIL 2
#define NVML_GPM_METRIC_ANY_TENSOR_UTIL 5
#define NVML_GPM_METRIC_DRAM_BW_UTIL 10

enum { kMaxGpus = 64, kText = 128 };
enum { kLinkInactive = 0, kLinkGpu = 1, kLinkSwitch = 2 };

struct link {
  int kind;
  unsigned int domain, bus, dev, fn;
};

/* One telemetry query's answer: unset (NOT_SUPPORTED), an error code, or up to three values. */
struct reading {
  int set;
  nvmlReturn_t rc;
  double values[3];
};

struct nvmlDevice_st {
  unsigned int domain, bus, dev, fn;
  char name[kText];
  char uuid[kText];
  unsigned long long memory;
  unsigned int pci_device;
  unsigned int nvlink_version; /* nvmlNvlinkVersion_t */
  int link_count;
  struct link links[NVML_NVLINK_MAX_LINKS];
  int has_fabric;
  unsigned char cluster_uuid[16];
  unsigned int clique;
  unsigned long long memory_used;
  struct reading utilization, power, energy, temperature, gpm;
};
typedef struct nvmlDevice_st* nvmlDevice_t;

struct nvmlGpmSample_st {
  nvmlDevice_t device;      /* NULL until nvmlGpmSampleGet fills it */
  unsigned long long taken; /* sequence number of that call */
};

static struct nvmlDevice_st g_gpus[kMaxGpus];
static int g_count;
static char g_driver[kText];
static int g_init_count; /* nvmlInit_v2 calls not yet matched by nvmlShutdown */

static int parse_bus(const char* s, unsigned int* d, unsigned int* b, unsigned int* v,
                     unsigned int* f) {
  char tail;
  return sscanf(s, "%x:%x:%x.%x%c", d, b, v, f, &tail) == 4 && *b <= 0xff && *v <= 0x1f && *f <= 7;
}

/* nvmlNvlinkVersion_t from "4.0": 1.0=1 2.0=2 2.2=3 3.0=4 3.1=5 4.0=6 5.0=7 */
static unsigned int parse_nvlink_version(const char* s) {
  static const char* const names[] = {"1.0", "2.0", "2.2", "3.0", "3.1", "4.0", "5.0"};
  for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    if (strcmp(s, names[i]) == 0) return i + 1;
  }
  return 0;
}

static int parse_uuid(const char* s, unsigned char out[16]) {
  int n = 0;
  for (; *s != '\0'; ++s) {
    if (*s == '-') continue;
    if (!isxdigit((unsigned char)s[0]) || !isxdigit((unsigned char)s[1]) || n == 16) return 0;
    char pair[3] = {s[0], s[1], '\0'};
    out[n++] = (unsigned char)strtoul(pair, NULL, 16);
    ++s;
  }
  return n == 16;
}

/* "<v1> ... <vn>", "not_supported" or "error <code>"; 0 on error. */
static int parse_reading(const char* s, int n, struct reading* r) {
  char tail;
  int code = 0;
  memset(r, 0, sizeof(*r));
  r->set = 1;
  if (strcmp(s, "not_supported") == 0) {
    r->rc = NVML_ERROR_NOT_SUPPORTED;
    return 1;
  }
  if (sscanf(s, "error %d %c", &code, &tail) == 1) {
    r->rc = code;
    return code != NVML_SUCCESS;
  }
  r->rc = NVML_SUCCESS;
  int got = 0;
  if (n == 1) got = sscanf(s, "%lf %c", &r->values[0], &tail);
  if (n == 2) got = sscanf(s, "%lf %lf %c", &r->values[0], &r->values[1], &tail);
  if (n == 3) got = sscanf(s, "%lf %lf %lf %c", &r->values[0], &r->values[1], &r->values[2], &tail);
  return got == n;
}

/* The return code of a query answered by `r`. */
static nvmlReturn_t reading_rc(const struct reading* r) {
  return r->set ? r->rc : NVML_ERROR_NOT_SUPPORTED;
}

static void copy_text(char* dst, const char* src) { snprintf(dst, kText, "%s", src); }

/* One table line; 0 on error. */
static int parse_line(char* line) {
  char* end = line + strlen(line);
  while (end > line && isspace((unsigned char)end[-1])) *--end = '\0';
  while (isspace((unsigned char)*line)) ++line;
  if (*line == '\0' || *line == '#') return 1;
  char* rest = line;
  while (*rest != '\0' && !isspace((unsigned char)*rest)) ++rest;
  if (*rest != '\0') *rest++ = '\0';
  while (isspace((unsigned char)*rest)) ++rest;

  if (strcmp(line, "driver") == 0) {
    copy_text(g_driver, rest);
    return 1;
  }
  if (strcmp(line, "gpu") == 0) {
    if (g_count == kMaxGpus) return 0;
    struct nvmlDevice_st* g = &g_gpus[g_count];
    memset(g, 0, sizeof(*g));
    if (!parse_bus(rest, &g->domain, &g->bus, &g->dev, &g->fn)) return 0;
    ++g_count;
    return 1;
  }
  if (g_count == 0) return 0; /* a device attribute before any "gpu" line */
  struct nvmlDevice_st* g = &g_gpus[g_count - 1];
  if (strcmp(line, "name") == 0) {
    copy_text(g->name, rest);
  } else if (strcmp(line, "uuid") == 0) {
    copy_text(g->uuid, rest);
  } else if (strcmp(line, "memory") == 0) {
    char* stop = NULL;
    g->memory = strtoull(rest, &stop, 10);
    if (stop == rest || *stop != '\0') return 0;
  } else if (strcmp(line, "pci_device") == 0) {
    char* stop = NULL;
    g->pci_device = (unsigned int)strtoul(rest, &stop, 16);
    if (stop == rest || *stop != '\0') return 0;
  } else if (strcmp(line, "nvlink_version") == 0) {
    g->nvlink_version = parse_nvlink_version(rest);
    if (g->nvlink_version == 0) return 0;
  } else if (strcmp(line, "link") == 0) {
    if (g->link_count == NVML_NVLINK_MAX_LINKS) return 0;
    struct link* l = &g->links[g->link_count];
    char kind[16];
    char bus[64];
    int fields = sscanf(rest, "%15s %63s", kind, bus);
    if (fields == 1 && strcmp(kind, "inactive") == 0) {
      l->kind = kLinkInactive;
    } else if (fields == 2 && (strcmp(kind, "gpu") == 0 || strcmp(kind, "switch") == 0)) {
      l->kind = strcmp(kind, "gpu") == 0 ? kLinkGpu : kLinkSwitch;
      if (!parse_bus(bus, &l->domain, &l->bus, &l->dev, &l->fn)) return 0;
    } else {
      return 0;
    }
    ++g->link_count;
  } else if (strcmp(line, "memory_used") == 0) {
    char* stop = NULL;
    g->memory_used = strtoull(rest, &stop, 10);
    if (stop == rest || *stop != '\0') return 0;
  } else if (strcmp(line, "utilization") == 0) {
    return parse_reading(rest, 2, &g->utilization);
  } else if (strcmp(line, "power") == 0) {
    return parse_reading(rest, 1, &g->power);
  } else if (strcmp(line, "energy") == 0) {
    return parse_reading(rest, 1, &g->energy);
  } else if (strcmp(line, "temperature") == 0) {
    return parse_reading(rest, 1, &g->temperature);
  } else if (strcmp(line, "gpm") == 0) {
    return parse_reading(rest, 3, &g->gpm);
  } else if (strcmp(line, "fabric") == 0) {
    char uuid[64];
    unsigned int clique = 0;
    char tail;
    if (sscanf(rest, "%63s %u %c", uuid, &clique, &tail) != 2) return 0;
    if (!parse_uuid(uuid, g->cluster_uuid)) return 0;
    g->clique = clique;
    g->has_fabric = 1;
  } else {
    return 0;
  }
  return 1;
}

static nvmlReturn_t load_table(void) {
  const char* path = getenv("TESSERA_FAKE_NVML_TABLE");
  g_count = 0;
  g_driver[0] = '\0';
  if (path == NULL || *path == '\0') return NVML_ERROR_DRIVER_NOT_LOADED;
  FILE* in = fopen(path, "r");
  if (in == NULL) return NVML_ERROR_DRIVER_NOT_LOADED;
  char line[512];
  int number = 0;
  nvmlReturn_t rc = NVML_SUCCESS;
  while (fgets(line, sizeof(line), in) != NULL) {
    ++number;
    if (!parse_line(line)) {
      fprintf(stderr, "fake NVML: %s:%d: malformed line\n", path, number);
      rc = NVML_ERROR_LIBRARY_NOT_FOUND;
      break;
    }
  }
  fclose(in);
  if (rc != NVML_SUCCESS) g_count = 0;
  return rc;
}

static int valid(nvmlDevice_t d) { return g_init_count > 0 && d >= g_gpus && d < g_gpus + g_count; }

static nvmlReturn_t put_text(char* dst, unsigned int length, const char* src) {
  if (dst == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(dst, src, strlen(src) + 1);
  return NVML_SUCCESS;
}

static void fill_pci(nvmlPciInfo_t* p, unsigned int domain, unsigned int bus, unsigned int dev,
                     unsigned int fn, unsigned int pci_device) {
  memset(p, 0, sizeof(*p));
  p->domain = domain;
  p->bus = bus;
  p->device = dev;
  p->pciDeviceId = (pci_device << 16) | 0x10de;
  /* NVML's forms: an 8-digit domain in busId, 4 digits in busIdLegacy; upper-case hex. */
  snprintf(p->busId, sizeof(p->busId), "%08X:%02X:%02X.%X", domain, bus, dev, fn);
  snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "%04X:%02X:%02X.%X", domain, bus, dev, fn);
}

/* The link slot `link` of a device, NULL with *rc set when there is none. */
static const struct link* get_link(nvmlDevice_t d, unsigned int link, nvmlReturn_t* rc) {
  if (!valid(d)) {
    *rc = g_init_count > 0 ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    return NULL;
  }
  if (d->link_count == 0) {
    *rc = NVML_ERROR_NOT_SUPPORTED;
    return NULL;
  }
  if (link >= NVML_NVLINK_MAX_LINKS) {
    *rc = NVML_ERROR_INVALID_ARGUMENT;
    return NULL;
  }
  static const struct link kDown = {kLinkInactive, 0, 0, 0, 0};
  *rc = NVML_SUCCESS;
  return (int)link < d->link_count ? &d->links[link] : &kDown;
}

API nvmlReturn_t nvmlInit_v2(void) {
  if (g_init_count == 0) {
    nvmlReturn_t rc = load_table();
    if (rc != NVML_SUCCESS) return rc;
  }
  ++g_init_count;
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlShutdown(void) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --g_init_count;
  return NVML_SUCCESS;
}

API const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
  }
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  return put_text(version, length, g_driver);
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *count = (unsigned int)g_count;
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == NULL || index >= (unsigned int)g_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_gpus[index];
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  if (!valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  return put_text(name, length, device->name);
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  if (!valid(device)) return NVML_ERROR_INVALID_ARGUMENT;
  return put_text(uuid, length, device->uuid);
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (!valid(device) || memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = device->memory;
  memory->used = device->memory_used;
  memory->free = device->memory - device->memory_used;
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  if (!valid(device) || pci == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  fill_pci(pci, device->domain, device->bus, device->dev, device->fn, device->pci_device);
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                          nvmlEnableState_t* is_active) {
  nvmlReturn_t rc;
  const struct link* l = get_link(device, link, &rc);
  if (l == NULL) return rc;
  if (is_active == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *is_active = l->kind != kLinkInactive;
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                            unsigned int* version) {
  nvmlReturn_t rc;
  const struct link* l = get_link(device, link, &rc);
  if (l == NULL) return rc;
  if (version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *version = device->nvlink_version;
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                     nvmlPciInfo_t* pci) {
  nvmlReturn_t rc;
  const struct link* l = get_link(device, link, &rc);
  if (l == NULL) return rc;
  if (pci == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (l->kind == kLinkInactive) return NVML_ERROR_NOT_SUPPORTED;
  fill_pci(pci, l->domain, l->bus, l->dev, l->fn, 0);
  return NVML_SUCCESS;
}

enum { kUtilization, kPower, kEnergy, kTemperature };

/* The return code of a telemetry query `which` of `device` writing to `out`. */
static nvmlReturn_t answer(nvmlDevice_t device, const void* out, int which) {
  if (!valid(device)) {
    return g_init_count > 0 ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
  }
  if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  const struct reading* r = which == kUtilization ? &device->utilization
                            : which == kPower     ? &device->power
                            : which == kEnergy    ? &device->energy
                                                  : &device->temperature;
  return reading_rc(r);
}

API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                               nvmlUtilization_t* utilization) {
  nvmlReturn_t rc = answer(device, utilization, kUtilization);
  if (rc != NVML_SUCCESS) return rc;
  utilization->gpu = (unsigned int)device->utilization.values[0];
  utilization->memory = (unsigned int)device->utilization.values[1];
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  nvmlReturn_t rc = answer(device, power, kPower);
  if (rc != NVML_SUCCESS) return rc;
  *power = (unsigned int)device->power.values[0];
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                     unsigned long long* energy) {
  nvmlReturn_t rc = answer(device, energy, kEnergy);
  if (rc != NVML_SUCCESS) return rc;
  *energy = (unsigned long long)device->energy.values[0];
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                          unsigned int* temp) {
  nvmlReturn_t rc = answer(device, temp, kTemperature);
  if (rc != NVML_SUCCESS) return rc;
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = (unsigned int)device->temperature.values[0];
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_OLD_DRIVER

static unsigned long long g_samples_taken; /* nvmlGpmSampleGet calls so far */

API nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t* temperature) {
  nvmlReturn_t rc = answer(device, temperature, kTemperature);
  if (rc != NVML_SUCCESS) return rc;
  if (temperature->version != NVML_TEMPERATURE_V1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (temperature->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  temperature->temperature = (int)device->temperature.values[0];
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* support) {
  if (!valid(device) || support == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (support->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  support->isSupportedDevice = reading_rc(&device->gpm) != NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (sample == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  sample->handle = calloc(1, sizeof(struct nvmlGpmSample_st));
  return sample->handle != NULL ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

API nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  if (sample.handle == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  free(sample.handle);
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  if (!valid(device) || sample.handle == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (reading_rc(&device->gpm) == NVML_ERROR_NOT_SUPPORTED) return NVML_ERROR_NOT_SUPPORTED;
  sample.handle->device = device;
  sample.handle->taken = ++g_samples_taken;
  return NVML_SUCCESS;
}

/* The table's values for SM_UTIL, ANY_TENSOR_UTIL and DRAM_BW_UTIL between two samples of one
 * device, the second taken after the first; other metric ids are NOT_SUPPORTED. */
API nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* get) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (get == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (get->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const struct nvmlGpmSample_st* a = get->sample1.handle;
  const struct nvmlGpmSample_st* b = get->sample2.handle;
  if (a == NULL || b == NULL || a->device == NULL || a->device != b->device ||
      b->taken <= a->taken || get->numMetrics > FAKE_GPM_METRIC_MAX) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  nvmlReturn_t rc = reading_rc(&a->device->gpm);
  if (rc != NVML_SUCCESS) return rc;
  for (unsigned int i = 0; i < get->numMetrics; ++i) {
    nvmlGpmMetric_t* m = &get->metrics[i];
    int slot = m->metricId == NVML_GPM_METRIC_SM_UTIL           ? 0
               : m->metricId == NVML_GPM_METRIC_ANY_TENSOR_UTIL ? 1
               : m->metricId == NVML_GPM_METRIC_DRAM_BW_UTIL    ? 2
                                                                : -1;
    m->nvmlReturn = slot < 0 ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
    m->value = slot < 0 ? 0.0 : a->device->gpm.values[slot];
  }
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                     nvmlIntNvLinkDeviceType_t* type) {
  nvmlReturn_t rc;
  const struct link* l = get_link(device, link, &rc);
  if (l == NULL) return rc;
  if (type == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (l->kind == kLinkInactive) return NVML_ERROR_NOT_SUPPORTED;
  *type = l->kind == kLinkGpu ? NVML_NVLINK_DEVICE_TYPE_GPU : NVML_NVLINK_DEVICE_TYPE_SWITCH;
  return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t* info) {
  if (!valid(device) || info == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (!device->has_fabric) return NVML_ERROR_NOT_SUPPORTED;
  memset(info, 0, sizeof(*info));
  memcpy(info->clusterUuid, device->cluster_uuid, sizeof(info->clusterUuid));
  info->status = NVML_SUCCESS;
  info->cliqueId = device->clique;
  info->state = 3; /* NVML_GPU_FABRIC_STATE_COMPLETED */
  return NVML_SUCCESS;
}

#endif /* FAKE_NVML_OLD_DRIVER */
