// Migration over NCCL, one MPI process per GPU: `mpirun -np 2 migrate_nccl_test` (built when CMake
// finds NCCL and MPI; with one process it checks the single-rank case). Every process runs the same
// tests; checks that span ranks are sums over the transport, so every rank reaches the same verdict.
#include "tests/common/migration_model.cuh"

#include <soaheap/distributed/nccl_transport.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

namespace soaheap_test::migration {
namespace {

dist::Transport* transport = nullptr;  // set by main() for the whole run

TEST(MigrateOverNccl, RandomDestinationsOverManyRoundsLoseAndDuplicateNothing) {
  constexpr int kRounds = 12;
  constexpr std::uint64_t kPairsPerRank = 20000;
  constexpr std::uint32_t kCells = 512;
  const int ranks = transport->size();
  const int rank = transport->rank();
  const std::uint64_t total = static_cast<std::uint64_t>(ranks) * 2 * kPairsPerRank;
  RankHeap rank_heap(soaheap::Backend::cuda, 3 * total, kCells);
  rank_heap.create(kPairsPerRank, static_cast<std::uint64_t>(rank) * 2 * kPairsPerRank);
  for (int round = 0; round < kRounds; ++round) {
    dist::MigrationOptions placement;
    placement.placement = round % 2 == 1 ? dist::MigrationPlacement::fresh_blocks : dist::MigrationPlacement::fill_holes;
    const dist::MigrationStats step = dist::migrate<Agent>(
        rank_heap.heap(), *transport, RandomRank{static_cast<std::uint64_t>(round), ranks}, rank_heap.links(), placement);
    rank_heap.heap().validate(soaheap::Validation::full);
    std::uint64_t sums[3] = {rank_heap.heap().count<Agent>(), step.sent, step.received};
    transport->all_reduce_sum(sums, 3);
    ASSERT_EQ(sums[0], total) << "round " << round;
    ASSERT_EQ(sums[1], sums[2]) << "round " << round << ": sent and received differ";
  }
  expect_agents_where_the_last_round_sent_them(rank_heap, *transport, kRounds, kCells, total);
}

TEST(MigrateOverNccl, AnUntranslatedPointerKeepsItsObjectHomeOnEveryRank) {
  constexpr std::uint64_t kPairs = 64;
  const int ranks = transport->size();
  const int rank = transport->rank();
  RankHeap rank_heap(soaheap::Backend::cuda, 1024, 8);
  rank_heap.create(kPairs, static_cast<std::uint64_t>(rank) * 2 * kPairs);
  rank_heap.heap().parallel_do<Agent, &Agent::partner_self_if_3_mod_4>();
  rank_heap.heap().synchronize();
  bool reported = false;
  try {
    dist::migrate<Agent>(rank_heap.heap(), *transport, SendAllTo{(rank + 1) % ranks}, rank_heap.links());
  } catch (const soaheap::usage_error& error) {
    reported = std::string(error.what()).find("could not translate") != std::string::npos;
  }
  // One rank alone sends nothing (its destination is itself); with more, 1/4 of the agents stay.
  EXPECT_EQ(reported, ranks > 1);
  std::uint64_t sums[1] = {rank_heap.heap().count<Agent>()};
  transport->all_reduce_sum(sums, 1);
  EXPECT_EQ(sums[0], static_cast<std::uint64_t>(ranks) * 2 * kPairs);
}

}  // namespace
}  // namespace soaheap_test::migration

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!soaheap::cuda_available()) {  // before MPI: a machine without a GPU needs no MPI runtime either
    std::printf("migrate_nccl_test: no CUDA GPU on this machine: the NCCL suite runs on a GPU machine (skipped)\n");
    return 0;
  }
  try {
    soaheap::distributed::MpiSession mpi(argc, argv);
    const auto nccl = std::make_unique<soaheap::distributed::NcclTransport>(mpi);
    soaheap_test::migration::transport = nccl.get();
    // Only rank 0 prints the test report; every rank runs every test.
    if (mpi.rank() != 0)
      delete ::testing::UnitTest::GetInstance()->listeners().Release(
          ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
    return RUN_ALL_TESTS();
  } catch (const std::exception& failure) {  // e.g. more processes on a host than GPUs
    std::fprintf(stderr, "migrate_nccl_test: %s\n", failure.what());
    return 2;
  }
}
