// Migration between MPI processes (MpiTransport), one rank per process:
//   mpirun -np 3 migrate_mpi_test                    host backend (CTest runs it so, label host)
//   mpirun -np 2 migrate_mpi_test --backend cuda     cuda backend; processes may share one GPU
// Every process runs every test with a transport of its own (a fresh communicator), so a test that
// breaks its transport on purpose leaves the next test unaffected. Checks that span ranks are sums
// over the transport, so every rank reaches the same verdict; each process's exit code is its own.
// Compiled by nvcc when the CUDA backend is built (mpi.h stays in the transport's library).
#include "tests/common/migration_model.cuh"

#include <soaheap/distributed/mpi_transport.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace soaheap_test::migration {
namespace {

const dist::MpiSession* session = nullptr;           // set by main() for the whole run
soaheap::Backend test_backend = soaheap::Backend::host;  // --backend

/// A transport of its own for a test; its bound is SOAHEAP_MPI_TIMEOUT (CTest sets a minute, so a
/// test that fails by hanging fails soon) unless @p timeout_seconds is given.
std::unique_ptr<dist::MpiTransport> make_transport(double timeout_seconds = 0) {
  dist::MpiTransportOptions options;
  options.timeout_seconds = timeout_seconds;
  return std::make_unique<dist::MpiTransport>(*session, test_backend, options);
}

/// Sums of @p values over all ranks (a fresh transport: usable after a test broke its own).
template <std::size_t N>
void sum_over_ranks(std::uint64_t (&values)[N]) {
  make_transport()->all_reduce_sum(values, static_cast<int>(N));
}

/// Forwards to another transport, but the exchange of rank @p failing throws: a rank that fails in
/// the middle of a migration step, after the counts went out and before the messages did.
class FailingExchange final : public dist::Transport {
 public:
  FailingExchange(dist::Transport& inner, int failing) : inner_(inner), failing_(failing) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string name() const override { return "failing-" + inner_.name(); }
  void exchange_counts(const std::uint64_t* send, std::uint64_t* received) override { inner_.exchange_counts(send, received); }
  void exchange(const std::vector<dist::Message>& sends, const std::vector<dist::Message>& receives) override {
    if (rank() == failing_) throw soaheap::error("injected failure in the middle of a migration step");
    inner_.exchange(sends, receives);
  }
  void all_reduce_sum(std::uint64_t* values, int count) override { inner_.all_reduce_sum(values, count); }

