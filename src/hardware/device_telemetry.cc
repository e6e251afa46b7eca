#include "hardware/device_telemetry.h"

namespace tessera {

bool DeviceTelemetry::HasAnyFigure() const {
  return utilization_ratio || duty_cycle_ratio || sm_activity_ratio || tensor_activity_ratio ||
         memory_busy_ratio || memory_bandwidth_ratio || memory_used_bytes || memory_total_bytes ||
         power_watts || power_ratio || energy_joules || temperature_celsius ||
         memory_temperature_celsius;
}

}  // namespace tessera
