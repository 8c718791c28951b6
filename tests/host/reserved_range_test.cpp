// ReservedRange on the host backend: addresses reserved without memory, chunks committed and
// released one by one and in pieces, the released pages really given back (mincore), bad chunk
// numbers refused.

#include <soaheap/core/detail/growable_memory.cuh>
#include <soaheap/core/detail/reserved_range.cuh>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace {

using soaheap::Backend;
using soaheap::detail::ReservedRange;

/// Pages of [address, address + bytes) that are resident in memory now.
std::uint64_t resident_pages(const void* address, std::uint64_t bytes) {
  const std::uint64_t page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> flags((bytes + page - 1) / page);
  if (mincore(const_cast<void*>(address), bytes, flags.data()) != 0) return ~std::uint64_t{0};
  std::uint64_t resident = 0;
  for (unsigned char flag : flags) resident += flag & 1u;
  return resident;
}

TEST(ReservedRange, ReservesAddressesWithoutMemoryAndRoundsChunksToPages) {
  const std::uint64_t page = ReservedRange::granularity(Backend::host);
  ReservedRange range(Backend::host, std::uint64_t{4} << 30, page + 1);  // 4 GiB of addresses
  EXPECT_EQ(range.chunk_bytes(), 2 * page);
  EXPECT_EQ(range.chunk_count(), (std::uint64_t{4} << 30) / (2 * page));
  EXPECT_EQ(range.reserved_bytes(), range.chunk_count() * range.chunk_bytes());
  EXPECT_EQ(range.committed_bytes(), 0u);
  EXPECT_EQ(resident_pages(range.base(), range.reserved_bytes()), 0u);
}

TEST(ReservedRange, ACommittedChunkHoldsDataAndItsNeighboursStayUncommitted) {
  ReservedRange range(Backend::host, std::uint64_t{1} << 26, std::uint64_t{1} << 16);
  ASSERT_TRUE(range.commit(3));
  ASSERT_TRUE(range.commit(3));  // committing twice changes nothing
  EXPECT_TRUE(range.is_committed(3));
  EXPECT_FALSE(range.is_committed(2));
  EXPECT_FALSE(range.is_committed(4));
  EXPECT_EQ(range.committed_bytes(), range.chunk_bytes());
  auto* chunk = static_cast<std::uint64_t*>(range.base()) + 3 * range.chunk_bytes() / sizeof(std::uint64_t);
  const std::uint64_t words = range.chunk_bytes() / sizeof(std::uint64_t);
  for (std::uint64_t i = 0; i < words; ++i) chunk[i] = i * 0x9e3779b97f4a7c15ull;
  for (std::uint64_t i = 0; i < words; ++i) ASSERT_EQ(chunk[i], i * 0x9e3779b97f4a7c15ull) << "word " << i;
  EXPECT_EQ(resident_pages(chunk, range.chunk_bytes()), range.chunk_bytes() / ReservedRange::granularity(Backend::host));
}

TEST(ReservedRange, ReleaseGivesThePagesBackAndTheChunkCanBeCommittedAgain) {
  ReservedRange range(Backend::host, std::uint64_t{1} << 24, std::uint64_t{1} << 16);
  for (std::uint64_t chunk = 0; chunk < 4; ++chunk) ASSERT_TRUE(range.commit(chunk));
  std::memset(range.base(), 0xab, 4 * range.chunk_bytes());
  char* second = static_cast<char*>(range.base()) + range.chunk_bytes();
  ASSERT_GT(resident_pages(second, range.chunk_bytes()), 0u);
  range.release(1);
  EXPECT_FALSE(range.is_committed(1));
  EXPECT_EQ(range.committed_bytes(), 3 * range.chunk_bytes());
  EXPECT_EQ(resident_pages(second, range.chunk_bytes()), 0u) << "released pages must leave memory";
  // The chunks around it keep their data.
  EXPECT_EQ(static_cast<unsigned char>(static_cast<char*>(range.base())[range.chunk_bytes() - 1]), 0xabu);
  EXPECT_EQ(static_cast<unsigned char>(second[range.chunk_bytes()]), 0xabu);
  range.release(1);  // releasing twice changes nothing
  ASSERT_TRUE(range.commit(1));
  second[0] = 7;
  EXPECT_EQ(second[0], 7);
  EXPECT_EQ(range.committed_bytes(), 4 * range.chunk_bytes());
}

