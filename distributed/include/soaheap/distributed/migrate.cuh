#pragma once
/// @file migrate.cuh
/// @brief `soaheap::distributed::migrate<T>(heap, transport, destination, links)`: every object of T
///        (and of its subclasses) for which `destination(object)` names another rank leaves this
///        rank's heap and is re-created in that rank's heap, fields intact, pointer fields translated
///        by `links` (links.cuh). Collective: every rank calls it with the same T, in the same order
///        as its other collective calls.
///
/// Per concrete class C, on each rank (all loops over objects are kernels; the host handles only
/// one count per rank):
///  1. survey (one thread per slot of C's blocks): destination(object); objects that leave are
///     counted per target rank. An object whose destination is not a rank, or that holds a pointer
///     `links` cannot translate, stays and is counted as an error.
///  2. pack: each leaving object is written into its target's message (SOA arrays, wire format in
///     detail/packing.cuh) and its slot is freed. Its destructor does not run: the object lives on.
///  3. the counts go all-to-all (Transport::exchange_counts), then the messages in one group
///     (Transport::exchange: grouped ncclSend/ncclRecv with NCCL).
///  4. unpack (one thread per received object): a slot of C is allocated and the fields written,
///     pointer names resolved by `links.to_local`.
/// Then errors are thrown on the host: a destination that is no rank, an untranslated pointer (its
/// object stayed home), a name the receiver could not resolve (the pointer arrived as null), out of
/// memory at the receiver (those objects are lost, and the message says how many).
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
#include <soaheap/core/memory.cuh>
#include <soaheap/distributed/departures.cuh>
#include <soaheap/distributed/detail/packing.cuh>
#include <soaheap/distributed/links.cuh>
#include <soaheap/distributed/transport.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

namespace soaheap::distributed {

/// @brief What one migrate call moved on this rank (objects and bytes per peer and in total).
struct MigrationStats {
  std::vector<std::uint64_t> sent_to;        ///< objects sent to each rank
  std::vector<std::uint64_t> received_from;  ///< objects received from each rank
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  double seconds = 0;  ///< wall time of the call, host clock (it waits for its kernels)

  /// Adds @p other's figures (e.g. to total many migration steps).
  MigrationStats& operator+=(const MigrationStats& other) {
    if (sent_to.size() < other.sent_to.size()) sent_to.resize(other.sent_to.size(), 0);
    if (received_from.size() < other.received_from.size()) received_from.resize(other.received_from.size(), 0);
    for (std::size_t p = 0; p < other.sent_to.size(); ++p) sent_to[p] += other.sent_to[p];
    for (std::size_t p = 0; p < other.received_from.size(); ++p) received_from[p] += other.received_from[p];
    sent += other.sent;
    received += other.received;
    bytes_sent += other.bytes_sent;
    bytes_received += other.bytes_received;
    seconds += other.seconds;
    return *this;
  }
};

/// @brief Where arriving objects go in the receiver's heap.
enum class MigrationPlacement {
  /// Into free slots of the class's blocks, as `new` would place them (the default): the slots that
  /// departures leave are reused, so the heap does not grow.
  fill_holes,
  /// Into free blocks taken whole, N_C arrivals per block, written densely (slots that departures
  /// left stay free for `new` and defragmentation). Arrivals that find no free block fill holes.
  fresh_blocks,
};

struct MigrationOptions {
  MigrationPlacement placement = MigrationPlacement::fill_holes;
};

namespace detail {

/// Per-heap buffers of migration (a Heap attachment), grown when a step needs more and kept, so a
/// steady-state migration allocates nothing.
struct MigrationScratch {
  soaheap::detail::Memory decisions;  ///< i32 per item (slot or recorded departure): the survey's verdict, read by the pack
  soaheap::detail::Memory counters;   ///< MigrationCounters
  soaheap::detail::Memory per_rank;   ///< u64[size]: objects leaving for each rank
  soaheap::detail::Memory cursors;    ///< u64[size]
  soaheap::detail::Memory send_offsets;      ///< u64[size]
  soaheap::detail::Memory received_first;    ///< u64[size + 1]
  soaheap::detail::Memory received_offsets;  ///< u64[size]
  soaheap::detail::Memory send_buffer;
  soaheap::detail::Memory receive_buffer;
  soaheap::detail::Memory fresh_blocks;      ///< u32 per group of arrivals (fresh_blocks placement)
  const Transport* agreed_with = nullptr;    ///< the transport whose ranks were found to hold the same heap type

