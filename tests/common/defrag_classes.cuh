#pragma once
// Managed classes and graph kernels for the defragmentation suites: an abstract root, a subclass
// chain, scalar pointer fields (to a base, to a subclass, to the own class) and a pointer array.
// Objects carry an id so that a test can check that every pointer still names the same object
// after objects moved.

#include <soaheap/soaheap.cuh>

#include <cstdint>

namespace soaheap_test {

class Atom;
class Molecule;

/// Sentinel id for "null pointer" in GraphRecord.
inline constexpr std::uint64_t kNullId = ~std::uint64_t{0};

/// What a test reads back per object id: its class and the ids its pointer fields name.
struct GraphRecord {
  std::uint64_t alive;
  std::uint64_t class_tag;   // 1 Atom, 2 Ion, 3 Molecule
  std::uint64_t partner;     // Atom::partner (Entity*)
  std::uint64_t home;        // Ion::home (Molecule*)
  std::uint64_t atoms[3];    // Molecule::atoms (array<Atom*, 3>)
  std::uint64_t next;        // Molecule::next (Molecule*)
};

/// Abstract root: every object has an id.
class Entity : public soaheap::Object<Entity> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t>;
  static constexpr const char* kName = "Entity";
  static constexpr bool kAbstract = true;
  soaheap::Field<Entity, 0> id;

  /// Stores this object's address at out[id] (how a test finds objects after they moved).
  SOAHEAP_HD void collect(Entity** out) { out[static_cast<std::uint64_t>(id)] = this; }
};

SOAHEAP_HD inline std::uint64_t id_or_null(const Entity* entity) {
  return entity == nullptr ? kNullId : static_cast<std::uint64_t>(entity->id.get());
}

/// 16 bytes (the smallest class: capacity 64) with a pointer to the abstract base.
class Atom : public soaheap::Object<Atom, Entity> {
 public:
  using FieldTypes = soaheap::fields<Entity*>;
  static constexpr const char* kName = "Atom";
  soaheap::Field<Atom, 0> partner;

  SOAHEAP_HD explicit Atom(std::uint64_t new_id) {
    id = new_id;
    partner = nullptr;
  }
  SOAHEAP_HD void dump(GraphRecord* records) {
    GraphRecord& record = records[static_cast<std::uint64_t>(id)];
    record.alive = 1;
    if (record.class_tag == 0) record.class_tag = 1;
    record.partner = id_or_null(partner.get());
    if (record.class_tag == 1) record.home = kNullId;  // Ion::dump_ion may run first or later
    for (int k = 0; k < 3; ++k) record.atoms[k] = kNullId;
    record.next = kNullId;
  }
};

/// Subclass of Atom, 28 bytes (capacity 36), pointing to a Molecule.
class Ion : public soaheap::Object<Ion, Atom> {
 public:
  using FieldTypes = soaheap::fields<std::int32_t, Molecule*>;
  static constexpr const char* kName = "Ion";
  soaheap::Field<Ion, 0> charge;
  soaheap::Field<Ion, 1> home;

  SOAHEAP_HD explicit Ion(std::uint64_t new_id) : Object(new_id) {
    charge = static_cast<std::int32_t>(new_id % 7) - 3;
    home = nullptr;
  }
  SOAHEAP_HD void dump_ion(GraphRecord* records);
};

/// 40 bytes (capacity 25): a pointer array to Atoms (and Ions) and a pointer to its own class.
class Molecule : public soaheap::Object<Molecule, Entity> {
 public:
  using FieldTypes = soaheap::fields<soaheap::array<Atom*, 3>, Molecule*>;
  static constexpr const char* kName = "Molecule";
  soaheap::Field<Molecule, 0> atoms;
  soaheap::Field<Molecule, 1> next;

  SOAHEAP_HD explicit Molecule(std::uint64_t new_id) {
    id = new_id;
    for (int k = 0; k < 3; ++k) atoms[k] = nullptr;
    next = nullptr;
  }
  SOAHEAP_HD void dump(GraphRecord* records) {
    GraphRecord& record = records[static_cast<std::uint64_t>(id)];
    record.alive = 1;
    record.class_tag = 3;
    record.partner = kNullId;
    record.home = kNullId;
    for (int k = 0; k < 3; ++k) record.atoms[k] = id_or_null(atoms[k]);
    record.next = id_or_null(next.get());
  }
};

SOAHEAP_HD inline void Ion::dump_ion(GraphRecord* records) {
  GraphRecord& record = records[static_cast<std::uint64_t>(id)];
  record.alive = 1;
  record.class_tag = 2;
  record.home = id_or_null(home.get());
}

using DefragHeap = soaheap::Heap<Entity, Atom, Ion, Molecule>;

/// A 4-byte class: N·8 bytes of forwarding pointers do not fit into its blocks, so defragmentation
/// falls back to the records strategy.
class Speck : public soaheap::Object<Speck> {
 public:
  using FieldTypes = soaheap::fields<std::uint32_t>;
  static constexpr const char* kName = "Speck";
  soaheap::Field<Speck, 0> id;
  SOAHEAP_HD explicit Speck(std::uint64_t new_id) { id = static_cast<std::uint32_t>(new_id); }
};

