#pragma once
/// @file auto_controller.hpp
/// @brief `AutoController`: the decisions of the `auto` defragmentation policy, as a plain class
///        fed with times. It reads no clock and sees no heap: DefragPolicy (policy.hpp) measures
///        the iterations, the looks and the runs and passes the figures in, so the same times
///        always give the same decisions (and tests drive it with synthetic ones).
///
/// The rules (see policy.hpp for the user's view):
///  - Budget: the controller's own work (looks at the statistics, compactions, reorders), less the
///    runs that paid, stays below `budget` times the runtime watched since the first call.
///  - Looks: only while a look and the cheapest known run still fit the budget (or some class's
///    last compaction paid), and, after looks that found nothing, only every 2, 4, ... up to
///    kMaxLookInterval iterations. A look compacts each class to its minimum block count when that
///    frees at least 1/kMinimumGain of its blocks and its last measured cost fits what the budget
///    allowed when the look started (a class never compacted counts as free).
///  - Verdicts: a call's runs are judged by the second iteration after them (the first pays for
///    allocations into the fresh blocks they left); at least kRunMinimumGain faster than the
///    iteration before them means they paid: their cost leaves the budget, and a class whose last
///    compaction paid may be compacted again whatever the budget says until one does not pay.
///  - Reorders (classes with an order): a rent-or-buy rule on the time lost to disorder (each
///    iteration's excess over the fastest since the last reorder), a backoff for reorders that
///    gained nothing, and an interval learned from the last reorder that paid.
///
/// Call protocol, once per DefragPolicy::maybe_defrag call:
///  1. the first call: start(); nothing else;
///  2. begin_call(iteration, iteration_ms); stop here when it returns false (a verdict is pending);
///  3. where some class has an order: reorder_due(...); when true, reorder and call reordered(...);
///  4. look_due(...); when true, take the statistics, call looked(look_ms), then for each class
///     compaction_wanted(...), and compacted(...) after each run; end_look(iteration); where
///     the policy would give memory back, release_fits(...) and then released_memory(...);
///  5. end_call(ordered_compaction).

#include <soaheap/base/log.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace soaheap {

class AutoController {
 public:
  /// @brief A class is compacted once that frees at least 1/kMinimumGain of its blocks (smaller
  /// gains are not worth a scan of the heap's pointers).
  static constexpr std::uint64_t kMinimumGain = 16;
  /// @brief The first reorder comes after this many iterations (their times are the reference), to
  /// measure what a reorder costs and gains.
  static constexpr long long kReorderWarmup = 8;
  /// @brief A call's runs count as paid when the second iteration after them is at least this share
  /// faster than the one before them.
  static constexpr double kRunMinimumGain = 0.01;
  /// @brief A reorder due after its budget is spent still runs once disorder has cost this many
  /// times a reorder since the last one (rent-or-buy: the loss is measured, not expected).
  static constexpr double kReorderOverBudgetLoss = 2.0;
  /// @brief Most iterations the backoff puts between reorders that keep gaining nothing.
  static constexpr long long kMaxReorderInterval = 1024;
  /// @brief Most iterations between two looks that found nothing worth compacting.
  static constexpr long long kMaxLookInterval = 64;

  /// @param budget the share of the runtime the controller's unpaid work may take (0.02: 2 %)
  explicit AutoController(double budget) : budget_(budget) {}

  /// @brief The reorder interval that costs least per iteration when a reorder costs @p cost_ms and
  /// the last one, after @p iterations of disorder, made the next iteration @p gain_ms faster: the
  /// loss per iteration then grows by gain/iterations per iteration, and (cost + rate·T²/2)/T is
  /// least at T = sqrt(2·cost/rate). Rounded, at least 1 and at most kMaxReorderInterval; 0 when
  /// nothing can be learned (no gain, no iterations).
  static long long learned_reorder_interval(double cost_ms, long long iterations, double gain_ms) {
    if (!(gain_ms > 0) || iterations <= 0 || !(cost_ms >= 0)) return 0;
    const double interval = std::sqrt(2.0 * cost_ms * static_cast<double>(iterations) / gain_ms);
    if (!(interval < static_cast<double>(kMaxReorderInterval))) return kMaxReorderInterval;
    return std::max(1LL, static_cast<long long>(std::llround(interval)));
  }

