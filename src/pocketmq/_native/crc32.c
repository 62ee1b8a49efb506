/* CRC32 with zlib's polynomial and bit order (zlib.crc32), for the records' body CRC.
 * No I/O here.
 *
 * On x86-64 CPUs with carry-less multiplication (PCLMULQDQ, SSE4.1; checked at run time) the
 * 16-byte blocks of a buffer of 64 bytes or more are folded four at a time, after Intel's
 * "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction" (the folding and
 * bit-reflected Barrett constants below are that paper's for the reflected polynomial
 * 0xEDB88320); the rest, and every buffer elsewhere, goes through tables, slicing by 8.
 * Both paths give the same value (tests compare the records with zlib.crc32's).
 */
#include "speedups.h"

static uint32_t crc_table[8][256];

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PMQ_CLMUL 1
static int use_clmul;
#endif

void
pmq_crc32_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        }
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++) {
            uint32_t prev = crc_table[t - 1][i];
            crc_table[t][i] = crc_table[0][prev & 0xFF] ^ (prev >> 8);
        }
    }
#ifdef PMQ_CLMUL
    __builtin_cpu_init();
    use_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

static uint32_t
crc32_tables(uint32_t c, const unsigned char *p, Py_ssize_t n)
{
    while (n >= 8) {
        /* Byte by byte into the two words, so neither alignment nor endianness matters. */
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                           | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16
                      | (uint32_t)p[7] << 24;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF]
            ^ crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24]
            ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF]
            ^ crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) {
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    }
    return c;
}

#ifdef PMQ_CLMUL
/* One 128-bit fold: x's low half times k's low, its high half times k's high, plus next. */
__attribute__((target("pclmul,sse4.1"))) static inline __m128i
fold(__m128i x, __m128i k, __m128i next)
{
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

/* The running CRC c (not inverted) over n bytes, n a multiple of 16 and at least 64. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc32_clmul(uint32_t c, const unsigned char *p, Py_ssize_t n)
{
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
    const __m128i poly_mu = _mm_set_epi64x(0x1f7011641LL, 0x1db710641LL);
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_loadu_si128((const __m128i *)p);
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)c));
    p += 64;
    n -= 64;
    while (n >= 64) {
        x1 = fold(x1, k1k2, _mm_loadu_si128((const __m128i *)p));
        x2 = fold(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = fold(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = fold(x4, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    x1 = fold(x1, k3k4, x2);
    x1 = fold(x1, k3k4, x3);
    x1 = fold(x1, k3k4, x4);
    while (n >= 16) {
        x1 = fold(x1, k3k4, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    /* 128 bits to 64 (appending 32 zero bits), then to 32 by Barrett reduction. */
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), _mm_clmulepi64_si128(k3k4, x1, 0x01));
    __m128i x2r = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00), x2r);
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly_mu, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly_mu, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x1, t), 1);
}
#endif

uint32_t
pmq_crc32(const unsigned char *p, Py_ssize_t n)
{
    uint32_t c = 0xFFFFFFFFu;
#ifdef PMQ_CLMUL
    if (use_clmul && n >= 64) {
        Py_ssize_t blocks = n & ~(Py_ssize_t)15;
        c = crc32_clmul(c, p, blocks);
        p += blocks;
        n -= blocks;
    }
#endif
    return crc32_tables(c, p, n) ^ 0xFFFFFFFFu;
}
