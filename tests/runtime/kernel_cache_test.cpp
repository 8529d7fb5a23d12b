#include "runtime/kernel_cache.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>

#include "ir/error.h"
#include "ir/messages.h"
#include "runtime/runtime_test_util.h"
#include "runtime/sha256.h"
#include "support/run_command.h"

namespace fusejit {
namespace {

using testing::list_dir;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(engine());
  return out;
}

CacheEntry sample_entry(size_t cubin_bytes = 1000) {
  return CacheEntry{.blobs = {{"ptx", "// ptx\n.version 8.0\n"},
                              {"cubin", random_bytes(cubin_bytes, cubin_bytes)},
                              {"nvrtc_log", ""},
                              {"with.nul", std::string("a\0b\n", 4)}}};
}

const std::string kKey = sha256_hex("kernel one");
const std::string kOtherKey = sha256_hex("kernel two");

// --- The file format ---

TEST(KernelCacheFormat, RoundTripsBinaryAndEmptyBlobs) {
  const CacheEntry entry = sample_entry();
  absl::StatusOr<CacheEntry> decoded = decode_cache_entry(encode_cache_entry(kKey, entry), kKey);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, entry);
}

TEST(KernelCacheFormat, EveryFlippedByteIsDetected) {
  const std::string file = encode_cache_entry(kKey, sample_entry(64));
  for (size_t i = 0; i < file.size(); ++i) {
    std::string damaged = file;
    damaged[i] ^= 0x20;
    EXPECT_FALSE(decode_cache_entry(damaged, kKey).ok()) << "flipped byte " << i << " of " << file.size();
  }
}

TEST(KernelCacheFormat, EveryTruncationIsDetected) {
  const std::string file = encode_cache_entry(kKey, sample_entry(64));
  for (size_t n = 0; n < file.size(); ++n) {
    EXPECT_FALSE(decode_cache_entry(file.substr(0, n), kKey).ok()) << "truncated to " << n << " bytes";
  }
}

TEST(KernelCacheFormat, ReportsWhatIsWrong) {
  const std::string file = encode_cache_entry(kKey, sample_entry());
  auto problem = [](std::string_view file, const std::string& key) {
    return std::string(status_text(decode_cache_entry(file, key).status()));
  };
  EXPECT_EQ(problem("hello world", kKey), "not a fusejit kernel cache entry (bad magic)");
  EXPECT_EQ(problem(file.substr(0, file.size() / 2), kKey), "truncated (no digest trailer)");
  EXPECT_EQ(problem(file, kOtherKey), "holds the entry for key " + kKey);
  std::string future = file;
  future[5] = '7';  // "FJKC 7"
  EXPECT_EQ(problem(future, kKey), "format version 7, this fusejit reads version 1");
  std::string flipped = file;
  flipped[flipped.size() / 2] ^= 1;
  EXPECT_EQ(problem(flipped, kKey), "digest mismatch");
}

TEST(KernelCacheFormat, RejectsInvalidKeysAndBlobNames) {
  EXPECT_THROW(encode_cache_entry("../../etc/passwd", CacheEntry{}), Error);
  EXPECT_THROW(encode_cache_entry(kKey, CacheEntry{.blobs = {{"two words", "x"}}}), Error);
  KernelCache cache("");
  EXPECT_THROW(cache.lookup("ABC"), Error);
}

// --- The cache ---

TEST(KernelCache, HitAfterMiss) {
  const TempDir tmp("fusejit-kc");
  KernelCache cache(tmp.path());
  EXPECT_FALSE(cache.lookup(kKey).has_value());
  cache.store(kKey, sample_entry());
  ASSERT_TRUE(cache.lookup(kKey).has_value());
  EXPECT_EQ(*cache.lookup(kKey), sample_entry());
  EXPECT_FALSE(cache.lookup(kOtherKey).has_value());
}

TEST(KernelCache, MemoryOnlyCacheWritesNothing) {
  KernelCache cache("");
  EXPECT_FALSE(cache.disk_writable());
  cache.store(kKey, sample_entry());
  ASSERT_TRUE(cache.lookup(kKey).has_value());
  EXPECT_EQ(*cache.lookup(kKey), sample_entry());
  EXPECT_FALSE(std::filesystem::exists(cache.entry_path(kKey)));
}

