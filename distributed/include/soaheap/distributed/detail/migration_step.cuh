#pragma once
/// @file detail/migration_step.cuh
/// @brief The one migration step behind migrate() and migrate_departures() (migrate.cuh): scratch
///        buffers kept per heap, the survey, pack, exchange and unpack.

#include <soaheap/core/heap.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/distributed/departures.cuh>
#include <soaheap/distributed/detail/host_words.cuh>
#include <soaheap/distributed/detail/packing.cuh>
#include <soaheap/distributed/links.cuh>
#include <soaheap/distributed/migration_stats.hpp>
#include <soaheap/distributed/transport.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace soaheap::distributed {

namespace detail {

/// Per-heap buffers of migration (a Heap attachment), sized from what earlier steps needed and
/// kept, so a steady-state step allocates nothing; a step whose messages exceed them grows them by
/// a quarter more than it needs.
struct MigrationScratch {
  soaheap::detail::Memory decisions;       ///< i32 per item: the survey's verdict, read by the pack
  soaheap::detail::Memory words;           ///< the step's device words (StepWords)
  HostWords mirror;                        ///< what the host reads after a wait (StepWords::mirror_*)
  HostWords upload;                        ///< the host's receive offsets on their way to the device
  soaheap::detail::Memory send_buffer;
  soaheap::detail::Memory receive_buffer;
  soaheap::detail::Memory fresh_blocks;    ///< u32 per group of arrivals (fresh_blocks placement)
  const Transport* agreed_with = nullptr;  ///< the transport whose ranks were found to hold the same heap type

