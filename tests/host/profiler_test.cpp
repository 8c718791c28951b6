// soaheap::Profiler writes the format of tools/profile/FORMAT.md: a profile recorded from a real
// host heap is read back by the strict reader (soaheap-profile summary --json).

#include "tests/common/test_classes.cuh"

#include <soaheap/profiler/profiler.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#ifndef SOAHEAP_SOURCE_DIR
#define SOAHEAP_SOURCE_DIR "."
#endif

namespace soaheap_test {
namespace {

std::string run_command(const std::string& command, int& status) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    status = -1;
    return output;
  }
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  status = pclose(pipe);
  return output;
}

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("soaheap_profiler_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(ProfilerTest, RoundTripThroughTheReader) {
  soaheap::HeapOptions options;
  options.objects = 64 * 64;
  options.backend = soaheap::Backend::host;
  options.host_threads = 2;
  TestHeap heap(options);
  std::vector<Small*> objects;
  {
    soaheap::Profiler profiler(path_, "profiler_test", 1);
    profiler.attach(heap, nlohmann::json{{"defrag_factor", 1}}.dump());
    profiler.sample(heap, 0);
    for (int i = 0; i < 640; ++i) objects.push_back(new (heap) Small(i, i));
    profiler.sample(heap, 1);
    for (std::size_t i = 0; i < objects.size(); i += 3) soaheap::destroy(heap, objects[i]);
    profiler.sample(heap, 2);
    const soaheap::DefragResult result = soaheap::defragment<Small>(heap);
    profiler.record_defrag(2, result);
    profiler.sample(heap, 3);
    profiler.finish(3, profiler.elapsed_s(), result.times.total_ms() / 1000.0);
  }
  const std::vector<nlohmann::json> lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 1u + 4u + 1u + 1u);
  EXPECT_EQ(lines[0]["format"], "soaheap-profile");
  EXPECT_EQ(lines[0]["version"], 1);
  EXPECT_EQ(lines[0]["classes"].size(), static_cast<std::size_t>(TestHeap::kClassCount));
  const nlohmann::json& small = lines[2]["classes"]["Small"];
  EXPECT_EQ(small["used_slots"], 640);
  EXPECT_EQ(small["allocated_slots"].get<std::uint64_t>(),
            small["allocated_blocks"].get<std::uint64_t>() * TestHeap::capacity<Small>);
  EXPECT_FALSE(lines[0]["classes"][0]["abstract"].is_null());
  EXPECT_EQ(lines[4]["type"], "defrag");
  EXPECT_EQ(lines[5]["type"], "sample");
  EXPECT_EQ(lines[6]["type"], "end");

  int status = 0;
  const std::string output = run_command(std::string("/usr/bin/python3 ") + SOAHEAP_SOURCE_DIR +
                                             "/tools/profile/soaheap-profile summary '" + path_ + "' --json 2>&1",
                                         status);
  ASSERT_EQ(status, 0) << output;
  const nlohmann::json summary = nlohmann::json::parse(output);
  const std::string text = summary.dump();
  EXPECT_NE(text.find("Small"), std::string::npos) << text;
  EXPECT_NE(text.find("profiler_test"), std::string::npos) << text;
}

TEST_F(ProfilerTest, RecordsUntypedMemoryOnceTheProgramUsesIt) {
  soaheap::HeapOptions options;
  options.objects = 64 * 64;
  options.backend = soaheap::Backend::host;
  options.host_threads = 1;
  TestHeap heap(options);
  void* buffer = nullptr;
  {
    soaheap::Profiler profiler(path_, "untyped", 1);
    profiler.attach(heap);
    profiler.sample(heap, 0);
    buffer = soaheap::malloc(heap.view(), 3 * TestHeap::block_bytes() + 1);  // a run of 4 blocks
    ASSERT_NE(buffer, nullptr);
    profiler.sample(heap, 1);
    profiler.finish(2, profiler.elapsed_s(), 0.0);
  }
  soaheap::free(heap.view(), buffer);
  heap.validate();
  const std::vector<nlohmann::json> lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_FALSE(lines[1].contains("untyped"));
  EXPECT_EQ(lines[2]["untyped"]["blocks"], 4);
  EXPECT_EQ(lines[2]["untyped"]["live_allocations"], 1);
  EXPECT_EQ(lines[2]["untyped"]["bytes_reserved"], 4 * TestHeap::block_bytes());
  int status = 0;
  const std::string output = run_command(std::string("/usr/bin/python3 ") + SOAHEAP_SOURCE_DIR +
                                             "/tools/profile/soaheap-profile summary '" + path_ + "' 2>&1",
                                         status);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("untyped memory (soaheap::malloc): peak 4 blocks"), std::string::npos) << output;
}