  bool started() const { return started_; }
  /// @brief The first call: the runtime the budget is a share of starts now.
  void start() { started_ = true; }

  /// @brief The iteration that just ended took @p iteration_ms (the application waited for its
  /// kernels); when it is the second after a call that ran something, it judges those runs.
  /// @return whether this call may run anything (false while a verdict is pending: every run is
  /// judged, and a class whose last compaction paid cannot run again and again on one verdict)
  bool begin_call(long long iteration, double iteration_ms) {
    iteration_ms_ = iteration_ms;
    reordered_ = false;
    reorder_ms_ = 0;
    compactions_ms_ = 0;
    if (judge_in_ > 0) {
      // The first iteration after the runs is noted, the second judges them.
      if (--judge_in_ == 1) {
        first_after_ms_ = iteration_ms;
      } else {
        judge(iteration, iteration_ms);
      }
    }
    if (judge_in_ > 0) return false;
    compacted_classes_.clear();
    return true;
  }

  /// @brief Whether to reorder the classes with an order now (call only where some class has one).
  /// @param elapsed_ms the runtime since start()
  bool reorder_due(long long iteration, double elapsed_ms) {
    fastest_ms_ = since_reorder_ == 0 ? iteration_ms_ : std::min(fastest_ms_, iteration_ms_);
    lost_ms_ += iteration_ms_ - fastest_ms_;
    ++since_reorder_;
    const bool first = reorder_cost_ms_ < 0;
    const bool learned_due = learned_interval_ > 0 && since_reorder_ >= learned_interval_;
    const bool due = first ? iteration >= kReorderWarmup
                           : (lost_ms_ >= reorder_cost_ms_ || learned_due) && since_reorder_ >= reorder_interval_;
    if (!due) return false;
    // Reorders that did not pay are charged to the budget like any compaction: once they have used
    // it up, only a reorder after the backoff's interval is tried again, and only when disorder has
    // cost at least kReorderOverBudgetLoss reorders since the last one. The verdict "did not pay"
    // rests on one iteration, which may pay for objects allocated into the fresh blocks a reorder
    // leaves (generation on an H100 lost 174 ms to disorder after one such verdict).
    const double budget_ms = budget_ * elapsed_ms;
    const double expected_ms = first ? 0.0 : reorder_cost_ms_;
    if (reorder_interval_ > 1 && spent_ms_ - saved_ms_ + expected_ms > budget_ms &&
        lost_ms_ < kReorderOverBudgetLoss * reorder_cost_ms_) {
      log::debug("defrag policy auto at iteration ", iteration, ": a reorder is due but unpaid runs used up the budget");
      return false;
    }
    return true;
  }

  /// @brief The reorder reorder_due() asked for ran and took @p cost_ms.
  void reordered(long long iteration, double cost_ms) {
    log::info("defrag policy auto at iteration ", iteration, ": reordered after ", since_reorder_,
              " iterations that lost ", log::fixed(lost_ms_), " ms to disorder (last iteration ",
              log::fixed(iteration_ms_), " ms); the reorder took ", log::fixed(cost_ms), " ms");
    reorder_cost_ms_ = cost_ms;
    reordered_after_ = since_reorder_;
    spent_ms_ += cost_ms;
    lost_ms_ = 0;
    since_reorder_ = 0;
    ++reorders_;
    reordered_ = true;
    reorder_ms_ = cost_ms;
  }

