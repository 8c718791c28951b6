#pragma once
/// @file detail/compaction_plan.cuh
/// @brief The one-shot compaction plan (CompactionStrategy::plan): which blocks of a class give
///        objects away, which receive them, and where every moved object goes, computed on the
///        device from the blocks' fill levels in one go, so that every object moves at most once and
///        the pointers are rewritten in one scan.
///
/// The members are the candidates (DefragTarget::bound: fill <= n/(n+1)) or every block with a free
/// slot (DefragTarget::minimum). With r members holding L objects, K = ceil(L/N) blocks suffice, so
/// the s = r - K emptiest members (ordered by fill; a histogram of the fills decides, no sort) give
/// all their objects away and are freed. The next member in fill order, the "remainder", ends with
/// R = L - (K-1)·N objects (it gives its surplus or receives what it lacks); every other member is
/// filled up. Afterwards all kept members are full except the remainder, so the class has the
/// fewest blocks its members allow and at most one of them partly filled: at least the paper's
/// guarantee (fragmentation <= 1/(n+1) with k1 = 0) for the candidates, and ceil(live/N) blocks
/// for the minimum target.
///
/// Destinations: per block, `give` and `receive` counts are scanned (exclusive prefix sums in block
/// id order). The g-th given object (donors in address order, a donor's given objects in slot
/// order) goes to the g-th receiving slot (receivers in address order, free slots in slot order):
/// objects of low-address donors land in low-address receivers, so the order of the objects in
/// memory is kept as far as the move allows. Each thread of the copy finds its donor and receiver by
/// binary search in the scans (neighbouring threads search the same path, so these loads are shared).
///
/// A donor gives its highest-ranked objects (all of them for a freed block). The copy leaves the new
/// pointer of a moved object in the old slot's own first 8-byte-aligned field of 8·k bytes, which no
/// other thread reads, so copy and forwarding are one kernel; the copy also clears the donor's
/// allocation bits, so the rewrite scan sees only objects that stayed and the moved ones at their
/// new place. Classes without such a field, and RewriteStrategy::records, recompute the destination
/// of a pointer from the scans instead.
///
/// Locality windows (DefragOptions::locality_window): each window of consecutive block ids gets its
/// own histogram and decision. Gives and receives balance inside every window, so the same global
/// scans map each window's given objects onto its own receiving slots: nothing leaves its window.

#include <soaheap/core/detail/kernels.cuh>
#include <soaheap/core/heap_view.cuh>
#include <soaheap/defrag/detail/copy_objects.cuh>
#include <soaheap/defrag/detail/pass_plan.cuh>
#include <soaheap/defrag/detail/state_update.cuh>
#include <soaheap/reflection/class_traits.cuh>

#include <cstdint>
#include <utility>

