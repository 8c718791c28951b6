#pragma once
/// @file policy.hpp
/// @brief `DefragPolicy`: when to defragment (paper §3.7). An application calls
///        `policy.maybe_defrag(heap, iteration)` once after each iteration's kernels; the policy
///        decides from its DefragConfig whether and which classes to defragment, logs it, and
///        returns the results of the runs it started.
///
/// Policies:
///  - manual: never (the program calls soaheap::defragment<T>(heap) itself);
///  - every:  every m iterations (iteration > 0 and iteration % m == 0), each concrete class with
///            more than its k1 candidates;
///  - mass:   each concrete class whose candidate count reached k2·n/(n+1), with k2 an absolute
///            block count or a percentage of the heap's blocks (a larger n makes more blocks
///            candidates, hence the scaling);
///  - auto:   pays for itself. It keeps the runtime since its first call and the time its own work
///            took (statistics and defragmentation, measured after waiting for the application's
///            kernels, so only its own work counts). Only while that share, with the cost of a
///            look and of the cheapest known run added, stays below DefragConfig::auto_budget
///            (default 2 %) does it look at the heap (and, after looks that found nothing, only
///            every 2, 4, ... up to kAutoMaxLookInterval iterations); it then compacts
///            each concrete class to its minimum block count (plan strategy, target minimum) when
///            that frees at least 1/kAutoMinimumGain of the class's blocks and the last measured cost
///            of doing it for that class still fits into what the budget allowed when the look
///            started (a class never compacted before counts as free, so each class gets a first run).
///            Runs are judged by the second iteration after them (the first pays for allocations
///            into fresh blocks): when it is at least kAutoRunMinimumGain faster than the one
///            before them, they paid, are not charged to the budget, and the classes they
///            compacted may be compacted again without regard to it until a run does not pay.
/// n, k1, the minimum compactions and the locality window come per class from the configuration's
/// overrides; every run uses the plan compaction strategy.
///
/// Orders (ordered compaction, detail/ordered_run.cuh): the application defines, per class, named
/// orders (`define_order<Fish>(heap, "field:position", soaheap::order_by_pointer_field<&Agent::position>())`);
/// the first one defined is the class's default. Whenever a policy compacts a class with an order
/// (the configuration may name another defined order, or say "none"), it compacts it in that
/// order; without enough free blocks for that it compacts in place instead (logged). The auto
/// policy also reorders on its own: when the time lost to disorder since the last reorder exceeds
/// what a reorder costs, or when the interval learned from the last reorder that paid has passed
/// (see policy/auto_controller.hpp).
///
/// Memory (release_memory, on for auto; a growable heap): after its compactions a policy gives the
/// free memory at the heap's end back, but only once the heap has stopped growing for a few
/// iterations, a wait that doubles whenever a release is mapped again soon (policy/release_backoff.hpp);
/// auto's releases also wait for its budget, and are charged to it.
///
/// The auto policy's decisions are AutoController's (policy/auto_controller.hpp), a plain class fed
/// with times: this front-end reads the clock (the iterations between calls, its looks and runs)
/// and passes the figures in. Orders live in ClassOrders (policy/class_orders.hpp).

#include <soaheap/core/heap.cuh>
#include <soaheap/config/defrag_config.hpp>
#include <soaheap/defrag/defragment.cuh>
#include <soaheap/defrag/policy/auto_controller.hpp>
#include <soaheap/defrag/policy/class_orders.hpp>
#include <soaheap/defrag/policy/release_backoff.hpp>
#include <soaheap/defrag/trim.cuh>
#include <soaheap/base/log.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace soaheap {

namespace detail {

/// Calls f(type_tag<C>) for every concrete class C of the heap.
template <class... Classes, class Function>
void for_each_concrete_class(const Heap<Classes...>&, Function&& f) {
  using View = ::soaheap::detail::internals_t<Heap<Classes...>>;
  (
      [&] {
        if constexpr (!Classes::kAbstract) f(typename View::template type_tag<Classes>{});
      }(),
      ...);
}

template <class... Classes>
std::vector<ClassInfo> class_infos(const Heap<Classes...>&) {
  using HeapType = Heap<Classes...>;
  std::vector<ClassInfo> infos;
  for (int c = 0; c < HeapType::kClassCount; ++c) infos.push_back({HeapType::class_name(c), HeapType::capacity_of_class(c)});
  return infos;
}

}  // namespace detail

