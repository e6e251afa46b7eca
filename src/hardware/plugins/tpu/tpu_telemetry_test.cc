// TPU telemetry from libtpu's runtime-metric service, served here by an in-process fake of
// tpu.monitoring.runtime.RuntimeMetricService on the loopback interface: the v5e fixture's chips
// with every figure, a libtpu that lacks a metric, no server, two servers that disagree, and the
// choice of servers.
#include "hardware/plugins/tpu/tpu_telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "grpcpp/grpcpp.h"
#include "grpcpp/security/server_credentials.h"
#include "hardware/plugins/tpu/proto/tpu_metric_service.grpc.pb.h"
#include "hardware/plugins/tpu/tpu_plugin.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

namespace rpc = ::tpu::monitoring::runtime;

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

class FakeMetricService final : public rpc::RuntimeMetricService::Service {
 public:
  grpc::Status GetRuntimeMetric(grpc::ServerContext*, const rpc::MetricRequest* request,
                                rpc::MetricResponse* response) override {
    auto it = metrics_.find(request->metric_name());
    if (it == metrics_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such metric");
    *response->mutable_metric() = it->second;
    return grpc::Status::OK;
  }

  // Per-device gauges with the device id as int_attr, as libtpu sends HBM and duty cycle.
  void AddInts(const std::string& name, const std::map<int, int64_t>& values) {
    rpc::TPUMetric& metric = metrics_[name];
    metric.set_name(name);
    for (const auto& [id, v] : values) {
      rpc::Metric* m = metric.add_metrics();
      m->mutable_attribute()->set_key("device-id");
      m->mutable_attribute()->mutable_value()->set_int_attr(id);
      m->mutable_gauge()->set_as_int(v);
    }
  }
  // Per-device doubles with the id in a key-value list as a string (newer libtpu).
  void AddDoubles(const std::string& name, const std::map<int, double>& values) {
    rpc::TPUMetric& metric = metrics_[name];
    metric.set_name(name);
    for (const auto& [id, v] : values) {
      rpc::Metric* m = metric.add_metrics();
      rpc::Attribute* ordinal =
          m->mutable_attribute()->mutable_value()->mutable_kvlist_attr()->add_attributes();
      ordinal->set_key("device_ordinal");
      ordinal->mutable_value()->set_string_attr(std::to_string(id));
      m->mutable_gauge()->set_as_double(v);
    }
  }

 private:
  std::map<std::string, rpc::TPUMetric> metrics_;
};

// A libtpu metric server on 127.0.0.1 with gRPC local credentials; stops when destroyed.
class FakeLibtpu {
 public:
  FakeLibtpu() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::experimental::LocalServerCredentials(LOCAL_TCP),
                             &port_);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
  }
  ~FakeLibtpu() { Stop(); }
  void Stop() {
    if (server_ != nullptr) server_->Shutdown();
    server_.reset();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  FakeMetricService service;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// What a single-process JAX program on the 8-chip v5e host serves.
void ServeV5eTraining(FakeMetricService& s) {
  std::map<int, int64_t> used, total;
  std::map<int, double> duty, hbm;
  for (int chip = 0; chip < 8; ++chip) {
    used[chip] = static_cast<int64_t>((8 + chip) * kGiB / 2);
    total[chip] = static_cast<int64_t>(16 * kGiB);
    duty[chip] = 90.5 - chip;
    hbm[chip] = 41.25 + chip;
  }
  s.AddInts("tpu.runtime.hbm.memory.usage.bytes", used);
  s.AddInts("tpu.runtime.hbm.memory.total.bytes", total);
  s.AddDoubles("tpu.runtime.tensorcore.dutycycle.percent", duty);
  s.AddDoubles("tpu.runtime.hbm.utilization.percent", hbm);
}

std::vector<Device> V5eChips() { return DetectOnFixture(*MakeTpuPlugin(), "tpu-v5e-8"); }

FamilyTelemetry ReadFrom(const std::vector<std::string>& servers,
                         const std::vector<Device>& devices) {
  TelemetryOptions options{.tpu_metric_servers = servers, .rpc_timeout = absl::Seconds(5)};
  return OpenTelemetryOn(*MakeTpuPlugin(), FixturePath("tpu-v5e-8"), std::move(options))
      ->Read(devices, kFirstReading);
}

TEST(TpuTelemetryTest, EveryChipGetsTheFiguresLibtpuServesForItsDeviceId) {
  FakeLibtpu libtpu;
  ServeV5eTraining(libtpu.service);
  const std::vector<Device> chips = V5eChips();
  ASSERT_EQ(chips.size(), 8u);
  const FamilyTelemetry reading = ReadFrom({libtpu.address()}, chips);
  EXPECT_THAT(reading.warnings, IsEmpty());
  ASSERT_EQ(reading.devices.size(), 8u);
  for (int chip = 0; chip < 8; ++chip) {
    SCOPED_TRACE(chip);
    const DeviceTelemetry& t = reading.devices[chip];
    EXPECT_EQ(t.source, "libtpu");
    EXPECT_THAT(t.memory_used_bytes, Optional((8 + chip) * kGiB / 2));
    EXPECT_THAT(t.memory_total_bytes, Optional(16 * kGiB));
    EXPECT_THAT(t.duty_cycle_ratio, Optional((90.5 - chip) / 100));
    EXPECT_THAT(t.memory_bandwidth_ratio, Optional((41.25 + chip) / 100));
    EXPECT_THAT(t.warnings, IsEmpty());
    // libtpu serves no utilization, power or temperature.
    EXPECT_EQ(t.utilization_ratio, std::nullopt);
    EXPECT_EQ(t.power_watts, std::nullopt);
    EXPECT_EQ(t.temperature_celsius, std::nullopt);
    EXPECT_EQ(t.tensor_activity_ratio, std::nullopt);
  }
}

TEST(TpuTelemetryTest, AMetricThisLibtpuLacksIsAbsentWithAWarning) {
  FakeLibtpu libtpu;
  libtpu.service.AddInts("tpu.runtime.hbm.memory.usage.bytes", {{0, 123}});
  libtpu.service.AddDoubles("tpu.runtime.tensorcore.dutycycle.percent", {{0, 250.0}});
  const std::vector<Device> chips = V5eChips();
  const FamilyTelemetry reading = ReadFrom({libtpu.address()}, {chips[0], chips[1]});
  EXPECT_THAT(reading.devices[0].memory_used_bytes, Optional(123u));
  EXPECT_EQ(reading.devices[0].memory_total_bytes, std::nullopt);
  EXPECT_EQ(reading.devices[0].duty_cycle_ratio, std::nullopt);
  EXPECT_THAT(reading.devices[0].warnings,
              ElementsAre(HasSubstr("duty cycle 250 is not a percentage")));
  EXPECT_THAT(reading.warnings,
              Contains(HasSubstr("does not serve tpu.runtime.hbm.memory.total.bytes")));
  EXPECT_FALSE(reading.devices[1].HasAnyFigure());
  EXPECT_THAT(reading.devices[1].warnings,
              ElementsAre(HasSubstr("chip 1: no libtpu server reports it")));
}

TEST(TpuTelemetryTest, WithNoProgramServingMetricsNoChipHasFiguresAndTheReadingSaysWhere) {
  FakeLibtpu gone;
  const std::string address = gone.address();
  gone.Stop();
  const std::vector<Device> chips = V5eChips();
  const FamilyTelemetry reading = ReadFrom({address}, chips);
  for (const DeviceTelemetry& t : reading.devices) EXPECT_FALSE(t.HasAnyFigure());
  EXPECT_THAT(reading.warnings,
              ElementsAre(AllOf(HasSubstr("no libtpu metric server answered at " + address),
                                HasSubstr("is a TPU program running?"))));
}

TEST(TpuTelemetryTest, ADeviceIdReportedByTwoServersIsDroppedAsAmbiguous) {
  FakeLibtpu first;
  FakeLibtpu second;
  first.service.AddInts("tpu.runtime.hbm.memory.usage.bytes", {{0, 1}, {1, 2}});
  second.service.AddInts("tpu.runtime.hbm.memory.usage.bytes", {{0, 3}});
  const std::vector<Device> chips = V5eChips();
  const FamilyTelemetry reading =
      ReadFrom({first.address(), second.address()}, {chips[0], chips[1]});
  EXPECT_FALSE(reading.devices[0].HasAnyFigure());
  EXPECT_THAT(reading.devices[1].memory_used_bytes, Optional(2u));
  EXPECT_THAT(reading.warnings,
              Contains(HasSubstr("more than one libtpu server reports device 0")));
}

TEST(TpuTelemetryTest, OnAFakeTreeNoServerIsAsked) {
  TelemetryContext context{Sysroot(FixturePath("tpu-v5e-8")),
                           Environment::ForSysroot(Sysroot(FixturePath("tpu-v5e-8"))),
                           {}};
  EXPECT_THAT(TpuMetricServers(context), IsEmpty());
  const std::vector<Device> chips = V5eChips();
  const FamilyTelemetry reading =
      MakeTpuPlugin()->OpenTelemetry(context)->Read(chips, kFirstReading);
  for (const DeviceTelemetry& t : reading.devices) EXPECT_FALSE(t.HasAnyFigure());
  EXPECT_THAT(reading.warnings, ElementsAre(HasSubstr("read only on the live machine")));
}

TEST(TpuTelemetryTest, TheLiveMachineAsksLocalhostAtEveryMetricsPort) {
  TelemetryContext context{Sysroot("/"), Environment(), {}};
  EXPECT_THAT(TpuMetricServers(context), ElementsAre("localhost:8431"));
  context.env.Set("TPU_RUNTIME_METRICS_PORTS", "8431, 8432,bad");
  EXPECT_THAT(TpuMetricServers(context), ElementsAre("localhost:8431", "localhost:8432"));
  context.options.tpu_metric_servers = {"10.0.0.5:9000"};
  EXPECT_THAT(TpuMetricServers(context), ElementsAre("10.0.0.5:9000"));
}

}  // namespace
}  // namespace tessera::testing
