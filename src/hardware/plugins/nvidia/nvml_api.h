// The slice of the NVML C ABI that Tessera calls, declared here so that neither nvml.h nor the CUDA
// toolkit is needed to build: the library is opened with dlopen at run time (nvml_library.h).
// Every type and signature below matches NVIDIA's nvml.h (CUDA 12.x / driver r570 headers, as
// reproduced in go-nvml and nvidia-ml-py); they are ABI contracts, so change none of them.
// The fake NVML (tests/fake_nvml/fake_nvml.c) repeats these declarations in C.
#pragma once

namespace tessera::nvml {

using nvmlReturn_t = int;  // enum nvmlReturn_enum: int-sized
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
inline constexpr nvmlReturn_t NVML_ERROR_LIBRARY_NOT_FOUND = 12;
inline constexpr nvmlReturn_t NVML_ERROR_FUNCTION_NOT_FOUND = 13;

struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

using nvmlEnableState_t = int;  // enum: NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1
inline constexpr nvmlEnableState_t NVML_FEATURE_ENABLED = 1;

using nvmlIntNvLinkDeviceType_t = int;  // enum nvmlIntNvLinkDeviceType_enum
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_GPU = 0x00;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02;
inline constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF;

// nvmlDeviceGetNvLinkVersion returns an nvmlNvlinkVersion_t, NOT the bare NVLink generation:
// 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0 (and 8 = 6.0 in newer headers).
// Drivers before the enum existed returned the bare generation (1..4), which maps to the same
// per-lane rates below 5 (see NvLinkLaneGigabytesPerSecond).
inline constexpr unsigned int NVML_NVLINK_VERSION_1_0 = 1;
inline constexpr unsigned int NVML_NVLINK_VERSION_4_0 = 6;
inline constexpr unsigned int NVML_NVLINK_VERSION_5_0 = 7;
inline constexpr unsigned int NVML_NVLINK_VERSION_6_0 = 8;

inline constexpr unsigned int NVML_NVLINK_MAX_LINKS = 18;
inline constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;

struct nvmlPciInfo_t {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;  // (device id << 16) | vendor id
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "00000000:1B:00.0": 8-digit domain, upper case
};

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// nvmlDeviceGetUtilizationRates: percent of the last sample period (1/6 s to 1 s) in which a
// kernel ran (gpu) and in which device memory was read or written (memory).
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

using nvmlTemperatureSensors_t = int;  // enum nvmlTemperatureSensors_enum
inline constexpr nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU = 0;

// nvmlDeviceGetTemperatureV's struct (nvmlTemperature_v1_t); `version` must be
// nvmlTemperature_v1 = NVML_STRUCT_VERSION(Temperature, 1) = sizeof | (1 << 24).
struct nvmlTemperature_t {
  unsigned int version;
  nvmlTemperatureSensors_t sensorType;
  int temperature;
};
inline constexpr unsigned int nvmlTemperature_v1 =
    static_cast<unsigned int>(sizeof(nvmlTemperature_t)) | (1u << 24);

// GPU Performance Monitoring (Hopper and newer): two samples >= 100 ms apart, then metrics over
// the interval. Metric ids are NVML_GPM_METRIC_* (percent values 0.0 - 100.0).
struct nvmlGpmSample_st;
struct nvmlGpmSample_t {
  nvmlGpmSample_st* handle;
};
inline constexpr unsigned int NVML_GPM_METRIC_SM_UTIL = 2;
inline constexpr unsigned int NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5;
inline constexpr unsigned int NVML_GPM_METRIC_DRAM_BW_UTIL = 10;
// The array bound of current headers (older ones had 98 and more recently 210). NVML reads only
// the first numMetrics entries, so a struct of the newest size works with every driver.
inline constexpr unsigned int NVML_GPM_METRIC_MAX = 333;
inline constexpr unsigned int NVML_GPM_METRICS_GET_VERSION = 1;
inline constexpr unsigned int NVML_GPM_SUPPORT_VERSION = 1;

struct nvmlGpmMetricMetricInfo_t {
  char* shortName;
  char* longName;
  char* unit;
};

struct nvmlGpmMetric_t {
  unsigned int metricId;    // in: NVML_GPM_METRIC_*
  nvmlReturn_t nvmlReturn;  // out: the value is valid only when NVML_SUCCESS
  double value;
  nvmlGpmMetricMetricInfo_t metricInfo;
};

struct nvmlGpmMetricsGet_t {
  unsigned int version;  // NVML_GPM_METRICS_GET_VERSION
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
};

struct nvmlGpmSupport_t {
  unsigned int version;  // NVML_GPM_SUPPORT_VERSION
  unsigned int isSupportedDevice;
};

inline constexpr unsigned int NVML_GPU_FABRIC_UUID_LEN = 16;
using nvmlGpuFabricState_t = unsigned char;
inline constexpr nvmlGpuFabricState_t NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0;
inline constexpr nvmlGpuFabricState_t NVML_GPU_FABRIC_STATE_COMPLETED = 3;

// The unversioned (v1) struct that nvmlDeviceGetGpuFabricInfo fills.
struct nvmlGpuFabricInfo_t {
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
};

// Function pointer types with C language linkage, as dlsym returns them.
extern "C" {
using InitFn = nvmlReturn_t (*)();                    // nvmlInit_v2
using ShutdownFn = nvmlReturn_t (*)();                // nvmlShutdown
using ErrorStringFn = const char* (*)(nvmlReturn_t);  // nvmlErrorString
using SystemGetDriverVersionFn = nvmlReturn_t (*)(char*,
                                                  unsigned int);  // nvmlSystemGetDriverVersion
using DeviceGetCountFn = nvmlReturn_t (*)(unsigned int*);         // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);  // ..._v2
using DeviceGetNameFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);  // nvmlDeviceGetName
using DeviceGetUuidFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);  // nvmlDeviceGetUUID
using DeviceGetMemoryInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using DeviceGetPciInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);  // ..._v3
using DeviceGetNvLinkStateFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlEnableState_t*);
using DeviceGetNvLinkVersionFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, unsigned int*);
using DeviceGetNvLinkRemotePciInfoFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int,
                                                        nvmlPciInfo_t*);  // ..._v2