TEST(KernelCache, DiskEntrySurvivesANewInstance) {
  const TempDir tmp("fusejit-kc");
  const std::string dir = tmp.path() + "/not/yet/made";
  KernelCache(dir).store(kKey, sample_entry());
  EXPECT_EQ(list_dir(dir), std::set<std::string>{kKey + ".fjkc"});
  KernelCache fresh(dir);
  std::optional<CacheEntry> got = fresh.lookup(kKey);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, sample_entry());
}

TEST(KernelCache, MemoryHitDoesNotReadTheDisk) {
  const TempDir tmp("fusejit-kc");
  KernelCache cache(tmp.path());
  cache.store(kKey, sample_entry());
  std::filesystem::remove(cache.entry_path(kKey));
  EXPECT_TRUE(cache.lookup(kKey).has_value());
}

// A damaged file is removed with a warning naming it and the problem, reads
// as a miss, and the next store replaces it with a good entry.
void expect_recovery(const std::string& dir, const std::string& expected_problem) {
  ScopedWarningSink warnings;
  KernelCache cache(dir);
  const std::string path = cache.entry_path(kKey);
  EXPECT_FALSE(cache.lookup(kKey).has_value());
  ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
  EXPECT_TRUE(testing::contains(warnings.messages()[0], path)) << warnings.text();
  EXPECT_TRUE(testing::contains(warnings.messages()[0], expected_problem)) << warnings.text();
  EXPECT_FALSE(std::filesystem::exists(path));
  cache.store(kKey, sample_entry());
  std::optional<CacheEntry> got = KernelCache(dir).lookup(kKey);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, sample_entry());
  EXPECT_EQ(warnings.messages().size(), 1u) << warnings.text();
}

TEST(KernelCache, CorruptEntryIsRemovedAndReplaced) {
  const TempDir tmp("fusejit-kc");
  const std::string& dir = tmp.path();
  KernelCache(dir).store(kKey, sample_entry());
  const std::string path = KernelCache(dir).entry_path(kKey);
  std::string file = read_file(path);
  file[file.size() / 2] ^= 0x01;
  write_file(path, file);
  expect_recovery(dir, "digest mismatch");
}

TEST(KernelCache, TruncatedEntryIsRemovedAndReplaced) {
  const TempDir tmp("fusejit-kc");
  const std::string& dir = tmp.path();
  KernelCache(dir).store(kKey, sample_entry());
  const std::string path = KernelCache(dir).entry_path(kKey);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  expect_recovery(dir, "truncated");
}

TEST(KernelCache, ForeignFileIsRemovedAndReplaced) {
  const TempDir tmp("fusejit-kc");
  const std::string& dir = tmp.path();
  write_file(KernelCache(dir).entry_path(kKey), "{\"not\": \"a cache entry\"}\n");
  expect_recovery(dir, "bad magic");
}

// What is not a regular file of an entry's size is never read: a sparse
// file of 1 TiB, a link to /dev/zero (endless) and a FIFO (which would
// wait for a writer) are each damaged entries, removed and replaced.
TEST(KernelCache, HugeOrSpecialFilesAreNotReadButReplaced) {
  {
    const TempDir tmp("fusejit-kc");
    const std::string path = KernelCache(tmp.path()).entry_path(kKey);
    write_file(path, "");
    std::filesystem::resize_file(path, uint64_t{1} << 40);
    expect_recovery(tmp.path(), "more than the");
  }
  {
    const TempDir tmp("fusejit-kc");
    std::filesystem::create_symlink("/dev/zero", KernelCache(tmp.path()).entry_path(kKey));
    expect_recovery(tmp.path(), "not a regular file");
  }
  {
    const TempDir tmp("fusejit-kc");
    ASSERT_EQ(::mkfifo(KernelCache(tmp.path()).entry_path(kKey).c_str(), 0600), 0);
    expect_recovery(tmp.path(), "not a regular file");
  }
}