namespace soaheap::detail {

/// Objects a block gives away and objects it receives (never both).
struct PlanFlow {
  std::uint64_t give;
  std::uint64_t receive;
};

/// Adds flows (the operator of the prefix sums over them).
struct AddFlows {
  SOAHEAP_HD PlanFlow operator()(const PlanFlow& a, const PlanFlow& b) const {
    return {a.give + b.give, a.receive + b.receive};
  }
};

/// Counters of one compacted class, in the backend's memory; zeroed at the start of a run and read
/// by the host once, at its end.
struct PlanCounts {
  // Survey (before anything moves).
  std::uint64_t listed;              ///< allocated blocks of the class (and the length of its block list)
  std::uint64_t used_before;         ///< live objects of the class
  std::uint64_t candidates_before;   ///< blocks in defrag[C]
  std::uint64_t members;             ///< r: blocks the plan compacts
  // Decision, summed over windows.
  std::uint64_t sources;             ///< s: members emptied and freed
  std::uint64_t moved;               ///< objects moved
  std::uint64_t working_blocks;      ///< `listed` when the plan moves anything, else 0 (sizes later kernels)
  // After the run.
  std::uint64_t allocated_after;
  std::uint64_t used_after;
  std::uint64_t candidates_after;
};

/// The plan of one window of consecutive block ids (the whole heap unless locality is asked for):
/// its members are compacted among themselves, so every object stays inside its window.
struct WindowPlan {
  static constexpr int kFillLevels = kSlotsPerBlock + 1;
  std::uint64_t members;             ///< r
  std::uint64_t member_objects;      ///< L
  std::uint64_t fill_histogram[kFillLevels];
  std::uint64_t sources;             ///< s: members emptied and freed
  std::uint64_t split_fill;          ///< fill level of the member at fill-order position s
  std::uint64_t split_first;         ///< fill-order position of the first member of that level
  std::uint64_t split_ticket;        ///< ranks the members of the split level among themselves
  std::uint64_t remainder_keep;      ///< R: objects the remainder member ends with
};

/// Index of the first field of C whose SOA element can hold a forwarding pointer in place (8-byte
/// aligned, a multiple of 8 bytes), or -1.
template <class C, class FieldList, int... Fields>
constexpr int in_place_forwarding_field_impl(int capacity, std::integer_sequence<int, Fields...>) {
  int found = -1;
  ((found = found < 0 && sizeof(type_at_t<FieldList, Fields>) % 8 == 0 &&
                    soa_array_offset<FieldList, Fields>(capacity) % 8 == 0
                ? Fields
                : found),
   ...);
  return found;
}
template <class View, class C>
inline constexpr int in_place_forwarding_field_v = in_place_forwarding_field_impl<C, all_field_types_t<C>>(
    View::Layout::template capacity<C>, std::make_integer_sequence<int, all_field_types_t<C>::size>{});

/// Trivially copyable description of the plan of one class, passed to all its kernels.
template <class View>
struct CompactionPlan {
  View view;
  PlanCounts* counts;
  WindowPlan* windows;         ///< [ceil(M / window_blocks)], zero before the survey
  std::uint64_t window_blocks = 1;  ///< blocks per window: M, or a multiple of 64 (a warp's blocks share one)
  PlanFlow* flows;             ///< [M] per block, written by PlanRolesKernel
  PlanFlow* offsets;           ///< [M] exclusive prefix sums of flows
  std::uint64_t* frozen;       ///< [M] allocation bitmap of each member before anything moved
  std::uint32_t* class_blocks; ///< [M] allocated blocks of the class, in no particular order
  std::uint64_t* donor_bits;   ///< [ceil(M/64)] bit per block that gives objects away (zero before the roles)
  std::uint64_t* partial_bits; ///< [ceil(M/64)] bit per donor that keeps some of its objects (at most one per window)
  int class_index = 0;
  int capacity = 1;
  bool minimum = false;        ///< members: every block with a free slot (else: the candidates)
  long long retained = 0;      ///< k1: nothing happens with at most this many members
  long long min_sources = 1;   ///< nothing happens with fewer sources

  SOAHEAP_HD std::uint64_t full_mask() const { return low_bits(capacity); }
  SOAHEAP_HD WindowPlan& window_of(std::uint64_t block) const { return windows[block / window_blocks]; }

  /// Fill level of @p block of the class if it is a member, else -1.
  SOAHEAP_HD int member_fill(std::uint64_t block, std::uint64_t allocation) const {
    const int fill = popcount(allocation & full_mask());
    if (minimum) return fill < capacity ? fill : -1;
    return view.defrag_candidates(class_index).get(block) ? fill : -1;
  }

  /// Last block whose offset (give or receive) is at most @p g: the block that owns the g-th unit.
  template <std::uint64_t PlanFlow::*Member>
  SOAHEAP_HD std::uint64_t owner_of(std::uint64_t g) const {
    std::uint64_t low = 0;
    std::uint64_t high = view.block_count;
    while (high - low > 1) {
      const std::uint64_t middle = low + (high - low) / 2;
      if (offsets[middle].*Member <= g) {
        low = middle;
      } else {
        high = middle;
      }
    }
    return low;
  }

  /// Rank (in slot order) of the first object that @p donor gives away.
  SOAHEAP_HD int first_given_rank(std::uint64_t donor) const {
    return popcount(frozen[donor]) - static_cast<int>(flows[donor].give);
  }

  /// Block and slot that receive the @p g-th moved object.
  SOAHEAP_HD void destination_of(std::uint64_t g, std::uint64_t& block, int& slot) const {
    block = this->template owner_of<&PlanFlow::receive>(g);
    const int rank = static_cast<int>(g - offsets[block].receive);
    slot = select_set_bit(~frozen[block] & full_mask(), rank);
  }