  /// @brief Whether to look at the heap's statistics now.
  /// @param classes the names of the heap's concrete classes
  /// @param elapsed_ms the runtime since start()
  bool look_due(long long iteration, const std::vector<std::string>& classes, double elapsed_ms) {
    look_budget_ms_ = budget_ * elapsed_ms;
    look_compactions_ = 0;
    // Look only when the look and at least the cheapest known run fit, so that looks cannot eat the
    // budget that runs need (or when some class's last compaction paid: it runs whatever the budget
    // says), and less often while looks keep finding nothing.
    return iteration >= next_look_ &&
           (some_last_run_paid() ||
            spent_ms_ - saved_ms_ + look_ms_ + cheapest_known_run_ms(classes) <= look_budget_ms_);
  }

  /// @brief The look look_due() asked for took @p look_ms (after waiting for the application's
  /// kernels, so only its own work counts).
  void looked(double look_ms) {
    look_ms_ = look_ms;
    // What this look may still spend: expected costs are charged against it, measured ones are
    // what the next looks see.
    allowance_ms_ = look_budget_ms_ - (spent_ms_ - saved_ms_) - look_ms_;
    spent_ms_ += look_ms_;
  }

  /// @brief Whether to compact class @p name to its minimum block count: @p allocated_blocks now,
  /// @p fewest_blocks at the minimum (from the statistics of the look).
  bool compaction_wanted(long long iteration, const std::string& name, std::uint64_t allocated_blocks,
                         std::uint64_t fewest_blocks) {
    const std::uint64_t gain = allocated_blocks - fewest_blocks;
    if (gain == 0 || gain * kMinimumGain < allocated_blocks) return false;
    // A class never compacted before, or whose last compaction paid, runs whatever the budget says.
    const auto known = cost_ms_.find(name);
    const bool exempt = known == cost_ms_.end() || last_run_paid(name);
    const double expected_ms = exempt ? 0.0 : known->second;
    if (!exempt && expected_ms > allowance_ms_) {
      log::debug("defrag policy auto at iteration ", iteration, ": ", name, " could free ", gain, " of ",
                 allocated_blocks, " blocks, but its last cost ", log::fixed(expected_ms),
                 " ms does not fit the budget (", log::fixed(spent_ms_), " of ", log::fixed(look_budget_ms_),
                 " ms spent)");
      return false;
    }
    allowance_ms_ -= expected_ms;
    return true;
  }

  /// @brief The compaction of @p name compaction_wanted() asked for took @p cost_ms and freed
  /// @p blocks_freed blocks (@p expected_gain expected); @p elapsed_ms is the runtime since start().
  void compacted(long long iteration, const std::string& name, double cost_ms, std::uint64_t blocks_freed,
                 std::uint64_t expected_gain, double elapsed_ms) {
    cost_ms_[name] = cost_ms;
    spent_ms_ += cost_ms;
    compactions_ms_ += cost_ms;
    ++look_compactions_;
    compacted_classes_.push_back(name);
    log::info("defrag policy auto at iteration ", iteration, ": ", name, " freed ", blocks_freed, " blocks (expected ",
              expected_gain, ") in ", log::fixed(cost_ms), " ms; ", log::fixed(100.0 * spent_ms_ / elapsed_ms, 2),
              " % of the runtime so far spent defragmenting (budget ", log::fixed(100.0 * budget_, 2), " %)");
  }

  /// @brief Whether giving memory back (release_memory) fits the budget now: its last measured
  /// cost beside the unpaid work so far (the first release counts as free, as a class's first
  /// compaction does). @p elapsed_ms is the runtime since start().
  bool release_fits(double elapsed_ms) const { return spent_ms_ - saved_ms_ + release_cost_ms_ <= budget_ * elapsed_ms; }

  /// @brief A look at giving memory back took @p cost_ms, and @p released: it gathered and
  /// released (its cost is then what the next release expects). Charged, and judged with the
  /// call's runs.
  void released_memory(double cost_ms, bool released) {
    spent_ms_ += cost_ms;
    compactions_ms_ += cost_ms;
    if (released) release_cost_ms_ = cost_ms;
  }

