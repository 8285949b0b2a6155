/*
 * emily_random.h — counter-based random numbers (part of libemily; include
 * after or instead of emily.h).
 *
 * The generator is Threefry-2x32 with 20 rounds (Salmon et al., "Parallel
 * random numbers: as easy as 1, 2, 3", SC'11), laid out exactly as
 * Nx.Random and JAX use it, so the same key gives the same bits:
 *
 *   - a key is a u32[2] array (any layout);
 *   - em_random_bits(key, shape) hashes the counters 0 .. n-1 (n = the
 *     element count; one extra 0 counter when n is odd): the first half of
 *     the counters is the x0 word and the second half the x1 word of each
 *     pair, and the output is the x0 results followed by the x1 results,
 *     the padding dropped;
 *   - u8 and u16 outputs keep the low bits of that u32 stream; u64 hashes
 *     2n counters and joins result words i (high) and n + i (low).
 *
 * Nx.Random.split(key, parts) is em_random_bits(key, {parts, 2}, u32).
 *
 * All three ops build lazy nodes; the hashing runs on the thread pool.
 */
#ifndef EMILY_RANDOM_H
#define EMILY_RANDOM_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Random bits of `shape` as dtype u8, u16, u32 or u64 (see above). `key`
 * is a u32 array of shape {2}. */
em_status em_random_bits(em_array *key, const int64_t *shape, int ndim,
                         em_dtype dtype, em_array **out);

/* The Threefry-2x32-20 hash of explicit counter pairs: `counters` is u32
 * with a last axis of size 2 holding (x0, x1); the output has the same
 * shape and holds the hashed (x0, x1). `key` is u32[2]. (Nx.Random.fold_in
 * hashes (high word, low word) of its data this way.) */
em_status em_threefry2x32(em_array *key, em_array *counters, em_array **out);

/* The inverse error function as Nx.Random computes it (Nx's reference
 * backend): M. Giles' single-precision approximation ("Approximating the
 * erfinv function", GPU Computing Gems, 2011) evaluated in double and
 * rounded to the dtype. It is within a few 1e-7 (relative) of the exact
 * erf_inv, and reproducing it is what makes Nx.Random.normal match bit for
 * bit. erf_inv(+-1) = +-Inf, NaN and |x| > 1 give NaN. Real float dtypes. */
em_status em_random_erf_inv(em_array *a, em_array **out);

#ifdef __cplusplus
}
#endif

#endif