TEST(ReservedRange, ACommitMapsPiecesOfUpToPieceChunksAndAReleaseGivesBackAWholePiece) {
  ReservedRange range(Backend::host, std::uint64_t{1} << 24, std::uint64_t{1} << 16, 16);
  ASSERT_TRUE(range.commit(3));  // a piece of its own
  ASSERT_TRUE(range.commit_range(0, 40));  // the chunks around it: [0,3), [4,20), [20,36), [36,40)
  EXPECT_EQ(range.committed_bytes(), 40 * range.chunk_bytes());
  EXPECT_EQ(range.piece_start(3), 3u);
  EXPECT_EQ(range.piece_start(2), 0u);
  EXPECT_EQ(range.piece_start(19), 4u);
  EXPECT_EQ(range.piece_start(20), 20u);
  EXPECT_EQ(range.piece_start(39), 36u);
  EXPECT_EQ(range.piece_start(40), 40u) << "an uncommitted chunk starts nothing but itself";
  EXPECT_EQ(range.piece_end(3), 4u);
  EXPECT_EQ(range.piece_end(4), 20u);
  EXPECT_EQ(range.piece_end(39), 40u);
  EXPECT_EQ(range.piece_end(40), 41u);
  std::memset(range.base(), 0x5a, 40 * range.chunk_bytes());
  range.release(25);  // the piece [20, 36)
  for (std::uint64_t chunk = 0; chunk < 40; ++chunk)
    EXPECT_EQ(range.is_committed(chunk), chunk < 20 || chunk >= 36) << "chunk " << chunk;
  EXPECT_EQ(range.committed_bytes(), 24 * range.chunk_bytes());
  const char* released = static_cast<const char*>(range.base()) + 20 * range.chunk_bytes();
  EXPECT_EQ(resident_pages(released, 16 * range.chunk_bytes()), 0u);
  EXPECT_EQ(static_cast<unsigned char>(released[-1]), 0x5au);
  EXPECT_EQ(static_cast<unsigned char>(released[16 * range.chunk_bytes()]), 0x5au);
  ASSERT_TRUE(range.commit_range(18, 38));  // refills the hole as one piece
  EXPECT_EQ(range.piece_start(35), 20u);
  EXPECT_EQ(range.committed_bytes(), 40 * range.chunk_bytes());
}

TEST(ReservedRange, BadSizesAndChunkNumbersAreRefusedNamingTheValues) {
  try {
    ReservedRange range(Backend::host, 0, 4096);
    FAIL() << "a range of 0 bytes was accepted";
  } catch (const soaheap::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("bytes=0"), std::string::npos) << error.what();
  }
  ReservedRange range(Backend::host, std::uint64_t{1} << 20, std::uint64_t{1} << 16);
  try {
    range.commit(16);
    FAIL() << "chunk 16 of 16 was committed";
  } catch (const soaheap::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("chunk 16 of a range of 16 chunks"), std::string::npos) << error.what();
  }
  EXPECT_THROW(range.release(99), soaheap::invalid_argument);
  EXPECT_EQ(range.committed_bytes(), 0u);
}

TEST(ReservedRange, MovingARangeMovesItsChunksAndFreesTheAddressesOnce) {
  ReservedRange first(Backend::host, std::uint64_t{1} << 20, std::uint64_t{1} << 16);
  ASSERT_TRUE(first.commit(0));
  static_cast<char*>(first.base())[0] = 42;
  void* const base = first.base();
  ReservedRange second(std::move(first));
  EXPECT_EQ(first.base(), nullptr);
  EXPECT_EQ(first.chunk_count(), 0u);
  EXPECT_EQ(second.base(), base);
  EXPECT_TRUE(second.is_committed(0));
  EXPECT_EQ(static_cast<char*>(second.base())[0], 42);
  ReservedRange third;
  third = std::move(second);
  EXPECT_EQ(third.base(), base);
  EXPECT_EQ(third.committed_bytes(), third.chunk_bytes());
}

}  // namespace

TEST(GrowableMemory, ReleasingARangeGivesBackOnlyThePiecesWhollyInsideItAndTheyMapAgainZeroed) {
  using soaheap::detail::GrowableMemory;
  const std::uint64_t chunk = ReservedRange::granularity(Backend::host);
  GrowableMemory memory = GrowableMemory::reserved(Backend::host, 64 * chunk, chunk, 4);
  ASSERT_TRUE(memory.ensure_range(0, 16 * chunk, true));  // pieces [0,4) [4,8) [8,12) [12,16)
  std::memset(memory.get(), 0x77, 16 * chunk);
  memory.release_range(2 * chunk, 12 * chunk + 1);  // wholly inside: [4,8) and [8,12)
  EXPECT_EQ(memory.resident_bytes(), 8 * chunk);
  const auto* bytes = memory.as<const unsigned char>();
  EXPECT_EQ(bytes[4 * chunk - 1], 0x77u) << "the piece reaching below the range stays";
  EXPECT_EQ(bytes[12 * chunk], 0x77u) << "the piece reaching above the range stays";
  EXPECT_EQ(resident_pages(bytes + 4 * chunk, 8 * chunk), 0u);
  memory.release_range(5 * chunk, 5 * chunk);  // empty: nothing
  EXPECT_EQ(memory.resident_bytes(), 8 * chunk);
  ASSERT_TRUE(memory.ensure_range(4 * chunk, 12 * chunk, true));
  for (std::uint64_t i = 4 * chunk; i < 12 * chunk; i += 64) ASSERT_EQ(bytes[i], 0u) << "byte " << i;
  EXPECT_EQ(memory.resident_bytes(), 16 * chunk);
}