TEST_F(ProfilerTest, SamplesCarryTheResidentBytesAndMappedBlocksOfTheStatsGiven) {
  soaheap::HeapStats stats;
  stats.block_bytes = 128;
  stats.mapped_blocks = 4242;
  stats.resident_bytes = 123456789;
  stats.heap_bytes = 123456789;
  stats.max_bytes = std::uint64_t{1} << 30;
  soaheap::ClassStats small;
  small.name = "Small";
  small.capacity = 64;
  small.allocated_blocks = 2;
  small.used_slots = 100;
  small.active_blocks = 1;
  stats.classes.push_back(small);
  {
    soaheap::Profiler profiler(path_, "resident");
    profiler.attach(soaheap::Backend::host, "cpu", 8192, std::uint64_t{1} << 30, 128, {{"Small", 64, false, 16}});
    profiler.sample_stats(stats, 5);
    stats.resident_bytes = 7;  // a heap that gave memory back
    stats.mapped_blocks = 3;
    profiler.sample_stats(stats, 6);
    profiler.finish(7, 0.5, 0.0);
  }
  const std::vector<nlohmann::json> lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["heap_bytes"], 8192);
  EXPECT_EQ(lines[0]["max_bytes"], std::uint64_t{1} << 30);
  EXPECT_EQ(lines[0]["classes"][0]["object_bytes"], 16);
  EXPECT_EQ(lines[1]["type"], "sample");
  EXPECT_EQ(lines[1]["resident_bytes"], 123456789);
  EXPECT_EQ(lines[1]["mapped_blocks"], 4242);
  EXPECT_EQ(lines[2]["resident_bytes"], 7);
  EXPECT_EQ(lines[2]["mapped_blocks"], 3);
  EXPECT_EQ(lines[2]["classes"]["Small"]["used_slots"], 100);
  // The strict reader accepts the new keys.
  int status = 0;
  const std::string output = run_command(std::string("/usr/bin/python3 ") + SOAHEAP_SOURCE_DIR +
                                             "/tools/profile/soaheap-profile summary '" + path_ + "' 2>&1",
                                         status);
  EXPECT_EQ(status, 0) << output;
}

TEST_F(ProfilerTest, RecordsHowAGrowingHeapsResidentMemoryFollowsItsObjects) {
  soaheap::HeapOptions options;
  options.objects = 64;
  options.max_bytes = std::uint64_t{256} << 20;
  options.backend = soaheap::Backend::host;
  options.host_threads = 2;
  TestHeap heap(options);
  ASSERT_TRUE(heap.growable());
  soaheap::HeapStats after;
  {
    soaheap::Profiler profiler(path_, "growing", 1);
    profiler.attach(heap);
    profiler.sample(heap, 0);
    heap.parallel_new<Small>(20000, std::uint64_t{0});
    heap.synchronize();
    profiler.sample(heap, 1);
    after = heap.stats();  // nothing ran in between: the stats the sample was taken from
    profiler.finish(2, profiler.elapsed_s(), 0.0);
  }
  const std::vector<nlohmann::json> lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["max_bytes"], heap.max_bytes());
  EXPECT_EQ(lines[0]["max_bytes"], std::uint64_t{256} << 20);
  EXPECT_LT(lines[0]["heap_bytes"].get<std::uint64_t>(), lines[0]["max_bytes"].get<std::uint64_t>());
  for (const nlohmann::json& entry : lines[0]["classes"]) {
    if (entry["name"] == "Small") {
      EXPECT_EQ(entry["object_bytes"], soaheap::object_size_v<Small>);
    }
    if (entry["abstract"].get<bool>()) {
      EXPECT_FALSE(entry.contains("object_bytes")) << entry.dump();
    }
  }
  EXPECT_EQ(lines[2]["resident_bytes"], after.resident_bytes);
  EXPECT_EQ(lines[2]["mapped_blocks"], after.mapped_blocks);
  EXPECT_GE(after.mapped_blocks, after.of("Small").allocated_blocks);
  EXPECT_GT(lines[2]["resident_bytes"].get<std::uint64_t>(), lines[1]["resident_bytes"].get<std::uint64_t>());
  EXPECT_GT(lines[2]["mapped_blocks"].get<std::uint64_t>(), lines[1]["mapped_blocks"].get<std::uint64_t>());
}

TEST_F(ProfilerTest, SamplingIntervalSkipsIterations) {
  soaheap::HeapOptions options;
  options.objects = 64 * 4;
  options.backend = soaheap::Backend::host;
  options.host_threads = 1;
  TestHeap heap(options);
  soaheap::Profiler profiler(path_, "interval", 3);
  profiler.attach(heap);
  for (long long i = 0; i < 10; ++i) profiler.sample(heap, i);
  profiler.finish(10, 0.5, 0.0);
  const std::vector<nlohmann::json> lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 1u + 4u + 1u);  // samples at 0, 3, 6, 9
  EXPECT_EQ(lines[4]["iteration"], 9);
}

TEST_F(ProfilerTest, RejectsMisuse) {
  EXPECT_THROW(soaheap::Profiler(path_, "bad", 0), soaheap::invalid_argument);
  soaheap::Profiler profiler(path_, "unattached");
  EXPECT_THROW(profiler.finish(1, 1.0, 0.0), soaheap::usage_error);
  EXPECT_THROW(soaheap::Profiler("/nonexistent-dir/x.jsonl", "bad"), soaheap::error);
  const std::vector<soaheap::Profiler::ProfiledClass> classes{{"Small", 64, false}};
  EXPECT_THROW(profiler.attach(soaheap::Backend::host, "cpu", 1024, 128, classes, "{not json"), soaheap::invalid_argument);
}

TEST_F(ProfilerTest, RecordsSettingsThatAreNotAnObjectUnderValue) {
  {
    soaheap::Profiler profiler(path_, "settings");
    profiler.attach(soaheap::Backend::host, "cpu", 1024, 128, {{"Small", 64, false}}, "\"every:50\"");
    profiler.finish(0, 0.0, 0.0);
  }
  const std::vector<nlohmann::json> lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["config"], nlohmann::json({{"value", "every:50"}}));
  EXPECT_EQ(lines[0]["backend"], "host");
  EXPECT_EQ(lines[0]["classes"][0]["name"], "Small");
  EXPECT_FALSE(lines[0].contains("max_bytes"));  // attach() by figures without a maximum
  EXPECT_FALSE(lines[0]["classes"][0].contains("object_bytes"));
}

}  // namespace
}  // namespace soaheap_test