  /// @brief The look has seen every class: looks that find nothing come less often.
  void end_look(long long iteration) {
    look_interval_ = look_compactions_ == 0 ? std::min(2 * look_interval_, kMaxLookInterval) : 1;
    next_look_ = iteration + look_interval_;
  }

  /// @brief The call's runs are done; @p ordered_compaction: a compaction (not a reorder) ran in a
  /// class's order, which ends its disorder as a reorder does.
  void end_call(bool ordered_compaction) {
    const bool reordered = reordered_;
    const bool compacted = !compacted_classes_.empty();
    if (!reordered && ordered_compaction) {
      lost_ms_ = 0;
      since_reorder_ = 0;
    }
    if (reordered || compacted) {
      // The second iteration from now judges this call's runs (not the look that found the
      // compactions: it is charged whether or not anything runs).
      judge_in_ = 2;
      judged_reorder_ = reordered;
      judged_cost_ms_ = reorder_ms_ + compactions_ms_;
      before_run_ms_ = iteration_ms_;
    }
  }

  /// @brief Reorders run so far.
  long long reorders() const { return reorders_; }
  /// @brief The reorder interval learned from the last reorder that paid (0: none).
  long long learned_interval() const { return learned_interval_; }
  /// @brief Least iterations between reorders now (the backoff's).
  long long reorder_interval() const { return reorder_interval_; }
  /// @brief Milliseconds spent (looks and runs), and of that on runs that paid (not charged).
  double spent_ms() const { return spent_ms_; }
  double saved_ms() const { return saved_ms_; }
  /// @brief Whether the last compaction of @p name paid.
  bool last_run_paid(const std::string& name) const {
    const auto known = last_run_paid_.find(name);
    return known != last_run_paid_.end() && known->second;
  }

 private:
  bool some_last_run_paid() const {
    return std::any_of(last_run_paid_.begin(), last_run_paid_.end(), [](const auto& entry) { return entry.second; });
  }

  /// The cheapest run known of @p classes (0 while one has never run: it might be cheap).
  double cheapest_known_run_ms(const std::vector<std::string>& classes) const {
    double cheapest = -1;
    for (const std::string& name : classes) {
      const auto known = cost_ms_.find(name);
      if (known == cost_ms_.end()) return 0.0;
      if (cheapest < 0 || known->second < cheapest) cheapest = known->second;
    }
    return cheapest < 0 ? 0.0 : cheapest;
  }

  /// The verdict on the last call's runs by @p iteration_ms, the second iteration after them.
  void judge(long long iteration, double iteration_ms) {
    const double gain_ms = before_run_ms_ - iteration_ms;
    const bool paid = gain_ms >= kRunMinimumGain * before_run_ms_;
    const double first_iteration_ms = std::max(0.0, first_after_ms_ - iteration_ms);
    // Runs that paid ended a loss greater than their cost: not charged to the budget. That holds
    // for compactions too: a class whose blocks are half empty costs its kernels time as well as
    // memory (generation on an H100: compacting the dying cells made iterations about a quarter
    // faster), and charging such runs left the budget spent when the next one was due.
    if (paid) saved_ms_ += judged_cost_ms_;
    for (const std::string& name : compacted_classes_) last_run_paid_[name] = paid;
    if (judged_reorder_) {
      if (paid) {
        reorder_interval_ = 1;
        // The warmup's reorder teaches too: it ends the setup's disorder as well as the warmup's,
        // so its interval is on the short side, and the next reorder that pays corrects it. The
        // first iteration's excess over the second counts as part of the reorder's cost.
        learned_interval_ = learned_reorder_interval(reorder_cost_ms_ + first_iteration_ms, reordered_after_, gain_ms);
      } else {
        reorder_interval_ = std::min(2 * reorder_interval_, kMaxReorderInterval);
        learned_interval_ = 0;
      }
    }
    log::debug("defrag policy auto at iteration ", iteration, ": the second iteration after the ",
               judged_reorder_ ? "reorder" : "compactions", " took ", log::fixed(iteration_ms), " ms, the one before ",
               log::fixed(before_run_ms_), " ms, the first after ", log::fixed(first_after_ms_), " ms (",
               paid ? "paid" : "not paid", "); next reorder after at least ", reorder_interval_,
               " iterations, learned interval ", learned_interval_);
  }

