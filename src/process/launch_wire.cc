#include "process/launch_wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace tessera::launch_wire {
namespace {

// The smallest encoded string: its length and its NUL.
constexpr size_t kMinStringBytes = 5;

// A cursor over the body; every read checks what is left.
struct Reader {
  char* data;
  size_t size;
  size_t at = 0;

  size_t left() const { return size - at; }
  bool U32(uint32_t* value) {
    if (left() < 4) return false;
    *value = LoadU32(reinterpret_cast<const unsigned char*>(data + at));
    at += 4;
    return true;
  }
};

__attribute__((format(printf, 3, 4))) void SetError(char* error, size_t error_size,
                                                    const char* format, ...) {
  if (error_size == 0) return;
  va_list args;
  va_start(args, format);
  vsnprintf(error, error_size, format, args);
  va_end(args);
}

// One string, NUL-terminated in place. `what` (with `index` when it is >= 0) names it in errors.
bool ReadString(Reader& reader, const char** out, const char* what, long index, char* error,
                size_t error_size) {
  char name[64];
  if (index >= 0) {
    snprintf(name, sizeof(name), "%s[%ld]", what, index);
  } else {
    snprintf(name, sizeof(name), "%s", what);
  }
  uint32_t length = 0;
  if (!reader.U32(&length)) {
    SetError(error, error_size, "launch spec is truncated at the length of %s", name);
    return false;
  }
  if (length >= reader.left()) {
    SetError(error, error_size, "launch spec is truncated in %s", name);
    return false;
  }
  char* start = reader.data + reader.at;
  if (memchr(start, '\0', length) != nullptr) {
    SetError(error, error_size, "%s of the launch spec holds a NUL byte", name);
    return false;
  }
  if (start[length] != '\0') {
    SetError(error, error_size, "%s of the launch spec does not end with NUL", name);
    return false;
  }
  reader.at += length + 1;
  *out = start;
  return true;
}

// A count followed by that many strings, into a malloc'd array ending with nullptr.
bool ReadList(Reader& reader, uint32_t* count, char*** list, const char* what, char* error,
              size_t error_size) {
  if (!reader.U32(count)) {
    SetError(error, error_size, "launch spec is truncated at the %s count", what);
    return false;
  }
  if (*count > reader.left() / kMinStringBytes) {
    SetError(error, error_size, "launch spec announces %lu %s entries, more than it holds",
             static_cast<unsigned long>(*count), what);
    return false;
  }
  *list = static_cast<char**>(calloc(static_cast<size_t>(*count) + 1, sizeof(char*)));
  if (*list == nullptr) {
    SetError(error, error_size, "out of memory for the %s list", what);
    return false;
  }
  for (uint32_t i = 0; i < *count; ++i) {
    const char* entry = nullptr;
    if (!ReadString(reader, &entry, what, static_cast<long>(i), error, error_size)) return false;
    (*list)[i] = const_cast<char*>(entry);
  }
  return true;
}

}  // namespace

bool ParseSpecHeader(const unsigned char* header, uint32_t* body_size, char* error,
                     size_t error_size) {
  if (LoadU32(header) != kSpecMagic) {
    SetError(error, error_size, "launch spec has a wrong magic number");
    return false;
  }
  const uint32_t version = LoadU32(header + 4);
  if (version != kSpecVersion) {
    SetError(error, error_size, "launch spec has version %lu, this launcher reads version %lu",
             static_cast<unsigned long>(version), static_cast<unsigned long>(kSpecVersion));
    return false;
  }
  *body_size = LoadU32(header + 8);
  if (*body_size > kMaxSpecBytes) {
    SetError(error, error_size, "launch spec body of %lu bytes is over the limit of %lu",
             static_cast<unsigned long>(*body_size), static_cast<unsigned long>(kMaxSpecBytes));
    return false;
  }
  return true;
}