  /// New pointer bits of the object in @p slot of donor @p block (which gave it away).
  SOAHEAP_HD std::uint64_t recomputed_destination(std::uint64_t block, int slot) const {
    const int rank = popcount(frozen[block] & low_bits(slot)) - first_given_rank(block);
    std::uint64_t to_block = 0;
    int to_slot = 0;
    destination_of(offsets[block].give + static_cast<std::uint64_t>(rank), to_block, to_slot);
    return view.make_pointer_bits(to_block, to_slot, class_index);
  }
};

/// Step 1, one thread per block of the heap: lists the class's allocated blocks, counts its objects
/// and candidates, and the members with their fill histogram. Every lane reaches every counter
/// (adding 0 when its block does not count) so that whole warps add with one atomic.
template <class View>
struct PlanSurveyKernel {
  CompactionPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t block) const {
    const View& view = plan.view;
    PlanCounts& counts = *plan.counts;
    const bool listed = view.allocated_blocks(plan.class_index).get(block);
    const std::uint64_t allocation = listed ? atomic_load(&view.headers[block].allocation) : 0;
    const std::uint64_t position = aggregated_fetch_add(&counts.listed, listed ? 1 : 0);
    if (listed) plan.class_blocks[position] = static_cast<std::uint32_t>(block);
    aggregated_add(&counts.used_before, static_cast<std::uint64_t>(popcount(allocation & plan.full_mask())));
    const bool candidate = listed && view.defrag_candidates(plan.class_index).get(block);
    aggregated_add(&counts.candidates_before, candidate ? 1 : 0);
    const int fill = listed ? plan.member_fill(block, allocation) : -1;
    const std::uint64_t member = fill >= 0 ? 1 : 0;
    aggregated_add(&counts.members, member);
    WindowPlan& window = plan.window_of(block);
    aggregated_add(&window.members, member);
    aggregated_add(&window.member_objects, fill >= 0 ? static_cast<std::uint64_t>(fill) : 0);
    // A few bins take nearly every member: one atomic per bin and warp, not per member.
    aggregated_add(&window.fill_histogram[fill >= 0 ? fill : 0], member);
  }
};

/// Step 2, one thread per window: how many members to empty, and the split fill level (see the
/// file comment); k1 and the minimum sources apply per window.
template <class View>
struct PlanDecisionKernel {
  CompactionPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t window_index) const {
    WindowPlan& window = plan.windows[window_index];
    const std::uint64_t capacity = static_cast<std::uint64_t>(plan.capacity);
    const std::uint64_t members = window.members;
    const std::uint64_t objects = window.member_objects;
    const std::uint64_t needed = (objects + capacity - 1) / capacity;  // K
    const std::uint64_t sources = members - needed;
    window.split_fill = WindowPlan::kFillLevels;  // no split level: every member is a source
    if (static_cast<long long>(members) <= plan.retained || sources == 0 ||
        static_cast<long long>(sources) < plan.min_sources)
      return;
    std::uint64_t position = 0;
    std::uint64_t given = 0;
    for (int fill = 0; fill < WindowPlan::kFillLevels; ++fill) {
      const std::uint64_t level = window.fill_histogram[fill];
      if (position + level > sources) {
        window.split_fill = static_cast<std::uint64_t>(fill);
        window.split_first = position;
        given += (sources - position) * static_cast<std::uint64_t>(fill);
        break;
      }
      position += level;
      given += level * static_cast<std::uint64_t>(fill);
    }
    if (needed > 0) {
      window.remainder_keep = objects - (needed - 1) * capacity;
      if (window.split_fill > window.remainder_keep) given += window.split_fill - window.remainder_keep;
    }
    window.sources = sources;
    PlanCounts& counts = *plan.counts;
    atomic_fetch_add(&counts.sources, sources);
    atomic_fetch_add(&counts.moved, given);
    atomic_store(&counts.working_blocks, atomic_load(&counts.listed));  // the same value from every window
  }
};

