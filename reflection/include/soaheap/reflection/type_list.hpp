#pragma once
/// @file type_list.hpp
/// @brief Compile-time lists of types: the vocabulary the reflection and the heap are built from.

#include <cstddef>
#include <type_traits>
#include <utility>

namespace soaheap {

/// @brief A compile-time list of types.
template <class... Types>
struct type_list {
  static constexpr int size = static_cast<int>(sizeof...(Types));
};

namespace detail {

template <class List, int Index>
struct type_at;
template <class Head, class... Tail>
struct type_at<type_list<Head, Tail...>, 0> {
  using type = Head;
};
template <class Head, class... Tail, int Index>
struct type_at<type_list<Head, Tail...>, Index> {
  using type = typename type_at<type_list<Tail...>, Index - 1>::type;
};

template <class A, class B>
struct concat;
template <class... As, class... Bs>
struct concat<type_list<As...>, type_list<Bs...>> {
  using type = type_list<As..., Bs...>;
};

/// Position of T in Types..., or -1.
template <class T, class... Types>
constexpr int index_of() {
  int index = 0;
  const bool found = ((std::is_same_v<T, Types> ? true : (++index, false)) || ...);
  return found ? index : -1;
}

/// Calls f(std::integral_constant<int, I>{}) for I in [0, Count).
template <int Count, class Function, int... Indices>
constexpr void for_each_index_impl(Function&& f, std::integer_sequence<int, Indices...>) {
  (f(std::integral_constant<int, Indices>{}), ...);
}
template <int Count, class Function>
constexpr void for_each_index(Function&& f) {
  for_each_index_impl<Count>(std::forward<Function>(f), std::make_integer_sequence<int, Count>{});
}

/// The type carried by a tag object such as HeapView::type_tag<C> (robust to the reference types
/// that decltype yields for lambda captures under some compilers).
template <class Tag>
using tag_type_t = typename std::remove_cv_t<std::remove_reference_t<Tag>>::type;

}  // namespace detail

template <class List, int Index>
using type_at_t = typename detail::type_at<List, Index>::type;

}  // namespace soaheap