/// Points at Specks.
class Dust : public soaheap::Object<Dust> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t, Speck*>;
  static constexpr const char* kName = "Dust";
  soaheap::Field<Dust, 0> id;
  soaheap::Field<Dust, 1> speck;
  SOAHEAP_HD explicit Dust(std::uint64_t new_id) {
    id = new_id;
    speck = nullptr;
  }
};

using SpeckHeap = soaheap::Heap<Speck, Dust>;

// ---- a deterministic random object graph ---------------------------------------------------------

SOAHEAP_HD inline std::uint64_t graph_hash(std::uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

/// Objects first_id .. first_id+atoms+ions+molecules-1: Atoms, then Ions, then Molecules. Pointers
/// only name objects of the same graph that survive the deletion, or are null.
struct GraphSpec {
  std::uint64_t first_id = 0;
  std::uint64_t atoms = 0, ions = 0, molecules = 0;
  std::uint64_t seed = 1;
  std::uint64_t delete_percent = 50;
  std::uint64_t null_percent = 15;

  SOAHEAP_HD std::uint64_t size() const { return atoms + ions + molecules; }
  SOAHEAP_HD std::uint64_t random(std::uint64_t index, std::uint64_t salt) const {
    return graph_hash(graph_hash(seed * 0x100000001b3ULL + salt) ^ index);
  }
  /// Index (0-based within the graph) kinds.
  SOAHEAP_HD int kind(std::uint64_t index) const { return index < atoms ? 1 : index < atoms + ions ? 2 : 3; }
  SOAHEAP_HD bool deleted(std::uint64_t index) const { return random(index, 1) % 100 < delete_percent; }
  /// A surviving index in [begin, begin+count) chosen by salt, or kNullId.
  SOAHEAP_HD std::uint64_t pick(std::uint64_t index, std::uint64_t salt, std::uint64_t begin, std::uint64_t count) const {
    if (count == 0 || random(index, salt) % 100 < null_percent) return kNullId;
    const std::uint64_t chosen = begin + random(index, salt + 1000) % count;
    return deleted(chosen) ? kNullId : chosen;
  }
  SOAHEAP_HD std::uint64_t partner_of(std::uint64_t index) const { return pick(index, 2, 0, size()); }
  SOAHEAP_HD std::uint64_t home_of(std::uint64_t index) const { return pick(index, 3, atoms + ions, molecules); }
  SOAHEAP_HD std::uint64_t atom_of(std::uint64_t index, int k) const { return pick(index, 4 + k, 0, atoms + ions); }
  SOAHEAP_HD std::uint64_t next_of(std::uint64_t index) const { return pick(index, 8, atoms + ions, molecules); }
};

/// Creates object index tid of the graph; objects[first_id + tid] receives it.
struct CreateGraph {
  DefragHeap::View heap;
  Entity** objects;
  GraphSpec spec;
  std::uint64_t* failures;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const std::uint64_t id = spec.first_id + tid;
    Entity* created = nullptr;
    switch (spec.kind(tid)) {
      case 1: created = new (heap) Atom(id); break;
      case 2: created = new (heap) Ion(id); break;
      default: created = new (heap) Molecule(id); break;
    }
    if (created == nullptr) soaheap::detail::atomic_fetch_add(failures, 1);
    objects[id] = created;
  }
};

/// Sets the pointer fields of object index tid (every object must exist).
struct LinkGraph {
  DefragHeap::View heap;
  Entity** objects;
  GraphSpec spec;
  SOAHEAP_HD Entity* object(std::uint64_t index) const {
    return index == kNullId ? nullptr : objects[spec.first_id + index];
  }
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    Entity* self = objects[spec.first_id + tid];
    if (spec.kind(tid) <= 2) {
      Atom* atom = static_cast<Atom*>(self);
      atom->partner = object(spec.partner_of(tid));
      if (spec.kind(tid) == 2) static_cast<Ion*>(self)->home = static_cast<Molecule*>(object(spec.home_of(tid)));
    } else {
      Molecule* molecule = static_cast<Molecule*>(self);
      for (int k = 0; k < 3; ++k) molecule->atoms[k] = static_cast<Atom*>(object(spec.atom_of(tid, k)));
      molecule->next = static_cast<Molecule*>(object(spec.next_of(tid)));
    }
  }
};

/// Destroys the objects of the graph that the spec deletes.
struct DeleteGraph {
  DefragHeap::View heap;
  Entity** objects;
  GraphSpec spec;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    if (!spec.deleted(tid)) return;
    soaheap::destroy(heap, objects[spec.first_id + tid]);
    objects[spec.first_id + tid] = nullptr;
  }
};

/// Destroys objects[first + tid] if present.
struct DestroyRange {
  DefragHeap::View heap;
  Entity** objects;
  std::uint64_t first;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    Entity* object = objects[first + tid];
    if (object != nullptr) soaheap::destroy(heap, object);
    objects[first + tid] = nullptr;
  }
};

}  // namespace soaheap_test
