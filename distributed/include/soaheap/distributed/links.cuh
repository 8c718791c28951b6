#pragma once
/// @file links.cuh
/// @brief How pointer fields cross ranks. An object's pointer fields hold addresses of the heap it
///        lives in, which mean nothing on another GPU; migration translates each non-null managed
///        pointer field of a migrating object through the application's Links:
///
///          struct CellLinks {
///            // sender: the pointee's global name, or kUntranslated when it has none
///            SOAHEAP_HD std::uint64_t to_global(const Cell* cell) const { return cell->global_index; }
///            // receiver: the local object of that name, or nullptr when this rank has none
///            SOAHEAP_HD Cell* to_local(soaheap::distributed::link_type<Cell>, std::uint64_t g) const { ... }
///          };
///
///        (templates over the pointee type work as well). An object with a pointer that its Links
///        cannot translate stays where it is and is reported on the host; a name the receiver cannot
///        resolve arrives as nullptr and is reported too: never a dangling pointer.

#include <soaheap/base/portability.cuh>

#include <cstdint>

namespace soaheap::distributed {

/// What to_global returns for a pointer it cannot translate.
inline constexpr std::uint64_t kUntranslated = ~std::uint64_t{0};

/// Tag that selects the pointee type of to_local.
template <class P>
struct link_type {
  using type = P;
};

/// Links of classes whose pointer fields never cross ranks: null pointers migrate, any other
/// managed pointer keeps its object at home (and is reported).
struct NoLinks {
  template <class P>
  SOAHEAP_HD std::uint64_t to_global(const P*) const {
    return kUntranslated;
  }
  template <class P>
  SOAHEAP_HD P* to_local(link_type<P>, std::uint64_t) const {
    return nullptr;
  }
};

}  // namespace soaheap::distributed