/// @brief Decides when to defragment which class, from a DefragConfig.
class DefragPolicy {
 public:
  /// @throw config_error when the policy lacks its parameter (every without m > 0, mass without k2)
  explicit DefragPolicy(DefragConfig config) : config_(std::move(config)), auto_(config_.auto_budget) {
    if (config_.policy == DefragPolicyKind::every && config_.every <= 0)
      throw config_error("soaheap: defrag policy 'every' needs defrag.every = m > 0 (got " +
                             std::to_string(config_.every) + ")",
                         "defrag.every");
    if (config_.policy == DefragPolicyKind::mass && !config_.mass_threshold.is_set())
      throw config_error("soaheap: defrag policy 'mass' needs defrag.mass_threshold = k2 (a block count or a "
                         "percentage of the heap)",
                         "defrag.mass_threshold");
  }

  const DefragConfig& config() const { return config_; }

  /// @brief Defines order @p name ("field:NAME" or "key:NAME") for concrete class C of @p heap's
  /// type; the first order defined for a class is its default (see the file comment).
  /// @throw invalid_argument for a malformed or already defined name
  template <class C, class Order, class HeapType>
  void define_order(const HeapType&, const std::string& name, const Order& order) {
    orders_.define<C, HeapType>(name, order);
  }

  /// @brief Defragments what the policy asks for at @p iteration (call it between kernels).
  /// @return one result per class that was defragmented, including the compactions that gave
  ///         memory back (release_memory); empty when no object moved
  /// @throw config_error when a per-class setting does not fit the heap (unknown class, n >= capacity)
  /// @throw usage_error while another operation on the heap is in flight
  template <class HeapType>
  std::vector<DefragResult> maybe_defrag(HeapType& heap, long long iteration) {
    std::vector<DefragResult> results;
    if (config_.policy == DefragPolicyKind::manual) return results;
    if (heap.growable()) release_backoff_.observe(iteration, heap.mapped_block_count());
    if (config_.policy == DefragPolicyKind::automatic) return maybe_defrag_automatically(heap, iteration);
    if (config_.policy == DefragPolicyKind::every && (iteration <= 0 || iteration % config_.every != 0)) {
      if (release_pending_) release_memory(heap, iteration, results);
      return results;
    }
    validate(config_, detail::class_infos(heap));
    // The candidate bitmaps must reflect each class's configured n before candidates are counted.
    detail::for_each_concrete_class(heap, [&](auto tag) {
      using C = detail::tag_type_t<decltype(tag)>;
      const int factor = config_.factor_for(C::kName);
      if (heap.defrag_factor(HeapType::template class_id<C>) != factor)
        heap.set_defrag_factor(HeapType::template class_id<C>, factor);
    });
    const HeapStats stats = heap.stats();
    const long long k2 = config_.mass_threshold.candidate_count(static_cast<long long>(heap.block_count()));

    detail::for_each_concrete_class(heap, [&](auto tag) {
      using C = detail::tag_type_t<decltype(tag)>;
      const std::string name = C::kName;
      const auto candidates = static_cast<long long>(stats.classes[HeapType::template class_id<C>].candidate_blocks);
      const DefragOptions options = options_for(name);
      if (config_.policy == DefragPolicyKind::mass) {
        const long long threshold = scaled_mass_threshold(k2, options.factor);
        if (candidates < threshold) {
          log::debug("defrag policy mass at iteration ", iteration, ": ", name, " has ", candidates, " candidates, below ",
                     threshold, " (k2 = ", k2, " scaled by ", options.factor, "/", options.factor + 1, ")");
          return;
        }
        log::info("defrag policy mass at iteration ", iteration, ": ", name, " has ", candidates, " candidates >= ",
                  threshold, " (k2 = ", k2, " scaled by ", options.factor, "/", options.factor + 1, ")");
      } else {
        if (candidates <= options.retained_candidates) {
          log::debug("defrag policy every:", config_.every, " at iteration ", iteration, ": ", name, " has ", candidates,
                     " candidates <= k1 = ", options.retained_candidates, ", nothing to do");
          return;
        }
        log::info("defrag policy every:", config_.every, " at iteration ", iteration, ": defragmenting ", name, " (",
                  candidates, " candidates, n = ", options.factor, ", k1 = ", options.retained_candidates, ")");
      }
      results.push_back(orders_.compact<C>(heap, options, config_));
    });
    if (results.empty())
      log::debug("defrag policy ", to_string(config_.policy), " at iteration ", iteration,
                 ": no class needed defragmentation");
    if (!results.empty() || release_pending_) release_memory(heap, iteration, results);
    return results;
  }