/// Step 3, one thread per block of the heap: each member's role and flow; frozen bitmaps. Every
/// flow entry is written, so the scans need no zeroed buffer. Donors are marked in donor_bits, and
/// the one donor of a window that keeps some objects (the remainder) also in partial_bits.
template <class View>
struct PlanRolesKernel {
  CompactionPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t block) const {
    WindowPlan& window = plan.window_of(block);
    int fill_level = -1;
    if (plan.counts->working_blocks != 0 && plan.view.allocated_blocks(plan.class_index).get(block)) {
      const std::uint64_t allocation = atomic_load(&plan.view.headers[block].allocation) & plan.full_mask();
      fill_level = plan.member_fill(block, allocation);
      if (fill_level >= 0) plan.frozen[block] = allocation;
    }
    const bool moves = fill_level >= 0 && window.sources != 0;  // else this window moves nothing (others do)
    const std::uint64_t fill = static_cast<std::uint64_t>(fill_level);
    // The members of the split level are ranked among themselves by a ticket; every lane takes
    // part (adding 0 if it is not one) so that a warp draws its tickets with one atomic.
    const bool at_split = moves && fill == window.split_fill;
    const std::uint64_t ticket = aggregated_fetch_add(&window.split_ticket, at_split ? 1 : 0);
    PlanFlow flow{0, 0};
    if (moves) {
      const std::uint64_t capacity = static_cast<std::uint64_t>(plan.capacity);
      std::uint64_t position = 0;  // in fill order; only its relation to s matters
      if (fill > window.split_fill) {
        position = window.sources + 1;
      } else if (at_split) {
        position = window.split_first + ticket;
      }
      if (position < window.sources) {
        flow.give = fill;
      } else if (position == window.sources) {
        const std::uint64_t keep = window.remainder_keep;
        flow.give = fill > keep ? fill - keep : 0;
        flow.receive = fill > keep ? 0 : keep - fill;
      } else {
        flow.receive = capacity - fill;
      }
      if (flow.give != 0) set_bit(plan.donor_bits, block);
      if (flow.give != 0 && flow.give < fill) set_bit(plan.partial_bits, block);
    }
    plan.flows[block] = flow;
  }
  SOAHEAP_HD static void set_bit(std::uint64_t* bits, std::uint64_t block) {
    atomic_fetch_or(&bits[block / 64], std::uint64_t{1} << (block % 64));
  }
};

/// Address in @p block of the in-place forwarding pointer of @p slot (class C, field Field).
template <class View, class C, int Field>
SOAHEAP_HD inline std::uint64_t* in_place_forwarding_pointer(const View& view, std::uint64_t block, int slot) {
  using FieldList = all_field_types_t<C>;
  using FieldType = type_at_t<FieldList, Field>;
  constexpr std::uint64_t kOffset = soa_array_offset<FieldList, Field>(View::Layout::template capacity<C>);
  return reinterpret_cast<std::uint64_t*>(view.data_address(block) + kOffset +
                                          static_cast<std::uint64_t>(slot) * sizeof(FieldType));
}

/// Step 5, one thread per moved object: copies it to its destination and leaves its forwarding
/// pointer in place (Field >= 0). The thread of a donor's first given object clears all the donor's
/// given bits, the thread of a receiver's first received slot sets all its received bits: one
/// atomic per block instead of two per object on words that up to 64 threads share.
template <class View, class C, int Field>
struct PlanCopyKernel {
  CompactionPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t g) const {
    const View& view = plan.view;
    const std::uint64_t donor = plan.template owner_of<&PlanFlow::give>(g);
    const std::uint64_t frozen = plan.frozen[donor];
    const int first_rank = plan.first_given_rank(donor);
    const int given_index = static_cast<int>(g - plan.offsets[donor].give);
    const int from_slot = select_set_bit(frozen, first_rank + given_index);
    std::uint64_t to_block = 0;
    int to_slot = 0;
    plan.destination_of(g, to_block, to_slot);
    ObjectCopy<View, C>::copy(view.data_address(donor), from_slot, view.data_address(to_block), to_slot);
    if constexpr (Field >= 0)
      *in_place_forwarding_pointer<View, C, Field>(view, donor, from_slot) =
          view.make_pointer_bits(to_block, to_slot, plan.class_index);
    if (given_index == 0)  // the donor gives its objects from this slot upwards
      atomic_fetch_and(&view.headers[donor].allocation, ~(frozen & ~low_bits(from_slot)));
    if (g == plan.offsets[to_block].receive) {  // the receiver fills its lowest free slots
      const std::uint64_t free_slots = ~plan.frozen[to_block] & plan.full_mask();
      const int last_slot = select_set_bit(free_slots, static_cast<int>(plan.flows[to_block].receive) - 1);
      atomic_fetch_or(&view.headers[to_block].allocation, free_slots & low_bits(last_slot + 1));
    }
  }
};

