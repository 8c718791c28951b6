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
///            candidates, hence the scaling).
/// n, k1 and the minimum compactions come per class from the configuration's overrides.

#include <soaheap/core/heap.cuh>
#include <soaheap/config/defrag_config.hpp>
#include <soaheap/defrag/defragment.cuh>
#include <soaheap/defrag/detail/logger.hpp>

#include <cmath>
#include <string>
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

  /// @brief Defragments what the policy asks for at @p iteration (call it between kernels).
  /// @return one result per class that was defragmented (empty when the policy did nothing)
  /// @throw config_error when a per-class setting does not fit the heap (unknown class, n >= capacity)
  /// @throw usage_error while another operation on the heap is in flight
  template <class HeapType>
  std::vector<DefragResult> maybe_defrag(HeapType& heap, long long iteration) {
    std::vector<DefragResult> results;
    if (config_.policy == DefragPolicyKind::manual) return results;
    if (config_.policy == DefragPolicyKind::every && (iteration <= 0 || iteration % config_.every != 0))
      return results;
    const auto logger = detail::library_logger();
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
      DefragOptions options;
      options.factor = config_.factor_for(name);
      options.retained_candidates = config_.retained_candidates_for(name);
      options.min_compactions = config_.min_compactions_for(name);
      if (config_.policy == DefragPolicyKind::mass) {
        const long long threshold = scaled_mass_threshold(k2, options.factor);
        if (candidates < threshold) {
          logger->debug("defrag policy mass at iteration {}: {} has {} candidates, below {} (k2 = {} scaled by {}/{})",
                        iteration, name, candidates, threshold, k2, options.factor, options.factor + 1);
          return;
        }
        logger->info("defrag policy mass at iteration {}: {} has {} candidates >= {} (k2 = {} scaled by {}/{})",
                     iteration, name, candidates, threshold, k2, options.factor, options.factor + 1);
      } else {
        if (candidates <= options.retained_candidates) {
          logger->debug("defrag policy every:{} at iteration {}: {} has {} candidates <= k1 = {}, nothing to do",
                        config_.every, iteration, name, candidates, options.retained_candidates);
          return;
        }
        logger->info("defrag policy every:{} at iteration {}: defragmenting {} ({} candidates, n = {}, k1 = {})",
                     config_.every, iteration, name, candidates, options.factor, options.retained_candidates);
      }
      results.push_back(soaheap::defragment<C>(heap, options));
    });
    if (results.empty())
      logger->debug("defrag policy {} at iteration {}: no class needed defragmentation", to_string(config_.policy),
                    iteration);
    return results;
  }

  /// @brief k2·n/(n+1), rounded up and at least 1 (the paper's scaling of the mass threshold).
  static long long scaled_mass_threshold(long long k2, int factor) {
    const double scaled = std::ceil(static_cast<double>(k2) * factor / (factor + 1.0));
    return scaled < 1 ? 1 : static_cast<long long>(scaled);
  }

 private:
  DefragConfig config_;
};

}  // namespace soaheap
