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
/// (see AutoState::learned_interval and kAutoReorderWarmup).

#include <soaheap/core/heap.cuh>
#include <soaheap/config/defrag_config.hpp>
#include <soaheap/defrag/defragment.cuh>
#include <soaheap/base/log.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

namespace soaheap {

namespace detail {

/// Calls f(type_tag<C>) for every concrete class C of the heap.
template <class... Classes, class Function>
void for_each_concrete_class(const Heap<Classes...>&, Function&& f) {
  using View = typename Heap<Classes...>::View;
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
  explicit DefragPolicy(DefragConfig config) : config_(std::move(config)) {
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
    static_assert(!C::kAbstract, "soaheap: define_order needs a concrete class (each one is ordered on its own)");
    if (!is_valid_order_name(name) || name == "none")
      throw invalid_argument("soaheap: define_order for " + std::string(C::kName) + ": order name \"" + name +
                             "\" is not \"field:NAME\" or \"key:NAME\"");
    std::vector<NamedOrder>& orders = orders_[C::kName];
    for (const NamedOrder& known : orders)
      if (known.name == name)
        throw invalid_argument("soaheap: define_order for " + std::string(C::kName) + ": \"" + name +
                               "\" is already defined");
    NamedOrder named;
    named.name = name;
    named.heap_type = std::type_index(typeid(HeapType));
    named.run = [order](void* heap, const DefragOptions& options) {
      return soaheap::defragment<C>(*static_cast<HeapType*>(heap), options, order);
    };
    orders.push_back(std::move(named));
  }

  /// @brief Defragments what the policy asks for at @p iteration (call it between kernels).
  /// @return one result per class that was defragmented (empty when the policy did nothing)
  /// @throw config_error when a per-class setting does not fit the heap (unknown class, n >= capacity)
  /// @throw usage_error while another operation on the heap is in flight
  template <class HeapType>
  std::vector<DefragResult> maybe_defrag(HeapType& heap, long long iteration) {
    std::vector<DefragResult> results;
    if (config_.policy == DefragPolicyKind::manual) return results;
    if (config_.policy == DefragPolicyKind::automatic) return maybe_defrag_automatically(heap, iteration);
    if (config_.policy == DefragPolicyKind::every && (iteration <= 0 || iteration % config_.every != 0))
      return results;
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
      results.push_back(compact_class<C>(heap, options));
    });
    if (results.empty())
      log::debug("defrag policy ", to_string(config_.policy), " at iteration ", iteration,
                 ": no class needed defragmentation");
    return results;
  }

  /// @brief The auto policy compacts a class once it can free at least 1/kAutoMinimumGain of the
  /// class's blocks (smaller gains are not worth a scan of the heap's pointers).
  static constexpr std::uint64_t kAutoMinimumGain = 16;
  /// @brief The auto policy's first reorder comes after this many iterations (their times are the
  /// reference), to measure what a reorder costs and gains.
  static constexpr long long kAutoReorderWarmup = 8;
  /// @brief A call's runs (reorder or compactions) count as paid when the second iteration after
  /// them is at least this share faster than the one before them.
  static constexpr double kAutoRunMinimumGain = 0.01;
  /// @brief A reorder due after its budget is spent still runs once disorder has cost this many
  /// times a reorder since the last one (rent-or-buy: the loss is measured, not expected).
  static constexpr double kAutoReorderOverBudgetLoss = 2.0;
  /// @brief Most iterations the backoff puts between reorders that keep gaining nothing.
  static constexpr long long kAutoMaxReorderInterval = 1024;

