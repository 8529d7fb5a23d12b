// Replacing files through symbolic links: every writer that renames a
// temporary over its destination (replace_files, write_npy; --plot goes
// through link_target the same way) keeps a user's link a link and gives
// the file it points to the new content.
#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "ir/host_tensor.h"
#include "ir/link_target.h"
#include "ir/npy.h"
#include "runtime/file_io.h"
#include "runtime/runtime_test_util.h"
#include "support/run_command.h"

namespace fusejit {
namespace {

namespace fs = std::filesystem;

TEST(LinkTarget, FollowsRelativeAbsoluteAndChainedLinks) {
  const fs::path dir = testing::make_temp_dir("fusejit-link-target");
  fs::create_directory(dir / "real");
  const std::string file = (dir / "real" / "data.txt").string();
  ASSERT_TRUE(write_whole_file(file, "x").ok());
  EXPECT_EQ(link_target(file), file);                                  // a plain file is itself
  EXPECT_EQ(link_target((dir / "new.txt").string()), (dir / "new.txt").string());  // so is a missing one
  fs::create_symlink("real/data.txt", dir / "relative");                // read against the link's folder
  EXPECT_EQ(fs::path(link_target((dir / "relative").string())), dir / "real/data.txt");
  fs::create_symlink(dir / "relative", dir / "chained");               // absolute, to another link
  EXPECT_EQ(fs::path(link_target((dir / "chained").string())), dir / "real/data.txt");
  fs::create_symlink("real/missing.txt", dir / "dangling");             // where a write would create it
  EXPECT_EQ(fs::path(link_target((dir / "dangling").string())), dir / "real/missing.txt");
  fs::create_symlink("loop_b", dir / "loop_a");                         // a cycle ends, as the kernel's limit does
  fs::create_symlink("loop_a", dir / "loop_b");
  const std::string loop = link_target((dir / "loop_a").string());
  EXPECT_TRUE(fs::path(loop).filename() == "loop_a" || fs::path(loop).filename() == "loop_b") << loop;
}

TEST(ReplaceFiles, WriteThroughALinkAndKeepIt) {
  const fs::path dir = testing::make_temp_dir("fusejit-replace-link");
  fs::create_directory(dir / "real");
  ASSERT_TRUE(write_whole_file((dir / "real" / "plan.txt").string(), "old").ok());
  fs::create_symlink("real/plan.txt", dir / "plan.txt");
  ASSERT_TRUE(replace_file((dir / "plan.txt").string(), "new").ok());
  EXPECT_TRUE(fs::is_symlink(dir / "plan.txt"));
  EXPECT_EQ(*read_whole_file((dir / "real" / "plan.txt").string()), "new");
  // The temporary was written beside the target and renamed: nothing is left over.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir / "real")) ++entries;
  EXPECT_EQ(entries, 1);

  // write_npy too.
  const HostTensor t{DType::kF32, {2}, {1.0, 2.0}};
  ASSERT_TRUE(write_npy((dir / "real" / "y.npy").string(), t).ok());
  fs::create_symlink("real/y.npy", dir / "y.npy");
  ASSERT_TRUE(write_npy((dir / "y.npy").string(), HostTensor{DType::kF32, {1}, {7.0}}).ok());
  EXPECT_TRUE(fs::is_symlink(dir / "y.npy"));
  EXPECT_EQ(read_npy((dir / "real" / "y.npy").string(), DType::kF32)->values, std::vector<double>{7.0});
}

// A device, FIFO or socket where a user's file would be written, or at the
// end of its link, is left alone: renaming a file over it would replace it
// (emit's manifest linked to /dev/zero once replaced /dev/zero). A cache's
// own file name is the cache's to replace, whatever is there.
TEST(ReplaceFiles, ADeviceFifoOrSocketIsLeftAlone) {
  const fs::path dir = testing::make_temp_dir("fusejit-replace-fifo");
  ASSERT_EQ(mkfifo((dir / "pipe").c_str(), 0644), 0);
  fs::create_symlink("pipe", dir / "to_pipe");
  fs::create_symlink("pipe", dir / "y.npy");
  for (const char* name : {"pipe", "to_pipe"}) {
    const absl::Status s = replace_files({{(dir / name).string(), "data"}, {(dir / "other.txt").string(), "x"}});
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("is not a regular file"), std::string_view::npos) << s;
    EXPECT_FALSE(fs::exists(dir / "other.txt")) << "nothing of the group is written";
  }
  const absl::Status npy = write_npy((dir / "y.npy").string(), HostTensor{DType::kF32, {1}, {7.0}});
  EXPECT_NE(npy.message().find("is not a regular file"), std::string_view::npos) << npy;
  EXPECT_TRUE(fs::is_fifo(dir / "pipe"));
  EXPECT_TRUE(fs::is_symlink(dir / "to_pipe"));
  EXPECT_TRUE(fs::is_symlink(dir / "y.npy"));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 3) << "no temporary left behind";

