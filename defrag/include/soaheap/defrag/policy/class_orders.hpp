#pragma once
/// @file class_orders.hpp
/// @brief `ClassOrders`: the orders an application defines per class for the policies (ordered
///        compaction, defrag/detail/ordered_run.cuh), and the one compaction every policy runs: a
///        class in its order when it has one and the heap has the free blocks that takes, else in
///        place.
///
/// The application names its orders (`"field:position"`, `"key:id"`); the first one defined for a
/// class is its default, and the configuration may name another defined order, or "none".

#include <soaheap/base/log.hpp>
#include <soaheap/config/defrag_config.hpp>
#include <soaheap/core/errors.hpp>
#include <soaheap/defrag/defragment.cuh>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

namespace soaheap {

class ClassOrders {
 public:
  /// @brief Defines order @p name ("field:NAME" or "key:NAME") for concrete class C of heap type
  /// HeapType; the first order defined for a class is its default.
  /// @throw invalid_argument for a malformed or already defined name
  template <class C, class HeapType, class Order>
  void define(const std::string& name, const Order& order) {
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

  /// An order the application defined for a class, type-erased over the heap type.
  struct NamedOrder {
    std::string name;
    std::type_index heap_type = std::type_index(typeid(void));
    std::function<DefragResult(void*, const DefragOptions&)> run;
  };

  /// @brief The order a policy run of @p class_name uses under @p config: the configured one, else
  /// the class's default; nullptr for none.
  /// @throw config_error when the configuration names an order the application did not define
  const NamedOrder* find(const std::string& class_name, const DefragConfig& config) const {
    const auto defined = orders_.find(class_name);
    const std::optional<std::string> configured = config.order_for(class_name);
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

  /// @brief Compacts concrete class C of @p heap with @p options: in its order (under @p config)
  /// when it has one and the heap has the free blocks that takes, else in place.
  /// @throw usage_error when the class's order was defined for another heap type
  template <class C, class HeapType>
  DefragResult compact(HeapType& heap, const DefragOptions& options, const DefragConfig& config) const {
    if (const NamedOrder* order = find(C::kName, config)) {
      if (order->heap_type != std::type_index(typeid(HeapType)))
        throw usage_error("soaheap: the order \"" + order->name + "\" of " + C::kName +
                          " was defined for another heap type than the one being defragmented");
      try {
        return order->run(&heap, options);
      } catch (const out_of_memory& error) {
        // Once per class at warning level: on a heap that stays nearly full (a growing one without
        // map_fresh_blocks) it can happen at reorder after reorder.
        const std::string message = std::string("defrag policy: ") + error.what() + "; compacting " + C::kName +
                                    " in place instead (a growable heap maps them with defrag.map_fresh_blocks)";
        if (short_of_blocks_.insert(C::kName).second) log::warn(message);
        else log::debug(message);
      }
    }
    return soaheap::defragment<C>(heap, options);
  }

 private:
  std::map<std::string, std::vector<NamedOrder>> orders_;  ///< by class name
  mutable std::set<std::string> short_of_blocks_;          ///< classes whose order lacked free blocks once
};

}  // namespace soaheap
