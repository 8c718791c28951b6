// Fireworks, a DynaSOAr-style program: written against DynaSOAr's public API only and built
// against soaheap through the compatibility shim (`#include "dynasoar.h"` finds compat/shim).
//
// Rockets climb until their fuel is spent, then burst into sparks created on the device and
// destroy themselves; sparks fade and destroy themselves. A new salvo of rockets starts every few
// steps, and the sparks are defragmented now and then.
#ifndef EXAMPLES_DYNASOAR_COMPAT_FIREWORKS_H
#define EXAMPLES_DYNASOAR_COMPAT_FIREWORKS_H

#include "dynasoar.h"

// Unscoped enumerators: device code may bind them to references without needing their address.
enum FireworksParameters : int {
  kSalvoSize = 4096,
  kSalvoInterval = 3,
  kMaxFuel = 5,
  kMinSparks = 2,
  kSparkVariety = 3,
  kMaxSparkLife = 4,
  kDefragInterval = 5,
};

__host__ __device__ inline int rocket_fuel(int id) { return 1 + id % kMaxFuel; }
__host__ __device__ inline int sparks_of(int id) { return kMinSparks + id % kSparkVariety; }
__host__ __device__ inline int spark_life(int id, int spark) { return 1 + (id + spark) % kMaxSparkLife; }

class Rocket;
class Spark;

using AllocatorT = SoaAllocator<64 * 64 * 64, Rocket, Spark>;

class Rocket : public AllocatorT::Base {
 public:
  declare_field_types(Rocket, int, int, float)

 private:
  Field<Rocket, 0> id_;
  Field<Rocket, 1> fuel_;
  Field<Rocket, 2> altitude_;

 public:
  __device__ Rocket(int index, int first_id);
  __device__ void fly();
};

class Spark : public AllocatorT::Base {
 public:
  declare_field_types(Spark, float, float, int)

 private:
  Field<Spark, 0> altitude_;
  Field<Spark, 1> brightness_;
  Field<Spark, 2> life_;

 public:
  __device__ Spark(float altitude, int life);
  __device__ void fade();
  __device__ void add_to_checksum();
};

#endif  // EXAMPLES_DYNASOAR_COMPAT_FIREWORKS_H