bool ParseSpecBody(char* body, size_t size, SpecView* spec, char* error, size_t error_size) {
  *spec = SpecView();
  Reader reader{body, size};
  SpecView parsed;
  bool ok = ReadList(reader, &parsed.argc, &parsed.argv, "argv", error, error_size) &&
            ReadList(reader, &parsed.envc, &parsed.envp, "environment", error, error_size) &&
            ReadString(reader, &parsed.cwd, "directory", -1, error, error_size) &&
            ReadString(reader, &parsed.stdout_path, "stdout path", -1, error, error_size) &&
            ReadString(reader, &parsed.stderr_path, "stderr path", -1, error, error_size) &&
            ReadString(reader, &parsed.stdin_path, "stdin path", -1, error, error_size);
  if (ok && (parsed.argc == 0 || parsed.argv[0][0] == '\0')) {
    SetError(error, error_size, "launch spec has no program (argv is empty)");
    ok = false;
  }
  for (uint32_t i = 0; ok && i < parsed.envc; ++i) {
    const char* equals = strchr(parsed.envp[i], '=');
    if (equals == nullptr || equals == parsed.envp[i]) {
      SetError(error, error_size, "environment[%lu] of the launch spec is not KEY=VALUE",
               static_cast<unsigned long>(i));
      ok = false;
    }
  }
  if (ok && reader.left() != 0) {
    SetError(error, error_size, "launch spec has %lu bytes after its last field",
             static_cast<unsigned long>(reader.left()));
    ok = false;
  }
  if (!ok) {
    FreeSpecView(&parsed);
    return false;
  }
  *spec = parsed;
  return true;
}

bool ParseSpec(char* data, size_t size, SpecView* spec, char* error, size_t error_size) {
  *spec = SpecView();
  if (size < kSpecHeaderBytes) {
    SetError(error, error_size, "launch spec is shorter than its header");
    return false;
  }
  uint32_t body_size = 0;
  if (!ParseSpecHeader(reinterpret_cast<const unsigned char*>(data), &body_size, error,
                       error_size)) {
    return false;
  }
  if (body_size != size - kSpecHeaderBytes) {
    SetError(error, error_size, "launch spec header announces %lu body bytes, but %lu follow",
             static_cast<unsigned long>(body_size),
             static_cast<unsigned long>(size - kSpecHeaderBytes));
    return false;
  }
  return ParseSpecBody(data + kSpecHeaderBytes, body_size, spec, error, error_size);
}

void FreeSpecView(SpecView* spec) {
  free(spec->argv);
  free(spec->envp);
  *spec = SpecView();
}

size_t WriteReport(unsigned char* out, uint32_t stage, uint32_t err, const char* detail,
                   size_t detail_size) {
  if (detail_size > kMaxDetailBytes) detail_size = kMaxDetailBytes;
  StoreU32(out, kReportMagic);
  StoreU32(out + 4, stage);
  StoreU32(out + 8, err);
  StoreU32(out + 12, static_cast<uint32_t>(detail_size));
  if (detail_size > 0) memcpy(out + kReportHeaderBytes, detail, detail_size);
  return kReportHeaderBytes + detail_size;
}

bool ParseReport(const unsigned char* data, size_t size, Report* report, char* error,
                 size_t error_size) {
  if (size < kReportHeaderBytes || LoadU32(data) != kReportMagic) {
    SetError(error, error_size, "launcher report of %lu bytes is malformed",
             static_cast<unsigned long>(size));
    return false;
  }
  const uint32_t detail_size = LoadU32(data + 12);
  if (detail_size > kMaxDetailBytes || detail_size != size - kReportHeaderBytes) {
    SetError(error, error_size, "launcher report announces a detail of %lu bytes, but %lu follow",
             static_cast<unsigned long>(detail_size),
             static_cast<unsigned long>(size - kReportHeaderBytes));
    return false;
  }
  report->stage = LoadU32(data + 4);
  report->err = LoadU32(data + 8);
  report->detail = reinterpret_cast<const char*>(data + kReportHeaderBytes);
  report->detail_size = detail_size;
  return true;
}

}  // namespace tessera::launch_wire