  /// @brief The reorder interval that costs least per iteration when a reorder costs @p cost_ms and
  /// the last one, after @p iterations of disorder, made the next iteration @p gain_ms faster: the
  /// loss per iteration then grows by gain/iterations per iteration, and (cost + rate·T²/2)/T is
  /// least at T = sqrt(2·cost/rate). Rounded, at least 1 and at most kAutoMaxReorderInterval; 0
  /// when nothing can be learned (no gain, no iterations).
  static long long learned_reorder_interval(double cost_ms, long long iterations, double gain_ms) {
    if (!(gain_ms > 0) || iterations <= 0 || !(cost_ms >= 0)) return 0;
    const double interval = std::sqrt(2.0 * cost_ms * static_cast<double>(iterations) / gain_ms);
    if (!(interval < static_cast<double>(kAutoMaxReorderInterval))) return kAutoMaxReorderInterval;
    return std::max(1LL, static_cast<long long>(std::llround(interval)));
  }

  /// @brief Reorders the auto policy has run so far.
  long long auto_reorders() const { return auto_.reorders; }
  /// @brief The reorder interval the auto policy learned from its last reorder that paid (0: none).
  long long auto_learned_interval() const { return auto_.learned_interval; }

  /// @brief Milliseconds the auto policy has spent (statistics and defragmentation) and the
  /// runtime it has watched since its first call.
  double auto_spent_ms() const { return auto_.spent_ms; }
  /// @brief Milliseconds of that spent on runs that paid (not charged to the budget).
  double auto_saved_ms() const { return auto_.saved_ms; }
  double auto_elapsed_ms() const { return auto_.started ? milliseconds_since(auto_.start) : 0.0; }

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