 private:
  dist::Transport& inner_;
  int failing_;
};

TEST(MigrateOverMpi, CountRowsGoAllToAllAndSumsAgreeOnEveryRank) {
  const auto transport = make_transport();
  const int n = transport->size();
  const int rank = transport->rank();
  constexpr int kWidth = 3;
  std::vector<std::uint64_t> send(static_cast<std::size_t>(n) * kWidth), received(send.size(), 0);
  for (int p = 0; p < n; ++p)
    for (int k = 0; k < kWidth; ++k) send[static_cast<std::size_t>(p * kWidth + k)] = 1000u * rank + 10u * p + k;
  transport->exchange_count_rows(send.data(), received.data(), kWidth);
  for (int p = 0; p < n; ++p)
    for (int k = 0; k < kWidth; ++k)
      EXPECT_EQ(received[static_cast<std::size_t>(p * kWidth + k)], 1000u * p + 10u * rank + k) << "from rank " << p;
  std::uint64_t sums[2] = {static_cast<std::uint64_t>(rank), 1};
  transport->all_reduce_sum(sums, 2);
  EXPECT_EQ(sums[0], static_cast<std::uint64_t>(n) * (n - 1) / 2);
  EXPECT_EQ(sums[1], static_cast<std::uint64_t>(n));
}

TEST(MigrateOverMpi, MovesEveryFieldOfEverySubclassToTheNextRank) {
  constexpr std::uint64_t kPairs = 300;
  constexpr std::uint32_t kCells = 37;
  const auto transport = make_transport();
  const int n = transport->size();
  const int rank = transport->rank();
  RankHeap rank_heap(test_backend, 8 * kPairs * n + 4 * kCells, kCells);
  rank_heap.create(kPairs, static_cast<std::uint64_t>(rank) * 2 * kPairs);
  const dist::MigrationStats step =
      dist::migrate<Agent>(rank_heap.heap(), *transport, SendAllTo{(rank + 1) % n}, rank_heap.links());
  rank_heap.heap().validate(soaheap::Validation::full);
  std::map<std::uint64_t, Seen> seen;
  std::vector<std::uint64_t> duplicates;
  rank_heap.collect(rank, seen, duplicates);
  const int from = (rank + n - 1) % n;
  std::uint64_t wrong = 0;
  for (const auto& [id, entry] : seen)
    if (static_cast<int>(id / (2 * kPairs)) != from || !entry.fields_ok || entry.cell_null || entry.cell != id % kCells) ++wrong;
  EXPECT_EQ(seen.size(), 2 * kPairs);
  EXPECT_EQ(wrong, 0u) << "agents from the wrong rank, with wrong fields or a wrong cell";
  EXPECT_TRUE(duplicates.empty());
  if (n > 1) {
    EXPECT_EQ(step.sent, 2 * kPairs);
    EXPECT_EQ(step.received_from[static_cast<std::size_t>(from)], 2 * kPairs);
  }
  std::uint64_t bytes[2] = {step.bytes_sent, step.bytes_received};
  transport->all_reduce_sum(bytes, 2);
  EXPECT_EQ(bytes[0], bytes[1]);
}

TEST(MigrateOverMpi, RandomDestinationsOverManyRoundsLoseAndDuplicateNothing) {
  constexpr int kRounds = 10;
  constexpr std::uint64_t kPairsPerRank = 1500;
  constexpr std::uint32_t kCells = 128;
  const auto transport = make_transport();
  const int ranks = transport->size();
  const int rank = transport->rank();
  const std::uint64_t total = static_cast<std::uint64_t>(ranks) * 2 * kPairsPerRank;
  RankHeap rank_heap(test_backend, 3 * total + 4 * kCells, kCells);
  rank_heap.create(kPairsPerRank, static_cast<std::uint64_t>(rank) * 2 * kPairsPerRank);
  dist::Departures departures(test_backend, total);
  for (int round = 0; round < kRounds; ++round) {
    // Rounds alternate placement; every third round records departures in a kernel instead.
    dist::MigrationOptions placement;
    placement.placement = round % 2 == 1 ? dist::MigrationPlacement::fresh_blocks : dist::MigrationPlacement::fill_holes;
    const RandomRank rule{static_cast<std::uint64_t>(round), ranks};
    dist::MigrationStats step;
    if (round % 3 == 2) {
      rank_heap.heap().parallel_do<Agent, &Agent::record_departure<RandomRank>>(departures.list(), rule, rank);
      step = dist::migrate_departures<Agent>(rank_heap.heap(), *transport, departures, rank_heap.links(), placement);
    } else {
      step = dist::migrate<Agent>(rank_heap.heap(), *transport, rule, rank_heap.links(), placement);
    }
    rank_heap.heap().validate(soaheap::Validation::full);
    std::uint64_t sums[3] = {rank_heap.heap().count<Agent>(), step.sent, step.received};
    transport->all_reduce_sum(sums, 3);
    ASSERT_EQ(sums[0], total) << "round " << round;
    ASSERT_EQ(sums[1], sums[2]) << "round " << round << ": sent and received differ";
    if (ranks > 1) {
      ASSERT_GT(sums[1], 0u) << "round " << round;
    }
  }
  expect_agents_where_the_last_round_sent_them(rank_heap, *transport, kRounds, kCells, total);
}

TEST(MigrateOverMpi, AnUntranslatedPointerKeepsItsObjectHomeOnEveryRank) {
  constexpr std::uint64_t kPairs = 64;
  const auto transport = make_transport();
  const int ranks = transport->size();
  const int rank = transport->rank();
  RankHeap rank_heap(test_backend, 1024 * ranks, 8);
  rank_heap.create(kPairs, static_cast<std::uint64_t>(rank) * 2 * kPairs);
  rank_heap.heap().parallel_do<Agent, &Agent::partner_self_if_3_mod_4>();
  rank_heap.heap().synchronize();
  bool reported = false;
  try {
    dist::migrate<Agent>(rank_heap.heap(), *transport, SendAllTo{(rank + 1) % ranks}, rank_heap.links());
  } catch (const soaheap::usage_error& error) {
    reported = std::string(error.what()).find("could not translate") != std::string::npos;
  }
  EXPECT_EQ(reported, ranks > 1);
  std::uint64_t partnered = 0;  // the Runners 3 mod 4 that stayed home
  rank_heap.heap().for_each<Runner>([&](const Runner* runner) { partnered += runner->partner.get() != nullptr ? 1 : 0; });
  EXPECT_EQ(partnered, kPairs / 2);
  std::uint64_t sums[1] = {rank_heap.heap().count<Agent>()};
  transport->all_reduce_sum(sums, 1);
  EXPECT_EQ(sums[0], static_cast<std::uint64_t>(ranks) * 2 * kPairs);
}

TEST(MigrateOverMpi, ADestinationThatIsNoRankIsRejectedOnEveryRankAndNothingMoves) {
  const auto transport = make_transport();
  const int ranks = transport->size();
  RankHeap rank_heap(test_backend, 1024, 8);
  rank_heap.create(10, static_cast<std::uint64_t>(transport->rank()) * 100);
  std::string message;
  try {
    dist::migrate<Agent>(rank_heap.heap(), *transport, SendAllTo{ranks + 4}, rank_heap.links());
  } catch (const soaheap::invalid_argument& error) {
    message = error.what();
  }
  EXPECT_NE(message.find("returned " + std::to_string(ranks + 4)), std::string::npos) << message;
  EXPECT_EQ(rank_heap.heap().count<Agent>(), 20u);
}

TEST(MigrateOverMpi, AReceiverOutOfMemoryFailsTheOthersNextCollectiveNamingIt) {
  const auto transport = make_transport();
  const int ranks = transport->size();
  const int rank = transport->rank();
  if (ranks < 2) GTEST_SKIP() << "needs two processes";
  // The last rank has room for its cells and few agents; every other rank sends it 2000 agents.
  const int full = ranks - 1;
  RankHeap rank_heap(test_backend, rank == full ? 192 : 8192, 4);
  if (rank != full) rank_heap.create(1000, static_cast<std::uint64_t>(rank) * 2000);
  std::string message;
  int failed = -1;
  try {
    dist::migrate<Agent>(rank_heap.heap(), *transport, SendAllTo{full}, rank_heap.links());
    std::uint64_t sums[1] = {rank_heap.heap().count<Agent>()};
    transport->all_reduce_sum(sums, 1);  // the collective after the step: it cannot complete
  } catch (const dist::rank_failed& error) {
    failed = error.failed_rank();
    message = error.what();
  } catch (const soaheap::out_of_memory& error) {
    // What the application's top level does with an exception: tell the other ranks, then stop.
    failed = rank;
    message = error.what();
    transport->report_failure(error.what());
  }
  EXPECT_EQ(failed, full) << message;
  EXPECT_NE(message.find("were lost"), std::string::npos) << message;
  if (rank != full) {
    EXPECT_NE(message.find("rank " + std::to_string(full) + " failed"), std::string::npos) << message;
    EXPECT_NE(message.find("all_reduce_sum"), std::string::npos) << "the message says what was waited for: " << message;
  }
  // The transport refuses to go on out of step.
  EXPECT_THROW(transport->all_reduce_sum(nullptr, 1), soaheap::error);
}

TEST(MigrateOverMpi, ARankThatThrowsMidMigrationMakesTheOthersFailNamingItWithoutHanging) {
  const int ranks = session->size();
  if (ranks < 2) GTEST_SKIP() << "needs two processes";
  const int failing = 1;
  constexpr std::uint64_t kPairs = 200;
  RankHeap rank_heap(test_backend, 8 * kPairs * ranks, 8);
  rank_heap.create(kPairs, static_cast<std::uint64_t>(session->rank()) * 2 * kPairs);
  std::string message;
  int failed = -1;
  try {
    // The failing rank's transport is destroyed while the exception unwinds: that tells the others.
    const auto transport = make_transport();
    FailingExchange failing_transport(*transport, failing);
    dist::migrate<Agent>(rank_heap.heap(), failing_transport, SendAllTo{(session->rank() + 1) % ranks}, rank_heap.links());
    FAIL() << "rank " << session->rank() << " completed a step that rank " << failing << " abandoned";
  } catch (const dist::rank_failed& error) {
    failed = error.failed_rank();
    message = error.what();
  } catch (const soaheap::error& error) {
    failed = session->rank();
    message = error.what();
  }
  EXPECT_EQ(failed, failing) << message;
  if (session->rank() == failing) {
    EXPECT_NE(message.find("injected failure"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("rank " + std::to_string(failing) + " failed"), std::string::npos) << message;
    EXPECT_NE(message.find("exchange"), std::string::npos) << "the message says what was waited for: " << message;
  }
}

TEST(MigrateOverMpi, HeapsWithOtherClassListsAreRefusedAtTheFirstExchangeOnEveryRank) {
  const auto transport = make_transport();
  const int ranks = transport->size();
  if (ranks < 2) GTEST_SKIP() << "needs two processes";
  std::string message;
  std::uint64_t count = 0;
  const auto attempt = [&](auto& heap) {
    TestBuffer<Cell*> cells(test_backend, 4);
    heap.template parallel_new<Cell>(4);
    heap.template parallel_do<Cell, &Cell::register_in>(cells.data());
    heap.template parallel_new<Walker>(10, std::uint64_t{0}, static_cast<Cell* const*>(cells.data()), 4u);
    heap.synchronize();
    try {
      dist::migrate<Agent>(heap, *transport, SendAllTo{(transport->rank() + 1) % ranks});
    } catch (const soaheap::usage_error& error) {
      message = error.what();
    }
    count = heap.template count<Agent>();
  };
  soaheap::HeapOptions options;
  options.objects = 4096;
  options.backend = test_backend;
  options.host_threads = 2;
  if (transport->rank() == ranks - 1) {
    soaheap::Heap<Cell, Agent, Runner, Walker> other(options);  // the same classes in another order
    attempt(other);
  } else {
    MigrationHeap heap(options);
    attempt(heap);
  }
  EXPECT_NE(message.find("has other classes"), std::string::npos) << message;
  EXPECT_NE(message.find(transport->rank() == ranks - 1 ? "rank(s) 0" : "rank(s) " + std::to_string(ranks - 1)),
            std::string::npos)
      << message;
  EXPECT_EQ(count, 10u) << "nothing moved";
}

TEST(MigrateOverMpi, CallsThatDisagreeAcrossRanksAreRefusedOnEveryRank) {
  const auto transport = make_transport();
  const int ranks = transport->size();
  if (ranks < 2) GTEST_SKIP() << "needs two processes";
  std::string message;
  std::vector<std::uint64_t> values(static_cast<std::size_t>(ranks), 1), received(values.size(), 0);
  try {
    if (transport->rank() == 0)
      transport->exchange_counts(values.data(), received.data());
    else
      transport->all_reduce_sum(values.data(), 1);
  } catch (const soaheap::usage_error& error) {
    message = error.what();
  }
  EXPECT_NE(message.find("disagree"), std::string::npos) << message;
  EXPECT_NE(message.find(transport->rank() == 0 ? "all_reduce_sum" : "exchange_counts"), std::string::npos) << message;
}

TEST(MigrateOverMpi, ARankThatNeverCallsMakesTheOthersTimeOutSayingWhatTheyWaitedFor) {
  const int ranks = session->size();
  if (ranks < 2) GTEST_SKIP() << "needs two processes";
  const auto transport = make_transport(1.0);
  const int absent = ranks - 1;
  std::string message;
  if (transport->rank() != absent) {
    std::uint64_t value[1] = {1};
    try {
      transport->all_reduce_sum(value, 1);
    } catch (const dist::transport_timeout& error) {
      message = error.what();
    }
    EXPECT_NE(message.find("all_reduce_sum #1 of rank(s) " + std::to_string(absent)), std::string::npos) << message;
    EXPECT_NE(message.find("SOAHEAP_MPI_TIMEOUT"), std::string::npos) << message;
  }
}

TEST(MigrateOverMpi, RanksAgreeAfterTheFailureTests) {
  // A fresh transport works after the others were broken on purpose.
  std::uint64_t sums[1] = {1};
  sum_over_ranks(sums);
  EXPECT_EQ(sums[0], static_cast<std::uint64_t>(session->size()));
}

}  // namespace
}  // namespace soaheap_test::migration

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      soaheap_test::migration::test_backend = soaheap::parse_backend(argv[++i]);
    } else {
      std::fprintf(stderr, "migrate_mpi_test: unknown argument '%s' (GoogleTest's flags, and --backend host|cuda)\n", argv[i]);
      return 2;
    }
  }
  if (soaheap_test::migration::test_backend == soaheap::Backend::cuda && !soaheap::cuda_available()) {
    std::printf("migrate_mpi_test: --backend cuda without a CUDA GPU here (skipped)\n");
    return 0;
  }
  try {
    soaheap::distributed::MpiSession mpi(argc, argv);
    soaheap_test::migration::session = &mpi;
    // Only rank 0 prints the test report; every rank runs every test and exits with its own verdict.
    if (mpi.rank() != 0)
      delete ::testing::UnitTest::GetInstance()->listeners().Release(
          ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
    const int result = RUN_ALL_TESTS();
    if (result != 0) std::fprintf(stderr, "migrate_mpi_test: rank %d of %d FAILED\n", mpi.rank(), mpi.size());
    return result;
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "migrate_mpi_test: %s\n", failure.what());
    return 2;
  }
}
