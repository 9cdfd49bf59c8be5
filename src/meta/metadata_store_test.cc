#include "meta/metadata_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tierkv {
namespace {

class MetadataStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tierkv-meta-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(MetadataStoreTest, RawBytesSurviveReopening) {
  const std::string value("bin\0ary\xff", 8);
  {
    auto s = FileMetadataStore::Open(dir_);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Put("a", value).ok());
    ASSERT_TRUE((*s)->Put("b", "2").ok());
    ASSERT_TRUE((*s)->Delete("b").ok());
    EXPECT_EQ((*s)->Delete("b").code(), Code::kNotFound);
  }
  auto s = FileMetadataStore::Open(dir_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*(*s)->Get("a"), value);
  EXPECT_EQ((*s)->Get("b").code(), Code::kNotFound);
}

TEST_F(MetadataStoreTest, MemoryOnlyWithoutADirectory) {
  auto s = FileMetadataStore::Open("");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Put("k", "v").ok());
  EXPECT_EQ(*(*s)->Get("k"), "v");
}

TEST_F(MetadataStoreTest, CorruptOrTruncatedFilesAreRefused) {
  std::ofstream(dir_ + "/metadata.bin") << "garbage";
  EXPECT_EQ(FileMetadataStore::Open(dir_).code(), Code::kProtocolError);
  std::ofstream(dir_ + "/metadata.bin") << "TKVMETA1\x05";
  EXPECT_EQ(FileMetadataStore::Open(dir_).code(), Code::kProtocolError);
}

TEST_F(MetadataStoreTest, AFailedWriteKeepsTheOldValue) {
  auto s = FileMetadataStore::Open(dir_);
  ASSERT_TRUE((*s)->Put("k", "old").ok());
  std::filesystem::remove_all(dir_);  // the directory vanishes: persisting fails
  Status st = (*s)->Put("k", "new");
  EXPECT_EQ(st.code(), Code::kIoError);
  EXPECT_EQ(*(*s)->Get("k"), "old");
  std::filesystem::create_directories(dir_);
}

}  // namespace
}  // namespace tierkv