TEST(KernelCache, EntryOfAnotherKeyIsRemovedAndReplaced) {
  const TempDir tmp("fusejit-kc");
  const std::string& dir = tmp.path();
  KernelCache cache(dir);
  cache.store(kOtherKey, sample_entry());
  std::filesystem::copy_file(cache.entry_path(kOtherKey), cache.entry_path(kKey));
  expect_recovery(dir, "holds the entry for key " + kOtherKey);
}

// The cache falls back to memory, with one warning per cache instance.
// What is wrong with how `cache` fell back to memory after its directory
// refused a write for `expected_reason`; empty when nothing is.
std::string memory_fallback_problem(KernelCache& cache, const std::string& expected_reason) {
  ScopedWarningSink warnings;
  cache.store(kKey, sample_entry());
  cache.store(kOtherKey, sample_entry(10));
  if (warnings.messages().size() != 1) return "expected one warning, got:\n" + warnings.text();
  const std::string warning = warnings.messages()[0];  // messages() is a copy
  for (const std::string& part : {cache.directory(), expected_reason, std::string("memory only")}) {
    if (!testing::contains(warning, part)) return "the warning does not say \"" + part + "\": " + warning;
  }
  if (cache.disk_writable()) return "the cache still calls its directory writable";
  if (cache.lookup(kKey) != std::optional<CacheEntry>(sample_entry()) ||
      cache.lookup(kOtherKey) != std::optional<CacheEntry>(sample_entry(10))) {
    return "the entries are not in memory";
  }
  return "";
}

void expect_memory_fallback(KernelCache& cache, const std::string& expected_reason) {
  EXPECT_EQ(memory_fallback_problem(cache, expected_reason), "");
}

enum class ChildOutcome { kFellBack, kDidNot, kNotPrepared, kCrashed };

std::ostream& operator<<(std::ostream& out, ChildOutcome o) {
  const char* names[] = {"fell back to memory", "did not fall back to memory", "could not be prepared", "crashed"};
  return out << names[static_cast<int>(o)];
}

