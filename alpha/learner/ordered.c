/* The ordered fold of a matrix product, the C twin of alpha.learner.kernels.fold_reference
 * (docs/kernels.md): for every output, out[i][j] = out[i][j] + a[i][p] * b[p][j] for p
 * ascending, each product rounded to the element type, then the add rounded, one at a time.
 *
 * The loops run i, then p, then j: the innermost loop runs across the outputs of one row, which
 * the compiler vectorises (the adds of different outputs are independent), while each output
 * still sees its products in ascending p, one rounded add after another, exactly as the numpy
 * reference does with whole-array operations. Nothing here may be reassociated or fused:
 *
 * - no contraction of a * b + c into a fused multiply-add (one rounding instead of two): the
 *   pragma below for compilers that honour it, and -ffp-contract=off on the command line for
 *   GCC, which ignores the pragma (and whose default in GNU mode is to fuse on targets with
 *   FMA, AArch64 among them);
 * - no -ffast-math (it would let the compiler reorder the adds), and nothing linked that sets
 *   flush-to-zero: subnormals stay subnormal, as in numpy;
 * - arithmetic in the element type itself (FLT_EVAL_METHOD 0): x87 code, whose registers keep
 *   more bits, is refused at compile time below, and the caller falls back to numpy.
 *
 * `out` never overlaps `a` or `b` (the caller checks), hence restrict. Strides are in elements
 * and may be negative; `b` and `out` have unit stride along a row (the caller copies them when
 * not). */

#pragma STDC FP_CONTRACT OFF

#include <float.h>
#include <stddef.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "float and double arithmetic here would carry excess precision (FLT_EVAL_METHOD != 0)"
#endif

/* On x86-64 one copy for AVX2 and a baseline one, chosen when the library loads: the same
 * source, so the same bits, and a library that runs on any x86-64 machine sharing the cache
 * (unlike -march=native). Elsewhere, the compiler's baseline only. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define ALPHA_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef ALPHA_CLONES
#define ALPHA_CLONES
#endif

#define ALPHA_FOLD(NAME, REAL)                                                                \
    ALPHA_CLONES void NAME(REAL *restrict out, ptrdiff_t out_row, const REAL *restrict a,       \
                           ptrdiff_t a_row, ptrdiff_t a_col, const REAL *restrict b,            \
                           ptrdiff_t b_row, ptrdiff_t rows, ptrdiff_t inner, ptrdiff_t cols) {  \
        for (ptrdiff_t i = 0; i < rows; ++i) {                                                 \
            REAL *restrict o = out + i * out_row;                                              \
            for (ptrdiff_t p = 0; p < inner; ++p) {                                            \
                const REAL factor = a[i * a_row + p * a_col];                                  \
                const REAL *restrict row = b + p * b_row;                                      \
                for (ptrdiff_t j = 0; j < cols; ++j) {                                         \
                    const REAL product = factor * row[j];                                      \
                    o[j] = o[j] + product;                                                     \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

ALPHA_FOLD(alpha_fold_float32, float)
ALPHA_FOLD(alpha_fold_float64, double)