  ASSERT_TRUE(replace_cache_file((dir / "pipe").string(), "entry").ok());
  EXPECT_EQ(*read_whole_file((dir / "pipe").string()), "entry");
}

TEST(ReplaceFiles, AFailedWriteThroughALinkNamesTheLinkAndItsTarget) {
  const fs::path dir = testing::make_temp_dir("fusejit-replace-link-error");
  fs::create_symlink("gone/plan.txt", dir / "plan.txt");  // its folder does not exist
  const absl::Status s = replace_file((dir / "plan.txt").string(), "new");
  ASSERT_FALSE(s.ok());
  const std::string message(s.message());
  EXPECT_NE(message.find((dir / "plan.txt").string() + " (a link to " + (dir / "gone/plan.txt").string() + ")"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find(".tmp"), std::string::npos) << "the temporary's name is not the user's concern: " << message;
  EXPECT_TRUE(fs::is_symlink(dir / "plan.txt"));
}

// A rename that fails after others succeeded (here onto a folder that is
// not empty) leaves no file the group created and no temporary; a file it
// replaced keeps the new content, and the message counts it.
TEST(ReplaceFiles, AFailedRenameRemovesTheFilesTheGroupCreated) {
  const fs::path dir = testing::make_temp_dir("fusejit-replace-rename");
  fs::create_directories(dir / "c" / "inside");
  ASSERT_TRUE(write_whole_file((dir / "b").string(), "old").ok());
  const absl::Status s = replace_files(
      {{(dir / "a").string(), "new a"}, {(dir / "b").string(), "new b"}, {(dir / "c").string(), "new c"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("(1 files replaced before it hold their new content)"), std::string::npos)
      << s.message();
  EXPECT_FALSE(fs::exists(dir / "a")) << "created by the group: removed again";
  EXPECT_EQ(*read_whole_file((dir / "b").string()), "new b");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 2) << "b and the folder c: no temporary is left";
}

// Temporaries fit wherever their file does: for a name of 250 bytes (255
// is the usual limit) the name is cut before the suffix is added.
TEST(ReplaceFiles, ALongFileNameGetsATemporaryThatFits) {
  const fs::path dir = testing::make_temp_dir("fusejit-replace-long");
  const std::string path = (dir / std::string(250, 'n')).string();
  const std::string temporary = temporary_path_beside(path);
  EXPECT_EQ(fs::path(temporary).parent_path(), dir);
  EXPECT_LE(fs::path(temporary).filename().string().size(), 255u) << temporary;
  ASSERT_TRUE(replace_file(path, "x").ok());
  EXPECT_EQ(*read_whole_file(path), "x");
}

// $TMPDIR set but empty counts as unset (/tmp), as for mktemp and glibc;
// one that cannot be used is an error naming it and where it came from.
TEST(TemporaryDirectory, AnEmptyTmpdirIsUnsetAndABadOneIsNamed) {
  {
    testing::ScopedEnv tmpdir("TMPDIR", "");
    absl::StatusOr<std::string> dir = temporary_directory();
    ASSERT_TRUE(dir.ok()) << dir.status();
    EXPECT_EQ(*dir, "/tmp");
  }
  {
    testing::ScopedEnv tmpdir("TMPDIR", "/nonexistent/tmp");
    absl::StatusOr<std::string> dir = temporary_directory();
    ASSERT_FALSE(dir.ok());
    EXPECT_NE(dir.status().message().find("/nonexistent/tmp (from $TMPDIR)"), std::string::npos) << dir.status();
    EXPECT_NE(dir.status().message().find("No such file or directory"), std::string::npos) << dir.status();
  }
  testing::ScopedEnv tmpdir("TMPDIR", std::nullopt);
  absl::StatusOr<std::string> dir = temporary_directory();
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, "/tmp");
}

// create_files makes a group of files all or none and replaces nothing:
// where one of them exists (made by another process meanwhile), those it
// created are removed again and the existing file is left as it was.
TEST(CreateFiles, AllOrNoneAndNothingReplaced) {
  const std::string dir = testing::make_temp_dir("fusejit-create-files");
  const std::string a = dir + "/a.npy", b = dir + "/b.npy", c = dir + "/c.npy";
  ASSERT_TRUE(create_files({{a, "A"}, {b, "B"}}).ok());
  EXPECT_EQ(testing::read_file(a), "A");
  EXPECT_EQ(testing::read_file(b), "B");
  fs::remove(a);
  testing::write_file(c, "theirs");  // the last of the group in order
  const absl::Status s = create_files({{a, "A2"}, {b + "x", "B2"}, {c, "C2"}});
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_NE(s.message().find(c + " exists"), std::string::npos) << s;
  EXPECT_FALSE(fs::exists(a)) << "created by the failed group: removed";
  EXPECT_FALSE(fs::exists(b + "x"));
  EXPECT_EQ(testing::read_file(c), "theirs");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 2u) << "b.npy and c.npy: no temporary file is left";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fusejit
