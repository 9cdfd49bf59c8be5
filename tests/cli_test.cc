// The tierkv command-line client against a real manager: every subcommand, its
// output and its exit codes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "manager_process.h"

namespace tierkv {
namespace {

using testing::ManagerProcess;
using testing::RunCommand;

class CliTest : public ::testing::Test {
 protected:
  int Run(std::vector<std::string> args, const std::string& input = "") {
    std::vector<std::string> argv = {TIERKV_CLI_BIN, "--address", address_};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, input, &out_, &err_);
  }
  ManagerProcess manager_;
  std::string address_ = manager_.uds();
  std::string out_, err_;
};

TEST_F(CliTest, PutFromStdinGetToStdout) {
  EXPECT_EQ(Run({"put", "greeting"}, "hello world"), 0) << err_;
  EXPECT_EQ(Run({"get", "greeting"}), 0);
  EXPECT_EQ(out_, "hello world");
  EXPECT_EQ(Run({"exists", "greeting"}), 0);
  EXPECT_EQ(Run({"exists", "nope"}), 1);
}

TEST_F(CliTest, PutFromFileGetToFileBinarySafe) {
  const std::string in = "/tmp/tierkv-cli-in-" + std::to_string(getpid());
  const std::string out = "/tmp/tierkv-cli-out-" + std::to_string(getpid());
  std::string data(300000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  std::ofstream(in, std::ios::binary) << data;
  EXPECT_EQ(Run({"put", "blob", in, "--group", "g1"}), 0) << err_;
  EXPECT_EQ(Run({"get", "blob", out}), 0) << err_;
  std::ifstream f(out, std::ios::binary);
  std::string back((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(back, data);
  EXPECT_EQ(Run({"stat", "blob"}), 0);
  EXPECT_NE(out_.find("size:    300000"), std::string::npos) << out_;
  EXPECT_NE(out_.find("media:   dram"), std::string::npos);
  EXPECT_NE(out_.find("group:   g1"), std::string::npos);
  unlink(in.c_str());
  unlink(out.c_str());
}

TEST_F(CliTest, ErrorsHaveCodesAndExitStatuses) {
  EXPECT_EQ(Run({"put", "k"}, "v1"), 0);
  EXPECT_EQ(Run({"put", "k"}, "v2"), 3);
  EXPECT_NE(err_.find("DUPLICATED"), std::string::npos) << err_;
  EXPECT_EQ(Run({"put", "k", "--upsert"}, "v2"), 0);
  EXPECT_EQ(Run({"get", "missing"}), 1);
  EXPECT_NE(err_.find("NOT_FOUND"), std::string::npos);
  EXPECT_EQ(Run({"put", "k", "/nonexistent/file"}), 3);
  EXPECT_EQ(Run({"frobnicate"}), 2);
  EXPECT_EQ(Run({"stat", "missing"}), 1);
  address_ = "unix:/nonexistent.sock";
  EXPECT_EQ(Run({"ls"}), 3);
  EXPECT_NE(err_.find("UNAVAILABLE"), std::string::npos) << err_;
}

TEST_F(CliTest, LsAndRmOverTcpWithTenants) {
  address_ = manager_.tcp();
  for (const char* k : {"a/1", "a/2", "b/1"}) EXPECT_EQ(Run({"put", k}, "x"), 0);
  EXPECT_EQ(Run({"--tenant", "other", "put", "a/9"}, "y"), 0);
  EXPECT_EQ(Run({"ls"}), 0);
  EXPECT_EQ(out_, "a/1\na/2\nb/1\n");
  EXPECT_EQ(Run({"ls", "a/"}), 0);
  EXPECT_EQ(out_, "a/1\na/2\n");
  EXPECT_EQ(Run({"--tenant", "other", "ls"}), 0);
  EXPECT_EQ(out_, "a/9\n");
  EXPECT_EQ(Run({"rm", "a/1", "zzz"}), 1);  // one missing key
  EXPECT_NE(err_.find("zzz"), std::string::npos);
  EXPECT_EQ(Run({"ls"}), 0);
  EXPECT_EQ(out_, "a/2\nb/1\n");
}

TEST_F(CliTest, RestCommandsShowSummarySegmentsAndKeys) {
  EXPECT_EQ(Run({"put", "k"}, "value"), 0);
  EXPECT_EQ(Run({"--rest", manager_.rest(), "stat"}), 0) << err_;
  EXPECT_NE(out_.find("keys                             1"), std::string::npos) << out_;
  EXPECT_NE(out_.find("dram_used"), std::string::npos);
  EXPECT_EQ(Run({"--rest", manager_.rest(), "segments"}), 0) << err_;
  EXPECT_NE(out_.find("rank-0-dram"), std::string::npos) << out_;
  EXPECT_NE(out_.find("64.0 MiB"), std::string::npos) << out_;
  EXPECT_EQ(Run({"--rest", manager_.rest(), "key", "k"}), 0) << err_;
  EXPECT_NE(out_.find("\"valid\": true"), std::string::npos) << out_;
  EXPECT_EQ(Run({"--rest", manager_.rest(), "key", "nope"}), 1);
  EXPECT_NE(err_.find("not found"), std::string::npos) << err_;
  EXPECT_EQ(Run({"--rest", "http://127.0.0.1:1", "segments"}), 3);
  EXPECT_NE(err_.find("cannot reach"), std::string::npos) << err_;
}

}  // namespace
}  // namespace tierkv