  static void grow(soaheap::detail::Memory& memory, Backend backend, std::uint64_t bytes) {
    if (memory.bytes() < bytes) memory = soaheap::detail::Memory(backend, bytes + bytes / 4);
  }
};

/// Word layout of one step over `classes` classes and `ranks` ranks, in MigrationScratch::words
/// (device) and ::mirror / ::upload (host-visible).
struct StepWords {
  std::uint64_t classes, ranks;
  std::uint64_t counts() const { return 0; }                          ///< [classes][ranks] objects leaving
  std::uint64_t cursors() const { return classes * ranks; }           ///< [classes][ranks]
  std::uint64_t bytes() const { return 2 * classes * ranks; }         ///< [ranks][classes] message bytes
  std::uint64_t send_offsets() const { return 3 * classes * ranks; }  ///< [classes][ranks]
  std::uint64_t plan() const { return 4 * classes * ranks; }          ///< total send bytes, held
  std::uint64_t counters() const { return plan() + 2; }               ///< [classes] MigrationCounters
  std::uint64_t claimed() const { return counters() + classes * kCounterWords; }  ///< [classes]
  std::uint64_t zeroed_end() const { return claimed() + classes; }    ///< the words StartStepKernel sets
  std::uint64_t received_first() const { return zeroed_end(); }       ///< [classes][ranks + 1] (uploaded)
  std::uint64_t received_offsets() const { return received_first() + classes * (ranks + 1); }  ///< [classes][ranks]
  std::uint64_t total() const { return received_offsets() + classes * ranks; }
  std::uint64_t uploaded() const { return total() - received_first(); }
  // The mirror: counts and plan (published before the first wait), the recorded departures, then
  // the counters (published before the last).
  std::uint64_t mirror_counts() const { return 0; }
  std::uint64_t mirror_plan() const { return classes * ranks; }
  std::uint64_t mirror_recorded() const { return mirror_plan() + 2; }
  std::uint64_t mirror_counters() const { return mirror_recorded() + 1; }
  std::uint64_t mirror_total() const { return mirror_counters() + classes * kCounterWords; }
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

/// The number of concrete classes of the heap that are T or derive from T.
template <class T, class... Classes>
constexpr int concrete_subclass_count(const Heap<Classes...>*) {
  return (0 + ... + ((std::is_base_of_v<T, Classes> && !Classes::kAbstract) ? 1 : 0));
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

/// Waits for the heap's kernels (throwing what they recorded) and counts the wait.
template <class HeapT>
void wait_for_device(const HeapT& heap, MigrationStats& stats) {
  ++stats.host_syncs;
  heap.synchronize();
}

/// One migration step for every concrete class of T; make_items(tag, k) gives the items of class
/// k (C = *tag) and how many there are. All classes are surveyed, and their messages planned and
/// packed on the device, before the one wait that brings the counts to the host; the counts of all
/// classes go to the other ranks in one exchange, all messages to one rank in one message, then
/// every class is unpacked, and a second wait reads what the step reports. A pack held back because
/// the send buffer was too small costs one more wait, after the buffer has grown.
/// @p recorded: the departure list's count (published for the caller), or nullptr; @p clear: a
/// device word zeroed once the step is done with the items (the departure count), or nullptr.
/// Failures of the step itself throw; what it reports about the objects (after the exchange, which
/// every rank completed) is returned, to be thrown by the caller.
template <class T, class HeapT, class MakeItems, class Links>
std::exception_ptr migration_step(HeapT& heap, Transport& transport, std::uint64_t decision_words,
                                  const std::uint64_t* recorded, std::uint64_t* clear, const MakeItems& make_items,
                                  const Links& links, const MigrationOptions& options, MigrationStats& stats,
                                  std::uint64_t* recorded_out) {
  using View = ::soaheap::detail::internals_t<HeapT>;
  constexpr int kClasses = concrete_subclass_count<T>(static_cast<const HeapT*>(nullptr));
  const int ranks = transport.size();
  const int rank = transport.rank();
  const auto R = static_cast<std::size_t>(ranks);
  const Backend backend = heap.backend();
  MigrationScratch& scratch = ::soaheap::detail::InternalsAccess::attachment<MigrationScratch>(heap);
  stats.sent_to.assign(R, 0);
  stats.received_from.assign(R, 0);
  if constexpr (kClasses == 0) {
    (void)decision_words, (void)recorded, (void)clear, (void)make_items, (void)links, (void)options, (void)recorded_out;
    return nullptr;
  } else {
    const StepWords layout{static_cast<std::uint64_t>(kClasses), static_cast<std::uint64_t>(ranks)};
    // Sized at the first step of this heap, class set and communicator; kept afterwards.
    MigrationScratch::grow(scratch.decisions, backend, (decision_words + 1) * sizeof(std::int32_t));
    MigrationScratch::grow(scratch.words, backend, layout.total() * sizeof(std::uint64_t));
    if (scratch.mirror.size() < layout.mirror_total()) scratch.mirror = HostWords(backend, layout.mirror_total());
    if (scratch.upload.size() < layout.uploaded()) scratch.upload = HostWords(backend, layout.uploaded());
    std::uint64_t* words = scratch.words.template as<std::uint64_t>();
    std::uint64_t* mirror = scratch.mirror.host();
    auto* decisions = scratch.decisions.template as<std::int32_t>();
    const View view = ::soaheap::detail::internals(heap);
    const auto row = [&](std::uint64_t base, int k) { return words + base + static_cast<std::uint64_t>(k) * R; };
    const auto counters_of = [&](int k) {
      return reinterpret_cast<MigrationCounters*>(words + layout.counters() + static_cast<std::uint64_t>(k) * kCounterWords);
    };
    const auto publish = [&](std::uint64_t from, std::uint64_t to, std::uint64_t count) {
      heap.launch(count, CopyWordsKernel{words + from, scratch.mirror.device() + to});
    };

    // 1. survey every class; message sizes, plan and pack on the device
    heap.launch(layout.zeroed_end(), StartStepKernel{words, layout.counters(), layout.claimed()});
    int k = 0;
    for_each_concrete_subclass<T>(heap, [&](auto* tag) {
      using C = std::remove_pointer_t<decltype(tag)>;
      const auto items = make_items(tag, k);
      using Items = std::remove_cv_t<decltype(items.first)>;
      if (items.second > 0)
        heap.launch(items.second, SurveyKernel<View, C, Items, Links>{view, items.first, decisions, row(layout.counts(), k),
                                                                    counters_of(k), links, rank, ranks});
      heap.launch(R, MessageBytesKernel<C>{row(layout.counts(), k), words + layout.bytes(), k, kClasses});
      ++k;
    });
    const auto plan_and_pack = [&] {
      heap.launch(1, PlanKernel<View>{view, words + layout.bytes(), words + layout.send_offsets(), words + layout.plan(),
                                      scratch.send_buffer.bytes(), ranks, kClasses});
      int c = 0;
      for_each_concrete_subclass<T>(heap, [&](auto* tag) {
        using C = std::remove_pointer_t<decltype(tag)>;
        const auto items = make_items(tag, c);
        using Items = std::remove_cv_t<decltype(items.first)>;
        if (items.second > 0)
          heap.launch(items.second, PackKernel<View, C, Items, Links>{view, items.first, decisions, row(layout.counts(), c),
                                                                    row(layout.send_offsets(), c), row(layout.cursors(), c),
                                                                    scratch.send_buffer.template as<unsigned char>(),
                                                                    words + layout.plan() + 1, links});
        ++c;
      });
      publish(layout.plan(), layout.mirror_plan(), 2);
    };
    plan_and_pack();
    publish(layout.counts(), layout.mirror_counts(), static_cast<std::uint64_t>(kClasses) * R);
    if (recorded != nullptr) heap.launch(1, CopyWordsKernel{recorded, scratch.mirror.device() + layout.mirror_recorded()});
    wait_for_device(heap, stats);  // the first wait: earlier kernels' errors surface here, before anything moved
    if (recorded_out != nullptr) *recorded_out = mirror[layout.mirror_recorded()];
    const std::uint64_t send_total = mirror[layout.mirror_plan()];
    if (mirror[layout.mirror_plan() + 1] != 0) {
      // The messages outgrew the send buffer: nothing was packed. Grow it and pack again.
      MigrationScratch::grow(scratch.send_buffer, backend, send_total + 16);
      plan_and_pack();
      wait_for_device(heap, stats);
      if (mirror[layout.mirror_plan() + 1] != 0)
        throw error("soaheap: migrate: the pack was held back again after its buffer grew (rank " +
                    std::to_string(rank) + ")");
    }

    // 2. the counts of all classes in one exchange, then one message to and from each rank
    std::vector<std::uint64_t> send_rows(R * kClasses, 0), receive_rows(R * kClasses, 0);
    for (std::size_t p = 0; p < R; ++p)
      for (int c = 0; c < kClasses; ++c) send_rows[p * kClasses + c] = mirror[layout.mirror_counts() + c * R + p];
    transport.exchange_count_rows(send_rows.data(), receive_rows.data(), kClasses);
    for (int c = 0; c < kClasses; ++c) receive_rows[static_cast<std::size_t>(rank) * kClasses + c] = 0;
    std::vector<std::uint64_t> send_bytes(R * kClasses, 0), receive_bytes(R * kClasses, 0);
    k = 0;
    for_each_concrete_subclass<T>(heap, [&](auto* tag) {
      using C = std::remove_pointer_t<decltype(tag)>;
      for (std::size_t p = 0; p < R; ++p) {
        send_bytes[p * kClasses + k] = WireLayout<C>::message_bytes(send_rows[p * kClasses + k]);
        receive_bytes[p * kClasses + k] = WireLayout<C>::message_bytes(receive_rows[p * kClasses + k]);
      }
      ++k;
    });
    std::uint64_t receive_total = 0;
    for (const std::uint64_t bytes : receive_bytes) receive_total += bytes;
    MigrationScratch::grow(scratch.receive_buffer, backend, receive_total + 16);
    // Where each class's arrivals start, per peer: prefix sums of counts and of bytes (by peer, then class).
    std::uint64_t* upload = scratch.upload.host();
    std::vector<std::uint64_t> received(static_cast<std::size_t>(kClasses), 0);
    std::vector<Message> sends, receives;
    std::uint64_t send_offset = 0, receive_offset = 0;
    for (std::size_t p = 0; p < R; ++p) {
      std::uint64_t send_length = 0, receive_length = 0;
      for (int c = 0; c < kClasses; ++c) {
        const std::size_t at = p * kClasses + c;
        upload[c * (R + 1) + p] = received[c];
        upload[layout.received_offsets() - layout.received_first() + c * R + p] = receive_offset + receive_length;
        received[c] += receive_rows[at];
        send_length += send_bytes[at];
        receive_length += receive_bytes[at];
        stats.sent_to[p] += send_rows[at];
        stats.received_from[p] += receive_rows[at];
        stats.sent += send_rows[at];
        stats.received += receive_rows[at];
      }
      if (send_length > 0)
        sends.push_back({static_cast<int>(p), scratch.send_buffer.template as<unsigned char>() + send_offset, send_length});
      if (receive_length > 0)
        receives.push_back(
            {static_cast<int>(p), scratch.receive_buffer.template as<unsigned char>() + receive_offset, receive_length});
      send_offset += send_length;
      receive_offset += receive_length;
    }
    for (int c = 0; c < kClasses; ++c) upload[c * (R + 1) + R] = received[c];
    if (send_offset != send_total)
      throw error("soaheap: migrate: the host sized " + std::to_string(send_offset) + " bytes of messages, the device " +
                  std::to_string(send_total));
    stats.bytes_sent += send_total;
    stats.bytes_received += receive_total;
    heap.launch(layout.uploaded(), CopyWordsKernel{scratch.upload.device(), words + layout.received_first()});
    transport.exchange(sends, receives);

    // 3. unpack every class
    std::uint64_t groups_total = 0;
    if (options.placement == MigrationPlacement::fresh_blocks) {
      k = 0;
      for_each_concrete_subclass<T>(heap, [&](auto* tag) {
        using C = std::remove_pointer_t<decltype(tag)>;
        groups_total += (received[k++] + HeapT::template capacity<C> - 1) / HeapT::template capacity<C>;
      });
      MigrationScratch::grow(scratch.fresh_blocks, backend, groups_total * sizeof(std::uint32_t) + 16);
    }
    std::uint64_t group_base = 0;
    k = 0;
    for_each_concrete_subclass<T>(heap, [&](auto* tag) {
      using C = std::remove_pointer_t<decltype(tag)>;
      constexpr int kCapacity = HeapT::template capacity<C>;
      const std::uint64_t arrivals = received[k];
      const std::uint32_t* fresh_blocks = nullptr;
      if (arrivals > 0 && options.placement == MigrationPlacement::fresh_blocks) {
        const std::uint64_t groups = (arrivals + kCapacity - 1) / kCapacity;
        std::uint32_t* blocks = scratch.fresh_blocks.template as<std::uint32_t>() + group_base;
        group_base += groups;
        heap.launch(groups, FillWordsKernel<std::uint32_t>{blocks, kNoFreshBlock});
        heap.launch(view.block_words(),
                    ClaimFreshBlocksKernel<View, C>{view, words + layout.claimed() + k, blocks, groups, arrivals});
        fresh_blocks = blocks;
      }
      if (arrivals > 0)
        heap.launch(arrivals, UnpackKernel<View, C, Links>{view, words + layout.received_first() + static_cast<std::uint64_t>(k) * (R + 1),
                                                           row(layout.received_offsets(), k),
                                                           scratch.receive_buffer.template as<unsigned char>(),
                                                           counters_of(k), links, ranks, fresh_blocks});
      ++k;
    });
    publish(layout.counters(), layout.mirror_counters(), static_cast<std::uint64_t>(kClasses) * kCounterWords);
    if (clear != nullptr) heap.launch(1, FillWordsKernel<std::uint64_t>{clear, 0});
    std::string out_of_memory_message;
    try {
      wait_for_device(heap, stats);  // the second wait: the step's reports
    } catch (const out_of_memory& failure) {
      out_of_memory_message = failure.what();  // the kernels ran to their end; the counters are final
    }

    // 4. reports, first class first
    std::exception_ptr first_error;
    if (!out_of_memory_message.empty()) {
      std::string lost;
      k = 0;
      for_each_concrete_subclass<T>(heap, [&](auto* tag) {
        using C = std::remove_pointer_t<decltype(tag)>;
        MigrationCounters result{};
        std::memcpy(&result, mirror + layout.mirror_counters() + static_cast<std::size_t>(k) * kCounterWords, sizeof(result));
        if (result.not_created > 0)
          lost += (lost.empty() ? "" : ", ") + std::to_string(result.not_created) + " of " + std::to_string(received[k]) +
                  " " + C::kName;
        ++k;
      });
      first_error = std::make_exception_ptr(out_of_memory(out_of_memory_message + "; " + lost +
                                                          " objects migrating to rank " + std::to_string(rank) +
                                                          " were lost"));
    }
    k = 0;
    for_each_concrete_subclass<T>(heap, [&](auto* tag) {
      using C = std::remove_pointer_t<decltype(tag)>;
      MigrationCounters result{};
      std::memcpy(&result, mirror + layout.mirror_counters() + static_cast<std::size_t>(k) * kCounterWords, sizeof(result));
      ++k;
      if (first_error) return;
      const std::string where = std::string(" (rank ") + std::to_string(rank) + " of " + std::to_string(ranks) +
                                ", class " + C::kName + ")";
      if (result.bad_destinations > 0)
        first_error = std::make_exception_ptr(invalid_argument(
            "soaheap: migrate: destination() returned " + std::to_string(result.first_bad_destination) +
            ", which is not a rank in [0, " + std::to_string(ranks) + "), for " + std::to_string(result.bad_destinations) +
            " objects; they stayed" + where));
      else if (result.untranslated > 0)
        first_error = std::make_exception_ptr(usage_error(
            "soaheap: migrate: " + std::to_string(result.untranslated) +
            " objects hold a pointer that the links could not translate (first in field " +
            std::to_string(result.first_untranslated_field) + " of the class, inherited fields first); they stayed" + where));
      else if (result.unlinked > 0)
        first_error = std::make_exception_ptr(usage_error(
            "soaheap: migrate: " + std::to_string(result.unlinked) +
            " pointers arrived as names the links could not resolve on this rank; they were set to null" + where));
    });
    return first_error;
  }
}

}  // namespace detail

}  // namespace soaheap::distributed
