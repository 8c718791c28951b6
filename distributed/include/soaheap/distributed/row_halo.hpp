#pragma once
/// @file row_halo.hpp
/// @brief RowSlabs and RowHalo: the row partition and the border-row exchange of the grid-of-cells pattern, for a grid split into row
///        slabs over the ranks of a Transport (rank r owns a band of rows; the ranks above and below
///        own the bands next to it, on a torus the first and last rank are neighbours too).
///
/// The application fills up() and down() with `width` values per row, one or more 64-bit words
/// per cell (from its cell objects, in a kernel), calls exchange(), and reads from_above() and
/// from_below(): up() goes to the rank above, which finds it in its from_below(); down() goes to
/// the rank below (its from_above()). The same call serves both directions of the pattern:
///  - owner → halo: up() = my first row, down() = my last row; then from_above() is the row just
///    above my band (my upper halo row), from_below() the row just below it.
///  - halo → owner (e.g. requests posted into halo cells, to be combined by the owner): up() = my
///    upper halo row, down() = my lower halo row; then from_above() holds what the rank above
///    posted into my first row, from_below() what the rank below posted into my last row.
/// With two ranks on a torus both neighbours are the same rank: the two rows travel as one message.
/// With one rank there is nothing to exchange (a torus of one band wraps onto itself).
/// The buffers are in the memory of the transport's kind; steady-state calls allocate nothing.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/memory.cuh>
#include <soaheap/distributed/transport.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace soaheap::distributed {

/// @brief Which rank owns which rows when @p height rows are split into row slabs over @p ranks:
/// rank r owns [first_row(r), first_row(r + 1)), bands that differ by at most one row.
struct RowSlabs {
  std::uint32_t height;
  int ranks;
  SOAHEAP_HD int owner(std::uint32_t row) const {
    return static_cast<int>(static_cast<std::uint64_t>(row) * static_cast<std::uint64_t>(ranks) / height);
  }
  SOAHEAP_HD std::uint32_t first_row(int rank) const {
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(rank) * height + static_cast<std::uint64_t>(ranks) - 1) /
                                      static_cast<std::uint64_t>(ranks));
  }
};

class RowHalo {
 public:
  /// @param width cells per row; @param words_per_cell 64-bit words per cell;
  /// @param periodic the grid is a torus in the row direction
  RowHalo(Transport& transport, Backend backend, std::uint64_t width, int words_per_cell, bool periodic)
      : transport_(transport), row_words_(width * static_cast<std::uint64_t>(words_per_cell)), periodic_(periodic) {
    if (width == 0 || words_per_cell < 1)
      throw invalid_argument("soaheap: RowHalo needs a width and words per cell of at least 1 (width " +
                             std::to_string(width) + ", words " + std::to_string(words_per_cell) + ")");
    // [up | down | from_below | from_above]: with two ranks on a torus, [up | down] is one message
    // and arrives as the peer's [up | down], which is [from_below | from_above] here.
    buffer_ = soaheap::detail::Memory(backend, 4 * row_words_ * sizeof(std::uint64_t));
    buffer_.fill_zero();
  }

  std::uint64_t* up() const { return row(0); }
  std::uint64_t* down() const { return row(1); }
  std::uint64_t* from_below() const { return row(2); }
  std::uint64_t* from_above() const { return row(3); }
  std::uint64_t row_words() const { return row_words_; }
  /// The ranks whose bands border this one (-1: none, at the edge of a non-periodic grid).
  int rank_above() const { return neighbour(-1); }
  int rank_below() const { return neighbour(+1); }

  /// Sends up() and down(), receives from_above() and from_below(). Collective over the transport.
  void exchange() {
    const int ranks = transport_.size();
    if (ranks == 1) return;
    const std::uint64_t bytes = row_words_ * sizeof(std::uint64_t);
    std::vector<Message> sends;
    std::vector<Message> receives;
    if (ranks == 2 && periodic_) {
      const int peer = 1 - transport_.rank();
      sends.push_back({peer, up(), 2 * bytes});
      receives.push_back({peer, from_below(), 2 * bytes});
    } else {
      if (rank_above() >= 0) {
        sends.push_back({rank_above(), up(), bytes});
        receives.push_back({rank_above(), from_above(), bytes});
      }
      if (rank_below() >= 0) {
        sends.push_back({rank_below(), down(), bytes});
        receives.push_back({rank_below(), from_below(), bytes});
      }
    }
    transport_.exchange(sends, receives);
  }

 private:
  std::uint64_t* row(int index) const { return buffer_.as<std::uint64_t>() + static_cast<std::uint64_t>(index) * row_words_; }
  int neighbour(int step) const {
    const int ranks = transport_.size();
    const int other = transport_.rank() + step;
    if (other >= 0 && other < ranks) return other;
    return periodic_ ? (other + ranks) % ranks : -1;
  }

  Transport& transport_;
  std::uint64_t row_words_;
  bool periodic_;
  soaheap::detail::Memory buffer_;
};

}  // namespace soaheap::distributed
