#pragma once
/// @file migrate.cuh
/// @brief `soaheap::distributed::migrate<T>(heap, transport, destination, links)`: every object of T
///        (and of its subclasses) for which `destination(object)` names another rank leaves this
///        rank's heap and is re-created in that rank's heap, fields intact, pointer fields translated
///        by `links` (links.cuh). Collective: every rank calls it with the same T, in the same order
///        as its other collective calls.
///
/// One step for all concrete classes C of T together, on each rank (all loops over objects are
/// kernels; the host waits for the device twice per step):
///  1. survey (one thread per slot of the heap's blocks, per class C): destination(object); objects
///     that leave are counted per class and target rank. An object whose destination is not a
///     rank, or that holds a pointer `links` cannot translate, stays and is counted as an error.
///  2. plan and pack, still on the device: message offsets from the counts; each leaving object is
///     written into its target's message (SOA arrays per class, wire format in detail/packing.cuh)
///     and its slot is freed. Its destructor does not run: the object lives on. The counts reach
///     the host through mapped memory at the first wait. When the messages exceed the send buffer
///     (kept from earlier steps), nothing is packed: the buffer grows and the pack runs again,
///     which costs this step one more wait.
///  3. the counts of all classes go all-to-all in one exchange (Transport::exchange_count_rows),
///     then one message per pair of ranks, holding every class (Transport::exchange).
///  4. unpack (one thread per received object): a slot of C is allocated (or a fresh block taken
///     on the device) and the fields written, pointer names resolved by `links.to_local`; the
///     second wait brings the step's error counters.
/// Then errors are thrown on the host: a destination that is no rank, an untranslated pointer (its
/// object stayed home), a name the receiver could not resolve (the pointer arrived as null), out of
/// memory at the receiver (those objects are lost, and the message says how many).
/// MigrationStats::host_syncs counts the waits.
///
/// Pointers *to* a migrating object from objects that stay are the application's concern: after
/// migrate they still hold the object's old address, whose slot is free now. Clear or re-link them
/// before (e.g. an agent leaves its cell: the cell's `agent` field is cleared when the move is
/// decided) or after (the receiver links arrivals into its cells: the wa-tor pattern).
///
/// The order in which objects arrive (and so where in the receiver's blocks they land) is not
/// specified; their values are.
///
/// `migrate_departures<T>(heap, transport, departures, links)` is the same step for objects that
/// the application's kernels recorded as leaving (departures.cuh): step 1 then looks at the
/// recorded objects only instead of every object of the class.

#include <soaheap/core/heap.cuh>
#include <soaheap/distributed/departures.cuh>
#include <soaheap/distributed/detail/migration_step.cuh>
#include <soaheap/distributed/links.cuh>
#include <soaheap/distributed/migration_stats.hpp>
#include <soaheap/distributed/transport.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace soaheap::distributed {

/// @brief Moves the objects of T (and its subclasses) that `destination` sends elsewhere to their
/// ranks; see the file comment. @p destination: `SOAHEAP_HD int operator()(T* object) const`, the
/// rank the object belongs to now (this rank: it stays). @p links: see links.cuh. @p options: where
/// arrivals go (MigrationPlacement).
/// @throw invalid_argument for a destination that is no rank; usage_error for pointers that could
///        not be translated or resolved; out_of_memory when the receiving heap is full. In every
///        case the exchange has completed on all ranks, and objects that could not leave stayed.
template <class T, class HeapT, class Destination, class Links = NoLinks>
MigrationStats migrate(HeapT& heap, Transport& transport, const Destination& destination, const Links& links = Links{},
                       const MigrationOptions& options = MigrationOptions{}) {
  using View = ::soaheap::detail::internals_t<HeapT>;
  const auto start = std::chrono::steady_clock::now();
  detail::agree_on_heap(heap, transport, ::soaheap::detail::InternalsAccess::attachment<detail::MigrationScratch>(heap));
  // Each class's decisions in a region of its own: one per slot of every block of the heap.
  const std::uint64_t blocks = heap.block_count();
  std::vector<std::uint64_t> decision_base;
  std::uint64_t decision_words = 0;
  detail::for_each_concrete_subclass<T>(heap, [&](auto* tag) {
    using C = std::remove_pointer_t<decltype(tag)>;
    decision_base.push_back(decision_words);
    decision_words += blocks * static_cast<std::uint64_t>(HeapT::template capacity<C>);
  });
  MigrationStats stats;
  const std::exception_ptr error = detail::migration_step<T>(
      heap, transport, decision_words, nullptr, nullptr,
      [&](auto* tag, int k) {
        using C = std::remove_pointer_t<decltype(tag)>;
        using Items = detail::SlotItems<View, C, T, Destination>;
        return std::pair<Items, std::uint64_t>{Items{::soaheap::detail::internals(heap), destination, decision_base[static_cast<std::size_t>(k)]},
                                               blocks * static_cast<std::uint64_t>(HeapT::template capacity<C>)};
      },
      links, options, stats, nullptr);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (error) std::rethrow_exception(error);
  return stats;
}

/// @brief Moves the objects of T (and its subclasses) that kernels recorded in @p departures, each
/// to the rank recorded with it, and empties the list. The same step as migrate() without its
/// survey of every object: use it when the application's own kernel already knows who leaves (e.g.
/// where an agent moves). Each object may be recorded once per step and must not be destroyed
/// before the step; recorded objects of classes outside T's hierarchy are dropped with the list.
/// @throw usage_error when more departures were recorded than the list holds (those beyond its
///        capacity were not recorded and stayed), after the exchange; otherwise as migrate().
template <class T, class HeapT, class Links = NoLinks>
MigrationStats migrate_departures(HeapT& heap, Transport& transport, Departures& departures, const Links& links = Links{},
                                  const MigrationOptions& options = MigrationOptions{}) {
  using View = ::soaheap::detail::internals_t<HeapT>;
  const auto start = std::chrono::steady_clock::now();
  detail::agree_on_heap(heap, transport, ::soaheap::detail::InternalsAccess::attachment<detail::MigrationScratch>(heap));
  const DepartureList list = departures.list();
  MigrationStats stats;
  std::uint64_t recorded = 0;
  std::exception_ptr first_error = detail::migration_step<T>(
      heap, transport, departures.capacity(), list.count, list.count,
      [&](auto* tag, int) {
        using C = std::remove_pointer_t<decltype(tag)>;
        using Items = detail::DepartureItems<View, C>;
        return std::pair<Items, std::uint64_t>{Items{list.objects, list.ranks, list.count, list.capacity}, list.capacity};
      },
      links, options, stats, &recorded);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::uint64_t count = recorded < departures.capacity() ? recorded : departures.capacity();
  if (!first_error && recorded > count)
    first_error = std::make_exception_ptr(usage_error(
        "soaheap: migrate_departures: " + std::to_string(recorded) + " departures were recorded but the list holds " +
        std::to_string(count) + "; the others stayed (make the Departures larger)"));
  if (first_error) std::rethrow_exception(first_error);
  return stats;
}

}  // namespace soaheap::distributed