  /// @brief The auto policy's constants (AutoController's, under their former names).
  static constexpr std::uint64_t kAutoMinimumGain = AutoController::kMinimumGain;
  static constexpr long long kAutoReorderWarmup = AutoController::kReorderWarmup;
  static constexpr double kAutoRunMinimumGain = AutoController::kRunMinimumGain;
  static constexpr double kAutoReorderOverBudgetLoss = AutoController::kReorderOverBudgetLoss;
  static constexpr long long kAutoMaxReorderInterval = AutoController::kMaxReorderInterval;

  /// @brief AutoController::learned_reorder_interval.
  static long long learned_reorder_interval(double cost_ms, long long iterations, double gain_ms) {
    return AutoController::learned_reorder_interval(cost_ms, iterations, gain_ms);
  }

  /// @brief The auto policy's decisions so far (reorders, learned interval, time spent and saved).
  const AutoController& auto_controller() const { return auto_; }
  /// @brief Reorders the auto policy has run so far.
  long long auto_reorders() const { return auto_.reorders(); }
  /// @brief The reorder interval the auto policy learned from its last reorder that paid (0: none).
  long long auto_learned_interval() const { return auto_.learned_interval(); }

  /// @brief Milliseconds the auto policy has spent (statistics and defragmentation) and the
  /// runtime it has watched since its first call.
  double auto_spent_ms() const { return auto_.spent_ms(); }
  /// @brief Milliseconds of that spent on runs that paid (not charged to the budget).
  double auto_saved_ms() const { return auto_.saved_ms(); }
  double auto_elapsed_ms() const { return auto_.started() ? milliseconds_since(start_) : 0.0; }

  /// @brief k2·n/(n+1), rounded up and at least 1 (the paper's scaling of the mass threshold).
  static long long scaled_mass_threshold(long long k2, int factor) {
    const double scaled = std::ceil(static_cast<double>(k2) * factor / (factor + 1.0));
    return scaled < 1 ? 1 : static_cast<long long>(scaled);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double milliseconds_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }

  /// The options of a run for class @p class_name alone (not its subclasses): its n, k1, minimum
  /// compactions and locality window from the configuration, with the plan strategy (the only one
  /// that keeps windows).
  DefragOptions options_for(const std::string& class_name) const {
    DefragOptions options;
    options.factor = config_.factor_for(class_name);
    options.retained_candidates = config_.retained_candidates_for(class_name);
    options.min_compactions = config_.min_compactions_for(class_name);
    options.compaction = CompactionStrategy::plan;
    options.locality_window = static_cast<std::uint64_t>(config_.locality_window_for(class_name));
    options.subclasses = false;  // every concrete class gets its own run with its own settings
    options.map_fresh_blocks = config_.map_fresh_blocks;  // else, short of free blocks for an order: in place
    return options;
  }

  bool has_order(const std::string& class_name) const { return orders_.find(class_name, config_) != nullptr; }

  /// After the policy's compactions (release_memory on, a growable heap): when a third of the
  /// mapped blocks or more could go (free, and above the heap's initial size) and the heap has not
  /// grown for a while (ReleaseBackoff), gathers the objects at the heap's start and gives the
  /// memory above them back, down to the heap's initial size (soaheap::trim without packing: the
  /// policy just packed). Less is left mapped: gathering moves every object above a hole, and the
  /// next growth would map it again. A release the backoff holds back stays pending and comes at
  /// the first call where it is due, compaction or not. The compactions of the gathering join
  /// @p results (objects moved: the caller refreshes its pointers as after any run, even in a call
  /// that compacted nothing). Returns whether it gathered and released.
  template <class HeapType>
  bool release_memory(HeapType& heap, long long iteration, std::vector<DefragResult>& results) {
    release_pending_ = false;
    if (!config_.releases_memory() || !heap.growable()) return false;
    if (heap.mapped_block_count() <= heap.initial_mapped_blocks()) return false;  // nothing it would release
    if (!release_backoff_.due(iteration)) {
      release_pending_ = true;
      log::debug("defrag policy ", to_string(config_.policy), " at iteration ", iteration,
                 ": release deferred, the heap grew within the last ", release_backoff_.quiet(), " iterations");
      return false;
    }
    // The allocator's count of blocks in use: one word read, where heap.stats() is a kernel over
    // every indexable block (traffic on an H200 paid 0.3 ms for each of these looks).
    const std::uint64_t mapped = heap.mapped_block_count();
    const std::uint64_t in_use = std::min(heap.allocated_block_count(), mapped);
    const std::uint64_t kept = std::max<std::uint64_t>(in_use, heap.initial_mapped_blocks());
    if (kept >= mapped || (mapped - kept) * 3 < mapped) return false;
    TrimResult trimmed = trim(heap, false);
    for (DefragResult& run : trimmed.runs) results.push_back(std::move(run));
    release_backoff_.released(iteration, heap.mapped_block_count());
    log::info("defrag policy ", to_string(config_.policy), " at iteration ", iteration, ": released ",
              trimmed.released_bytes, " bytes (resident ", trimmed.resident_before, " -> ", trimmed.resident_after, ")");
    return true;
  }