using DeviceGetNvLinkRemoteDeviceTypeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int,
                                                           nvmlIntNvLinkDeviceType_t*);
using DeviceGetGpuFabricInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpuFabricInfo_t*);
// Telemetry.
using DeviceGetUtilizationRatesFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using DeviceGetPowerUsageFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);  // milliwatts
using DeviceGetTotalEnergyConsumptionFn = nvmlReturn_t (*)(nvmlDevice_t,
                                                           unsigned long long*);  // millijoules
using DeviceGetTemperatureFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlTemperatureSensors_t,
                                                unsigned int*);  // °C; deprecated in 13.0
using DeviceGetTemperatureVFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlTemperature_t*);
using GpmQueryDeviceSupportFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSupport_t*);
using GpmSampleAllocFn = nvmlReturn_t (*)(nvmlGpmSample_t*);
using GpmSampleFreeFn = nvmlReturn_t (*)(nvmlGpmSample_t);
using GpmSampleGetFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSample_t);
using GpmMetricsGetFn = nvmlReturn_t (*)(nvmlGpmMetricsGet_t*);

}  // extern "C"

// Layout checks against nvml.h on x86-64 / aarch64 (LP64).
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlGpuFabricInfo_t) == 28);
static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlTemperature_t) == 12 && nvmlTemperature_v1 == 0x100000c);
static_assert(sizeof(nvmlGpmSample_t) == 8);
static_assert(sizeof(nvmlGpmMetric_t) == 40);
static_assert(sizeof(nvmlGpmMetricsGet_t) == 24 + 40 * NVML_GPM_METRIC_MAX);
static_assert(sizeof(nvmlGpmSupport_t) == 8);

}  // namespace tessera::nvml