  struct AutoState {
    bool started = false;
    Clock::time_point start{};
    double spent_ms = 0;
    double look_ms = 0;                        ///< what the last look at the statistics cost
    std::map<std::string, double> cost_ms;     ///< last measured cost of compacting each class
    // A class whose last compaction paid (see judge_in) is compacted again whenever a look finds
    // it worth it, budget or not, as a reorder that paid lets the next one come when due: the
    // budget bounds the runs that do not pay. Each unpaid run clears the mark, so at most one run
    // per paid one comes over the budget.
    std::map<std::string, bool> last_run_paid;
    // The classes the last call with runs compacted (not reordered): nothing runs before their
    // verdict, so they are the ones it judges.
    std::vector<std::string> compacted_classes;
    long long next_look = 0;                   ///< first iteration of the next look
    long long look_interval = 1;               ///< grows while looks find nothing worth doing
    // Reordering (classes with an order), a rent-or-buy rule: iterations slow down as objects lose
    // their order; once the time lost since the last reorder (each iteration's excess over the
    // fastest one since) exceeds what a reorder costs, reorder. A reorder that gained nothing
    // doubles the least interval before the next one; one that gained resets it.
    Clock::time_point call_end{};              ///< end of the previous call: the next iteration starts
    double reorder_cost_ms = -1;               ///< last measured cost of reordering (all ordered classes)
    double fastest_ms = 0;                     ///< fastest iteration since the last reorder
    double lost_ms = 0;                        ///< sum of the iterations' excess over fastest_ms
    // Every call that ran something (a reorder, compactions or both) is judged by the second
    // iteration after it against the iteration before it: when it is at least kAutoRunMinimumGain
    // faster, the runs paid and are not charged to the budget. The first iteration after a run is
    // skipped: it pays for the objects allocated into the fresh blocks the run left (generation on
    // an H100: 0.1-0.2 ms slower after every reorder, every reorder judged by it "not paid"); its
    // excess over the second counts as part of the run's cost.
    int judge_in = 0;                          ///< iterations until the verdict on the last call's runs
    bool judged_reorder = false;               ///< those runs include a reorder (its verdict also sets the intervals)
    double judged_cost_ms = 0;                 ///< what those runs cost
    double before_run_ms = 0;                  ///< the iteration before them
    double first_after_ms = 0;                 ///< the first iteration after them
    long long since_reorder = 0;               ///< iterations since the last reorder
    long long reorder_interval = 1;            ///< least iterations between reorders
    // The interval learned from the last reorder that paid: its gain g after k iterations of
    // disorder says the loss per iteration grows by about g/k per iteration, so reordering every T
    // iterations costs (C + g·T²/(2k))/T per iteration, least at T = sqrt(2·C·k/g). Where the
    // workload shrinks or grows, the excess over the fastest iteration above misjudges the loss
    // (generation shrinks: 247 iterations "lost" 2.9 ms, every:50 ran 7 % faster than the rule).
    long long learned_interval = 0;            ///< 0: nothing learned (the rent-or-buy rule alone)
    long long reordered_after = 0;             ///< iterations of disorder the last reorder ended (the warmup's: since the first call)
    long long reorders = 0;
    double saved_ms = 0;                       ///< cost of the runs that paid (not charged to the budget)
  };
  /// Most iterations between two looks that found nothing worth compacting.
  static constexpr long long kAutoMaxLookInterval = 64;

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
    return options;
  }

  /// Whether the last compaction of @p class_name paid (AutoState::last_run_paid).
  bool last_run_paid(const std::string& class_name) const {
    const auto known = auto_.last_run_paid.find(class_name);
    return known != auto_.last_run_paid.end() && known->second;
  }

  /// Whether the last compaction of some class paid.
  bool some_last_run_paid() const {
    return std::any_of(auto_.last_run_paid.begin(), auto_.last_run_paid.end(),
                       [](const auto& entry) { return entry.second; });
  }

  /// The cheapest run the policy knows of (0 while some class has never run: it might be cheap).
  template <class HeapType>
  double cheapest_known_run_ms(const HeapType& heap) const {
    double cheapest = -1;
    bool unknown = false;
    detail::for_each_concrete_class(heap, [&](auto tag) {
      const auto known = auto_.cost_ms.find(detail::tag_type_t<decltype(tag)>::kName);
      if (known == auto_.cost_ms.end()) {
        unknown = true;
      } else if (cheapest < 0 || known->second < cheapest) {
        cheapest = known->second;
      }
    });
    return unknown || cheapest < 0 ? 0.0 : cheapest;
  }

  /// Whether some concrete class of @p heap has an order (configured or default).
  template <class HeapType>
  bool has_ordered_class(const HeapType& heap) const {
    bool any = false;
    detail::for_each_concrete_class(heap, [&](auto tag) { any = any || order_for(detail::tag_type_t<decltype(tag)>::kName); });
    return any;
  }

  /// Times the iteration that just ended (the application waited for its kernels before calling)
  /// and, when it is the second after a call that ran something, judges those runs by it.
  double observe_iteration(long long iteration) {
    const double iteration_ms = milliseconds_since(auto_.call_end);
    if (auto_.judge_in == 0) return iteration_ms;
    if (--auto_.judge_in == 1) {
      auto_.first_after_ms = iteration_ms;
      return iteration_ms;
    }
    const double gain_ms = auto_.before_run_ms - iteration_ms;
    const bool paid = gain_ms >= kAutoRunMinimumGain * auto_.before_run_ms;
    const double first_iteration_ms = std::max(0.0, auto_.first_after_ms - iteration_ms);
    // Runs that paid ended a loss greater than their cost: not charged to the budget. That holds
    // for compactions too: a class whose blocks are half empty costs its kernels time as well as
    // memory (generation on an H100: a compaction of the dying cells made the iterations about a
    // quarter faster), and charging such runs left the budget spent when the next one was due.
    if (paid) auto_.saved_ms += auto_.judged_cost_ms;
    for (const std::string& name : auto_.compacted_classes) auto_.last_run_paid[name] = paid;
    if (auto_.judged_reorder) {
      if (paid) {
        auto_.reorder_interval = 1;
        // The warmup's reorder teaches too: it ends the setup's disorder as well as the warmup's, so
        // its interval is on the short side, and the next reorder that pays corrects it. Learning
        // nothing from it left generation (a shrinking population, where the rent-or-buy rule sees
        // no loss) 247 iterations without a reorder on an H100.
        auto_.learned_interval =
            learned_reorder_interval(auto_.reorder_cost_ms + first_iteration_ms, auto_.reordered_after, gain_ms);
      } else {
        auto_.reorder_interval = std::min(2 * auto_.reorder_interval, kAutoMaxReorderInterval);
        auto_.learned_interval = 0;
      }
    }
    log::debug("defrag policy auto at iteration ", iteration, ": the second iteration after the ",
               auto_.judged_reorder ? "reorder" : "compactions", " took ", log::fixed(iteration_ms), " ms, the one before ",
               log::fixed(auto_.before_run_ms), " ms, the first after ", log::fixed(auto_.first_after_ms), " ms (",
               paid ? "paid" : "not paid", "); next reorder after at least ", auto_.reorder_interval,
               " iterations, learned interval ", auto_.learned_interval);
    return iteration_ms;
  }

  /// Reorders the classes with an order when the rent-or-buy rule says so (@p iteration_ms: the
  /// iteration that just ended).
  /// @return what the reorder cost in milliseconds (0: none ran)
  template <class HeapType>
  double maybe_reorder(HeapType& heap, long long iteration, double iteration_ms, std::vector<DefragResult>& results) {
    if (!has_ordered_class(heap)) return 0.0;
    auto_.fastest_ms = auto_.since_reorder == 0 ? iteration_ms : std::min(auto_.fastest_ms, iteration_ms);
    auto_.lost_ms += iteration_ms - auto_.fastest_ms;
    ++auto_.since_reorder;
    const bool first = auto_.reorder_cost_ms < 0;
    const bool learned_due = auto_.learned_interval > 0 && auto_.since_reorder >= auto_.learned_interval;
    const bool due = first ? iteration >= kAutoReorderWarmup
                           : (auto_.lost_ms >= auto_.reorder_cost_ms || learned_due) &&
                                 auto_.since_reorder >= auto_.reorder_interval;
    if (!due) return 0.0;
    // Reorders that did not pay are charged to the budget like any compaction: once they have
    // used it up, only a reorder after the backoff's interval is tried again, and only when
    // disorder has cost at least twice a reorder since the last one (kAutoReorderOverBudgetLoss).
    // The verdict "did not pay" rests on one iteration, which may pay for objects allocated into
    // the fresh blocks a reorder leaves; generation on an H100 had one reorder judged so at
    // iteration 222 and then, budget spent, lost 174 ms to disorder before the next one at 686.
    const double budget_ms = config_.auto_budget * milliseconds_since(auto_.start);
    const double expected_ms = first ? 0.0 : auto_.reorder_cost_ms;
    if (auto_.reorder_interval > 1 && auto_.spent_ms - auto_.saved_ms + expected_ms > budget_ms &&
        auto_.lost_ms < kAutoReorderOverBudgetLoss * auto_.reorder_cost_ms) {
      log::debug("defrag policy auto at iteration ", iteration, ": a reorder is due but unpaid runs used up the budget");
      return 0.0;
    }
    const Clock::time_point start = Clock::now();
    detail::for_each_concrete_class(heap, [&](auto tag) {
      using C = detail::tag_type_t<decltype(tag)>;
      if (order_for(C::kName) == nullptr) return;
      DefragOptions options = options_for(C::kName);
      options.locality_window = 0;  // an order decides where objects go
      results.push_back(compact_class<C>(heap, options));
    });
    const double cost_ms = milliseconds_since(start);
    log::info("defrag policy auto at iteration ", iteration, ": reordered after ", auto_.since_reorder,
              " iterations that lost ", log::fixed(auto_.lost_ms), " ms to disorder (last iteration ",
              log::fixed(iteration_ms), " ms); the reorder took ", log::fixed(cost_ms), " ms");
    auto_.reorder_cost_ms = cost_ms;
    auto_.reordered_after = auto_.since_reorder;
    auto_.spent_ms += cost_ms;
    auto_.lost_ms = 0;
    auto_.since_reorder = 0;
    ++auto_.reorders;
    return cost_ms;
  }

  template <class HeapType>
  std::vector<DefragResult> maybe_defrag_automatically(HeapType& heap, long long iteration) {
    std::vector<DefragResult> results;
    if (!auto_.started) {
      auto_.started = true;
      auto_.start = Clock::now();
      auto_.call_end = auto_.start;
      return results;
    }
    const double iteration_ms = observe_iteration(iteration);
    if (auto_.judge_in > 0) {
      // Nothing runs before the verdict on the last runs: every run is judged, and a class whose
      // last compaction paid cannot run again and again on that one verdict (game-of-life on an
      // H100 compacted in every iteration when it could).
      auto_.call_end = Clock::now();
      return results;
    }
    auto_.compacted_classes.clear();
    const double reorder_ms = maybe_reorder(heap, iteration, iteration_ms, results);
    const bool reordered = !results.empty();
    const std::size_t reorder_results = results.size();
    const double compactions_ms = look_and_compact(heap, iteration, reordered, results);
    const bool compacted = results.size() > reorder_results;
    if (!reordered && std::any_of(results.begin(), results.end(), [](const DefragResult& r) { return r.ordered; })) {
      // A compaction in order is a reorder too: disorder starts from nothing again.
      auto_.lost_ms = 0;
      auto_.since_reorder = 0;
    }
    if (reordered || compacted) {
      // The second iteration from now judges this call's runs (not the look that found the
      // compactions: it is charged whether or not anything runs).
      auto_.judge_in = 2;
      auto_.judged_reorder = reordered;
      auto_.judged_cost_ms = reorder_ms + compactions_ms;
      auto_.before_run_ms = iteration_ms;
    }
    auto_.call_end = Clock::now();
    return results;
  }

  /// The memory half of the auto policy (see the file comment); classes reordered in this call
  /// (@p reordered) are already as compact as they get.
  /// @return what its compactions cost in milliseconds (0: none ran)
  template <class HeapType>
  double look_and_compact(HeapType& heap, long long iteration, bool reordered, std::vector<DefragResult>& results) {
    const double budget_ms = config_.auto_budget * milliseconds_since(auto_.start);
    // Look only when the look and at least the cheapest known run fit, so that looks cannot eat the
    // budget that runs need (or when some class's last compaction paid: it runs whatever the budget
    // says), and less often while looks keep finding nothing.
    if (iteration < auto_.next_look ||
        (!some_last_run_paid() &&
         auto_.spent_ms - auto_.saved_ms + auto_.look_ms + cheapest_known_run_ms(heap) > budget_ms))
      return 0.0;
    // The application's kernels are its own time, not ours: wait for them before measuring.
    heap.synchronize();
    const Clock::time_point look_start = Clock::now();
    validate(config_, detail::class_infos(heap));
    const HeapStats stats = heap.stats();
    auto_.look_ms = milliseconds_since(look_start);
    // What this look may still spend: expected costs are charged against it, measured ones are
    // what the next looks see.
    double allowance_ms = budget_ms - (auto_.spent_ms - auto_.saved_ms) - auto_.look_ms;
    auto_.spent_ms += auto_.look_ms;
    const std::size_t results_before = results.size();
    double compactions_ms = 0;

    detail::for_each_concrete_class(heap, [&](auto tag) {
      using C = detail::tag_type_t<decltype(tag)>;
      const std::string name = C::kName;
      if (reordered && order_for(name) != nullptr) return;
      const ClassStats& entry = stats.classes[HeapType::template class_id<C>];
      const auto capacity = static_cast<std::uint64_t>(entry.capacity);
      const std::uint64_t fewest = (entry.used_slots + capacity - 1) / capacity;
      const std::uint64_t gain = entry.allocated_blocks - fewest;
      if (gain == 0 || gain * kAutoMinimumGain < entry.allocated_blocks) return;
      // A class never compacted before, or whose last compaction paid, runs whatever the budget says.
      const auto known = auto_.cost_ms.find(name);
      const bool exempt = known == auto_.cost_ms.end() || last_run_paid(name);
      const double expected_ms = exempt ? 0.0 : known->second;
      if (!exempt && expected_ms > allowance_ms) {
        log::debug("defrag policy auto at iteration ", iteration, ": ", name, " could free ", gain, " of ",
                   entry.allocated_blocks, " blocks, but its last cost ", log::fixed(expected_ms),
                   " ms does not fit the budget (", log::fixed(auto_.spent_ms), " of ", log::fixed(budget_ms),
                   " ms spent)");
        return;
      }
      allowance_ms -= expected_ms;
      DefragOptions options = options_for(name);
      options.target = DefragTarget::minimum;
      if (order_for(name) != nullptr) options.locality_window = 0;
      const Clock::time_point run_start = Clock::now();
      results.push_back(compact_class<C>(heap, options));
      const double cost = milliseconds_since(run_start);
      auto_.cost_ms[name] = cost;
      auto_.spent_ms += cost;
      compactions_ms += cost;
      auto_.compacted_classes.push_back(name);
      log::info("defrag policy auto at iteration ", iteration, ": ", name, " freed ", results.back().blocks_freed,
                " blocks (expected ", gain, ") in ", log::fixed(cost), " ms; ",
                log::fixed(100.0 * auto_.spent_ms / milliseconds_since(auto_.start), 2),
                " % of the runtime so far spent defragmenting (budget ", log::fixed(100.0 * config_.auto_budget, 2), " %)");
    });
    if (results.size() == results_before) {
      auto_.look_interval = auto_.look_interval * 2 > kAutoMaxLookInterval ? kAutoMaxLookInterval : auto_.look_interval * 2;
    } else {
      auto_.look_interval = 1;
    }
    auto_.next_look = iteration + auto_.look_interval;
    return compactions_ms;
  }

  /// An order the application defined for a class, type-erased over the heap type.
  struct NamedOrder {
    std::string name;
    std::type_index heap_type = std::type_index(typeid(void));
    std::function<DefragResult(void*, const DefragOptions&)> run;
  };

  /// The order a policy run of @p class_name uses: the configured one, else the class's default;
  /// nullptr for none.
  /// @throw config_error when the configuration names an order the application did not define
  const NamedOrder* order_for(const std::string& class_name) const {
    const auto defined = orders_.find(class_name);
    const std::optional<std::string> configured = config_.order_for(class_name);
    if (!configured) return defined == orders_.end() || defined->second.empty() ? nullptr : &defined->second.front();
    if (*configured == "none") return nullptr;
    std::string known;
    if (defined != orders_.end()) {
      for (const NamedOrder& order : defined->second) {
        if (order.name == *configured) return &order;
        known += (known.empty() ? "" : ", ") + order.name;
      }
    }
    const std::string key = "defrag.classes." + class_name + ".order";
    throw config_error("soaheap: " + key + " = \"" + *configured + "\": the application defines no such order for " +
                           class_name + " (it defines: " + (known.empty() ? std::string("none") : known) + ")",
                       key);
  }

  /// Compacts concrete class C with @p options: in its order when it has one and the heap has the
  /// free blocks that takes, else in place.
  template <class C, class HeapType>
  DefragResult compact_class(HeapType& heap, const DefragOptions& options) {
    if (const NamedOrder* order = order_for(C::kName)) {
      if (order->heap_type != std::type_index(typeid(HeapType)))
        throw usage_error("soaheap: the order \"" + order->name + "\" of " + C::kName +
                          " was defined for another heap type than the one being defragmented");
      try {
        return order->run(&heap, options);
      } catch (const out_of_memory& error) {
        log::warn("defrag policy: ", error.what(), "; compacting ", C::kName, " in place instead");
      }
    }
    return soaheap::defragment<C>(heap, options);
  }

  DefragConfig config_;
  AutoState auto_;
  std::map<std::string, std::vector<NamedOrder>> orders_;  ///< by class name
};

}  // namespace soaheap
