// A handler that serves the files of one directory (the dashboard's built web app):
//
//   TESSERA_ASSIGN_OR_RETURN(HttpHandler files,
//                            StaticFileHandler({.root = "/usr/share/tessera/dashboard"}));
//   TESSERA_RETURN_IF_ERROR(server->HandlePrefix("/", std::move(files)));
//
// The request's decoded path, less `mount_prefix`, names a file under `root`; a path that ends
// "/" (the root's "/" included) names that directory's index.html. Refused: a ".." segment
// (403), a path that resolves (through symlinks) outside the root (403), anything but a regular
// file (403: directories, FIFOs, devices; a FIFO is never opened for a blocking read), a file
// over max_file_bytes (500); a missing file is 404. Content-Type from the extension: html, js,
// mjs, css, svg, png, json, txt, ico, map, wasm; anything else application/octet-stream. Every
// file is sent with "Cache-Control: no-cache" (a new build shows at once) and
// "X-Content-Type-Options: nosniff".
//
// The root is trusted not to be rearranged while serving: a request resolves its path
// (realpath) and then opens the result without following a final symlink; a directory swapped
// for a symlink between the two could escape.
//
// Threading: the handler is thread-safe. Cost per request: one realpath, one open, one read of
// the file; nothing is cached.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "metrics/http_server.h"

namespace tessera::metrics {

struct StaticFileOptions {
  // The directory served; must exist.
  std::string root;
  // The route prefix the handler is mounted under ("/", "/dashboard/"); stripped from the path.
  std::string mount_prefix = "/";
  uint64_t max_file_bytes = 32 * 1024 * 1024;
};

// NotFound when the root does not exist, InvalidArgument when it is not a directory or the
// prefix does not start and end with "/".
absl::StatusOr<HttpHandler> StaticFileHandler(StaticFileOptions options);

// The Content-Type for a file name, by its extension (see above).
std::string_view ContentTypeForFile(std::string_view file_name);

}  // namespace tessera::metrics