  static void grow(soaheap::detail::Memory& memory, Backend backend, std::uint64_t bytes) {
    if (memory.bytes() < bytes) memory = soaheap::detail::Memory(backend, bytes + bytes / 4);
  }
  void ensure(Backend backend, std::uint64_t items, int ranks) {
    grow(decisions, backend, (items + 1) * sizeof(std::int32_t));
    grow(counters, backend, sizeof(MigrationCounters));
    const std::uint64_t per_rank_bytes = (static_cast<std::uint64_t>(ranks) + 1) * sizeof(std::uint64_t);
    for (soaheap::detail::Memory* memory : {&per_rank, &cursors, &send_offsets, &received_first, &received_offsets})
      grow(*memory, backend, per_rank_bytes);
  }
};

/// FNV-1a over @p bytes, continuing from @p hash.
inline std::uint64_t fingerprint_bytes(std::uint64_t hash, const void* bytes, std::size_t count) {
  const auto* data = static_cast<const unsigned char*>(bytes);
  for (std::size_t i = 0; i < count; ++i) hash = (hash ^ data[i]) * 0x100000001b3ull;
  return hash;
}
template <class C>
std::uint64_t fingerprint_class(std::uint64_t hash) {
  const std::string name = C::kName;
  hash = fingerprint_bytes(hash, name.data(), name.size() + 1);
  const std::uint64_t shape[2] = {static_cast<std::uint64_t>(all_field_types_t<C>::size), WireLayout<C>::message_bytes(1)};
  return fingerprint_bytes(hash, shape, sizeof(shape));
}
/// What must be equal on every rank for objects to migrate: the heap's classes, in order, with
/// their names and wire shapes.
template <class... Classes>
std::uint64_t class_list_fingerprint(const Heap<Classes...>&) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  ((hash = fingerprint_class<Classes>(hash)), ...);
  return hash;
}
template <class... Classes>
std::string class_list_names(const Heap<Classes...>&) {
  std::string names;
  ((names += (names.empty() ? "" : ", ") + std::string(Classes::kName)), ...);
  return names;
}

/// At the first migration of @p heap over @p transport, every rank's class list is compared (one
/// extra exchange of counts, once). Ranks with different heaps would misread each other's
/// messages; every rank sees every other's fingerprint, so all refuse alike, before anything moves.
template <class HeapT>
void agree_on_heap(HeapT& heap, Transport& transport, MigrationScratch& scratch) {
  if (scratch.agreed_with == &transport) return;
  const std::uint64_t mine = class_list_fingerprint(heap);
  const auto n = static_cast<std::size_t>(transport.size());
  const std::vector<std::uint64_t> send(n, mine);
  std::vector<std::uint64_t> received(n, 0);
  transport.exchange_counts(send.data(), received.data());
  std::string differing;
  for (std::size_t p = 0; p < n; ++p)
    if (received[p] != mine) differing += (differing.empty() ? "" : ", ") + std::to_string(p);
  if (!differing.empty())
    throw usage_error("soaheap: migrate: the heap of rank(s) " + differing + " has other classes than rank " +
                      std::to_string(transport.rank()) + "'s (" + class_list_names(heap) +
                      "): every rank must build the same soaheap::Heap<...> type, classes in the same order");
  scratch.agreed_with = &transport;
}

/// Host-side offsets of the messages of one class: byte offset of each and the total.
template <class C>
std::vector<std::uint64_t> message_offsets(const std::vector<std::uint64_t>& counts, std::uint64_t& total_bytes) {
  std::vector<std::uint64_t> offsets(counts.size(), 0);
  total_bytes = 0;
  for (std::size_t p = 0; p < counts.size(); ++p) {
    offsets[p] = total_bytes;
    total_bytes += WireLayout<C>::message_bytes(counts[p]);
  }
  return offsets;
}

/// One class's migration step over @p item_count items (SlotItems or DepartureItems). Failures of
/// the step itself throw; what it reports about the objects (after the exchange, which every rank
/// completed) is returned, so that the caller can go on with the next class in step with the other
/// ranks and throw at the end.
template <class C, class HeapT, class Items, class Links>
std::exception_ptr migrate_items(HeapT& heap, Transport& transport, std::uint64_t item_count, const Items& items,
                                 const Links& links, const MigrationOptions& options, MigrationStats& stats) {
  using View = ::soaheap::detail::internals_t<HeapT>;
  constexpr int kCapacity = HeapT::template capacity<C>;
  const int ranks = transport.size();
  const int rank = transport.rank();
  const Backend backend = heap.backend();
  MigrationScratch& scratch = heap.template attachment<MigrationScratch>();
  // 1. survey
  scratch.ensure(backend, item_count, ranks);
  const MigrationCounters initial{0, 0, 0, 0, -1, -1};
  scratch.counters.copy_from_host(0, &initial, sizeof(initial));
  const std::vector<std::uint64_t> zeros(static_cast<std::size_t>(ranks) + 1, 0);
  scratch.per_rank.copy_from_host(0, zeros.data(), zeros.size() * sizeof(std::uint64_t));
  scratch.cursors.copy_from_host(0, zeros.data(), zeros.size() * sizeof(std::uint64_t));
  auto* counters = scratch.counters.template as<MigrationCounters>();
  if (item_count > 0)
    heap.launch(item_count, SurveyKernel<View, C, Items, Links>{::soaheap::detail::internals(heap), items, scratch.decisions.template as<std::int32_t>(),
                                                           scratch.per_rank.template as<std::uint64_t>(), counters,
                                                           links, rank, ranks});
  heap.synchronize();
  std::vector<std::uint64_t> send_counts(static_cast<std::size_t>(ranks), 0);
  scratch.per_rank.copy_to_host(send_counts.data(), 0, send_counts.size() * sizeof(std::uint64_t));

  // 2. pack
  std::uint64_t send_bytes = 0;
  const std::vector<std::uint64_t> send_offsets = message_offsets<C>(send_counts, send_bytes);
  MigrationScratch::grow(scratch.send_buffer, backend, send_bytes + 16);
  scratch.send_offsets.copy_from_host(0, send_offsets.data(), send_offsets.size() * sizeof(std::uint64_t));
  if (send_bytes > 0)
    heap.launch(item_count, PackKernel<View, C, Items, Links>{::soaheap::detail::internals(heap), items, scratch.decisions.template as<std::int32_t>(),
                                                  scratch.per_rank.template as<std::uint64_t>(),
                                                  scratch.send_offsets.template as<std::uint64_t>(),
                                                  scratch.cursors.template as<std::uint64_t>(),
                                                  scratch.send_buffer.template as<unsigned char>(), links});

  // 3. counts, then the messages
  std::vector<std::uint64_t> receive_counts(static_cast<std::size_t>(ranks), 0);
  transport.exchange_counts(send_counts.data(), receive_counts.data());
  receive_counts[static_cast<std::size_t>(rank)] = 0;
  std::uint64_t receive_bytes = 0;
  const std::vector<std::uint64_t> receive_offsets = message_offsets<C>(receive_counts, receive_bytes);
  std::vector<std::uint64_t> first(static_cast<std::size_t>(ranks) + 1, 0);
  for (int p = 0; p < ranks; ++p) first[p + 1] = first[p] + receive_counts[p];
  MigrationScratch::grow(scratch.receive_buffer, backend, receive_bytes + 16);
  scratch.received_first.copy_from_host(0, first.data(), first.size() * sizeof(std::uint64_t));
  scratch.received_offsets.copy_from_host(0, receive_offsets.data(), receive_offsets.size() * sizeof(std::uint64_t));
  heap.synchronize();  // the messages are packed
  std::vector<Message> sends;
  std::vector<Message> receives;
  for (int p = 0; p < ranks; ++p) {
    const auto index = static_cast<std::size_t>(p);
    if (p != rank && send_counts[index] > 0)
      sends.push_back({p, scratch.send_buffer.template as<unsigned char>() + send_offsets[index],
                       WireLayout<C>::message_bytes(send_counts[index])});
    if (p != rank && receive_counts[index] > 0)
      receives.push_back({p, scratch.receive_buffer.template as<unsigned char>() + receive_offsets[index],
                          WireLayout<C>::message_bytes(receive_counts[index])});
  }
  transport.exchange(sends, receives);

  // 4. unpack
  const std::uint64_t received = first.back();
  const std::uint32_t* fresh_blocks = nullptr;
  if (received > 0 && options.placement == MigrationPlacement::fresh_blocks) {
    const std::uint64_t groups = (received + kCapacity - 1) / kCapacity;
    MigrationScratch::grow(scratch.fresh_blocks, backend, groups * sizeof(std::uint32_t));
    const auto free_list = heap.enumerate_blocks(0);  // the free bitmap, in address order
    heap.launch(groups, ClaimFreshBlocksKernel<View, C>{::soaheap::detail::internals(heap), free_list.ids(), free_list.count,
                                                        scratch.fresh_blocks.template as<std::uint32_t>(), received});
    fresh_blocks = scratch.fresh_blocks.template as<std::uint32_t>();
  }
  if (received > 0)
    heap.launch(received, UnpackKernel<View, C, Links>{::soaheap::detail::internals(heap), scratch.received_first.template as<std::uint64_t>(),
                                                       scratch.received_offsets.template as<std::uint64_t>(),
                                                       scratch.receive_buffer.template as<unsigned char>(), counters,
                                                       links, ranks, fresh_blocks});
  MigrationCounters result{};
  std::exception_ptr out_of_memory_error;
  try {
    heap.synchronize();
  } catch (const out_of_memory& error) {
    scratch.counters.copy_to_host(&result, 0, sizeof(result));
    out_of_memory_error = std::make_exception_ptr(
        out_of_memory(std::string(error.what()) + "; " + std::to_string(result.not_created) + " of " +
                      std::to_string(received) + " " + C::kName + " objects migrating to rank " +
                      std::to_string(rank) + " were lost"));
  }
  scratch.counters.copy_to_host(&result, 0, sizeof(result));

  for (std::size_t p = 0; p < send_counts.size(); ++p) {
    stats.sent_to[p] += send_counts[p];
    stats.received_from[p] += receive_counts[p];
    stats.sent += send_counts[p];
    stats.received += receive_counts[p];
  }
  stats.bytes_sent += send_bytes;
  stats.bytes_received += receive_bytes;

  const std::string where = std::string(" (rank ") + std::to_string(rank) + " of " + std::to_string(ranks) + ", class " +
                            C::kName + ")";
  if (out_of_memory_error) return out_of_memory_error;
  if (result.bad_destinations > 0)
    return std::make_exception_ptr(invalid_argument("soaheap: migrate: destination() returned " + std::to_string(result.first_bad_destination) +
                           ", which is not a rank in [0, " + std::to_string(ranks) + "), for " +
                           std::to_string(result.bad_destinations) + " objects; they stayed" + where));
  if (result.untranslated > 0)
    return std::make_exception_ptr(usage_error("soaheap: migrate: " + std::to_string(result.untranslated) +
                      " objects hold a pointer that the links could not translate (first in field " +
                      std::to_string(result.first_untranslated_field) +
                      " of the class, inherited fields first); they stayed" + where));
  if (result.unlinked > 0)
    return std::make_exception_ptr(usage_error("soaheap: migrate: " + std::to_string(result.unlinked) +
                      " pointers arrived as names the links could not resolve on this rank; they were set to null" +
                      where));
  return nullptr;
}

/// migrate's step for class C: every object of C is asked its destination.
template <class T, class C, class HeapT, class Destination, class Links>
std::exception_ptr migrate_class(HeapT& heap, Transport& transport, const Destination& destination, const Links& links,
                                 const MigrationOptions& options, MigrationStats& stats) {
  const auto list = heap.enumerate_blocks(1 + HeapT::template class_id<C>);
  const std::uint64_t slots = list.count * static_cast<std::uint64_t>(HeapT::template capacity<C>);
  return migrate_items<C>(heap, transport, slots,
                          SlotItems<::soaheap::detail::internals_t<HeapT>, C, T, Destination>{::soaheap::detail::internals(heap), list.ids(), destination},
                          links, options, stats);
}

/// Host-side f(static_cast<C*>(nullptr)) for each concrete class C of the heap that is T or derives
/// from T (the view's version is host-device, which host-only bodies cannot be called from).
template <class T, class C, class Function>
void visit_if_concrete_subclass(Function& f) {
  if constexpr (std::is_base_of_v<T, C> && !C::kAbstract) f(static_cast<C*>(nullptr));
}
template <class T, class... Classes, class Function>
void for_each_concrete_subclass(const Heap<Classes...>&, Function&& f) {
  (visit_if_concrete_subclass<T, Classes>(f), ...);
}

/// Sizes @p stats for the transport's ranks and runs step(static_cast<C*>(nullptr)) for each
/// concrete class C of T, in the same order on every rank; returns the first error a step reported.
template <class T, class HeapT, class Step>
std::exception_ptr step_each_class(HeapT& heap, Transport& transport, MigrationStats& stats, Step&& step) {
  stats.sent_to.assign(static_cast<std::size_t>(transport.size()), 0);
  stats.received_from.assign(static_cast<std::size_t>(transport.size()), 0);
  std::exception_ptr first_error;
  for_each_concrete_subclass<T>(heap, [&](auto* tag) {
    const std::exception_ptr error = step(tag);
    if (!first_error) first_error = error;
  });
  return first_error;
}

}  // namespace detail

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
  const auto start = std::chrono::steady_clock::now();
  heap.synchronize();  // earlier errors surface before anything moves
  detail::agree_on_heap(heap, transport, heap.template attachment<detail::MigrationScratch>());
  MigrationStats stats;
  const std::exception_ptr error = detail::step_each_class<T>(heap, transport, stats, [&](auto* tag) {
    using C = std::remove_pointer_t<decltype(tag)>;
    return detail::migrate_class<T, C>(heap, transport, destination, links, options, stats);
  });
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
  const auto start = std::chrono::steady_clock::now();
  heap.synchronize();  // the kernels that recorded departures are done; earlier errors surface
  detail::agree_on_heap(heap, transport, heap.template attachment<detail::MigrationScratch>());
  const std::uint64_t recorded = departures.recorded();
  const std::uint64_t count = recorded < departures.capacity() ? recorded : departures.capacity();
  MigrationStats stats;
  std::exception_ptr first_error = detail::step_each_class<T>(heap, transport, stats, [&](auto* tag) {
    using C = std::remove_pointer_t<decltype(tag)>;
    return detail::migrate_items<C>(
        heap, transport, count, detail::DepartureItems<::soaheap::detail::internals_t<HeapT>, C>{departures.objects(), departures.ranks()},
        links, options, stats);
  });
  departures.clear();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!first_error && recorded > count)
    first_error = std::make_exception_ptr(usage_error(
        "soaheap: migrate_departures: " + std::to_string(recorded) + " departures were recorded but the list holds " +
        std::to_string(count) + "; the others stayed (make the Departures larger)"));
  if (first_error) std::rethrow_exception(first_error);
  return stats;
}

}  // namespace soaheap::distributed
