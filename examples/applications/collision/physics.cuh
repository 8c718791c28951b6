#pragma once
/// @file physics.cuh
/// @brief The physics of the n-body-with-collisions benchmark (DynaSOAr paper, Fig. 1 and §6),
///        shared by the soaheap version (`collision`) and the hand-written SOA baseline
///        (`collision_baseline`) so that both compute exactly the same thing.
///
/// A step: (1) every body sums the gravitational acceleration from all others; (2) velocity and
/// position are integrated, walls reflect; (3) every body picks as merge target the nearest
/// heavier body within the collision radius; (4) every body that has no target itself accepts the
/// nearest body that targets it and absorbs its mass and momentum; (5) accepted bodies disappear.
///
/// Determinism: accelerations are summed in fixed point (integer addition is associative), and
/// every choice breaks ties by body id, so a run depends only on seed and backend, never on
/// thread scheduling or on where objects sit in memory.

#include <soaheap/base/portability.cuh>

#include <cmath>
#include <cstdint>

namespace collision {

inline constexpr float kGravity = 1.0f;              ///< G; masses sum to ~1, the box is [-1, 1]^2
inline constexpr float kTimeStep = 0.002f;
inline constexpr float kSoftening = 0.01f;           ///< added to distances so close pairs stay finite
inline constexpr float kCollisionRadiusFactor = 0.2f;///< collision radius in mean body spacings
inline constexpr float kBoxHalfWidth = 1.0f;
inline constexpr float kInitialSpeed = 0.05f;
inline constexpr float kMinInitialMass = 0.5f;       ///< in units of 1/n
inline constexpr float kMaxInitialMass = 1.5f;
inline constexpr double kAccelerationScale = 1099511627776.0;  ///< 2^40 fixed-point units per unit
inline constexpr double kMaxAcceleration = 4194304.0;          ///< 2^22: clamp so the sum cannot overflow
inline constexpr std::uint64_t kNoBody = ~std::uint64_t{0};
/// Relative tolerance of the mass-conservation self-check (float masses).
inline constexpr double kMassTolerance = 1e-4;

/// Deterministic per-(seed, index) random bits (splitmix64).
SOAHEAP_HD inline std::uint64_t mix(std::uint64_t value) {
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}
/// Uniform float in [0, 1) from the stream (seed, index, channel).
SOAHEAP_HD inline float uniform(std::uint64_t seed, std::uint64_t index, std::uint64_t channel) {
  const std::uint64_t bits = mix(mix(seed ^ mix(index)) + channel);
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

struct InitialBody {
  float x, y, vx, vy, mass;
};

/// Body @p index of @p count: uniform position in the box, small random velocity, mass around 1/count.
SOAHEAP_HD inline InitialBody initial_body(std::uint64_t seed, std::uint64_t index, std::uint64_t count) {
  InitialBody body;
  body.x = (2.0f * uniform(seed, index, 0) - 1.0f) * kBoxHalfWidth;
  body.y = (2.0f * uniform(seed, index, 1) - 1.0f) * kBoxHalfWidth;
  body.vx = (2.0f * uniform(seed, index, 2) - 1.0f) * kInitialSpeed;
  body.vy = (2.0f * uniform(seed, index, 3) - 1.0f) * kInitialSpeed;
  body.mass = (kMinInitialMass + (kMaxInitialMass - kMinInitialMass) * uniform(seed, index, 4)) /
              static_cast<float>(count);
  return body;
}

/// Collision radius for @p count bodies: a fixed share of the mean spacing of the initial bodies.
SOAHEAP_HD inline float collision_radius(std::uint64_t count) {
  return kCollisionRadiusFactor * 2.0f * kBoxHalfWidth / sqrtf(static_cast<float>(count));
}

SOAHEAP_HD inline long long to_fixed(double value) {
  if (value > kMaxAcceleration) value = kMaxAcceleration;
  if (value < -kMaxAcceleration) value = -kMaxAcceleration;
  return static_cast<long long>(value * kAccelerationScale);
}

/// Adds the acceleration that a body of mass @p other_mass at (@p other_x, @p other_y) causes on a
/// body at (@p x, @p y), in fixed point.
SOAHEAP_HD inline void add_acceleration(float x, float y, float other_x, float other_y, float other_mass,
                                        long long& acceleration_x, long long& acceleration_y) {
  const float dx = other_x - x;
  const float dy = other_y - y;
  const float distance_squared = dx * dx + dy * dy + kSoftening * kSoftening;
  const float distance = sqrtf(distance_squared);
  const float magnitude = kGravity * other_mass / (distance_squared * distance);
  acceleration_x += to_fixed(static_cast<double>(magnitude * dx));
  acceleration_y += to_fixed(static_cast<double>(magnitude * dy));
}

/// Integrates one step and reflects at the walls.
SOAHEAP_HD inline void integrate(long long acceleration_x, long long acceleration_y, float& x, float& y, float& vx,
                                 float& vy) {
  vx += static_cast<float>(static_cast<double>(acceleration_x) / kAccelerationScale) * kTimeStep;
  vy += static_cast<float>(static_cast<double>(acceleration_y) / kAccelerationScale) * kTimeStep;
  x += vx * kTimeStep;
  y += vy * kTimeStep;
  if (x < -kBoxHalfWidth || x > kBoxHalfWidth) {
    vx = -vx;
    x = x < 0 ? -kBoxHalfWidth : kBoxHalfWidth;
  }
  if (y < -kBoxHalfWidth || y > kBoxHalfWidth) {
    vy = -vy;
    y = y < 0 ? -kBoxHalfWidth : kBoxHalfWidth;
  }
}

/// The strict total order "A absorbs B": heavier first, equal masses by smaller id. It has no
/// cycles, so merge targets never form one.
SOAHEAP_HD inline bool absorbs(float mass_a, std::uint64_t id_a, float mass_b, std::uint64_t id_b) {
  return mass_a > mass_b || (mass_a == mass_b && id_a < id_b);
}

/// Whether (distance, id) is closer than the best so far; ties by smaller id.
SOAHEAP_HD inline bool closer(float distance_squared, std::uint64_t id, float best_distance_squared,
                              std::uint64_t best_id) {
  return distance_squared < best_distance_squared || (distance_squared == best_distance_squared && id < best_id);
}

/// The merged body: masses add, momentum is conserved, position is the centre of mass.
SOAHEAP_HD inline void merge_into(float& mass, float& x, float& y, float& vx, float& vy, float other_mass,
                                  float other_x, float other_y, float other_vx, float other_vy) {
  const float total = mass + other_mass;
  x = (mass * x + other_mass * other_x) / total;
  y = (mass * y + other_mass * other_y) / total;
  vx = (mass * vx + other_mass * other_vx) / total;
  vy = (mass * vy + other_mass * other_vy) / total;
  mass = total;
}

}  // namespace collision