/// Where the plan's moved objects went, for the rewrite: read from the forwarding pointer the copy
/// left in the old slot (Field >= 0) or recomputed from the scans (Field < 0). Bits per block
/// (M/8 bytes each, cache-resident; nothing writes them during the rewrite, so they are read
/// through the read-only cache) reject most pointers before any other load.
template <class View, class C, int Field>
struct PlanRelocation {
  CompactionPlan<View> plan;
  /// The copy cleared the bits of moved objects, so no holder block needs skipping.
  SOAHEAP_HD bool holder_block_moved_away(std::uint64_t) const { return false; }
  /// 1 for a donor, 3 for the donor that may have kept the object (a window's remainder), else 0.
  SOAHEAP_HD unsigned moved_state(std::uint64_t block) const {
    return (read_only_bit(plan.donor_bits, block) ? 1u : 0u) | (read_only_bit(plan.partial_bits, block) ? 2u : 0u);
  }
  SOAHEAP_HD std::uint64_t moved_to(std::uint64_t pointer, std::uint64_t block, unsigned state) const {
    const int slot = slot_of(pointer);
    // Every donor but the remainder of a window gave all its objects: no header to read.
    if ((state & 2u) != 0 && ((plan.view.headers[block].allocation >> slot) & 1u) != 0) return pointer;  // stayed
    if constexpr (Field >= 0) {
      return *in_place_forwarding_pointer<View, C, Field>(plan.view, block, slot);
    } else {
      return plan.recomputed_destination(block, slot);
    }
  }
};

/// Step 7, one thread per block of the class's list: emptied donors become free, other members get
/// active/defrag from their new fill level.
template <class View>
struct PlanStateKernel {
  CompactionPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint64_t block = plan.class_blocks[index];
    const PlanFlow flow = plan.flows[block];
    if (flow.give == 0 && flow.receive == 0) return;
    if (atomic_load(&plan.view.headers[block].allocation) == 0) {
      release_emptied_block(plan.view, block, plan.class_index);
    } else {
      plan.view.refresh_block_state(block, plan.class_index);
    }
  }
};

/// Step 8, one thread per block of the class's list: the class's occupancy after the run (every
/// lane adds, 0 for a block no longer allocated, so that whole warps add with one atomic).
template <class View>
struct PlanAfterKernel {
  CompactionPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint64_t block = plan.class_blocks[index];
    const bool allocated = plan.view.allocated_blocks(plan.class_index).get(block);
    PlanCounts& counts = *plan.counts;
    aggregated_add(&counts.allocated_after, allocated ? 1 : 0);
    const std::uint64_t allocation = allocated ? atomic_load(&plan.view.headers[block].allocation) : 0;
    aggregated_add(&counts.used_after, static_cast<std::uint64_t>(popcount(allocation & plan.full_mask())));
    const bool candidate = allocated && plan.view.defrag_candidates(plan.class_index).get(block);
    aggregated_add(&counts.candidates_after, candidate ? 1 : 0);
  }
};

/// One thread per block of the heap: lists the allocated blocks of @p class_index (holders whose
/// pointer fields the rewrite scans) and counts them into *count (zero before); lists nothing when
/// *working is 0 (the plan moves nothing).
template <class View>
struct ListClassBlocksKernel {
  View view;
  int class_index;
  std::uint32_t* ids;
  std::uint64_t* count;
  const std::uint64_t* working;
  const std::uint64_t* skipped = nullptr;  ///< a bit per block not to list (an ordered run's old blocks)
  SOAHEAP_HD void operator()(std::uint64_t block) const {
    const bool listed = *working != 0 && view.allocated_blocks(class_index).get(block) &&
                        (skipped == nullptr || !read_only_bit(skipped, block));
    const std::uint64_t position = aggregated_fetch_add(count, listed ? 1 : 0);  // whole warps add
    if (listed) ids[position] = static_cast<std::uint32_t>(block);
  }
};

/// Zeroes @p words 64-bit words (a kernel, so that it stays in stream order without a host wait).
struct ZeroWordsKernel {
  std::uint64_t* words;
  SOAHEAP_HD void operator()(std::uint64_t index) const { words[index] = 0; }
};

}  // namespace soaheap::detail