// memory_fallback_problem() for a cache of `dir` in a child process, after
// `prepare` has changed what the child may do (false: it could not); the
// child prints the problem, if any, on its stderr.
ChildOutcome memory_fallback_in_child(const std::string& dir, const std::function<bool()>& prepare,
                                      const std::string& expected_reason) {
  const pid_t pid = fork();
  if (pid < 0) return ChildOutcome::kCrashed;
  if (pid == 0) {
    if (!prepare()) _exit(77);
    KernelCache cache(dir);
    const std::string problem = memory_fallback_problem(cache, expected_reason);
    if (!problem.empty()) std::fprintf(stderr, "%s\n", problem.c_str());
    _exit(problem.empty() ? 0 : 1);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return ChildOutcome::kCrashed;
  if (WEXITSTATUS(status) == 77) return ChildOutcome::kNotPrepared;
  return WEXITSTATUS(status) == 0 ? ChildOutcome::kFellBack : ChildOutcome::kDidNot;
}

// A path below a regular file cannot be created, even by root.
TEST(KernelCache, UncreatableDirectoryFallsBackToMemory) {
  const TempDir tmp("fusejit-kc");
  const std::string file = tmp.path() + "/regular_file";
  write_file(file, "x");
  KernelCache cache(file + "/kernels");
  expect_memory_fallback(cache, "Not a directory");
  // As a compile uses it, a lookup before the store: still one warning, that
  // the cache is in memory only, not also one that an entry cannot be read.
  KernelCache looked_up(file + "/kernels");
  ScopedWarningSink warnings;
  EXPECT_FALSE(looked_up.lookup(kKey).has_value());
  looked_up.store(kKey, sample_entry());
  EXPECT_EQ(looked_up.lookup(kKey), std::optional<CacheEntry>(sample_entry()));
  ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
  EXPECT_TRUE(testing::contains(warnings.messages()[0], "Not a directory")) << warnings.text();
  EXPECT_TRUE(testing::contains(warnings.messages()[0], "memory only")) << warnings.text();
}

TEST(KernelCache, ReadOnlyDirectoryFallsBackToMemory) {
  const TempDir tmp("fusejit-kc");
  const std::string& dir = tmp.path();
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  if (!std::ofstream(dir + "/probe")) {
    KernelCache cache(dir);
    expect_memory_fallback(cache, "Permission denied");
    return;
  }
  // Root writes into a 0555 directory anyway (CI runs as root): check in a
  // child process that has given up root for the unprivileged `nobody`.
  std::filesystem::remove(dir + "/probe");
  const ChildOutcome outcome = memory_fallback_in_child(
      dir, [] { return setgid(65534) == 0 && setuid(65534) == 0; }, "Permission denied");
  if (outcome == ChildOutcome::kNotPrepared) GTEST_SKIP() << "running as root and cannot switch to the user nobody";
  EXPECT_EQ(outcome, ChildOutcome::kFellBack) << "the unprivileged child's cache did not (its stderr above)";
}

// A full disk: the write fails after writing part of the file.
TEST(KernelCache, FullDiskFallsBackToMemoryAndLeavesNoTemporaryFile) {
  const TempDir tmp("fusejit-kc");
  const std::string& dir = tmp.path();
  KernelCache cache(dir);
  cache.set_file_writer_for_testing([](const std::string& path, std::string_view data) {
    write_file(path, std::string(data.substr(0, data.size() / 2)));
    return absl::ResourceExhaustedError("cannot write " + path + ": No space left on device");
  });
  expect_memory_fallback(cache, "No space left on device");
  EXPECT_TRUE(list_dir(dir).empty());
}

// A real failed write rather than a simulated one: a child process whose
// files may not grow past 100 bytes (RLIMIT_FSIZE: the write fails part
// way with "File too large", as on a full disk) falls back to memory and
// leaves no temporary file.
TEST(KernelCache, AFailedWriteFallsBackToMemoryAndLeavesNoTemporaryFile) {
  const TempDir tmp("fusejit-kc");
  const std::string& dir = tmp.path();
  const ChildOutcome outcome = memory_fallback_in_child(
      dir,
      [] {
        signal(SIGXFSZ, SIG_IGN);  // the write returns EFBIG instead of killing the process
        const rlimit limit{100, 100};
        return setrlimit(RLIMIT_FSIZE, &limit) == 0;
      },
      "File too large");
  if (outcome == ChildOutcome::kNotPrepared) GTEST_SKIP() << "cannot limit the file size (setrlimit)";
  EXPECT_EQ(outcome, ChildOutcome::kFellBack) << "the child's cache did not (its stderr above)";
  EXPECT_TRUE(list_dir(dir).empty());
}

// Processes that store and look up the same key at once (each round a fresh
// cache, so every lookup reads the file) see a miss or the exact entry, never
// a damaged file; no temporary file survives.
TEST(KernelCache, ConcurrentProcessesNeverReadHalfWrittenEntries) {
  const TempDir tmp("fusejit-kc");
  const std::string& dir = tmp.path();
  const CacheEntry entry = sample_entry(256 << 10);
  constexpr int kProcesses = 4;
  constexpr int kRounds = 50;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      {
        ScopedWarningSink warnings;
        for (int round = 0; round < kRounds && code == 0; ++round) {
          KernelCache cache(dir);
          std::optional<CacheEntry> got = cache.lookup(kKey);
          if (got && *got != entry) code = 2;
          cache.store(kKey, entry);
        }
        if (code == 0 && !warnings.messages().empty()) code = 3;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: read a wrong entry, 3: saw a damaged file";
  }
  EXPECT_EQ(list_dir(dir), std::set<std::string>{kKey + ".fjkc"});
  EXPECT_EQ(KernelCache(dir).lookup(kKey), entry);
}

// --- Limits ---

// Sets an entry file's time `seconds_ago`: the order eviction follows.
void set_age(const std::string& path, int seconds_ago) {
  std::filesystem::last_write_time(path,
                                   std::filesystem::file_time_type::clock::now() - std::chrono::seconds(seconds_ago));
}

// Past the disk limit, the least recently used entries go first (a hit
// counts as a use), down to 3/4 of the limit; the entry just stored stays.
TEST(KernelCache, DiskBeyondTheLimitDropsLeastRecentlyUsedEntries) {
  const TempDir tmp("fusejit-kc");
  const std::vector<std::string> keys = {sha256_hex("a"), sha256_hex("b"), sha256_hex("c"), sha256_hex("d")};
  const uint64_t size = encode_cache_entry(keys[0], sample_entry()).size();
  // Room for 3.5 entries: the fourth store evicts down to 2.625, i.e. 2 entries.
  const KernelCacheLimits limits{.disk_bytes = size * 7 / 2, .memory_bytes = uint64_t{1} << 30};
  {
    KernelCache cache(tmp.path(), limits);
    for (int i = 0; i < 3; ++i) cache.store(keys[i], sample_entry());
  }
  for (int i = 0; i < 3; ++i) set_age(KernelCache(tmp.path()).entry_path(keys[i]), 300 - 100 * i);
  // a is the oldest but a new process uses it: now b is.
  ASSERT_TRUE(KernelCache(tmp.path(), limits).lookup(keys[0]).has_value());
  KernelCache cache(tmp.path(), limits);
  cache.store(keys[3], sample_entry());
  EXPECT_EQ(list_dir(tmp.path()), (std::set<std::string>{keys[0] + ".fjkc", keys[3] + ".fjkc"}));
  // An evicted entry is a miss for a new process, which compiles and stores it again.
  EXPECT_FALSE(KernelCache(tmp.path(), limits).lookup(keys[1]).has_value());
  // An entry larger than the whole limit is still written (and the rest make room for it).
  const KernelCacheLimits tiny{.disk_bytes = size / 2, .memory_bytes = uint64_t{1} << 30};
  KernelCache(tmp.path(), tiny).store(keys[2], sample_entry());
  EXPECT_EQ(list_dir(tmp.path()), std::set<std::string>{keys[2] + ".fjkc"});
}

// Memory keeps the newest entries within its limit.
TEST(KernelCache, MemoryBeyondTheLimitDropsTheOldestEntries) {
  const std::vector<std::string> keys = {sha256_hex("a"), sha256_hex("b"), sha256_hex("c")};
  uint64_t size = 0;
  for (const auto& [name, blob] : sample_entry().blobs) size += name.size() + blob.size();
  KernelCache cache("", KernelCacheLimits{.disk_bytes = 0, .memory_bytes = size * 5 / 2});
  for (const std::string& key : keys) cache.store(key, sample_entry());
  EXPECT_FALSE(cache.lookup(keys[0]).has_value());
  EXPECT_TRUE(cache.lookup(keys[1]).has_value());
  EXPECT_TRUE(cache.lookup(keys[2]).has_value());
  // Storing a key again replaces it without counting it twice, and makes it the newest.
  cache.store(keys[1], sample_entry());
  EXPECT_TRUE(cache.lookup(keys[2]).has_value());
  const std::string d = sha256_hex("d");
  cache.store(d, sample_entry());
  EXPECT_FALSE(cache.lookup(keys[2]).has_value());
  EXPECT_TRUE(cache.lookup(keys[1]).has_value());
  EXPECT_TRUE(cache.lookup(d).has_value());
}

// A write whose process died leaves a temporary file; after an hour it
// counts against the limit and is removed first. A newer one is a write in
// progress and is left alone.
TEST(KernelCache, AbandonedTemporaryFilesAreRemovedWhenTrimming) {
  const TempDir tmp("fusejit-kc");
  const uint64_t size = encode_cache_entry(kKey, sample_entry()).size();
  const std::string abandoned = KernelCache(tmp.path()).entry_path(kOtherKey) + ".tmp-1-00000000deadbeef";
  const std::string in_progress = KernelCache(tmp.path()).entry_path(kOtherKey) + ".tmp-2-00000000cafef00d";
  write_file(abandoned, std::string(size, 'x'));
  write_file(in_progress, std::string(size, 'y'));
  set_age(abandoned, 2 * 3600);
  KernelCache(tmp.path(), KernelCacheLimits{.disk_bytes = size * 3 / 2, .memory_bytes = size * 4})
      .store(kKey, sample_entry());
  EXPECT_FALSE(std::filesystem::exists(abandoned));
  EXPECT_TRUE(std::filesystem::exists(in_progress));
  EXPECT_TRUE(std::filesystem::exists(KernelCache(tmp.path()).entry_path(kKey)));
}

TEST(KernelCache, DiskLimitFollowsTheEnvironment) {
  {
    testing::ScopedEnv limit("FUSEJIT_CACHE_MAX_MB", "64");
    EXPECT_EQ(KernelCacheLimits::from_environment().disk_bytes, uint64_t{64} << 20);
  }
  for (const char* bad : {"0", "-5", "1.5", "64MB", "lots"}) {
    testing::ScopedEnv limit("FUSEJIT_CACHE_MAX_MB", bad);
    ScopedWarningSink warnings;
    EXPECT_EQ(KernelCacheLimits::from_environment().disk_bytes, KernelCacheLimits{}.disk_bytes) << bad;
    ASSERT_EQ(warnings.messages().size(), 1u) << bad;
    EXPECT_TRUE(testing::contains(warnings.messages()[0], std::string("FUSEJIT_CACHE_MAX_MB='") + bad + "'"))
        << warnings.text();
  }
}

TEST(KernelCache, DefaultDirectoryFollowsTheEnvironment) {
  {
    testing::ScopedEnv cache_dir("FUSEJIT_CACHE_DIR", "/some/where");
    EXPECT_EQ(KernelCache::default_directory(), "/some/where/kernels");
  }
  testing::ScopedEnv cache_dir("FUSEJIT_CACHE_DIR", std::nullopt);
  {
    testing::ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(KernelCache::default_directory(), "/xdg/fusejit/kernels");
  }
  {
    testing::ScopedEnv home("HOME", "/home/someone");
    // A relative or empty $XDG_CACHE_HOME is ignored (the XDG spec), and
    // so is a relative or empty $HOME: each would put the cache in the
    // folder the program runs in.
    for (const char* ignored : {"relative/cache", ""}) {
      testing::ScopedEnv xdg("XDG_CACHE_HOME", ignored);
      EXPECT_EQ(KernelCache::default_directory(), "/home/someone/.cache/fusejit/kernels") << ignored;
    }
  }
  testing::ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  for (const std::optional<std::string>& home :
       {std::optional<std::string>(), std::optional<std::string>(""), std::optional<std::string>("relative")}) {
    testing::ScopedEnv scoped_home("HOME", home);
    // The password database's home folder, never a folder every user can
    // make first (/tmp/.cache was the fallback once).
    const std::string dir = KernelCache::default_directory();
    EXPECT_EQ(dir.front(), '/') << dir;
    EXPECT_FALSE(dir.starts_with("/tmp/.cache")) << dir;
    EXPECT_TRUE(dir.ends_with("/.cache/fusejit/kernels") || dir.starts_with("/tmp/fusejit-cache-")) << dir;
  }
}

// Kernels in the cache are loaded and run, so a folder another user can
// change is not used: fusejit warns once and keeps kernels in memory.
TEST(KernelCache, AFolderOtherUsersCanChangeIsNotUsed) {
  const TempDir tmp("fusejit-kc");
  const std::string dir = tmp.path() + "/kernels";
  KernelCache(dir).store(kKey, sample_entry());                    // a good entry, as if another user had put it there
  std::filesystem::permissions(dir, std::filesystem::perms::all);  // rwx for every user, no sticky bit
  {
    ScopedWarningSink warnings;
    KernelCache cache(dir);
    EXPECT_FALSE(cache.lookup(kKey).has_value()) << "not loaded from a folder every user may write to";
    cache.store(kOtherKey, sample_entry());
    EXPECT_TRUE(cache.lookup(kOtherKey).has_value()) << "kept in memory";
    EXPECT_FALSE(std::filesystem::exists(cache.entry_path(kOtherKey)));
    EXPECT_FALSE(cache.disk_writable());
    ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
    EXPECT_TRUE(testing::contains(warnings.messages()[0], "every user may write to " + dir)) << warnings.text();
  }
  // The same for the folder it is in.
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  std::filesystem::permissions(tmp.path(), std::filesystem::perms::all);
  {
    ScopedWarningSink warnings;
    EXPECT_FALSE(KernelCache(dir).lookup(kKey).has_value());
    EXPECT_EQ(warnings.messages().size(), 1u) << warnings.text();
  }
  // The sticky bit (as on /tmp) keeps others from replacing what is there.
  std::filesystem::permissions(tmp.path(), std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
  {
    ScopedWarningSink warnings;
    EXPECT_TRUE(KernelCache(dir).lookup(kKey).has_value());
    EXPECT_TRUE(warnings.messages().empty()) << warnings.text();
  }
  std::filesystem::permissions(tmp.path(), std::filesystem::perms::owner_all);
  // In the cache folder itself the sticky bit does not help: other users
  // could still create an entry (the keys are predictable).
  std::filesystem::permissions(dir, std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
  {
    ScopedWarningSink warnings;
    EXPECT_FALSE(KernelCache(dir).lookup(kKey).has_value());
    EXPECT_EQ(warnings.messages().size(), 1u) << warnings.text();
  }
  // A group may write where it is this user's own (umask 002's private
  // groups), not where it is another.
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_all);
  {
    ScopedWarningSink warnings;
    EXPECT_TRUE(KernelCache(dir).lookup(kKey).has_value());
    EXPECT_TRUE(warnings.messages().empty()) << warnings.text();
  }
  if (::geteuid() == 0) {  // only root can give a folder to another group here
    ASSERT_EQ(::chown(dir.c_str(), 0, 65534), 0);
    ScopedWarningSink warnings;
    EXPECT_FALSE(KernelCache(dir).lookup(kKey).has_value());
    ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
    EXPECT_TRUE(testing::contains(warnings.messages()[0], "the users of group 65534 may write to " + dir))
        << warnings.text();
  }
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  // A folder of another user (only root can make one here).
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
    ScopedWarningSink warnings;
    EXPECT_FALSE(KernelCache(dir).lookup(kKey).has_value());
    ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
    EXPECT_TRUE(testing::contains(warnings.messages()[0], dir + " belongs to another user (uid 65534)"))
        << warnings.text();
  }
}

// A folder that does not exist yet is judged once it does: one another
// user made between the first lookup and the first store is not used.
TEST(KernelCache, AFolderMadeByAnotherUserMeanwhileIsNotUsed) {
  const TempDir tmp("fusejit-kc");
  const std::string dir = tmp.path() + "/kernels";
  ScopedWarningSink warnings;
  KernelCache cache(dir);
  EXPECT_FALSE(cache.lookup(kKey).has_value());  // missing: nothing to load, nothing judged yet
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::all);  // as if another user had made it so
  cache.store(kKey, sample_entry());
  EXPECT_FALSE(std::filesystem::exists(cache.entry_path(kKey)));
  EXPECT_FALSE(cache.disk_writable());
  ASSERT_EQ(warnings.messages().size(), 1u) << warnings.text();
  EXPECT_TRUE(testing::contains(warnings.messages()[0], "every user may write to " + dir)) << warnings.text();
  EXPECT_TRUE(cache.lookup(kKey).has_value()) << "kept in memory";
}

// A link under an entry's name is replaced by the entry, not written
// through: a link planted in the cache writes nowhere else.
TEST(KernelCache, ALinkInTheCacheIsReplacedNotFollowed) {
  const TempDir tmp("fusejit-kc");
  KernelCache cache(tmp.path());
  const std::string target = tmp.path() + "/outside";
  std::filesystem::create_directories(tmp.path());
  std::filesystem::create_symlink(target, cache.entry_path(kKey));
  cache.store(kKey, sample_entry());
  EXPECT_FALSE(std::filesystem::exists(target));
  EXPECT_FALSE(std::filesystem::is_symlink(cache.entry_path(kKey)));
  EXPECT_EQ(KernelCache(tmp.path()).lookup(kKey), sample_entry());
}

}  // namespace
}  // namespace fusejit