  double budget_;
  bool started_ = false;
  double iteration_ms_ = 0;                  ///< the iteration that ended before this call
  double spent_ms_ = 0;
  double saved_ms_ = 0;                      ///< cost of the runs that paid (not charged to the budget)
  double look_ms_ = 0;                       ///< what the last look at the statistics cost
  double look_budget_ms_ = 0;                ///< the budget when the current look started
  double allowance_ms_ = 0;                  ///< what the current look may still spend
  long long look_compactions_ = 0;           ///< compactions of the current look
  long long next_look_ = 0;                  ///< first iteration of the next look
  long long look_interval_ = 1;              ///< grows while looks find nothing worth doing
  std::map<std::string, double> cost_ms_;    ///< last measured cost of compacting each class
  double release_cost_ms_ = 0;               ///< last measured cost of giving memory back
  // A class whose last compaction paid is compacted again whenever a look finds it worth it,
  // budget or not, as a reorder that paid lets the next one come when due: the budget bounds the
  // runs that do not pay. Each unpaid run clears the mark, so at most one run per paid one comes
  // over the budget.
  std::map<std::string, bool> last_run_paid_;
  // The classes the last call with runs compacted (not reordered): nothing runs before their
  // verdict, so they are the ones it judges.
  std::vector<std::string> compacted_classes_;
  bool reordered_ = false;                   ///< this call reordered
  double reorder_ms_ = 0;                    ///< what this call's reorder cost
  double compactions_ms_ = 0;                ///< what this call's compactions cost
  // Reordering: iterations slow down as objects lose their order; once the time lost since the
  // last reorder (each iteration's excess over the fastest one since) exceeds what a reorder costs,
  // reorder. A reorder that gained nothing doubles the least interval before the next one; one
  // that gained resets it.
  double reorder_cost_ms_ = -1;              ///< last measured cost of reordering (all ordered classes)
  double fastest_ms_ = 0;                    ///< fastest iteration since the last reorder
  double lost_ms_ = 0;                       ///< sum of the iterations' excess over fastest_ms_
  long long since_reorder_ = 0;              ///< iterations since the last reorder
  long long reorder_interval_ = 1;           ///< least iterations between reorders
  // The interval learned from the last reorder that paid: its gain g after k iterations of disorder
  // says the loss per iteration grows by about g/k per iteration, so reordering every T iterations
  // costs (C + g·T²/(2k))/T per iteration, least at T = sqrt(2·C·k/g). Where the workload shrinks
  // or grows, the excess over the fastest iteration misjudges the loss, which this corrects.
  long long learned_interval_ = 0;           ///< 0: nothing learned (the rent-or-buy rule alone)
  long long reordered_after_ = 0;            ///< iterations of disorder the last reorder ended
  long long reorders_ = 0;
  // The verdict on a call's runs: the iteration before them, the first after them, and when.
  int judge_in_ = 0;                         ///< iterations until the verdict on the last call's runs
  bool judged_reorder_ = false;              ///< those runs include a reorder (its verdict also sets the intervals)
  double judged_cost_ms_ = 0;                ///< what those runs cost
  double before_run_ms_ = 0;                 ///< the iteration before them
  double first_after_ms_ = 0;                ///< the first iteration after them
};

}  // namespace soaheap
