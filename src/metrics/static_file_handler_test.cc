// The static-file handler over a real directory: files with their content types, index.html
// for directories' "/", and the refusals (.., symlinks out of the root, non-regular files).
#include "metrics/static_file_handler.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::metrics {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Pair;

void WriteFile(const fs::path& path, std::string_view content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << content;
}

HttpRequest Get(std::string path) {
  HttpRequest request;
  request.method = "GET";
  request.path = std::move(path);
  request.target = request.path;
  return request;
}

class StaticFileHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(::testing::TempDir()) /
            ("static_files_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    root_ = base_ / "dashboard";
    WriteFile(root_ / "index.html", "<h1>Tessera</h1>");
    WriteFile(root_ / "app.js", "console.log(1)");
    WriteFile(root_ / "style.css", "body{}");
    WriteFile(root_ / "logo.svg", "<svg/>");
    WriteFile(root_ / "logo.png", "\x89PNG");
    WriteFile(root_ / "data" / "nodes.json", "[]");
    WriteFile(root_ / "nodes" / "index.html", "<h1>Nodes</h1>");
    WriteFile(base_ / "secret.txt", "secret");
    fs::create_symlink(base_ / "secret.txt", root_ / "escape.txt");
    fs::create_symlink(root_ / "app.js", root_ / "alias.js");
    ASSERT_EQ(mkfifo((root_ / "pipe").c_str(), 0600), 0);
    auto handler = StaticFileHandler({.root = root_.string()});
    ASSERT_TRUE(handler.ok()) << handler.status();
    handler_ = std::move(*handler);
  }
  void TearDown() override { fs::remove_all(base_); }

  fs::path base_;
  fs::path root_;
  HttpHandler handler_;
};

TEST_F(StaticFileHandlerTest, FilesAreServedWithTheirContentTypes) {
  struct Case {
    const char* path;
    const char* body;
    const char* type;
  };
  for (const Case& c :
       {Case{"/app.js", "console.log(1)", "text/javascript; charset=utf-8"},
        Case{"/style.css", "body{}", "text/css; charset=utf-8"},
        Case{"/logo.svg", "<svg/>", "image/svg+xml"}, Case{"/logo.png", "\x89PNG", "image/png"},
        Case{"/data/nodes.json", "[]", "application/json"},
        Case{"/alias.js", "console.log(1)", "text/javascript; charset=utf-8"}}) {
    const HttpResponse response = handler_(Get(c.path));
    EXPECT_EQ(response.status, 200) << c.path << ": " << response.body;
    EXPECT_EQ(response.body, c.body) << c.path;
    EXPECT_EQ(response.content_type, c.type) << c.path;
  }
  EXPECT_THAT(handler_(Get("/app.js")).headers,
              Contains(Pair("X-Content-Type-Options", "nosniff")));
}

TEST_F(StaticFileHandlerTest, ASlashServesIndexHtml) {
  HttpResponse root = handler_(Get("/"));
  EXPECT_EQ(root.status, 200);
  EXPECT_EQ(root.body, "<h1>Tessera</h1>");
  EXPECT_EQ(root.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(handler_(Get("/nodes/")).body, "<h1>Nodes</h1>");
}

TEST_F(StaticFileHandlerTest, AMissingFileIsNotFound) {
  EXPECT_EQ(handler_(Get("/missing.js")).status, 404);
  EXPECT_EQ(handler_(Get("/app.js/more")).status, 404);
}

TEST_F(StaticFileHandlerTest, DotDotIsRefused) {
  const HttpResponse response = handler_(Get("/data/../../secret.txt"));
  EXPECT_EQ(response.status, 403);
  EXPECT_THAT(response.body, HasSubstr("\"..\" segment"));
  EXPECT_EQ(handler_(Get("/..")).status, 403);
}

TEST_F(StaticFileHandlerTest, ASymlinkLeadingOutOfTheRootIsRefused) {
  const HttpResponse response = handler_(Get("/escape.txt"));
  EXPECT_EQ(response.status, 403);
  EXPECT_THAT(response.body, HasSubstr("outside the served directory"));
  EXPECT_THAT(response.body, ::testing::Not(HasSubstr("secret")));
}

TEST_F(StaticFileHandlerTest, NonRegularFilesAreRefused) {
  EXPECT_EQ(handler_(Get("/pipe")).status, 403);  // and does not block on the FIFO
  const HttpResponse directory = handler_(Get("/data"));
  EXPECT_EQ(directory.status, 403);
  EXPECT_THAT(directory.body, HasSubstr("not a regular file"));
}

TEST_F(StaticFileHandlerTest, AMountPrefixIsStripped) {
  auto handler = StaticFileHandler({.root = root_.string(), .mount_prefix = "/dashboard/"});
  ASSERT_TRUE(handler.ok());
  EXPECT_EQ((*handler)(Get("/dashboard/app.js")).body, "console.log(1)");
  EXPECT_EQ((*handler)(Get("/dashboard/")).body, "<h1>Tessera</h1>");
  EXPECT_EQ((*handler)(Get("/other/app.js")).status, 404);
}

TEST_F(StaticFileHandlerTest, ABadRootOrPrefixIsAnError) {
  EXPECT_EQ(StaticFileHandler({.root = (base_ / "none").string()}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(StaticFileHandler({.root = (base_ / "secret.txt").string()}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StaticFileHandler({.root = root_.string(), .mount_prefix = "/x"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ContentTypeTest, UnknownExtensionsAreOctetStreams) {
  EXPECT_EQ(ContentTypeForFile("/a/b.HTML"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeForFile("/a/b.bin"), "application/octet-stream");
  EXPECT_EQ(ContentTypeForFile("/a/Makefile"), "application/octet-stream");
}

}  // namespace
}  // namespace tessera::metrics