  /// The auto policy: times what AutoController needs (the iteration since the previous call, the
  /// runtime, its own looks and runs) and carries out what it decides.
  template <class HeapType>
  std::vector<DefragResult> maybe_defrag_automatically(HeapType& heap, long long iteration) {
    std::vector<DefragResult> results;
    if (!auto_.started()) {
      auto_.start();
      start_ = Clock::now();
      call_end_ = start_;
      return results;
    }
    if (!auto_.begin_call(iteration, milliseconds_since(call_end_))) {
      call_end_ = Clock::now();
      return results;
    }
    std::vector<std::string> classes;
    bool any_ordered = false;
    detail::for_each_concrete_class(heap, [&](auto tag) {
      classes.emplace_back(detail::tag_type_t<decltype(tag)>::kName);
      any_ordered = any_ordered || has_order(classes.back());
    });
    bool reordered = false;
    if (any_ordered && auto_.reorder_due(iteration, milliseconds_since(start_))) {
      const Clock::time_point reorder_start = Clock::now();
      detail::for_each_concrete_class(heap, [&](auto tag) {
        using C = detail::tag_type_t<decltype(tag)>;
        if (!has_order(C::kName)) return;
        DefragOptions options = options_for(C::kName);
        options.locality_window = 0;  // an order decides where objects go
        results.push_back(orders_.compact<C>(heap, options, config_));
      });
      auto_.reordered(iteration, milliseconds_since(reorder_start));
      reordered = true;
    }
    bool ordered_compaction = false;
    if (auto_.look_due(iteration, classes, milliseconds_since(start_))) {
      // The application's kernels are its own time, not the policy's: wait for them before measuring.
      heap.synchronize();
      const Clock::time_point look_start = Clock::now();
      validate(config_, detail::class_infos(heap));
      const HeapStats stats = heap.stats();
      auto_.looked(milliseconds_since(look_start));
      detail::for_each_concrete_class(heap, [&](auto tag) {
        using C = detail::tag_type_t<decltype(tag)>;
        const std::string name = C::kName;
        // Classes reordered in this call are already as compact as they get.
        if (reordered && has_order(name)) return;
        const ClassStats& entry = stats.classes[HeapType::template class_id<C>];
        const auto capacity = static_cast<std::uint64_t>(entry.capacity);
        const std::uint64_t fewest = (entry.used_slots + capacity - 1) / capacity;
        if (!auto_.compaction_wanted(iteration, name, entry.allocated_blocks, fewest)) return;
        DefragOptions options = options_for(name);
        options.target = DefragTarget::minimum;
        if (has_order(name)) options.locality_window = 0;
        const Clock::time_point run_start = Clock::now();
        results.push_back(orders_.compact<C>(heap, options, config_));
        const double cost_ms = milliseconds_since(run_start);
        ordered_compaction = ordered_compaction || results.back().ordered;
        auto_.compacted(iteration, name, cost_ms, results.back().blocks_freed, entry.allocated_blocks - fewest,
                        milliseconds_since(start_));
      });
      auto_.end_look(iteration);
    }
    const bool may_release = config_.releases_memory() && heap.growable();
    if (may_release && (!results.empty() || (release_pending_ && release_backoff_.due(iteration)))) {
      // Giving memory back is unpaid work like a run: it waits for the budget (its last measured
      // cost), is charged, and is judged with the runs it follows. The application's kernels are
      // not its time.
      if (auto_.release_fits(milliseconds_since(start_))) {
        heap.synchronize();
        const Clock::time_point release_start = Clock::now();
        const bool released = release_memory(heap, iteration, results);
        auto_.released_memory(milliseconds_since(release_start), released);
      } else {
        release_pending_ = true;
      }
    }
    auto_.end_call(ordered_compaction);
    call_end_ = Clock::now();
    return results;
  }

  DefragConfig config_;
  ClassOrders orders_;
  AutoController auto_;
  ReleaseBackoff release_backoff_;
  bool release_pending_ = false;  ///< a release the backoff held back
  Clock::time_point start_{};     ///< the auto policy's first call
  Clock::time_point call_end_{};  ///< end of the previous call: the next iteration starts
};

}  // namespace soaheap
