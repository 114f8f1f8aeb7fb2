/* splitmix64 (Steele, Lea & Flood 2014): the library's seeded generator,
   independent of igraph's process-wide RNG. */
#ifndef AG_RNG_H
#define AG_RNG_H

#include <stdint.h>

#define AG_RNG_GAMMA 0x9E3779B97F4A7C15ull

static inline uint64_t rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t rng_next(uint64_t *state)
{
    return rng_mix(*state += AG_RNG_GAMMA);
}

/* The k-th output (k = 0, 1, ...) after `state`, without the k before it: the
   state is a Weyl sequence, so draws can be made in parallel, in any order. */
static inline uint64_t rng_at(uint64_t state, uint64_t k)
{
    return rng_mix(state + (k + 1) * AG_RNG_GAMMA);
}

/* A state for stream `stream` of `seed`: distinct streams are independent. */
static inline uint64_t rng_seed(uint64_t seed, uint64_t stream)
{
    uint64_t mix = seed ^ (stream * 0xD1B54A32D192ED03ull);
    return rng_next(&mix);
}

/* A 32-bit mix (Wellons' lowbias32, a bijection): cheap in vectors, where
   64-bit multiplies are not (AVX2 has no vpmullq). */
static inline uint32_t rng_mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

/* Uniform in 0..n-1 (n >= 1; the modulo bias is below n / 2^64). */
static inline int64_t rng_below(uint64_t *state, int64_t n)
{
    return (int64_t)(rng_next(state) % (uint64_t)n);
}

#endif
